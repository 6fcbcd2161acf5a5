// Package app wires the bridge together: configuration, database, certificate manager, management
// cluster, conductor and RPC server. cmd/magnum-capi-bridge only parses flags and calls Run.
package app

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/addons"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/barbican"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/capi"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/certs"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/conductor"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/config"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/discovery"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/keystone"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/tenantview"
)

// DefaultConfigFiles are read when no --config-file is given: Magnum's own file, then the bridge's.
var DefaultConfigFiles = []string{"/etc/magnum/magnum.conf", "/etc/magnum-capi-bridge/bridge.conf"}

// ExistingDefaultConfigFiles returns the default files that exist (magnum.conf always, so that its
// absence is reported).
func ExistingDefaultConfigFiles() []string {
	out := []string{DefaultConfigFiles[0]}
	for _, f := range DefaultConfigFiles[1:] {
		if _, err := os.Stat(f); err == nil {
			out = append(out, f)
		}
	}
	return out
}

// Options is the whole configuration, validated.
type Options struct {
	Files []string
	Host  string
	// DatabaseURL is [database] connection, in SQLAlchemy form.
	DatabaseURL string
	RPC         rpc.Options
	Generate    certs.GenerateOptions
	Sign        certs.SignOptions
	// HeartbeatInterval refreshes magnum_service: a third of [DEFAULT] service_down_time (the age at
	// which magnum-api shows the conductor down), at most 60 s like the Python conductor.
	HeartbeatInterval time.Duration
	// Warnings name what the configuration sets that this release ignores or reads under a former
	// name; logged at start and printed by --check-config.
	Warnings []string
	// CertManagerType is [certificates] cert_manager_type: x509keypair or barbican.
	CertManagerType string
	// CAPIHelmNamespacePrefix is magnum-capi-helm's [capi_helm] namespace_prefix: where the clusters
	// that driver built are (the adoption plan looks there).
	CAPIHelmNamespacePrefix string
	// Barbican configures the barbican certificate backend; nil with x509keypair.
	Barbican *BarbicanOptions
	Bridge   BridgeOptions
	// Notifications is [oslo_messaging_notifications]; nil when no driver is set (or noop).
	Notifications *NotificationOptions
}

// BarbicanOptions are what the barbican certificate backend needs: Magnum's service user, as
// Magnum's conductor acts with it ([keystone_auth]), [barbican_client] and the dialect of the
// Magnum release in use ([bridge] magnum_release).
type BarbicanOptions struct {
	Service   keystone.PasswordAuth
	Region    string
	Interface string
	Dialect   barbican.Dialect
}

// NotificationOptions are the [oslo_messaging_notifications] settings the bridge honours.
type NotificationOptions struct {
	// Driver is messagingv2 (the 2.0 envelope) or messaging (no envelope).
	Driver string
	Topics []string
}

// BridgeOptions is the [bridge] section: the bridge's own settings.
type BridgeOptions struct {
	Kubeconfig      string
	NamespacePrefix string
	// Flavor is the infrastructure of clusters whose labels name none ([bridge] default_infrastructure).
	Flavor templates.Flavor
	// AllowedFlavors are the infrastructures a template may choose with the capi_infrastructure
	// label ([bridge] allowed_infrastructures; default: Flavor alone). They always hold Flavor.
	AllowedFlavors           []templates.Flavor
	DefaultKubernetesVersion string
	// KubernetesVersions are the versions a cluster may get: Cluster API's narrowed to the add-on
	// table's (addons.SupportedKubernetesVersions; not configurable).
	KubernetesVersions templates.VersionRange
	// AllowKubeTagImageMismatch lets a cluster's kube_tag differ from its image's own Kubernetes
	// version (allow_kube_tag_image_mismatch, default false: refused, as kubeadm would refuse it).
	AllowKubeTagImageMismatch bool
	// MagnumRelease presets the object versions replies use until magnum-api's are learned
	// ("zed" … ; empty: learn only).
	MagnumRelease string
	LogLevel      string
	// LogFormat is text or json (log_format).
	LogFormat string
	// MetricsBind is where /metrics, /healthz and /readyz listen (metrics_bind, host:port); empty:
	// not served.
	MetricsBind string
	// LeaderElection gates the status sync, the start-up resync and the namespace re-ensure on a
	// Lease (LeaderElectionNamespace/LeaderElectionID) so that replicas do not fight; off means
	// this process always acts as the leader (one replica only).
	LeaderElection          bool
	LeaderElectionNamespace string
	LeaderElectionID        string
	// NamespaceQuota is the ResourceQuota of every project namespace (namespace_quota).
	NamespaceQuota corev1.ResourceList
	// Credentials configures the per-cluster Keystone application credentials; nil when
	// [bridge] cluster_credentials is off.
	Credentials *CredentialOptions
	// TenantView is the Keystone login to the management cluster (docs/tenant-view.md); nil when
	// [bridge] tenant_view is off.
	TenantView *TenantViewOptions
	// Discovery serves /.well-known/managed-kubernetes.json (docs/discovery.md); nil when
	// [bridge] discovery_bind is empty.
	Discovery *DiscoveryOptions
	// UpdateTimeout and DeleteTimeout are the deadlines of updates and deletes (update_timeout,
	// delete_timeout, in minutes like Magnum's create_timeout).
	UpdateTimeout, DeleteTimeout time.Duration
	// OperationWorkers is how many clusters the operation driver works on at once.
	OperationWorkers int
	// PregeneratedKeys is how many RSA keys are made ahead of creates (four per cluster;
	// pregenerated_keys, default 32, 0: none).
	PregeneratedKeys int
	// ServiceUser is Magnum's service user ([keystone_auth] / [keystone_authtoken]) when configured;
	// --check-config authenticates it.
	ServiceUser *keystone.PasswordAuth
	// RequireAdmissionPolicies refuses to start unless the admission policies that confine the
	// bridge's RBAC are in force for its identity (require_admission_policies, default true).
	RequireAdmissionPolicies bool
}

// TenantViewOptions are [bridge] tenant_view*, token_webhook_*.
type TenantViewOptions struct {
	// WebhookBind is where the TokenReview webhook listens; empty: this instance only binds the
	// viewer role (another instance serves the webhook).
	WebhookBind string
	// CertFile and KeyFile make the webhook serve HTTPS; without them it serves plain HTTP, which
	// is allowed on a loopback address only (the apiserver sends tokens).
	CertFile, KeyFile string
	CacheTTL          time.Duration
	// KeystoneURL validates the tokens ([keystone_authtoken] auth_url).
	KeystoneURL      string
	KeystoneCAFile   string
	KeystoneInsecure bool
	// TenantAPI: tenants declare clusters as MagnumCluster objects in their namespace
	// ([bridge] tenant_api; docs/tenant-api.md), reconciled through magnum-api with their own
	// credentials; the webhook listener also validates those objects at admission.
	TenantAPI bool
	// TenantAPIRegion picks this bridge's magnum-api in the catalog (tenant_api_region_name, else
	// cloud_region_name or [keystone_authtoken] region_name; empty: the credential's region).
	TenantAPIRegion string
}

// DiscoveryOptions are [bridge] discovery_*.
type DiscoveryOptions struct {
	Bind     string
	CacheTTL time.Duration
	// Service is the identity that lists flavors, images and the catalog (Magnum's service user).
	Service keystone.PasswordAuth
	Region  string
	// Server is the management cluster's API server URL as tenants reach it (tenant_view_server;
	// default: the bridge's kubeconfig).
	Server string
}

// CredentialOptions are the [bridge] cluster_credential* and cloud_* settings plus Magnum's
// service user, which deletes credentials whose owner's token is gone (docs/credentials.md).
type CredentialOptions struct {
	Service keystone.PasswordAuth
	// Roles and WorkloadRoles are delegated to the CAPO and the in-cluster credential.
	Roles, WorkloadRoles []string
	// AuthURL is Keystone as CAPO and the workload cluster reach it; empty means the auth_url of
	// the request that created the cluster.
	AuthURL, RegionName, Interface string
	// CACertFile is the CA bundle of the cloud's endpoints, copied into the cloud-config Secrets.
	CACertFile string
}

const bridgeSection = "bridge"

// DefaultOperationWorkers is [bridge] operation_workers unset. A create's apply is mostly waiting on
// the apiserver: eight at once kept a 2-core host busy where four left it idle between round trips
// (docs/scale.md).
const DefaultOperationWorkers = 8

// LoadOptions reads and validates the configuration files; errors name the offending key.
func LoadOptions(files ...string) (*Options, error) {
	f, err := config.Load(files...)
	if err != nil {
		return nil, err
	}
	return optionsFrom(f, files)
}

func optionsFrom(f *config.File, files []string) (*Options, error) {
	o := &Options{Files: files}
	host, _ := os.Hostname()
	o.Host = f.String("DEFAULT", "host", host)
	o.DatabaseURL = f.String("database", "connection", "")
	if o.DatabaseURL == "" {
		return nil, &config.Error{Section: "database", Key: "connection", Reason: "is required"}
	}
	if _, err := db.ParseURL(o.DatabaseURL); err != nil {
		return nil, &config.Error{Section: "database", Key: "connection", Reason: err.Error()}
	}
	downTime, err := f.Seconds("DEFAULT", "service_down_time", 180*time.Second)
	if err != nil {
		return nil, err
	}
	if downTime < 3*time.Second {
		return nil, &config.Error{Section: "DEFAULT", Key: "service_down_time", Reason: "must be at least 3 seconds"}
	}
	o.HeartbeatInterval = min(downTime/3, 60*time.Second)
	if o.RPC, err = rpc.OptionsFromConfig(f); err != nil {
		return nil, err
	}
	if o.Generate, o.Sign, err = certs.OptionsFromConfig(f); err != nil {
		return nil, err
	}
	if o.CertManagerType, err = f.OneOf("certificates", "cert_manager_type", "barbican", "barbican", "x509keypair", "local"); err != nil {
		return nil, err
	}
	if o.CertManagerType == "local" {
		return nil, &config.Error{Section: "certificates", Key: "cert_manager_type",
			Reason: `"local" (files on one conductor host, for development) is not supported by magnum-capi-bridge; use barbican or x509keypair`}
	}
	o.CAPIHelmNamespacePrefix = f.String("capi_helm", "namespace_prefix", "magnum")
	b := &o.Bridge
	b.Kubeconfig = f.String(bridgeSection, "kubeconfig", "")
	if b.Kubeconfig != "" {
		if _, err := os.Stat(b.Kubeconfig); err != nil {
			return nil, &config.Error{Section: bridgeSection, Key: "kubeconfig", Reason: err.Error()}
		}
	}
	b.NamespacePrefix = f.String(bridgeSection, "namespace_prefix", "magnum-")
	if p := b.NamespacePrefix; p == "" || strings.ToLower(p) != p || len(p) > 20 {
		return nil, &config.Error{Section: bridgeSection, Key: "namespace_prefix", Reason: "want 1-20 lowercase characters"}
	}
	f.Rename(bridgeSection, "infrastructure", "default_infrastructure")
	flavor := f.String(bridgeSection, "default_infrastructure", string(templates.FlavorOpenStack))
	if b.Flavor, err = templates.ParseFlavor(flavor); err != nil {
		return nil, &config.Error{Section: bridgeSection, Key: "default_infrastructure", Reason: err.Error()}
	}
	for _, name := range f.List(bridgeSection, "allowed_infrastructures", []string{flavor}) {
		allowed, err := templates.ParseFlavor(name)
		if err != nil {
			return nil, &config.Error{Section: bridgeSection, Key: "allowed_infrastructures", Reason: err.Error()}
		}
		if !slices.Contains(b.AllowedFlavors, allowed) {
			b.AllowedFlavors = append(b.AllowedFlavors, allowed)
		}
	}
	if !slices.Contains(b.AllowedFlavors, b.Flavor) {
		return nil, &config.Error{Section: bridgeSection, Key: "allowed_infrastructures",
			Reason: fmt.Sprintf("must hold the default infrastructure %q", b.Flavor)}
	}
	b.DefaultKubernetesVersion = f.String(bridgeSection, "default_kubernetes_version", "v1.36.3")
	if _, err := templates.ParseVersion(b.DefaultKubernetesVersion); err != nil {
		return nil, &config.Error{Section: bridgeSection, Key: "default_kubernetes_version", Reason: err.Error()}
	}
	b.KubernetesVersions = addons.SupportedKubernetesVersions()
	if !b.KubernetesVersions.Contains(b.DefaultKubernetesVersion) {
		return nil, &config.Error{Section: bridgeSection, Key: "default_kubernetes_version",
			Reason: fmt.Sprintf("%s is outside the Kubernetes versions the bridge supports (%s)", b.DefaultKubernetesVersion, b.KubernetesVersions)}
	}
	if b.AllowKubeTagImageMismatch, err = f.Bool(bridgeSection, "allow_kube_tag_image_mismatch", false); err != nil {
		return nil, err
	}
	b.MagnumRelease = f.String(bridgeSection, "magnum_release", "")
	if o.CertManagerType == "barbican" {
		if o.Barbican, err = barbicanOptionsFrom(f, b.MagnumRelease); err != nil {
			return nil, err
		}
	}
	if b.NamespaceQuota, err = capi.ParseNamespaceQuota(f.String(bridgeSection, "namespace_quota", capi.DefaultNamespaceQuota)); err != nil {
		return nil, &config.Error{Section: bridgeSection, Key: "namespace_quota", Reason: err.Error()}
	}
	if b.LogLevel, err = f.OneOf(bridgeSection, "log_level", "info", "debug", "info", "warn", "error"); err != nil {
		return nil, err
	}
	if b.LogFormat, err = f.OneOf(bridgeSection, "log_format", "text", "text", "json"); err != nil {
		return nil, err
	}
	b.MetricsBind = f.String(bridgeSection, "metrics_bind", "")
	if b.MetricsBind != "" {
		if _, port, err := net.SplitHostPort(b.MetricsBind); err != nil || port == "" {
			return nil, &config.Error{Section: bridgeSection, Key: "metrics_bind", Reason: "want host:port (e.g. 127.0.0.1:9590 or :9590)"}
		}
	}
	if b.LeaderElection, err = f.Bool(bridgeSection, "leader_election", true); err != nil {
		return nil, err
	}
	b.LeaderElectionNamespace = f.String(bridgeSection, "leader_election_namespace", "magnum-capi-bridge")
	b.LeaderElectionID = f.String(bridgeSection, "leader_election_id", "magnum-capi-bridge-"+strings.TrimSuffix(b.NamespacePrefix, "-"))
	for _, o := range []struct{ key, value string }{{"leader_election_namespace", b.LeaderElectionNamespace}, {"leader_election_id", b.LeaderElectionID}} {
		if errs := validation.IsDNS1123Subdomain(o.value); len(errs) > 0 {
			return nil, &config.Error{Section: bridgeSection, Key: o.key, Reason: strings.Join(errs, "; ")}
		}
	}
	if o.Notifications, err = notificationOptionsFrom(f); err != nil {
		return nil, err
	}
	if b.Credentials, err = credentialOptionsFrom(f, b.OffersOpenStack()); err != nil {
		return nil, err
	}
	if b.Credentials != nil {
		b.ServiceUser = &b.Credentials.Service
	} else if service, err := keystone.ServiceAuthFromConfig(f); err == nil {
		b.ServiceUser = &service
	}
	if b.RequireAdmissionPolicies, err = f.Bool(bridgeSection, "require_admission_policies", true); err != nil {
		return nil, err
	}
	if b.TenantView, err = tenantViewOptionsFrom(f); err != nil {
		return nil, err
	}
	if b.Discovery, err = discoveryOptionsFrom(f); err != nil {
		return nil, err
	}
	if b.UpdateTimeout, err = minutesOption(f, "update_timeout", conductor.DefaultUpdateTimeout); err != nil {
		return nil, err
	}
	if b.DeleteTimeout, err = minutesOption(f, "delete_timeout", conductor.DefaultDeleteTimeout); err != nil {
		return nil, err
	}
	if b.OperationWorkers, err = f.Int(bridgeSection, "operation_workers", DefaultOperationWorkers, 1, 64); err != nil {
		return nil, err
	}
	// Eight clusters' worth: a burst of creates as large as the operation workers' backlog
	// usually is finds its keys made (a key is a few KiB of memory).
	if b.PregeneratedKeys, err = f.Int(bridgeSection, "pregenerated_keys", 32, 0, 1024); err != nil {
		return nil, err
	}
	// Bounded prefetch: an unlimited one (oslo's default) lets a backlog pile up in one replica.
	prefetch, err := f.Int(bridgeSection, "rpc_prefetch_count", 64, 1, 10000)
	if err != nil {
		return nil, err
	}
	if o.RPC.PrefetchCount <= 0 {
		o.RPC.PrefetchCount = prefetch
	}
	if o.RPC.ServerID == "" || o.RPC.ServerID == host {
		o.RPC.ServerID = o.Host
	}
	// Like oslo.config, an option this release does not know never stops the bridge: an operator
	// rolling back one release keeps the configuration the newer one read.
	o.Warnings = f.Warnings()
	for _, k := range f.Unread(bridgeSection) {
		o.Warnings = append(o.Warnings, fmt.Sprintf("[%s] %s is not an option of this release: ignored", bridgeSection, k))
	}
	return o, nil
}

// barbicanOptionsFrom reads what Magnum's barbican cert manager reads: the service user, and
// Barbican's catalog entry from [barbican_client].
func barbicanOptionsFrom(f *config.File, release string) (*BarbicanOptions, error) {
	service, err := keystone.ServiceAuthFromConfig(f)
	if err != nil {
		return nil, err
	}
	o := &BarbicanOptions{Service: service, Region: f.String("barbican_client", "region_name", ""),
		Interface: f.String("barbican_client", "endpoint_type", "publicURL")}
	if _, err := barbican.Availability(o.Interface); err != nil {
		return nil, &config.Error{Section: "barbican_client", Key: "endpoint_type", Reason: err.Error()}
	}
	if o.Dialect, err = barbican.DialectFor(release); err != nil {
		return nil, &config.Error{Section: bridgeSection, Key: "magnum_release", Reason: err.Error()}
	}
	return o, nil
}

const notificationsSection = "oslo_messaging_notifications"

// notificationOptionsFrom reads [oslo_messaging_notifications]: notifications are on when a
// messaging driver is set, as for the Python services.
func notificationOptionsFrom(f *config.File) (*NotificationOptions, error) {
	var driver string
	for _, d := range f.List(notificationsSection, "driver", nil) {
		switch d {
		case "noop", "":
		case "messagingv2", "messaging":
			if driver != "" && driver != d {
				return nil, &config.Error{Section: notificationsSection, Key: "driver", Reason: "set either messagingv2 or messaging, not both"}
			}
			driver = d
		default:
			return nil, &config.Error{Section: notificationsSection, Key: "driver",
				Reason: fmt.Sprintf("%q is not supported by magnum-capi-bridge; use messagingv2 (or noop)", d)}
		}
	}
	if driver == "" {
		return nil, nil
	}
	// Magnum's notifier uses its RPC transport (magnum.common.rpc.init), so its notifications never
	// follow [oslo_messaging_notifications] transport_url; neither do the bridge's.
	return &NotificationOptions{Driver: driver, Topics: f.List(notificationsSection, "topics", []string{"notifications"})}, nil
}

// minutesOption reads a positive number of minutes (fractions allowed, e.g. 0.5).
func minutesOption(f *config.File, key string, def time.Duration) (time.Duration, error) {
	raw := f.String(bridgeSection, key, "")
	if raw == "" {
		return def, nil
	}
	m, err := strconv.ParseFloat(raw, 64)
	if err != nil || m <= 0 {
		return 0, &config.Error{Section: bridgeSection, Key: key, Reason: fmt.Sprintf("want a positive number of minutes, not %q", raw)}
	}
	return time.Duration(m * float64(time.Minute)), nil
}

// OffersOpenStack reports whether clusters may run on OpenStack machines, which call the cloud.
func (b *BridgeOptions) OffersOpenStack() bool {
	return slices.Contains(b.AllowedFlavors, templates.FlavorOpenStack)
}

// credentialOptionsFrom reads the credential settings. Credentials are on by default where machines
// call the cloud (the openstack infrastructure is offered) and off where only the in-memory flavor
// is, whose machines call nothing.
func credentialOptionsFrom(f *config.File, openstack bool) (*CredentialOptions, error) {
	on, err := f.Bool(bridgeSection, "cluster_credentials", openstack)
	if err != nil {
		return nil, err
	}
	if !on {
		if openstack {
			return nil, &config.Error{Section: bridgeSection, Key: "cluster_credentials",
				Reason: "the openstack infrastructure needs a cloud credential per cluster; it cannot be off"}
		}
		return nil, nil
	}
	service, err := keystone.ServiceAuthFromConfig(f)
	if err != nil {
		return nil, err
	}
	c := &CredentialOptions{
		Service:    service,
		Roles:      f.List(bridgeSection, "cluster_credential_roles", keystone.DefaultRoles),
		AuthURL:    f.String(bridgeSection, "cloud_auth_url", ""),
		RegionName: f.String(bridgeSection, "cloud_region_name", f.String("keystone_authtoken", "region_name", "")),
		CACertFile: f.String(bridgeSection, "cloud_ca_file", ""),
	}
	c.WorkloadRoles = f.List(bridgeSection, "cluster_workload_credential_roles", c.Roles)
	if slices.ContainsFunc(append(append([]string{}, c.Roles...), c.WorkloadRoles...), func(r string) bool { return strings.EqualFold(r, "admin") }) {
		return nil, &config.Error{Section: bridgeSection, Key: "cluster_credential_roles",
			Reason: "a cluster credential never gets the admin role: anyone who can read it would be a cloud admin"}
	}
	if c.Interface, err = f.OneOf(bridgeSection, "cloud_interface", "public", "public", "internal", "admin"); err != nil {
		return nil, err
	}
	if c.AuthURL != "" {
		if u, err := url.Parse(c.AuthURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, &config.Error{Section: bridgeSection, Key: "cloud_auth_url", Reason: "want an absolute http(s) URL of Keystone v3"}
		}
	}
	if c.CACertFile != "" {
		if _, err := os.ReadFile(c.CACertFile); err != nil {
			return nil, &config.Error{Section: bridgeSection, Key: "cloud_ca_file", Reason: err.Error()}
		}
	}
	return c, nil
}

func tenantViewOptionsFrom(f *config.File) (*TenantViewOptions, error) {
	on, err := f.Bool(bridgeSection, "tenant_view", false)
	if err != nil || !on {
		return nil, err
	}
	t := &TenantViewOptions{
		WebhookBind: f.String(bridgeSection, "token_webhook_bind", ""),
		CertFile:    f.String(bridgeSection, "token_webhook_cert_file", ""),
		KeyFile:     f.String(bridgeSection, "token_webhook_key_file", ""),
	}
	if t.CacheTTL, err = f.Seconds(bridgeSection, "tenant_view_cache_ttl", tenantview.DefaultCacheTTL); err != nil {
		return nil, err
	}
	if t.TenantAPI, err = f.Bool(bridgeSection, "tenant_api", false); err != nil {
		return nil, err
	}
	t.TenantAPIRegion = f.String(bridgeSection, "tenant_api_region_name",
		f.String(bridgeSection, "cloud_region_name", f.String("keystone_authtoken", "region_name", "")))
	if (t.CertFile == "") != (t.KeyFile == "") {
		return nil, &config.Error{Section: bridgeSection, Key: "token_webhook_cert_file", Reason: "token_webhook_cert_file and token_webhook_key_file go together"}
	}
	// A slice, not a map: the first missing file is always the one reported.
	for _, f := range []struct{ key, file string }{{"token_webhook_cert_file", t.CertFile}, {"token_webhook_key_file", t.KeyFile}} {
		if f.file != "" {
			if _, err := os.Stat(f.file); err != nil {
				return nil, &config.Error{Section: bridgeSection, Key: f.key, Reason: err.Error()}
			}
		}
	}
	if t.WebhookBind != "" {
		host, _, err := net.SplitHostPort(t.WebhookBind)
		if err != nil {
			return nil, &config.Error{Section: bridgeSection, Key: "token_webhook_bind", Reason: "want host:port, " + err.Error()}
		}
		if t.CertFile == "" && !isLoopback(host) {
			return nil, &config.Error{Section: bridgeSection, Key: "token_webhook_bind",
				Reason: "the apiserver sends Keystone tokens to the webhook: off a loopback address it must serve HTTPS (token_webhook_cert_file, token_webhook_key_file)"}
		}
	}
	service, err := keystone.ServiceAuthFromConfig(f)
	if err != nil {
		return nil, err
	}
	t.KeystoneURL, t.KeystoneCAFile, t.KeystoneInsecure = service.AuthURL, service.CAFile, service.Insecure
	return t, nil
}

func discoveryOptionsFrom(f *config.File) (*DiscoveryOptions, error) {
	bind := f.String(bridgeSection, "discovery_bind", "")
	if bind == "" {
		return nil, nil
	}
	if _, _, err := net.SplitHostPort(bind); err != nil {
		return nil, &config.Error{Section: bridgeSection, Key: "discovery_bind", Reason: "want host:port, " + err.Error()}
	}
	d := &DiscoveryOptions{Bind: bind, Server: f.String(bridgeSection, "tenant_view_server", ""),
		Region: f.String(bridgeSection, "cloud_region_name", f.String("keystone_authtoken", "region_name", ""))}
	var err error
	if d.CacheTTL, err = f.Seconds(bridgeSection, "discovery_cache_ttl", discovery.DefaultCacheTTL); err != nil {
		return nil, err
	}
	if d.Server != "" {
		if u, err := url.Parse(d.Server); err != nil || u.Scheme != "https" || u.Host == "" {
			return nil, &config.Error{Section: bridgeSection, Key: "tenant_view_server", Reason: "want the https URL of the management cluster's API server"}
		}
	}
	if d.Service, err = keystone.ServiceAuthFromConfig(f); err != nil {
		return nil, err
	}
	return d, nil
}

// isLoopback: "localhost" or a loopback IP.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
