package keystone

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/applicationcredentials"
)

// Purpose says which consumer an application credential is for.
type Purpose string

const (
	// PurposeCAPO is the credential of Cluster API Provider OpenStack in the management cluster
	// (servers, ports, security groups, load balancer of the API server). It never enters the
	// workload cluster.
	PurposeCAPO Purpose = "capo"
	// PurposeWorkload is the credential copied into the workload cluster for the OpenStack cloud
	// controller manager and Cinder CSI. Anyone with admin rights in that cluster can read it, which
	// is why it is separate from PurposeCAPO and can be revoked on its own.
	PurposeWorkload Purpose = "workload"
)

var purposes = []Purpose{PurposeCAPO, PurposeWorkload}

func (p Purpose) describe() string {
	switch p {
	case PurposeCAPO:
		return "Cluster API Provider OpenStack (management cluster)"
	case PurposeWorkload:
		return "cloud controller manager and Cinder CSI inside the workload cluster"
	}
	return string(p)
}

// DefaultRoles is what a cluster credential gets when CreateOptions names none: the project's
// `member` role, enough for Nova, Neutron, Octavia and Cinder under their default policies, and
// neither admin nor a reader-everywhere role.
var DefaultRoles = []string{"member"}

// CredentialName is the deterministic Keystone name of a cluster's credential:
// "magnum-<cluster uuid>-<purpose>" for the first generation, "…-<purpose>-r<N>" after N rotations.
// Keystone keeps names unique per user, so a retried create finds the previous attempt by name.
func CredentialName(clusterUUID string, purpose Purpose, generation int) string {
	name := "magnum-" + clusterUUID + "-" + string(purpose)
	if generation > 0 {
		name += "-r" + strconv.Itoa(generation)
	}
	return name
}

// parseCredentialName is the inverse of CredentialName for one cluster.
func parseCredentialName(clusterUUID, name string) (Purpose, int, bool) {
	rest, ok := strings.CutPrefix(name, "magnum-"+clusterUUID+"-")
	if !ok {
		return "", 0, false
	}
	for _, p := range purposes {
		tail, ok := strings.CutPrefix(rest, string(p))
		if !ok {
			continue
		}
		if tail == "" {
			return p, 0, true
		}
		if digits, ok := strings.CutPrefix(tail, "-r"); ok {
			if n, err := strconv.Atoi(digits); err == nil && n > 0 && strconv.Itoa(n) == digits {
				return p, n, true
			}
		}
	}
	return "", 0, false
}

// checkClusterUUID accepts Magnum's canonical form only (lower-case, dashed), because the UUID
// becomes part of Keystone names that later lookups must match byte for byte.
func checkClusterUUID(s string) error {
	u, err := uuid.Parse(s)
	if err != nil || u.String() != s {
		return &Error{Op: "check cluster uuid", Message: fmt.Sprintf("%q is not a canonical lower-case cluster UUID", s)}
	}
	return nil
}

// CredentialRef identifies a stored application credential without its secret: what cleanup needs.
type CredentialRef struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	// UserID is the owner. Keystone's URL needs it; when empty the deleting identity's own id is used.
	UserID string `json:"user_id,omitempty"`
}

func (r CredentialRef) String() string {
	if r.Name == "" {
		return "(id " + r.ID + ")"
	}
	return r.Name + " (id " + r.ID + ")"
}

// ApplicationCredential is one created credential, secret included. All printing, logging and JSON
// paths redact the secret; use Secret.Reveal only to render the clouds.yaml.
type ApplicationCredential struct {
	ID        string
	Name      string
	Purpose   Purpose
	UserID    string
	ProjectID string
	Roles     []string
	// ExpiresAt is the zero time when the credential does not expire.
	ExpiresAt time.Time
	Secret    Secret
}

// Ref drops the secret.
func (a ApplicationCredential) Ref() CredentialRef {
	return CredentialRef{ID: a.ID, Name: a.Name, UserID: a.UserID}
}

func (a ApplicationCredential) String() string {
	return fmt.Sprintf("ApplicationCredential{ID:%s Name:%s Purpose:%s UserID:%s ProjectID:%s Roles:%v ExpiresAt:%s Secret:%s}",
		a.ID, a.Name, a.Purpose, a.UserID, a.ProjectID, a.Roles, a.expiry(), a.Secret)
}

func (a ApplicationCredential) expiry() string {
	if a.ExpiresAt.IsZero() {
		return "never"
	}
	return a.ExpiresAt.UTC().Format(time.RFC3339)
}

// GoString implements fmt.GoStringer (%#v).
func (a ApplicationCredential) GoString() string { return "keystone." + a.String() }

// Format implements fmt.Formatter so that no verb falls back to printing the fields raw.
func (a ApplicationCredential) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		_, _ = io.WriteString(f, a.GoString())
		return
	}
	_, _ = io.WriteString(f, a.String())
}

// LogValue implements slog.LogValuer.
func (a ApplicationCredential) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("id", a.ID), slog.String("name", a.Name), slog.String("purpose", string(a.Purpose)),
		slog.String("user_id", a.UserID), slog.String("project_id", a.ProjectID),
		slog.Any("roles", a.Roles), slog.String("expires_at", a.expiry()), slog.Any("secret", a.Secret))
}

// ClusterCredentials are the two credentials of one cluster.
type ClusterCredentials struct {
	ClusterUUID string
	// UserID owns both credentials; ProjectID is their scope.
	UserID, ProjectID string
	CAPO              ApplicationCredential
	Workload          ApplicationCredential
}

// Refs lists both credentials without secrets, for storing next to the cluster and for cleanup.
func (c ClusterCredentials) Refs() []CredentialRef {
	return []CredentialRef{c.CAPO.Ref(), c.Workload.Ref()}
}

func (c ClusterCredentials) String() string {
	return fmt.Sprintf("ClusterCredentials{Cluster:%s UserID:%s ProjectID:%s CAPO:%s Workload:%s}",
		c.ClusterUUID, c.UserID, c.ProjectID, c.CAPO, c.Workload)
}

// GoString implements fmt.GoStringer (%#v).
func (c ClusterCredentials) GoString() string { return "keystone." + c.String() }

// Format implements fmt.Formatter.
func (c ClusterCredentials) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		_, _ = io.WriteString(f, c.GoString())
		return
	}
	_, _ = io.WriteString(f, c.String())
}

// LogValue implements slog.LogValuer.
func (c ClusterCredentials) LogValue() slog.Value {
	return slog.GroupValue(slog.String("cluster_uuid", c.ClusterUUID), slog.String("user_id", c.UserID),
		slog.String("project_id", c.ProjectID), slog.Any("capo", c.CAPO), slog.Any("workload", c.Workload))
}

// CreateOptions shape the credentials of CreateClusterCredentials and RotateClusterCredentials.
type CreateOptions struct {
	// ClusterName goes into the description, next to the UUID, to help people reading Keystone.
	ClusterName string
	// Roles for the CAPO credential; DefaultRoles when empty. The caller must hold each of them on
	// the project (Keystone only delegates roles the creator has).
	Roles []string
	// WorkloadRoles for the in-cluster credential; Roles when empty.
	WorkloadRoles []string
	// ExpiresAt, when set, makes Keystone refuse the credentials after that instant. Clusters
	// outliving it need RotateClusterCredentials first.
	ExpiresAt *time.Time
}

func (o CreateOptions) rolesFor(p Purpose) []string {
	roles := o.Roles
	if p == PurposeWorkload && len(o.WorkloadRoles) > 0 {
		roles = o.WorkloadRoles
	}
	if len(roles) == 0 {
		roles = DefaultRoles
	}
	return roles
}

func (c *Client) checkCreate(clusterUUID string, opts CreateOptions) error {
	if err := checkClusterUUID(clusterUUID); err != nil {
		return err
	}
	if opts.ExpiresAt != nil && !opts.ExpiresAt.After(time.Now()) {
		return &Error{Op: "create application credential", Message: fmt.Sprintf("expiry %s is not in the future", opts.ExpiresAt.UTC().Format(time.RFC3339))}
	}
	for _, p := range purposes {
		for _, role := range opts.rolesFor(p) {
			if !c.who.HasRole(role) {
				return &Error{Op: "create application credential", Message: fmt.Sprintf(
					"%s has no role %q on project %s; Keystone only lets a user delegate roles they hold (token roles: %s)",
					c.who.UserID, role, c.who.ProjectID, strings.Join(c.who.Roles, ","))}
			}
		}
	}
	return nil
}

// CreateClusterCredentials creates the cluster's CAPO and workload credentials as the client's user,
// scoped to the token's project, restricted (unrestricted=false: they cannot create further
// credentials or trusts), with the requested roles only.
//
// It is idempotent by name: a credential already named like one of ours (an earlier attempt whose
// secret was lost, or whose result the caller is replacing now) is deleted and created again,
// because Keystone never returns a secret twice and a credential without its secret is useless.
// Every successful call therefore invalidates the secrets of the previous one for this cluster:
// store what it returns. Callers must serialise calls per cluster (two concurrent calls would
// delete each other's result). When the second credential cannot be created, the first is deleted
// again so no half-made pair is left behind.
func (c *Client) CreateClusterCredentials(ctx context.Context, clusterUUID string, opts CreateOptions) (*ClusterCredentials, error) {
	return c.createGeneration(ctx, clusterUUID, 0, opts)
}

func (c *Client) createGeneration(ctx context.Context, clusterUUID string, generation int, opts CreateOptions) (*ClusterCredentials, error) {
	if err := c.checkCreate(clusterUUID, opts); err != nil {
		return nil, err
	}
	out := &ClusterCredentials{ClusterUUID: clusterUUID, UserID: c.who.UserID, ProjectID: c.who.ProjectID}
	// One after the other: at once, they took longer on a busy Keystone (each create hashes the
	// secret; 0.6 s alone, 1.5 s side by side on two cores) and drew its spurious 403 for the token
	// method more often (make bench-peer, 2026-12-02).
	capo, err := c.replaceCredential(ctx, clusterUUID, PurposeCAPO, generation, opts)
	if err != nil {
		return nil, err
	}
	workload, err := c.replaceCredential(ctx, clusterUUID, PurposeWorkload, generation, opts)
	if err != nil {
		if rollbackErr := c.deleteCredential(ctx, capo.Ref()); rollbackErr != nil {
			return nil, errors.Join(err, fmt.Errorf("rolling back the CAPO credential: %w", rollbackErr))
		}
		return nil, err
	}
	out.CAPO, out.Workload = *capo, *workload
	return out, nil
}

// replaceCredential deletes any credential of the caller with the target name and creates it anew.
// A 409 means a concurrent creator slipped in between; one more round settles it. Keystone's
// transient ErrUnassignedRole and ErrApplicationCredentialMethod (for a token that is not an
// application credential's) are retried with backoff (the client's RetryPolicy).
func (c *Client) replaceCredential(ctx context.Context, clusterUUID string, purpose Purpose, generation int, opts CreateOptions) (*ApplicationCredential, error) {
	name := CredentialName(clusterUUID, purpose, generation)
	description := fmt.Sprintf("Magnum cluster %s", clusterUUID)
	if opts.ClusterName != "" {
		description += fmt.Sprintf(" (%s)", opts.ClusterName)
	}
	description += fmt.Sprintf(": %s. Managed by magnum-capi-bridge; deleted with the cluster.", purpose.describe())
	roles := opts.rolesFor(purpose)
	create := applicationcredentials.CreateOpts{
		Name:         name,
		Description:  description,
		Unrestricted: false,
		ExpiresAt:    opts.ExpiresAt,
	}
	for _, r := range roles {
		create.Roles = append(create.Roles, applicationcredentials.Role{Name: r})
	}

	// The create comes first: on a first attempt nothing has the name. Keystone refuses a second
	// credential of the user with the same name (409); then the old one (an earlier attempt's, whose
	// secret nobody knows any more) is deleted and the create repeated. A second 409 means a
	// concurrent creator slipped in between; one more round settles it.
	conflicts := 0
	clearFirst := false
	attempts := c.retry.Start(ctx)
	for {
		if clearFirst {
			existing, err := c.listByName(ctx, c.who.UserID, name)
			if err != nil {
				return nil, err
			}
			for _, old := range existing {
				if err := c.deleteCredential(ctx, old); err != nil && !errors.Is(err, ErrNotFound) {
					return nil, err
				}
			}
		}
		created, err := applicationcredentials.Create(ctx, c.identity, c.who.UserID, create).Extract()
		if err != nil {
			err := newError("create application credential", name, err)
			switch {
			case errors.Is(err, ErrConflict) && conflicts < 2:
				conflicts++
				clearFirst = true
				continue
			case errors.Is(err, ErrUnassignedRole),
				errors.Is(err, ErrApplicationCredentialMethod) && c.who.ApplicationCredentialID == "":
				// checkCreate saw the role in the token, and the token is not an application
				// credential's: Keystone misread the request, which passes.
				if attempts.Wait(ctx) {
					continue
				}
				return nil, gaveUp(attempts, err)
			}
			return nil, err
		}
		cred := &ApplicationCredential{
			ID: created.ID, Name: created.Name, Purpose: purpose, UserID: c.who.UserID,
			ProjectID: created.ProjectID, ExpiresAt: created.ExpiresAt, Secret: NewSecret(created.Secret),
		}
		for _, r := range created.Roles {
			cred.Roles = append(cred.Roles, r.Name)
		}
		if cred.Secret.IsZero() {
			return nil, &Error{Op: "create application credential", Credential: name, Message: "Keystone returned no secret"}
		}
		return cred, nil
	}
}

// listByName returns the user's credentials with exactly this name (Keystone filters server-side).
func (c *Client) listByName(ctx context.Context, userID, name string) ([]CredentialRef, error) {
	pages, err := applicationcredentials.List(c.identity, userID, applicationcredentials.ListOpts{Name: name}).AllPages(ctx)
	if err != nil {
		return nil, newError("list application credentials of user "+userID, name, err)
	}
	found, err := applicationcredentials.ExtractApplicationCredentials(pages)
	if err != nil {
		return nil, newError("list application credentials of user "+userID, name, err)
	}
	var refs []CredentialRef
	for _, a := range found {
		if a.Name == name {
			refs = append(refs, CredentialRef{ID: a.ID, Name: a.Name, UserID: userID})
		}
	}
	return refs, nil
}

// ListClusterCredentials returns the credentials of userID that carry this cluster's names (any
// generation). Keystone allows it to the owner (also when authenticated as one of the owner's
// application credentials) and to admins.
func (c *Client) ListClusterCredentials(ctx context.Context, clusterUUID, userID string) ([]CredentialRef, error) {
	if err := checkClusterUUID(clusterUUID); err != nil {
		return nil, err
	}
	if userID == "" {
		userID = c.who.UserID
	}
	pages, err := applicationcredentials.List(c.identity, userID, nil).AllPages(ctx)
	if err != nil {
		return nil, newError("list application credentials of user "+userID, "", err)
	}
	all, err := applicationcredentials.ExtractApplicationCredentials(pages)
	if err != nil {
		return nil, newError("list application credentials of user "+userID, "", err)
	}
	var refs []CredentialRef
	for _, a := range all {
		if _, _, ok := parseCredentialName(clusterUUID, a.Name); ok {
			refs = append(refs, CredentialRef{ID: a.ID, Name: a.Name, UserID: userID})
		}
	}
	return refs, nil
}

// DeleteApplicationCredential deletes one credential with this client's token. Keystone allows it to
// the owner and to admins, but not to a restricted application credential (not even for itself).
// The error matches ErrNotFound when the credential is already gone and ErrForbidden when this
// identity may not delete it.
func (c *Client) DeleteApplicationCredential(ctx context.Context, ref CredentialRef) error {
	return c.deleteCredential(ctx, ref)
}

func (c *Client) deleteCredential(ctx context.Context, ref CredentialRef) error {
	if ref.ID == "" {
		return &Error{Op: "delete application credential", Credential: ref.String(), Message: "no credential id"}
	}
	owner := ref.UserID
	if owner == "" {
		// Keystone authorises against the credential's real owner, whatever the URL says, so the
		// deleting identity's own id is as good as any when the owner is not known.
		owner = c.who.UserID
	}
	err := applicationcredentials.Delete(ctx, c.identity, owner, ref.ID).ExtractErr()
	return newError("delete application credential", ref.String(), err)
}

// Cleanup describes what DeleteClusterCredentials removes.
type Cleanup struct {
	ClusterUUID string
	// Known are the credentials stored with the cluster.
	Known []CredentialRef
	// Owners are users whose credentials are also searched for this cluster's names (leftovers of
	// an interrupted create or rotation whose secret was never stored). The owners of Known are
	// searched anyway; add the cluster's user_id here.
	Owners []string
}

// Deletion records one deleted credential and which identity managed it.
type Deletion struct {
	Credential CredentialRef
	By         string
}

// DeleteClusterCredentials deletes a cluster's credentials, trying each client in order for each
// credential: the first one Keystone allows deletes it. A typical chain is the caller (works when
// the caller owns the credentials), then the service user (admin, works for anyone's). A 403 or 401
// hands over to the next client; a 404 is final, unless the client is itself an application
// credential (whose own deletion also produces 404s).
//
// Before deleting, the owners' credential lists are searched for this cluster's names (every
// generation), so leftovers of interrupted creates and rotations go too; listing uses the first
// client Keystone allows (the owner, the owner's application credential, or an admin).
//
// The returned error joins one *Error per credential that is not deleted now: errors.Is(err,
// ErrNotFound) / OnlyNotFound(err) tell "already gone" apart from ErrForbidden ("nobody here may
// delete it") so the caller can report it. It is never swallowed.
func DeleteClusterCredentials(ctx context.Context, cleanup Cleanup, clients ...*Client) ([]Deletion, error) {
	if err := checkClusterUUID(cleanup.ClusterUUID); err != nil {
		return nil, err
	}
	if len(clients) == 0 {
		return nil, &Error{Op: "delete application credentials", Message: "no Keystone client given"}
	}
	var errs []error
	targets := make([]CredentialRef, 0, len(cleanup.Known))
	seen := map[string]bool{}
	add := func(r CredentialRef) {
		if r.ID != "" && !seen[r.ID] {
			seen[r.ID] = true
			targets = append(targets, r)
		}
	}
	owners := append([]string(nil), cleanup.Owners...)
	for _, r := range cleanup.Known {
		add(r)
		if r.UserID != "" {
			owners = append(owners, r.UserID)
		}
	}
	listed := map[string]bool{}
	for _, owner := range owners {
		if owner == "" || listed[owner] {
			continue
		}
		listed[owner] = true
		var listErr error
		for _, c := range clients {
			refs, err := c.ListClusterCredentials(ctx, cleanup.ClusterUUID, owner)
			if err == nil {
				listErr = nil
				for _, r := range refs {
					add(r)
				}
				break
			}
			listErr = err
			if !handsOver(c, err) {
				break
			}
		}
		if listErr != nil {
			errs = append(errs, listErr)
		}
	}

	deleted, err := deleteRefs(ctx, targets, clients)
	if err != nil {
		errs = append(errs, err)
	}
	return deleted, errors.Join(errs...)
}
