package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"golang.org/x/sync/errgroup"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/go-logr/logr"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/capi"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/certs"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/conductor"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/logctx"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/notify"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/telemetry"
)

// Run serves until ctx ends.
func Run(ctx context.Context, o *Options, version string) error {
	log, err := logctx.New(os.Stderr, o.Bridge.LogFormat, o.Bridge.LogLevel)
	if err != nil {
		return err
	}
	slog.SetDefault(log)
	ctrl.SetLogger(logr.FromSlogHandler(log.Handler()))
	// client-go's own lines (leader election, reflectors) in the same format.
	klog.SetLogger(logr.FromSlogHandler(log.Handler()))
	log.Info("starting magnum-capi-bridge", "version", version, "host", o.Host, "config", o.Files, "rpc", o.RPC.String())
	for _, w := range o.Warnings {
		log.Warn("configuration: " + w)
	}

	metrics := telemetry.New()
	st, err := openStore(ctx, o)
	if err != nil {
		return err
	}
	defer st.Close()

	cfg, err := capi.RESTConfig(o.Bridge.Kubeconfig)
	if err != nil {
		return err
	}
	if err := requireAdmissionPolicies(ctx, o, cfg); err != nil {
		return err
	}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return countingTransport{next: rt, count: func() { metrics.DependencyError(telemetry.APIServer) }}
	})
	mgr, err := capi.NewManager(cfg)
	if err != nil {
		return err
	}
	// The clusters' autoscalers need rights a bridge upgraded before its role lacks: without them
	// it runs none, and says so, rather than fail every status sync.
	missing, err := capi.AutoscalerRights(ctx, cfg)
	if err != nil {
		return err
	}
	autoscalers := len(missing) == 0
	if !autoscalers {
		log.Warn("the bridge runs no cluster autoscaler: its role lacks " + strings.Join(missing, ", ") + " (apply deploy/kubernetes/rbac.yaml and admission-policy.yaml)")
	}
	mgr.Client.NamespaceQuota = o.Bridge.NamespaceQuota
	mgr.Client.ProjectViewers = o.Bridge.TenantView != nil
	mgr.Client.ProjectEditors = o.Bridge.TenantView != nil && o.Bridge.TenantView.TenantAPI
	mgr.Client.Log = log
	// ctx as an argument: Run replaces its ctx with the errgroup's below.
	go func(ctx context.Context) {
		if err := mgr.Client.Warm(ctx); err != nil {
			log.Debug("management cluster: warming the client left lookups to the first create", "error", err)
		}
	}(ctx)
	var listeners []*listener
	defer func() {
		for _, l := range listeners {
			l.ln.Close()
		}
	}()
	tenantParts, err := tenantAPI(o, st, mgr, log)
	if err != nil {
		return err
	}
	tenant := tenantParts.reconcilerOrNil()
	if t := o.Bridge.TenantView; t != nil && t.WebhookBind != "" {
		l, err := tokenWebhookListener(t, tenantParts, log)
		if err != nil {
			return err
		}
		listeners = append(listeners, l)
	}
	if o.Bridge.Discovery != nil {
		l, err := discoveryListener(o, st, cfg, log)
		if err != nil {
			return err
		}
		listeners = append(listeners, l)
	}
	versions := magnum.NewVersions(nil)
	if o.Bridge.MagnumRelease != "" {
		preset, err := magnum.ReleaseVersions(o.Bridge.MagnumRelease)
		if err != nil {
			return fmt.Errorf("[bridge] magnum_release: %w", err)
		}
		versions = magnum.NewVersions(preset)
	}
	var creds conductor.CloudCredentials
	var serverGroups conductor.ServerGroups
	var floatingIPs conductor.FloatingIPs
	var images conductor.Images
	var flavors conductor.Flavors
	if o.Bridge.Credentials != nil {
		kc, err := newKeystoneCredentials(o.Bridge.Credentials, log)
		if err != nil {
			return err
		}
		kc.countError = func() { metrics.DependencyError(telemetry.Keystone) }
		creds = kc
		nova := newNovaServerGroups(kc)
		// Glance, for the Kubernetes version check of creates and upgrades, in the same catalog
		// (region and interface) as Nova; on every flavor: the version matters to each.
		images = newGlanceImages(nova)
		// Nova's flavors, for the size of a node of an autoscaled group at zero machines.
		flavors = newNovaFlavors(nova)
		if o.Bridge.OffersOpenStack() {
			serverGroups, floatingIPs = nova, nova
		}
	}
	var notes *notify.Notifier
	if n := o.Notifications; n != nil {
		sender, err := rpc.NewNotifier(o.RPC, n.Topics)
		if err != nil {
			return err
		}
		defer sender.Close()
		notes = notify.New(sender, "container-infra."+o.Host, log, metrics.Notification)
		notes.Version1 = n.Driver == "messaging"
		log.Info("notifications on", "driver", n.Driver, "topics", n.Topics, "exchange", o.RPC.Exchange)
	}
	// Operation claims: one driver per cluster across replicas (docs/operations.md, "Replicas").
	// Without leader election this is the only replica, which needs none.
	identity := replicaIdentity(o.Host)
	// One deployment drives the database's clusters (docs/other-drivers.md, "One owner").
	deployment, err := deploymentName(ctx, cfg, o)
	if err != nil {
		return err
	}
	owner := &databaseOwner{store: st.Store, deployment: deployment, replica: identity, log: log, now: time.Now}
	var claims conductor.Claims
	if o.Bridge.LeaderElection {
		cs, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
		if err != nil {
			return err
		}
		claims = &leaseClaims{leases: cs.CoordinationV1(), namespace: o.Bridge.LeaderElectionNamespace, identity: identity, host: o.Host, now: time.Now}
	}
	// Each create needs four RSA keys; [bridge] pregenerated_keys of them are made ahead, so that
	// creates, alone or in a burst, apply their Cluster without waiting for them.
	generate := o.Generate
	bits := generate.RSAKeySize
	if bits == 0 {
		bits = certs.DefaultRSAKeySize
	}
	if o.Bridge.PregeneratedKeys > 0 {
		generate.Keys = certs.NewKeyPool(ctx, bits, o.Bridge.PregeneratedKeys)
		metrics.WatchKeyPool(generate.Keys.Ready)
	}
	certStore, err := certBackend(o, st, func() { metrics.DependencyError(telemetry.Barbican) })
	if err != nil {
		return err
	}
	kicked := &kickMarks{}
	observed := newObservedStore(st, metrics, notes)
	if tenant != nil {
		observed.changed = tenant.Kick
	}
	cond := conductor.New(observed, kube{Client: mgr.Client, kick: func(namespace, name string) {
		kicked.mark(namespace + "/" + name)
		mgr.Kick(namespace, name)
	}}, certs.NewManager(certStore), conductor.Options{
		Flavor: o.Bridge.Flavor, AllowedFlavors: o.Bridge.AllowedFlavors, NamespacePrefix: o.Bridge.NamespacePrefix,
		CAPIHelmNamespacePrefix:  o.CAPIHelmNamespacePrefix,
		DefaultKubernetesVersion: o.Bridge.DefaultKubernetesVersion, BridgeVersion: version, Sign: o.Sign, Generate: generate,
		KubernetesVersions: o.Bridge.KubernetesVersions, AllowKubeTagImageMismatch: o.Bridge.AllowKubeTagImageMismatch, Images: images,
		Versions: versions, Credentials: creds, ServerGroups: serverGroups, FloatingIPs: floatingIPs, Logger: log,
		Autoscalers: autoscalers, Flavors: flavors,
		UpdateTimeout: o.Bridge.UpdateTimeout, DeleteTimeout: o.Bridge.DeleteTimeout,
		Claims: claims,
	})

	// What must run once across replicas: on the leader only.
	leaderWork := func(ctx context.Context) {
		// The quota or binding of an existing project may have changed.
		if n, err := mgr.Client.EnsureProjectNamespaces(ctx, o.Bridge.NamespacePrefix); err != nil {
			log.Warn("ensure project namespaces", "updated", n, "error", err)
		} else {
			log.Info("project namespaces ensured", "count", n)
		}
		if err := cond.Resync(ctx); err != nil {
			log.Warn("resync", "error", err)
		}
		// Whatever changed while another replica (or none) led, and the create_timeout timers.
		if n, err := mgr.KickAll(ctx); err != nil && ctx.Err() == nil {
			log.Warn("status sync of every cluster", "error", err)
		} else {
			log.Info("status sync of every cluster queued", "clusters", n)
		}
		if tenant != nil {
			tenant.KickAll(ctx)
		}
		if claims != nil {
			// Operations of replicas that die later: resumed once their claims expire.
			go cond.ResumeEvery(ctx, resumeInterval)
		}
	}
	var lead *leadership
	leading := owner.held.Load
	if o.Bridge.LeaderElection {
		lead = newLeadership(o.Host, o.Bridge.LeaderElectionNamespace, o.Bridge.LeaderElectionID, log, leaderWork, metrics.Leading)
		lead.identity = identity
		leading = func() bool { return owner.held.Load() && lead.Leading() }
	}

	mgr.NamespacePrefix = o.Bridge.NamespacePrefix
	mgr.Autoscalers = autoscalers
	if err := mgr.Watch(&gatedSink{sink: cond, leader: leading, kicked: kicked}); err != nil {
		return err
	}
	if tenant != nil {
		tenant.Leading = leading
		if err := tenant.Setup(ctx, mgr); err != nil {
			return err
		}
	}
	if err := countWatchEvents(ctx, mgr, o.Bridge.NamespacePrefix, metrics); err != nil {
		return err
	}
	rpcOpts := o.RPC
	rpcOpts.Logger = log
	rpcOpts.Observe = metrics.ObserveRPC
	rpcOpts.OnBrokerError = func() { metrics.DependencyError(telemetry.RabbitMQ) }
	rpcOpts.KeyFunc = conductor.KeyFunc
	srv, err := rpc.NewServer(rpcOpts)
	if err != nil {
		return err
	}
	handlers := cond.Handlers()
	for method, h := range handlers {
		srv.Register(method, h)
	}
	metrics.Methods(slices.Collect(maps.Keys(handlers)))
	metrics.WatchRPC(srv.Stats, srv.Consuming)

	var synced atomic.Bool
	checks := []telemetry.Check{
		{Name: "rabbitmq", Fn: func(context.Context) (string, error) {
			if !srv.Consuming() {
				return "", errors.New("not consuming from RabbitMQ (connecting or reconnecting)")
			}
			return "consuming " + strings.Join(srv.Queues(), ","), nil
		}},
		{Name: "database", Fn: func(ctx context.Context) (string, error) {
			if err := st.DB().PingContext(ctx); err != nil {
				return "", errors.New("unreachable: " + sanitize(err))
			}
			return "reachable", nil
		}},
		{Name: "informers", Fn: func(context.Context) (string, error) {
			if !synced.Load() {
				return "", errors.New("management cluster caches not synced yet")
			}
			return "synced", nil
		}},
		{Name: "database owner", Fn: owner.check},
		{Name: "leadership", Informational: true, Fn: func(context.Context) (string, error) {
			if lead == nil {
				return "leader (leader election off)", nil
			}
			return lead.State(), nil
		}},
	}

	g, ctx := errgroup.WithContext(ctx)
	if o.Bridge.MetricsBind != "" {
		g.Go(func() error {
			return telemetry.Serve(ctx, o.Bridge.MetricsBind, telemetry.Handler(metrics, checks), log, nil)
		})
	}
	g.Go(func() error {
		return st.Heartbeat(ctx, o.Host, o.HeartbeatInterval, srv.Consuming, func(_ *db.MagnumService, err error) {
			if err != nil {
				metrics.Heartbeat("error")
				metrics.DependencyError(telemetry.Database)
				return
			}
			metrics.Heartbeat("ok")
		})
	})
	g.Go(func() error { return mgr.Start(ctx) })
	for _, l := range listeners {
		g.Go(func() error { return l.serve(ctx, log) })
	}
	g.Go(func() error { return cond.RunOperations(ctx, o.Bridge.OperationWorkers) })
	g.Go(func() error { return cond.RunClaims(ctx) })
	g.Go(func() error {
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return nil
		}
		synced.Store(true)
		if err := owner.acquire(ctx); err != nil {
			return nil // ctx ended
		}
		g.Go(func() error { return owner.keep(ctx) })
		if lead != nil {
			g.Go(func() error { return lead.Run(ctx, cfg) })
		} else {
			metrics.Leading(true)
			leaderWork(ctx) // one replica: before any message, as before
		}
		return srv.Run(ctx)
	})
	g.Go(func() error {
		select {
		case <-srv.Ready():
			log.Info("serving", "queues", srv.Queues())
		case <-ctx.Done():
		}
		return nil
	})
	err = g.Wait()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	log.Info("stopped", "error", err)
	return err
}

// sanitize keeps a dependency's error to one line without credentials: database drivers quote
// the DSN's user but never its password; still, cut anything after '@' of a URL-like word.
func sanitize(err error) string {
	words := strings.Fields(err.Error())
	for i, w := range words {
		if at := strings.Index(w, "@"); at > 0 && strings.Contains(w[:at], ":") {
			words[i] = "***" + w[at:]
		}
	}
	return strings.Join(words, " ")
}

// countWatchEvents counts the informers' events in the bridge's namespaces.
func countWatchEvents(ctx context.Context, mgr *capi.Manager, prefix string, m *telemetry.Metrics) error {
	for kind, newObj := range watchKinds {
		inf, err := mgr.GetCache().GetInformer(ctx, newObj())
		if err != nil {
			return fmt.Errorf("informer for %s: %w", kind, err)
		}
		ours := func(obj any) bool {
			if mo, ok := obj.(metav1.Object); ok {
				return strings.HasPrefix(mo.GetNamespace(), prefix)
			}
			return true // a tombstone: counted
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) {
				if ours(obj) {
					m.WatchEvent(kind, "add")
				}
			},
			UpdateFunc: func(_, obj any) {
				if ours(obj) {
					m.WatchEvent(kind, "update")
				}
			},
			DeleteFunc: func(obj any) {
				if ours(obj) {
					m.WatchEvent(kind, "delete")
				}
			},
		}); err != nil {
			return fmt.Errorf("informer for %s: %w", kind, err)
		}
	}
	return nil
}

// kube is the management cluster as the conductor sees it: the writing client plus the watch's kick.
type kube struct {
	*capi.Client
	kick func(namespace, name string)
}

func (k kube) Kick(namespace, name string) { k.kick(namespace, name) }
