// Package conductor holds the RPC endpoints magnum-api calls, one file per family, reading like
// Magnum's own conductor (magnum/conductor/handlers): cluster_create and cluster_delete
// (cluster.go), the CA calls (certificates.go), ping_conductor (here), and the status sync that
// replaces Magnum's periodic tasks (sync.go). Every handler is idempotent: messages are acknowledged
// only after their effect is durable, so a redelivery after a crash runs the handler again.
package conductor

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/addons"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/certs"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// Options are the conductor's own settings (from the [bridge] section).
type Options struct {
	// Flavor is the infrastructure of clusters whose labels name none; AllowedFlavors are those the
	// capi_infrastructure label may choose (nil: any).
	Flavor          templates.Flavor
	AllowedFlavors  []templates.Flavor
	NamespacePrefix string
	// CAPIHelmNamespacePrefix is magnum-capi-helm's namespace prefix (its [capi_helm] namespace_prefix).
	CAPIHelmNamespacePrefix  string
	DefaultKubernetesVersion string
	// BridgeVersion is recorded on each Cluster this bridge renders (templates.AnnotationRenderedBy).
	BridgeVersion string
	// KubernetesVersions are the versions a cluster may get (zero: addons.SupportedKubernetesVersions,
	// Cluster API's narrowed to the add-on table's); AllowKubeTagImageMismatch lets kube_tag differ
	// from the image's own version ([bridge] allow_kube_tag_image_mismatch).
	KubernetesVersions        templates.VersionRange
	AllowKubeTagImageMismatch bool
	// Images looks a template's image up in Glance for that check; nil: the image's name decides.
	Images Images
	// Sign are the [x509] signing options (allowed extensions, key usages, validity).
	Sign certs.SignOptions
	// Generate are the [x509] options for new CAs (key size, validity).
	Generate certs.GenerateOptions
	// Versions are the object versions replies are encoded at (learned from what magnum-api sends).
	Versions *magnum.Versions
	// Credentials issues each cluster's Keystone application credentials; nil means clusters get
	// none (only sensible on the in-memory flavor, whose machines call no cloud).
	Credentials CloudCredentials
	// ServerGroups creates the Nova server groups of OpenStack clusters; nil means none are made.
	ServerGroups ServerGroups
	// Autoscalers runs a cluster-autoscaler for each cluster with an autoscaled worker group (in
	// its project namespace; the bridge's role must allow it). Flavors sizes a node of each
	// autoscaled group for it (nil: the groups cannot grow from zero).
	Autoscalers bool
	Flavors     Flavors
	// FloatingIPs releases the floating IPs CAPO leaves for deleted OpenStack clusters; nil: none.
	FloatingIPs FloatingIPs
	Logger      *slog.Logger
	// UpdateTimeout and DeleteTimeout are the deadlines of updates (resize, upgrade, node group
	// changes) and deletes; zero means DefaultUpdateTimeout / DefaultDeleteTimeout.
	UpdateTimeout, DeleteTimeout time.Duration
	// RetryBase and RetryMax bound the operation driver's backoff; zero means 1 s and 1 min.
	RetryBase, RetryMax time.Duration
	// Claims gives an operation one driver across replicas; nil means this is the only replica.
	Claims Claims
	// ClaimRenew is how often held claims are renewed (and released once their operation
	// ended); ClaimRecheck how soon an operation this replica's handler recorded looks again at
	// a claim another replica holds. Zero means 5 s each.
	ClaimRenew, ClaimRecheck time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Conductor implements Magnum's conductor endpoints on top of Cluster API.
type Conductor struct {
	store Store
	kube  Kube
	certs *certs.Manager
	opts  Options
	log   *slog.Logger
	ops   *operations
	// foreignNoted holds the clusters of other drivers already logged (drivers.go), once each.
	foreignNoted sync.Map
	// adopted holds the clusters seen adopted from another driver (uuid → driver; drivers.go).
	adopted sync.Map
	// adoptionRunning serializes bridge_adoption_run (adoption.go).
	adoptionRunning sync.Mutex
}

// New wires a conductor.
func New(store Store, kube Kube, certManager *certs.Manager, opts Options) *Conductor {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Versions == nil {
		opts.Versions = magnum.NewVersions(nil)
	}
	if opts.KubernetesVersions.IsZero() {
		opts.KubernetesVersions = addons.SupportedKubernetesVersions()
	}
	if opts.UpdateTimeout <= 0 {
		opts.UpdateTimeout = DefaultUpdateTimeout
	}
	if opts.DeleteTimeout <= 0 {
		opts.DeleteTimeout = DefaultDeleteTimeout
	}
	if opts.RetryBase <= 0 {
		opts.RetryBase = time.Second
	}
	if opts.RetryMax <= 0 {
		opts.RetryMax = time.Minute
	}
	if opts.ClaimRenew <= 0 {
		opts.ClaimRenew = 5 * time.Second
	}
	if opts.ClaimRecheck <= 0 {
		opts.ClaimRecheck = 5 * time.Second
	}
	return &Conductor{store: store, kube: kube, certs: certManager, opts: opts, log: opts.Logger,
		ops: newOperations(opts.RetryBase, opts.RetryMax)}
}

// readOnlyMethods only read what the conductor owns: they never wait behind a cluster's write
// (KeyFunc), so `openstack coe cluster config` answers while that cluster's operation retries.
var readOnlyMethods = map[string]bool{"get_ca_certificate": true, "sign_certificate": true, "ping_conductor": true}

// KeyFunc is the rpc server's serialization key: a cluster's writes run one at a time in arrival
// order; read-only calls run at once.
func KeyFunc(req *rpc.Request) string {
	if readOnlyMethods[req.Method] {
		return ""
	}
	return rpc.DefaultKeyFunc(req)
}

// Handlers maps every RPC method the bridge serves to its endpoint. Methods not listed get oslo's
// NoSuchMethod from the rpc server.
func (c *Conductor) Handlers() map[string]rpc.Handler {
	handlers := map[string]rpc.Handler{
		"cluster_create":        c.ClusterCreate,
		"cluster_delete":        c.ClusterDelete,
		"get_ca_certificate":    c.GetCACertificate,
		"sign_certificate":      c.SignCertificate,
		"ping_conductor":        c.PingConductor,
		"cluster_update":        c.ClusterUpdate,
		"cluster_resize":        c.ClusterResize,
		"cluster_upgrade":       c.ClusterUpgrade,
		"nodegroup_create":      c.NodeGroupCreate,
		"nodegroup_update":      c.NodeGroupUpdate,
		"nodegroup_delete":      c.NodeGroupDelete,
		"rotate_ca_certificate": c.RotateCACertificate,
		"credential_rotate":     c.CredentialRotate,
		"federation_create":     c.FederationNotImplemented,
		"federation_update":     c.FederationNotImplemented,
		"federation_delete":     c.FederationNotImplemented,
		// The bridge's own (docs/upgrades.md).
		string(magnum.OpRenderingMove): c.BridgeRenderingMove,
		MethodRenderingPlan:            c.BridgeRenderingPlan,
		MethodAdoptionPlan:             c.BridgeAdoptionPlan,
		MethodAdoptionRun:              c.BridgeAdoptionRun,
	}
	for method, h := range handlers {
		handlers[method] = bounded(h)
	}
	return handlers
}

// handlerTimeout bounds one run of a handler: a hung connection becomes a transient error the rpc
// server retries, never a message held forever. Handlers only record intent (the operation driver
// does the long work), so this is generous.
const handlerTimeout = 2 * time.Minute

func bounded(h rpc.Handler) rpc.Handler {
	return func(ctx context.Context, req *rpc.Request) (any, error) {
		ctx, cancel := context.WithTimeout(ctx, handlerTimeout)
		defer cancel()
		res, err := h(ctx, req)
		if err != nil && ctx.Err() != nil && !rpc.IsRetryable(err) {
			err = rpc.Retry(err) // the handler's own deadline, not a refusal
		}
		return res, err
	}
}

// FederationNotImplemented answers the federation casts as Magnum's own conductor does: the
// feature does not exist (magnum-api writes no federation rows either).
func (c *Conductor) FederationNotImplemented(ctx context.Context, req *rpc.Request) (any, error) {
	c.log.InfoContext(ctx, "federation is not implemented by Magnum; message acknowledged", "method", req.Method)
	if req.IsCall {
		return nil, magnum.NotSupported("Federation")
	}
	return nil, nil
}

// PingConductor answers ListenerAPI.ping_conductor: true.
func (c *Conductor) PingConductor(context.Context, *rpc.Request) (any, error) { return true, nil }

// authorize enforces the tenant boundary: only the cluster's own project, or an admin, may act on
// it. magnum-api checks policy too; the bridge does not trust a message to have come through it.
func authorize(rctx *rpc.Context, projectID string) error {
	if rctx == nil {
		return authorizationFailure("the request carries no context")
	}
	if rctx.IsAdmin {
		return nil
	}
	caller := rctx.ProjectID
	if caller == "" {
		caller = rctx.Project
	}
	if caller == "" || caller != projectID {
		return authorizationFailure(fmt.Sprintf("project %q may not act on a cluster of project %q", caller, projectID))
	}
	return nil
}

// decodeView decodes the object argument name into v, remembering its version for replies.
func (c *Conductor) decodeView(req *rpc.Request, name string, v magnum.View) error {
	raw, ok := req.Args[name]
	if !ok {
		return rpc.InvalidArgs("missing argument %q", name)
	}
	obj, err := magnum.DecodeObject(raw)
	if err == nil {
		c.opts.Versions.Observe(obj)
		err = magnum.Decode(obj, v)
	}
	if err != nil {
		return rpc.InvalidArgs("argument %q: %v", name, err)
	}
	return nil
}

// intArg decodes an integer argument; absent or null gives def.
func intArg(req *rpc.Request, name string, def int) (int, error) {
	raw, ok := req.Args[name]
	if !ok || string(raw) == "null" {
		return def, nil
	}
	var n int
	if err := json.Unmarshal(raw, &n); err != nil {
		return 0, rpc.InvalidArgs("argument %q: want an integer, got %s", name, truncate(string(raw), 40))
	}
	return n, nil
}

func stringArg(req *rpc.Request, name string) (string, error) {
	raw, ok := req.Args[name]
	if !ok || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", rpc.InvalidArgs("argument %q: want a string", name)
	}
	return s, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func ptr[T any](v T) *T { return &v }
