package app

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"k8s.io/client-go/rest"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/discovery"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/keystone"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/tenantapi"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/tenantview"
)

// TokenReviewPath is where the token webhook answers (the apiserver's webhook kubeconfig names it).
const TokenReviewPath = "/tokenreview"

// listener is one of the bridge's HTTP listeners, bound at start-up so that a taken port stops the
// start instead of failing later.
type listener struct {
	name string
	ln   net.Listener
	srv  *http.Server
	tls  bool
}

func (l *listener) serve(ctx context.Context, log *slog.Logger) error {
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = l.srv.Shutdown(shutdown)
	}()
	log.Info("listening", "listener", l.name, "address", l.ln.Addr().String(), "tls", l.tls)
	var err error
	if l.tls {
		err = l.srv.ServeTLS(l.ln, "", "")
	} else {
		err = l.srv.Serve(l.ln)
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("%s listener: %w", l.name, err)
}

func newListener(name, addr string, h http.Handler, log *slog.Logger) (*listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s listener: %w", name, err)
	}
	return &listener{name: name, ln: ln, srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: 30 * time.Second, WriteTimeout: 60 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}}, nil
}

// tokenWebhookListener serves the TokenReview webhook ([bridge] token_webhook_bind).
// With the tenant API (tenant, non-nil) it also serves the API's validating webhook and makes each
// project's namespace at its first login.
func tokenWebhookListener(t *TenantViewOptions, tenant *tenantAPIParts, log *slog.Logger) (*listener, error) {
	var opts []keystone.Option
	opts = append(opts, keystone.WithUserAgent("magnum-capi-bridge-token-webhook"))
	if t.KeystoneCAFile != "" || t.KeystoneInsecure {
		hc, err := keystone.HTTPClient(t.KeystoneCAFile, t.KeystoneInsecure)
		if err != nil {
			return nil, err
		}
		hc.Timeout = 10 * time.Second
		opts = append(opts, keystone.WithHTTPClient(hc))
	} else {
		opts = append(opts, keystone.WithHTTPClient(&http.Client{Timeout: 10 * time.Second}))
	}
	wh := tenantview.NewWebhook(tenantview.KeystoneValidator{URL: t.KeystoneURL, Options: opts},
		tenantview.Options{CacheTTL: t.CacheTTL, Logger: log, OnProject: tenant.onProject()})
	mux := http.NewServeMux()
	mux.Handle(TokenReviewPath, wh)
	if tenant != nil {
		mux.Handle(tenantapi.AdmissionPath, tenant.admission)
	}
	l, err := newListener("token webhook", t.WebhookBind, mux, log)
	if err != nil {
		return nil, err
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			l.ln.Close()
			return nil, fmt.Errorf("[bridge] token_webhook_cert_file/token_webhook_key_file: %w", err)
		}
		l.srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
		l.tls = true
	}
	return l, nil
}

// discoveryListener serves /.well-known/managed-kubernetes.json ([bridge] discovery_bind).
func discoveryListener(o *Options, st store, cfg *rest.Config, log *slog.Logger) (*listener, error) {
	d := o.Bridge.Discovery
	settings := discovery.Settings{Flavor: o.Bridge.Flavor, AllowedFlavors: o.Bridge.AllowedFlavors, NamespacePrefix: o.Bridge.NamespacePrefix,
		DefaultKubernetesVersion: o.Bridge.DefaultKubernetesVersion, TenantView: o.Bridge.TenantView != nil, Server: d.Server,
		TenantAPI:          o.Bridge.TenantView != nil && o.Bridge.TenantView.TenantAPI,
		KubernetesVersions: o.Bridge.KubernetesVersions, AllowKubeTagImageMismatch: o.Bridge.AllowKubeTagImageMismatch}
	if settings.Server == "" {
		settings.Server = cfg.Host
	}
	ca := cfg.CAData
	if len(ca) == 0 && cfg.CAFile != "" {
		b, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("discovery: the management cluster's CA: %w", err)
		}
		ca = b
	}
	if len(ca) > 0 {
		settings.CertificateAuthorityData = base64.StdEncoding.EncodeToString(ca)
	}
	cloud := discovery.OpenStackCloud{Auth: d.Service, Region: d.Region, Templates: func(ctx context.Context) ([]discovery.Template, error) {
		rows, err := st.ListPublicClusterTemplates(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]discovery.Template, 0, len(rows))
		for _, r := range rows {
			out = append(out, discovery.Template{Name: deref(r.Name), ImageID: deref(r.ImageID), COE: deref(r.COE), Labels: r.Labels.Map()})
		}
		return out, nil
	}}
	return newListener("discovery", d.Bind, discovery.NewHandler(cloud, settings, d.CacheTTL, log).Mux(), log)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
