package keystone

import (
	"context"
	"errors"
)

// PendingRotation is phase one of a credential rotation: the new credentials exist, the old ones
// still work. The caller stores New (the cluster's Secret in the management cluster, and the copy
// inside the workload cluster), then calls Commit to delete Old; or Abort to delete New when
// storing failed, leaving the cluster on its old credentials.
type PendingRotation struct {
	New *ClusterCredentials
	Old []CredentialRef
}

// RotateClusterCredentials creates the next generation of the cluster's two credentials as the
// client's user (Magnum's `credential_rotate`). current are the credentials in use now (from the
// stored Secret); their names decide the generation, so the new names never collide with them and
// both sets live side by side until Commit. A retried rotation replaces its own unfinished
// generation by name, like CreateClusterCredentials.
//
// When the rotating user is not the current owner, the new credentials belong to the rotating
// user: ownership moves (as magnum-capi-helm does), and New.UserID is what the caller should record
// as the cluster's credential owner. Deleting the old ones then needs the old owner or an admin.
func (c *Client) RotateClusterCredentials(ctx context.Context, clusterUUID string, current []CredentialRef, opts CreateOptions) (*PendingRotation, error) {
	if err := checkClusterUUID(clusterUUID); err != nil {
		return nil, err
	}
	next := 1
	for _, ref := range current {
		if _, gen, ok := parseCredentialName(clusterUUID, ref.Name); ok && gen+1 > next {
			next = gen + 1
		}
	}
	created, err := c.createGeneration(ctx, clusterUUID, next, opts)
	if err != nil {
		return nil, err
	}
	return &PendingRotation{New: created, Old: append([]CredentialRef(nil), current...)}, nil
}

// Commit deletes the old credentials once the caller has stored the new ones. clients are tried in
// order per credential as in DeleteClusterCredentials (the rotating user, then the service user for
// credentials another user owns). Not-found old credentials are reported, matching ErrNotFound.
func (p *PendingRotation) Commit(ctx context.Context, clients ...*Client) ([]Deletion, error) {
	if p == nil || p.New == nil {
		return nil, &Error{Op: "commit credential rotation", Message: "no pending rotation"}
	}
	if len(p.Old) == 0 {
		return nil, nil
	}
	return deleteRefs(ctx, p.Old, clients)
}

// Abort deletes the new credentials when they could not be stored; the old ones stay in use.
func (p *PendingRotation) Abort(ctx context.Context, clients ...*Client) ([]Deletion, error) {
	if p == nil || p.New == nil {
		return nil, &Error{Op: "abort credential rotation", Message: "no pending rotation"}
	}
	return deleteRefs(ctx, p.New.Refs(), clients)
}

// deleteRefs deletes exactly the given credentials, each with the first client Keystone allows.
func deleteRefs(ctx context.Context, refs []CredentialRef, clients []*Client) ([]Deletion, error) {
	if len(clients) == 0 {
		return nil, &Error{Op: "delete application credentials", Message: "no Keystone client given"}
	}
	var deleted []Deletion
	var errs []error
	for _, ref := range refs {
		d, err := deleteWithFirstAllowed(ctx, ref, clients)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		deleted = append(deleted, d)
	}
	return deleted, errors.Join(errs...)
}

// deleteWithFirstAllowed tries each client; 403 and 401 hand over to the next one, anything else
// (success, 404, Keystone unreachable) is final — except a 404 answered to a client that is itself
// an application credential: Keystone answers 404 when the token's own credential has been deleted
// (for instance by an earlier client of this chain), which says nothing about the target.
func deleteWithFirstAllowed(ctx context.Context, ref CredentialRef, clients []*Client) (Deletion, error) {
	var lastErr error
	for _, c := range clients {
		err := c.deleteCredential(ctx, ref)
		if err == nil {
			return Deletion{Credential: ref, By: c.who.String()}, nil
		}
		lastErr = err
		if !handsOver(c, err) {
			break
		}
	}
	return Deletion{}, lastErr
}

// handsOver says whether a failed call should be retried with the next client of a chain.
func handsOver(c *Client, err error) bool {
	if errors.Is(err, ErrForbidden) || errors.Is(err, ErrUnauthorized) {
		return true
	}
	return errors.Is(err, ErrNotFound) && c.who.ApplicationCredentialID != ""
}
