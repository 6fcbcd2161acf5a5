package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"golang.org/x/sync/errgroup"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/go-logr/logr"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/capi"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/certs"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/conductor"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

func logger(level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
}

// Run serves until ctx ends.
func Run(ctx context.Context, o *Options, version string) error {
	log := logger(o.Bridge.LogLevel)
	slog.SetDefault(log)
	ctrl.SetLogger(logr.FromSlogHandler(log.Handler()))
	log.Info("starting magnum-capi-bridge", "version", version, "host", o.Host, "config", o.Files, "rpc", o.RPC.String())

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
	var le []capi.LeaderElection
	if o.Bridge.LeaderElection {
		le = append(le, capi.LeaderElection{ID: capi.LeaderElectionID(o.Bridge.NamespacePrefix), Namespace: o.Bridge.LeaderElectionNamespace})
	}
	mgr, err := capi.NewManager(cfg, le...)
	if err != nil {
		return err
	}
	mgr.Client.NamespaceQuota = o.Bridge.NamespaceQuota
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
	if o.Bridge.Credentials != nil {
		kc, err := newKeystoneCredentials(o.Bridge.Credentials, log)
		if err != nil {
			return err
		}
		creds = kc
		if o.Bridge.Flavor == templates.FlavorOpenStack {
			serverGroups = novaServerGroups{}
		}
	}
	cond := conductor.New(st, kube{Client: mgr.Client, kick: mgr.Kick}, certs.NewManager(st.KeyPairs()), conductor.Options{
		Flavor: o.Bridge.Flavor, NamespacePrefix: o.Bridge.NamespacePrefix,
		DefaultKubernetesVersion: o.Bridge.DefaultKubernetesVersion, Sign: o.Sign, Generate: o.Generate,
		Versions: versions, Credentials: creds, ServerGroups: serverGroups, Logger: log,
	})
	mgr.NamespacePrefix = o.Bridge.NamespacePrefix
	if err := mgr.Watch(cond); err != nil {
		return err
	}
	rpcOpts := o.RPC
	rpcOpts.Logger = log
	srv, err := rpc.NewServer(rpcOpts)
	if err != nil {
		return err
	}
	for method, h := range cond.Handlers() {
		srv.Register(method, h)
	}

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return st.Heartbeat(ctx, o.Host, o.HeartbeatInterval) })
	g.Go(func() error { return mgr.Start(ctx) })
	g.Go(func() error {
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return nil
		}
		// Before any message: the quota or binding of an existing project may have changed.
		if n, err := mgr.Client.EnsureProjectNamespaces(ctx, o.Bridge.NamespacePrefix); err != nil {
			log.Warn("ensure project namespaces after start-up", "updated", n, "error", err)
		} else {
			log.Info("project namespaces ensured", "count", n)
		}
		if err := cond.Resync(ctx); err != nil {
			log.Warn("resync after start-up", "error", err)
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

// kube is the management cluster as the conductor sees it: the writing client plus the watch's kick.
type kube struct {
	*capi.Client
	kick func(namespace, name string)
}

func (k kube) Kick(namespace, name string) { k.kick(namespace, name) }
