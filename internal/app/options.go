// Package app wires the bridge together: configuration, database, certificate manager, management
// cluster, conductor and RPC server. cmd/magnum-capi-bridge only parses flags and calls Run.
package app

import (
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/capi"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/certs"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/config"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/keystone"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
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
	// CertManagerType is [certificates] cert_manager_type; the bridge implements x509keypair.
	CertManagerType string
	Bridge          BridgeOptions
}

// BridgeOptions is the [bridge] section: the bridge's own settings.
type BridgeOptions struct {
	Kubeconfig               string
	NamespacePrefix          string
	Flavor                   templates.Flavor
	DefaultKubernetesVersion string
	// MagnumRelease presets the object versions replies use until magnum-api's are learned
	// ("zed" … ; empty: learn only).
	MagnumRelease string
	LogLevel      string
	// NamespaceQuota is the ResourceQuota of every project namespace (namespace_quota).
	NamespaceQuota corev1.ResourceList
	// Credentials configures the per-cluster Keystone application credentials; nil when
	// [bridge] cluster_credentials is off.
	Credentials *CredentialOptions
	// ServiceUser is Magnum's service user ([keystone_auth] / [keystone_authtoken]) when configured;
	// --check-config authenticates it.
	ServiceUser *keystone.PasswordAuth
	// RequireAdmissionPolicies refuses to start unless the admission policies that confine the
	// bridge's RBAC are in force for its identity (require_admission_policies, default true).
	RequireAdmissionPolicies bool
	// LeaderElection runs the status sync on one replica at a time (leader_election); every
	// replica serves RPC. LeaderElectionNamespace holds the Lease (empty: the pod's namespace).
	LeaderElection          bool
	LeaderElectionNamespace string
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
	if o.CertManagerType != "x509keypair" {
		return nil, &config.Error{Section: "certificates", Key: "cert_manager_type",
			Reason: fmt.Sprintf("%q is not supported by magnum-capi-bridge yet; use x509keypair", o.CertManagerType)}
	}
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
	flavor := f.String(bridgeSection, "infrastructure", string(templates.FlavorOpenStack))
	if b.Flavor, err = templates.ParseFlavor(flavor); err != nil {
		return nil, &config.Error{Section: bridgeSection, Key: "infrastructure", Reason: err.Error()}
	}
	b.DefaultKubernetesVersion = f.String(bridgeSection, "default_kubernetes_version", "v1.36.3")
	if _, _, _, err := templates.ParseVersion(b.DefaultKubernetesVersion); err != nil {
		return nil, &config.Error{Section: bridgeSection, Key: "default_kubernetes_version", Reason: err.Error()}
	}
	b.MagnumRelease = f.String(bridgeSection, "magnum_release", "")
	if b.NamespaceQuota, err = capi.ParseNamespaceQuota(f.String(bridgeSection, "namespace_quota", capi.DefaultNamespaceQuota)); err != nil {
		return nil, &config.Error{Section: bridgeSection, Key: "namespace_quota", Reason: err.Error()}
	}
	if b.LogLevel, err = f.OneOf(bridgeSection, "log_level", "info", "debug", "info", "warn", "error"); err != nil {
		return nil, err
	}
	if b.Credentials, err = credentialOptionsFrom(f, b.Flavor); err != nil {
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
	if b.LeaderElection, err = f.Bool(bridgeSection, "leader_election", false); err != nil {
		return nil, err
	}
	b.LeaderElectionNamespace = f.String(bridgeSection, "leader_election_namespace", "")
	if b.LeaderElection && b.Kubeconfig != "" && b.LeaderElectionNamespace == "" {
		return nil, &config.Error{Section: bridgeSection, Key: "leader_election_namespace",
			Reason: "is required with leader_election outside the management cluster (a kubeconfig is set)"}
	}
	if o.RPC.ServerID == "" || o.RPC.ServerID == host {
		o.RPC.ServerID = o.Host
	}
	return o, nil
}

// credentialOptionsFrom reads the credential settings. Credentials are on by default where machines
// call the cloud (openstack) and off for the in-memory flavor, whose machines call nothing.
func credentialOptionsFrom(f *config.File, flavor templates.Flavor) (*CredentialOptions, error) {
	on, err := f.Bool(bridgeSection, "cluster_credentials", flavor == templates.FlavorOpenStack)
	if err != nil {
		return nil, err
	}
	if !on {
		if flavor == templates.FlavorOpenStack {
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
