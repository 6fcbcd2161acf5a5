package app

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/barbican"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/capi"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/keystone"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// CheckError names the dependency that failed a check.
type CheckError struct {
	Dependency string
	Err        error
}

func (e *CheckError) Error() string {
	msg := e.Err.Error()
	// Errors that name their service already ("Barbican: …", "keystone: …") are not named twice.
	if strings.HasPrefix(strings.ToLower(msg), strings.ToLower(e.Dependency)+": ") {
		return msg
	}
	return e.Dependency + ": " + msg
}
func (e *CheckError) Unwrap() error { return e.Err }

// Check connects to every dependency the way the bridge will use it and stops at the first that
// fails: RabbitMQ (its virtual host), the database (Magnum's tables), the management cluster (the
// bridge's identity, the Cluster API resources it writes, the admission policies confining it) and
// Keystone (Magnum's service user) and, with cert_manager_type = barbican, Barbican (its catalog
// entry, and a secret the service user creates, reads and deletes). Each check that passed is reported to out, one line each. It is
// what --check-config runs. No message carries a password or token: every error below comes from code
// that redacts them (rpc, db, keystone) or never sees them (client-go).
func Check(ctx context.Context, o *Options, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	step := func(dependency string, f func(context.Context) (string, error)) error {
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		detail, err := f(sctx)
		if err != nil {
			return &CheckError{Dependency: dependency, Err: err}
		}
		fmt.Fprintf(out, "ok  %-20s %s\n", dependency, detail)
		return nil
	}
	if err := step("RabbitMQ", func(ctx context.Context) (string, error) {
		vhost := o.RPC.VirtualHost
		if vhost == "" {
			vhost = "/"
		}
		return fmt.Sprintf("virtual host %q", vhost), o.RPC.Probe(ctx)
	}); err != nil {
		return err
	}
	if err := step("database", func(ctx context.Context) (string, error) {
		st, err := openStore(ctx, o)
		if err != nil {
			return "", err
		}
		defer st.Close()
		return fmt.Sprintf("%s, Magnum's tables found", st.Target()), nil
	}); err != nil {
		return err
	}
	var cfg *rest.Config
	var user string
	if err := step("management cluster", func(ctx context.Context) (string, error) {
		var err error
		if cfg, err = capi.RESTConfig(o.Bridge.Kubeconfig); err != nil {
			return "", err
		}
		if user, err = capi.WhoAmI(ctx, cfg); err != nil {
			return "", err
		}
		return fmt.Sprintf("%s as %s", cfg.Host, user), nil
	}); err != nil {
		return err
	}
	if err := step("Cluster API", func(ctx context.Context) (string, error) {
		want := requiredAPIResources(o.Bridge.AllowedFlavors)
		return fmt.Sprintf("%d resources served", len(want)), capi.CheckAPIResources(ctx, cfg, want)
	}); err != nil {
		return err
	}
	if err := step("admission policies", func(ctx context.Context) (string, error) {
		err := capi.CheckAdmissionPolicies(ctx, cfg, user)
		if err != nil && !o.Bridge.RequireAdmissionPolicies {
			return "not required ([bridge] require_admission_policies = false): " + err.Error(), nil
		}
		return "in force for " + user, err
	}); err != nil {
		return err
	}
	if err := step("database owner", func(ctx context.Context) (string, error) {
		deployment, err := deploymentName(ctx, cfg, o)
		if err != nil {
			return "", err
		}
		st, err := openStore(ctx, o)
		if err != nil {
			return "", err
		}
		defer st.Close()
		return checkOwner(ctx, st.Store, deployment, time.Now())
	}); err != nil {
		return err
	}
	if err := step("cluster autoscalers", func(ctx context.Context) (string, error) {
		missing, err := capi.AutoscalerRights(ctx, cfg)
		if err != nil {
			return "", err
		}
		if len(missing) > 0 {
			return "none will run: the bridge's role lacks " + strings.Join(missing, ", ") + " (deploy/kubernetes/rbac.yaml)", nil
		}
		return "the bridge may run them", nil
	}); err != nil {
		return err
	}
	if err := step("Keystone", func(ctx context.Context) (string, error) {
		s := o.Bridge.ServiceUser
		if s == nil {
			return "not checked: no service user configured ([keystone_auth] or [keystone_authtoken])", nil
		}
		if _, err := keystoneServiceClient(ctx, *s); err != nil {
			return "", err
		}
		name := s.Username
		if name == "" {
			name = s.UserID
		}
		return fmt.Sprintf("service user %q authenticated at %s", name, s.AuthURL), nil
	}); err != nil {
		return err
	}
	return step("Barbican", func(ctx context.Context) (string, error) {
		if o.Barbican == nil {
			return "not used ([certificates] cert_manager_type = " + o.CertManagerType + ")", nil
		}
		b, err := newBarbican(o.Barbican, nil)
		if err != nil {
			return "", err
		}
		endpoint, err := b.Probe(ctx)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s at %s: the service user created, read and deleted a secret", barbican.CatalogType, endpoint), nil
	})
}

// keystoneServiceClient authenticates Magnum's service user.
func keystoneServiceClient(ctx context.Context, s keystone.PasswordAuth) (*keystone.Client, error) {
	opts := []keystone.Option{keystone.WithUserAgent("magnum-capi-bridge")}
	if s.CAFile != "" || s.Insecure {
		hc, err := keystone.HTTPClient(s.CAFile, s.Insecure)
		if err != nil {
			return nil, err
		}
		opts = append(opts, keystone.WithHTTPClient(hc))
	}
	return keystone.NewPasswordClient(ctx, s, opts...)
}

// requiredAPIResources are the Cluster API resources the bridge applies or watches for a flavor.
func requiredAPIResources(flavors []templates.Flavor) []capi.APIResource {
	r := func(gv, resource string) capi.APIResource {
		return capi.APIResource{GroupVersion: gv, Resource: resource}
	}
	core := "cluster.x-k8s.io/v1beta2"
	want := []capi.APIResource{
		r(core, "clusters"), r(core, "clusterclasses"), r(core, "machinedeployments"), r(core, "machines"),
		// Every cluster's add-ons (internal/addons) are a ClusterResourceSet, watched with its binding.
		r(addonsv1.GroupVersion.String(), "clusterresourcesets"), r(addonsv1.GroupVersion.String(), "clusterresourcesetbindings"),
		r(templates.ControlPlaneGroupVersion, "kubeadmcontrolplanetemplates"),
		r(templates.BootstrapGroupVersion, "kubeadmconfigtemplates"),
	}
	for _, flavor := range flavors {
		switch flavor {
		case templates.FlavorOpenStack:
			want = append(want, r(templates.CAPOGroupVersion, "openstackclustertemplates"), r(templates.CAPOGroupVersion, "openstackmachinetemplates"))
		case templates.FlavorInMemory:
			want = append(want, r(templates.InfraGroupVersion, "devclustertemplates"), r(templates.InfraGroupVersion, "devmachinetemplates"))
		}
	}
	return want
}

// requireAdmissionPolicies is start-up's guard: the bridge's cluster-wide RBAC is confined to
// project namespaces only by the admission policies.
func requireAdmissionPolicies(ctx context.Context, o *Options, cfg *rest.Config) error {
	if !o.Bridge.RequireAdmissionPolicies {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	user, err := capi.WhoAmI(ctx, cfg)
	if err == nil {
		err = capi.CheckAdmissionPolicies(ctx, cfg, user)
	}
	if err != nil {
		return fmt.Errorf("admission policies: %w (the bridge's RBAC is confined to project namespaces only by them; "+
			"[bridge] require_admission_policies = false starts without them)", err)
	}
	return nil
}
