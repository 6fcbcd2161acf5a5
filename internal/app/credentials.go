package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"k8s.io/utils/lru"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/autoscaler"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/compute"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/conductor"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/keystone"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// keystoneCredentials implements conductor.CloudCredentials with internal/keystone: credentials are
// created as the requesting user (the RPC context's token) and deleted by that user while the token
// lives, otherwise by Magnum's service user.
type keystoneCredentials struct {
	opts   CredentialOptions
	caCert []byte
	log    *slog.Logger
	// countError, if set, counts failed Keystone requests (metrics).
	countError func()
}

func newKeystoneCredentials(o *CredentialOptions, log *slog.Logger) (*keystoneCredentials, error) {
	k := &keystoneCredentials{opts: *o, log: log}
	if o.CACertFile != "" {
		b, err := os.ReadFile(o.CACertFile)
		if err != nil {
			return nil, fmt.Errorf("[bridge] cloud_ca_file: %w", err)
		}
		k.caCert = b
	}
	return k, nil
}

func (k *keystoneCredentials) clientOptions() ([]keystone.Option, error) {
	opts := []keystone.Option{keystone.WithUserAgent("magnum-capi-bridge")}
	hc, err := keystone.HTTPClient(k.opts.Service.CAFile, k.opts.Service.Insecure)
	if err != nil {
		return nil, err
	}
	if k.countError != nil {
		hc.Transport = countingTransport{next: hc.Transport, count: k.countError}
	}
	return append(opts, keystone.WithHTTPClient(hc)), nil
}

// callerClient acts as the requesting user. The token must be scoped to the cluster's project:
// application credentials belong to the token's project.
func (k *keystoneCredentials) callerClient(ctx context.Context, caller *rpc.Context, cl *magnum.Cluster) (*keystone.Client, error) {
	if caller == nil || caller.AuthToken == "" {
		return nil, &keystone.Error{Op: "act as the requesting user", Message: "the request carries no Keystone token"}
	}
	url := caller.AuthURL
	if url == "" {
		url = k.opts.Service.AuthURL
	}
	opts, err := k.clientOptions()
	if err != nil {
		return nil, err
	}
	// magnum-api sends the token's body along: no validation round trip to Keystone then.
	c, err := keystone.NewClientFromTokenInfo(ctx, url, keystone.NewSecret(caller.AuthToken), caller.AuthTokenInfo, opts...)
	if err != nil {
		return nil, err
	}
	if msg := otherProject(c.Identity().ProjectID, cl.ProjectID.Or("")); msg != "" {
		return nil, &keystone.Error{Op: "act as the requesting user", Message: msg + "; credentials can only be issued from a token of the cluster's project"}
	}
	return c, nil
}

func (k *keystoneCredentials) serviceClient(ctx context.Context) (*keystone.Client, error) {
	opts, err := k.clientOptions()
	if err != nil {
		return nil, err
	}
	return keystone.NewPasswordClient(ctx, k.opts.Service, opts...)
}

func (k *keystoneCredentials) createOptions(cl *magnum.Cluster) keystone.CreateOptions {
	return keystone.CreateOptions{ClusterName: cl.Name.Or(""), Roles: k.opts.Roles, WorkloadRoles: k.opts.WorkloadRoles}
}

// issued renders what the cluster's Secrets hold.
func (k *keystoneCredentials) issued(caller *rpc.Context, creds *keystone.ClusterCredentials) (*conductor.IssuedCredentials, error) {
	authURL := k.opts.AuthURL
	if authURL == "" {
		authURL = caller.AuthURL
	}
	if authURL == "" {
		authURL = k.opts.Service.AuthURL
	}
	render := func(a keystone.ApplicationCredential) ([]byte, error) {
		return keystone.RenderCloudsYAML(keystone.CloudsYAMLParams{AuthURL: authURL, RegionName: k.opts.RegionName,
			Interface: k.opts.Interface, ApplicationCredentialID: a.ID, ApplicationCredentialSecret: a.Secret})
	}
	capo, err := render(creds.CAPO)
	if err != nil {
		return nil, err
	}
	workload, err := render(creds.Workload)
	if err != nil {
		return nil, err
	}
	return &conductor.IssuedCredentials{Refs: creds.Refs(), CAPOCloudsYAML: capo, WorkloadCloudsYAML: workload, CACert: k.caCert}, nil
}

func (k *keystoneCredentials) Issue(ctx context.Context, caller *rpc.Context, cl *magnum.Cluster) (*conductor.IssuedCredentials, error) {
	user, err := k.callerClient(ctx, caller, cl)
	if err != nil {
		return nil, err
	}
	creds, err := user.CreateClusterCredentials(ctx, cl.UUID.Or(""), k.createOptions(cl))
	if err != nil {
		return nil, err
	}
	out, err := k.issued(caller, creds)
	if err != nil {
		// Unusable without their clouds.yaml: take them back rather than leak them.
		_, _ = keystone.DeleteClusterCredentials(ctx, keystone.Cleanup{ClusterUUID: cl.UUID.Or(""), Known: creds.Refs()}, user)
		return nil, err
	}
	k.log.Info("cluster credentials issued", "cluster", cl.UUID.Or(""), "credentials", creds)
	return out, nil
}

func (k *keystoneCredentials) Rotate(ctx context.Context, caller *rpc.Context, cl *magnum.Cluster, current []keystone.CredentialRef) (
	*conductor.IssuedCredentials, func(context.Context) error, func(context.Context), error) {
	user, err := k.callerClient(ctx, caller, cl)
	if err != nil {
		return nil, nil, nil, err
	}
	pending, err := user.RotateClusterCredentials(ctx, cl.UUID.Or(""), current, k.createOptions(cl))
	if err != nil {
		return nil, nil, nil, err
	}
	abort := func(ctx context.Context) {
		if _, err := pending.Abort(ctx, user); err != nil {
			k.log.Warn("credential rotation: deleting the unused new credentials failed", "cluster", cl.UUID.Or(""), "error", err)
		}
	}
	out, err := k.issued(caller, pending.New)
	if err != nil {
		abort(ctx)
		return nil, nil, nil, err
	}
	commit := func(ctx context.Context) error {
		clients := []*keystone.Client{user}
		if svc, err := k.serviceClient(ctx); err == nil {
			clients = append(clients, svc)
		} else {
			k.log.Warn("credential rotation: service user unavailable; only the rotating user deletes old credentials", "error", err)
		}
		deleted, err := pending.Commit(ctx, clients...)
		k.logDeleted(cl, deleted)
		if keystone.OnlyNotFound(err) {
			return nil // the old ones were already gone: the goal is reached
		}
		return err
	}
	return out, commit, abort, nil
}

func (k *keystoneCredentials) Revoke(ctx context.Context, caller *rpc.Context, cl *magnum.Cluster, known []keystone.CredentialRef) error {
	var clients []*keystone.Client
	if caller != nil && caller.AuthToken != "" {
		// The deleting user's token, while it lives, deletes their own credentials.
		if user, err := k.callerClient(ctx, caller, cl); err == nil {
			clients = append(clients, user)
		}
	}
	svc, err := k.serviceClient(ctx)
	if err != nil {
		if len(clients) == 0 {
			return err
		}
		k.log.Warn("credential cleanup: service user unavailable", "error", err)
	} else {
		clients = append(clients, svc)
	}
	deleted, err := keystone.DeleteClusterCredentials(ctx, keystone.Cleanup{ClusterUUID: cl.UUID.Or(""), Known: known,
		Owners: []string{cl.UserID.Or("")}}, clients...)
	k.logDeleted(cl, deleted)
	if err == nil || keystone.OnlyNotFound(err) {
		return nil
	}
	if errors.Is(err, keystone.ErrNotFound) {
		// Some were already gone; report only what is left.
		err = withoutNotFound(err)
	}
	return err
}

func (k *keystoneCredentials) logDeleted(cl *magnum.Cluster, deleted []keystone.Deletion) {
	for _, d := range deleted {
		k.log.Info("cluster credential deleted", "cluster", cl.UUID.Or(""), "credential", d.Credential.String(), "by", d.By)
	}
}

// withoutNotFound drops the 404s from a joined error.
func withoutNotFound(err error) error {
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return err
	}
	var left []error
	for _, e := range joined.Unwrap() {
		if !keystone.OnlyNotFound(e) {
			left = append(left, e)
		}
	}
	return errors.Join(left...)
}

// novaServerGroups implements conductor.ServerGroups with internal/compute, as the cluster's CAPO
// credential or as the request's user; Nova is the one of the catalog's region and interface the
// cluster's credential is given (the [bridge] credential options).
type novaServerGroups struct {
	authURL, region, iface string
	caCert                 []byte
}

func newNovaServerGroups(k *keystoneCredentials) novaServerGroups {
	return novaServerGroups{authURL: cmp.Or(k.opts.AuthURL, k.opts.Service.AuthURL), region: k.opts.RegionName,
		iface: k.opts.Interface, caCert: k.caCert}
}

func (novaServerGroups) client(ctx context.Context, cloudsYAML, caCert []byte) (*compute.Client, error) {
	return compute.NewFromCloudsYAML(ctx, cloudsYAML, caCert)
}

// asCaller is a client acting with the request's token, which must be scoped to projectID: another
// project's token (an admin's) sees other private images and flavors under the same names.
func (n novaServerGroups) asCaller(caller *rpc.Context, projectID string) (*compute.Client, error) {
	c, err := compute.NewFromToken(compute.Token{AuthURL: cmp.Or(caller.AuthURL, n.authURL), Value: caller.AuthToken,
		Info: caller.AuthTokenInfo, Region: n.region, Interface: n.iface}, n.caCert)
	if err != nil {
		return nil, err
	}
	if msg := otherProject(c.ProjectID(), projectID); msg != "" {
		return nil, &compute.Error{Op: "act as the request's token", Message: msg}
	}
	return c, nil
}

func (n novaServerGroups) EnsureAsCaller(ctx context.Context, caller *rpc.Context, projectID string, groups []templates.ServerGroup) error {
	c, err := n.asCaller(caller, projectID)
	if err != nil {
		return err
	}
	return c.EnsureServerGroups(ctx, groups)
}

func (n novaServerGroups) Ensure(ctx context.Context, cloudsYAML, caCert []byte, groups []templates.ServerGroup) error {
	c, err := n.client(ctx, cloudsYAML, caCert)
	if err != nil {
		return err
	}
	return c.EnsureServerGroups(ctx, groups)
}

func (n novaServerGroups) Delete(ctx context.Context, cloudsYAML, caCert []byte, names []string) error {
	c, err := n.client(ctx, cloudsYAML, caCert)
	if err != nil {
		return err
	}
	return c.DeleteServerGroups(ctx, names)
}

// ReleaseLeftovers implements conductor.FloatingIPs with the same client.
func (n novaServerGroups) ReleaseLeftovers(ctx context.Context, cloudsYAML, caCert []byte, clusterResourceName string) ([]string, error) {
	c, err := n.client(ctx, cloudsYAML, caCert)
	if err != nil {
		return nil, err
	}
	return c.ReleaseLeftoverFloatingIPs(ctx, clusterResourceName)
}

// glanceImages implements conductor.Images with internal/compute as the request's user: Glance is
// found in the token's catalog, in the region and interface the cluster credentials are given (as
// Nova is for novaServerGroups). An answer is kept for imageCacheTTL per project and image, so a
// burst of creates from one template asks Glance once; a changed kube_version property counts
// after at most that long.
type glanceImages struct {
	nova novaServerGroups
	now  func() time.Time

	mu    sync.Mutex
	cache map[string]cachedImage
}

type cachedImage struct {
	img templates.Image
	at  time.Time
}

const (
	imageCacheTTL = time.Minute
	// imageCacheSize bounds the cache: past it, it starts over.
	imageCacheSize = 1024
)

func newGlanceImages(n novaServerGroups) *glanceImages {
	return &glanceImages{nova: n, now: time.Now, cache: map[string]cachedImage{}}
}

func (g *glanceImages) FindImage(ctx context.Context, caller *rpc.Context, projectID, ref string) (templates.Image, error) {
	key := projectID + "\x00" + ref
	now := g.now()
	g.mu.Lock()
	if c, ok := g.cache[key]; ok && now.Sub(c.at) < imageCacheTTL {
		g.mu.Unlock()
		return c.img, nil
	}
	g.mu.Unlock()
	c, err := g.nova.asCaller(caller, projectID)
	if err != nil {
		return templates.Image{}, err
	}
	found, err := c.FindImage(ctx, ref)
	if err != nil {
		return templates.Image{}, err
	}
	img := templates.Image{Name: found.Name, KubeVersion: found.KubeVersion}
	g.mu.Lock()
	if len(g.cache) >= imageCacheSize {
		clear(g.cache)
	}
	g.cache[key] = cachedImage{img: img, at: now}
	g.mu.Unlock()
	return img, nil
}

// otherProject says why a request's token may not act for a cluster of clusterProject ("" when it may).
func otherProject(tokenProject, clusterProject string) string {
	if tokenProject == clusterProject {
		return ""
	}
	return fmt.Sprintf("the request's token is scoped to project %s, the cluster belongs to project %s", tokenProject, clusterProject)
}

// novaFlavors implements conductor.Flavors with internal/compute as the cluster's cloud
// credential. A flavor rarely changes: an answer is kept for flavorCacheTTL per project and flavor,
// in an LRU of flavorCacheSize, which also spares Keystone a token per lookup.
type novaFlavors struct {
	nova  novaServerGroups
	now   func() time.Time
	cache *lru.Cache
}

type cachedFlavor struct {
	flavor autoscaler.Flavor
	at     time.Time
}

const (
	flavorCacheTTL  = 10 * time.Minute
	flavorCacheSize = 1024
)

func newNovaFlavors(n novaServerGroups) *novaFlavors {
	return &novaFlavors{nova: n, now: time.Now, cache: lru.New(flavorCacheSize)}
}

func (f *novaFlavors) FindFlavor(ctx context.Context, cloudsYAML, caCert []byte, projectID, ref string) (autoscaler.Flavor, error) {
	key := projectID + "\x00" + ref
	now := f.now()
	if v, ok := f.cache.Get(key); ok && now.Sub(v.(cachedFlavor).at) < flavorCacheTTL {
		return v.(cachedFlavor).flavor, nil
	}
	c, err := f.nova.client(ctx, cloudsYAML, caCert)
	if err != nil {
		return autoscaler.Flavor{}, err
	}
	found, err := c.FindFlavor(ctx, ref)
	if err != nil {
		return autoscaler.Flavor{}, err
	}
	flavor := autoscaler.Flavor{VCPUs: found.VCPUs, RAMMiB: found.RAMMiB, DiskGiB: found.DiskGiB, ExtraSpecs: found.ExtraSpecs}
	f.cache.Add(key, cachedFlavor{flavor: flavor, at: now})
	return flavor, nil
}
