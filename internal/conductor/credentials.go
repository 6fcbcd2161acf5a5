package conductor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/certs"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/compute"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/keystone"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// IssuedCredentials are a cluster's two cloud credentials, ready to store: the clouds.yaml CAPO
// reads in the management cluster and the one for the workload cluster's cloud integrations.
type IssuedCredentials struct {
	// Refs name both credentials and their owner, without secrets: what cleanup needs.
	Refs               []keystone.CredentialRef
	CAPOCloudsYAML     []byte
	WorkloadCloudsYAML []byte
	// CACert is the CA bundle of the cloud's endpoints; empty when they use public CAs.
	CACert []byte
}

// CloudCredentials issues and revokes each cluster's Keystone application credentials
// (implemented in internal/app over internal/keystone; see docs/credentials.md).
type CloudCredentials interface {
	// Issue creates the cluster's credentials as the caller (the request's Keystone token).
	Issue(ctx context.Context, caller *rpc.Context, cl *magnum.Cluster) (*IssuedCredentials, error)
	// Rotate creates the next generation as the caller, next to the current one. commit deletes the
	// current credentials once the new ones are stored; abort deletes the new ones instead.
	Rotate(ctx context.Context, caller *rpc.Context, cl *magnum.Cluster, current []keystone.CredentialRef) (
		issued *IssuedCredentials, commit func(context.Context) error, abort func(context.Context), err error)
	// Revoke deletes every credential of the cluster: the known ones and leftovers found by name.
	// Credentials already gone are not an error; credentials nobody may delete are
	// (keystone.ErrForbidden), as are Keystone outages.
	Revoke(ctx context.Context, caller *rpc.Context, cl *magnum.Cluster, known []keystone.CredentialRef) error
}

// Keys of the cloud-config Secrets. CAPO reads clouds.yaml and cacert from its identityRef Secret;
// the refs key records which application credentials the Secret holds so that a delete or rotation
// can revoke them without the secrets.
const (
	cloudsYAMLKey      = "clouds.yaml"
	cloudCACertKey     = "cacert"
	credentialRefsKey  = "application-credentials.json"
	labelSecretPurpose = "magnum.openstack.org/secret-purpose"
)

// workloadCloudConfigSecretName holds the credential meant for the workload cluster (cloud
// controller manager, Cinder CSI): separate from CAPO's so either can be revoked alone.
func workloadCloudConfigSecretName(clusterName string) string {
	return clusterName + "-workload-cloud-config"
}

func cloudConfigSecrets(clusterName string, issued *IssuedCredentials) ([]certs.CAPISecret, error) {
	refs, err := json.Marshal(issued.Refs)
	if err != nil {
		return nil, err
	}
	mk := func(name, purpose string, clouds []byte) certs.CAPISecret {
		data := map[string][]byte{cloudsYAMLKey: clouds, credentialRefsKey: refs}
		if len(issued.CACert) > 0 {
			data[cloudCACertKey] = issued.CACert
		}
		return certs.CAPISecret{Name: name, Purpose: purpose, Type: "Opaque",
			Labels: map[string]string{labelSecretPurpose: purpose}, Data: data}
	}
	return []certs.CAPISecret{
		mk(templates.CloudConfigSecretName(clusterName), "cloud-credential-capo", issued.CAPOCloudsYAML),
		mk(workloadCloudConfigSecretName(clusterName), "cloud-credential-workload", issued.WorkloadCloudsYAML),
	}, nil
}

// storedCredentialRefs reads which credentials a cluster holds; found is false when the cluster has
// no cloud-config Secret (never issued, or already cleaned up).
func (c *Conductor) storedCredentialRefs(ctx context.Context, cl *magnum.Cluster) (refs []keystone.CredentialRef, found bool, err error) {
	data, found, err := c.readCloudConfig(ctx, cl)
	if err != nil || !found {
		return nil, found, err
	}
	if raw := data[credentialRefsKey]; len(raw) > 0 {
		if err := json.Unmarshal(raw, &refs); err != nil {
			return nil, true, fmt.Errorf("the cloud-config Secret of cluster %s has an unreadable %s: %w", cl.UUID.Or(""), credentialRefsKey, err)
		}
	}
	return refs, true, nil
}

// readCloudConfig reads the cluster's cloud-config Secret (CAPO's credential and the bridge's refs
// to it) where the cluster's objects are; found is false without it.
func (c *Conductor) readCloudConfig(ctx context.Context, cl *magnum.Cluster) (map[string][]byte, bool, error) {
	ns, err := c.placeOf(ctx, cl)
	if err != nil {
		return nil, false, err
	}
	return c.kube.ReadSecret(ctx, ns, templates.CloudConfigSecretName(cl.StackID.Or("")))
}

// errAwaitingCredentials: a create resumed without its request cannot issue the credentials; the
// redelivered request will (the driver lets go of the cluster's claim for that handler meanwhile).
var errAwaitingCredentials = errors.New("the cluster's cloud credential is not stored yet; waiting for the create request to be redelivered")

// ensureCloudCredentials issues the cluster's credentials once and stores them in its namespace; a
// redelivered create finds the Secret and leaves the credentials alone. Without the request's token
// (a create resumed at start-up) nothing can be issued on the user's behalf, so that is final.
func (c *Conductor) ensureCloudCredentials(ctx context.Context, caller *rpc.Context, cl *magnum.Cluster, namespace, clusterName string) error {
	if c.opts.Credentials == nil {
		return nil
	}
	if _, found, err := c.storedCredentialRefs(ctx, cl); err != nil || found {
		return err
	}
	if caller == nil || caller.AuthToken == "" {
		if cl.Status.Or("") != magnum.StatusCreateInProgress {
			// A day-2 change re-applies the topology without a user's token; a cluster that predates
			// per-cluster credentials keeps running as it did. Rotation issues them.
			c.log.WarnContext(ctx, "cluster has no cloud credential; `openstack coe credential rotate` issues one", "cluster", cl.UUID.Or(""))
			return nil
		}
		// A create resumed at start-up: its message, if the bridge died before acknowledging it, is
		// redelivered with the token and finishes the job. Only a create past its timeout is given up.
		timeout := time.Duration(cl.CreateTimeout.Or(60)) * time.Minute
		if created, ok := cl.CreatedAt.Get(); ok && c.opts.Now().After(created.Add(timeout)) {
			return &permanentError{errors.New("the cluster's cloud credential was never stored and the request that created the cluster is gone; delete the cluster and create it again")}
		}
		return errAwaitingCredentials
	}
	issued, err := c.opts.Credentials.Issue(ctx, caller, cl)
	if err != nil {
		return cloudError("creating the cluster's application credentials failed", err)
	}
	secrets, err := cloudConfigSecrets(clusterName, issued)
	if err != nil {
		return &permanentError{err}
	}
	return c.kube.ApplyClusterSecrets(ctx, namespace, cl.UUID.Or(""), secrets)
}

// revokeCloudCredentials deletes the cluster's credentials before its Secrets go: the Secret names
// them. Leftovers of interrupted creates are found by name even without a Secret.
func (c *Conductor) revokeCloudCredentials(ctx context.Context, caller *rpc.Context, cl *magnum.Cluster) error {
	if c.opts.Credentials == nil {
		return nil
	}
	refs, _, err := c.storedCredentialRefs(ctx, cl)
	if err != nil {
		return err
	}
	if err := c.opts.Credentials.Revoke(ctx, caller, cl, refs); err != nil {
		return cloudError("deleting the cluster's application credentials failed", err)
	}
	return nil
}

// cloudError keeps the cloud's refusals (forbidden, missing role, expired token, quota, bad
// request) permanent, with the context a tenant needs; outages and server errors stay retryable.
func cloudError(what string, err error) error {
	wrapped := fmt.Errorf("%s: %w", what, err)
	if cloudTransient(err) {
		return wrapped
	}
	return &permanentError{wrapped}
}

// cloudTransient tells failures a retry may cure: the service unreachable, timing out or failing,
// or Keystone's transient refusal of a role the caller holds.
func cloudTransient(err error) bool {
	var status int
	var cause error
	var ke *keystone.Error
	var ce *compute.Error
	switch {
	case errors.Is(err, keystone.ErrUnassignedRole):
		// Keystone denying a role the token holds: it passes (the keystone client retried it
		// for a while already; the create's own retries go on within its deadline).
		return true
	case errors.As(err, &ke):
		status, cause = ke.StatusCode, ke.Err
	case errors.As(err, &ce):
		status, cause = ce.StatusCode, ce.Err
	default:
		return !permanent(err)
	}
	switch {
	case status >= 500, status == http.StatusRequestTimeout, status == http.StatusTooManyRequests:
		return true
	case status == 0:
		return cause != nil // a transport error; without one it is a refusal of the request itself
	}
	return false
}

// CredentialRotate implements credential_rotate(cluster) (Magnum 21.0.0+, a call magnum-api waits
// on for 60 s): the next generation of the cluster's two application credentials is created as the
// caller, stored where CAPO and the workload cluster read it, and only then are the old ones
// deleted, so the cluster never holds a credential that does not work. The cluster's status is left
// alone: nothing about the cluster itself changes.
func (c *Conductor) CredentialRotate(ctx context.Context, req *rpc.Request) (any, error) {
	cl, err := c.loadForUpdate(ctx, req, "Rotating the credential of a cluster", magnum.OpCredentialRotate, nil)
	if err != nil {
		return nil, err
	}
	if c.opts.Credentials == nil {
		return nil, magnum.NotSupportedMessage("Credential rotation is not supported: this bridge issues no per-cluster cloud credentials.")
	}
	current, found, err := c.storedCredentialRefs(ctx, cl)
	if err != nil {
		return nil, err
	}
	var (
		issued *IssuedCredentials
		commit = func(context.Context) error { return nil }
		abort  = func(context.Context) {}
	)
	if found {
		issued, commit, abort, err = c.opts.Credentials.Rotate(ctx, req.Context, cl, current)
	} else {
		// A cluster that predates per-cluster credentials (or lost its Secret) gets its first ones.
		issued, err = c.opts.Credentials.Issue(ctx, req.Context, cl)
	}
	if err != nil {
		return nil, credentialFailure(err)
	}
	ns, name := c.namespace(cl.ProjectID.Or("")), cl.StackID.Or("")
	secrets, err := cloudConfigSecrets(name, issued)
	if err == nil {
		err = c.kube.ApplyClusterSecrets(ctx, ns, cl.UUID.Or(""), secrets)
	}
	if err != nil {
		abort(ctx)
		return nil, err
	}
	// The workload cluster's kube-system/cloud-config must carry the new credential before the old
	// one is deleted; if it cannot, the old one is kept (a later rotation or delete finds it by name).
	if err := c.refreshAddons(ctx, cl); err != nil {
		c.log.Warn("credential rotation: the add-on set could not be updated; old credentials kept", "cluster", cl.UUID.Or(""), "error", err)
		return nil, credentialFailure(errors.New("the new credentials are stored, but the workload cluster's cloud-config could not be updated, so the old credentials are kept; try again"))
	}
	if err := commit(ctx); err != nil {
		// The new credentials are stored and work; the old ones could not all be deleted. Say so
		// rather than pretend: the tenant or operator can delete them by name.
		return nil, credentialFailure(fmt.Errorf("the new credentials are in use, but deleting the old ones failed: %w", err))
	}
	c.log.InfoContext(ctx, "cluster credentials rotated", "cluster", cl.UUID.Or(""), "credentials", issued.Refs)
	return nil, nil
}

// credentialFailure is the Magnum error a call answers when Keystone refused; the first sentence
// (all magnum-api shows as the error's title) says what failed.
func credentialFailure(err error) error {
	return magnum.NewMagnumException("Rotating the cluster's cloud credentials failed: " + err.Error())
}
