package app

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/capi"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/keystone"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/tenantapi"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/tenantapi/v1alpha1"
)

// tenantAPICRD is the MagnumCluster CustomResourceDefinition.
const tenantAPICRD = v1alpha1.Resource + "." + v1alpha1.Group

// tenantAPIParts are the pieces of the tenant API.
type tenantAPIParts struct {
	// reconciler is registered with the manager once leadership is known.
	reconciler *tenantapi.Reconciler
	admission  http.Handler
	// ensureNamespace makes a project's namespace.
	ensureNamespace func(ctx context.Context, projectID string) error
}

func (p *tenantAPIParts) reconcilerOrNil() *tenantapi.Reconciler {
	if p == nil {
		return nil
	}
	return p.reconciler
}

func (p *tenantAPIParts) onProject() func(ctx context.Context, projectID string) error {
	if p == nil {
		return nil
	}
	return p.ensureNamespace
}

// tenantAPI sets up the tenant API ([bridge] tenant_api); nil when it is off. It refuses to start
// when the CRD is not installed, rather than fail on the first watch.
func tenantAPI(o *Options, st store, mgr *capi.Manager, log *slog.Logger) (*tenantAPIParts, error) {
	t := o.Bridge.TenantView
	if t == nil || !t.TenantAPI {
		return nil, nil
	}
	if err := v1alpha1.AddToScheme(mgr.GetScheme()); err != nil {
		return nil, err
	}
	// Discovery, which every identity may read: the bridge's role has no rights on CRDs.
	if _, err := mgr.GetRESTMapper().RESTMapping(v1alpha1.GroupVersion.WithKind(v1alpha1.Kind).GroupKind(), v1alpha1.Version); err != nil {
		return nil, fmt.Errorf("[bridge] tenant_api needs the CustomResourceDefinition %s (deploy/helm/magnum-capi-bridge/crds): %w", tenantAPICRD, err)
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	if t.KeystoneCAFile != "" || t.KeystoneInsecure {
		var err error
		if hc, err = keystone.HTTPClient(t.KeystoneCAFile, t.KeystoneInsecure); err != nil {
			return nil, err
		}
		hc.Timeout = 30 * time.Second
	}
	r := &tenantapi.Reconciler{Cache: mgr.GetClient(), Direct: mgr.Client.Client, NamespacePrefix: o.Bridge.NamespacePrefix, Log: log,
		Clients: &tenantapi.Clients{KeystoneURL: t.KeystoneURL, Region: t.TenantAPIRegion, HTTP: hc}}
	admission := &tenantapi.Admission{NamespacePrefix: o.Bridge.NamespacePrefix, Flavor: o.Bridge.Flavor, Log: log,
		Templates: func(ctx context.Context, projectID, ident string) ([]tenantapi.Template, error) {
			found, err := st.FindClusterTemplates(ctx, projectID, ident)
			if err != nil {
				return nil, err
			}
			out := make([]tenantapi.Template, 0, len(found))
			for _, f := range found {
				labels, _ := f.View().Labels.Get()
				out = append(out, tenantapi.Template{UUID: f.UUID, Labels: labels.Map()})
			}
			return out, nil
		}}
	prefix := o.Bridge.NamespacePrefix
	return &tenantAPIParts{reconciler: r, admission: admission, ensureNamespace: func(ctx context.Context, projectID string) error {
		return mgr.Client.EnsureProjectNamespace(ctx, templates.NamespaceFor(prefix, projectID), projectID)
	}}, nil
}
