// Package compute manages what the bridge creates in Nova for a cluster: the server groups its
// machines are placed in (labels `server_group_policies`; internal/templates renders the
// OpenStackMachineTemplates that name them); it releases the floating IPs CAPO leaves in Neutron
// when a cluster is deleted (floatingips.go); and it reads a template's image from Glance for the
// Kubernetes version check of creates and upgrades (images.go).
//
// A Client acts as one cluster's application credential, read from the clouds.yaml the bridge
// stores in the cluster's cloud-config Secret (keystone.RenderCloudsYAML), or as the user of the
// request's token (NewFromToken), so whatever it creates belongs to the cluster's project, where
// CAPO (using the cluster's credential) looks it up by name.
// Nova is found in the token's catalog (the clouds.yaml's region and interface).
package compute

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/tokens"
	"github.com/gophercloud/utils/v2/openstack/clientconfig"
	"sigs.k8s.io/yaml"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/keystone"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/osclient"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/tlsclient"
)

// DefaultRequestTimeout bounds every request of a client built without WithHTTPClient, so that an
// endpoint that accepts connections but never answers cannot hang the conductor.
const DefaultRequestTimeout = tlsclient.DefaultTimeout

// Option adjusts how a Client talks to Keystone and Nova.
type Option func(*clientOptions)

type clientOptions struct {
	httpClient *http.Client
	userAgent  string
	cloud      string
}

// WithHTTPClient sets the HTTP client (proxies, timeouts). Its TLS settings win over the caCert
// given to NewFromCloudsYAML.
func WithHTTPClient(c *http.Client) Option { return func(o *clientOptions) { o.httpClient = c } }

// WithUserAgent prepends a product token to the User-Agent header.
func WithUserAgent(ua string) Option { return func(o *clientOptions) { o.userAgent = ua } }

// WithCloud picks another entry of the clouds.yaml than keystone.CloudName ("openstack").
func WithCloud(name string) Option { return func(o *clientOptions) { o.cloud = name } }

// Client talks to Nova as one application credential. It is safe for concurrent use.
type Client struct {
	compute   *gophercloud.ServiceClient
	projectID string
	// provider and endpoint find Neutron in the same catalog when it is first needed.
	provider *gophercloud.ProviderClient
	endpoint gophercloud.EndpointOpts
	// secrets that took part in authentication, removed from every error message.
	scrub []string

	// The microversion used for server groups, negotiated once (see serverGroupClient).
	mu           sync.Mutex
	negotiated   bool
	microversion string
}

// ProjectID is the project of the credential's token: where the client's server groups live.
func (c *Client) ProjectID() string { return c.projectID }

// Endpoint is the Nova endpoint found in the catalog.
func (c *Client) Endpoint() string { return c.compute.Endpoint }

// String names the client; the token stays out of every printed form.
func (c *Client) String() string {
	return "compute.Client{project " + c.projectID + " at " + c.compute.Endpoint + "}"
}

// GoString implements fmt.GoStringer (%#v) so that the struct, which holds the token, never prints.
func (c *Client) GoString() string { return c.String() }

// cloudsYAMLBytes hands clouds.yaml bytes to clientconfig instead of files found on disk: the
// bridge's process environment and file system must not influence which cloud is used.
type cloudsYAMLBytes []byte

func (b cloudsYAMLBytes) LoadCloudsYAML() (map[string]clientconfig.Cloud, error) {
	var clouds clientconfig.Clouds
	if err := yaml.Unmarshal(b, &clouds); err != nil {
		// The YAML parser may quote the offending input, which can be the secret.
		return nil, errors.New("clouds.yaml is not valid YAML")
	}
	return clouds.Clouds, nil
}

func (cloudsYAMLBytes) LoadSecureCloudsYAML() (map[string]clientconfig.Cloud, error) { return nil, nil }

func (cloudsYAMLBytes) LoadPublicCloudsYAML() (map[string]clientconfig.Cloud, error) {
	return map[string]clientconfig.Cloud{}, nil
}

// cloudConfig is what the client needs from one clouds.yaml entry.
type cloudConfig struct {
	authURL      string
	auth         tokens.AuthOptions
	region       string
	availability gophercloud.Availability
	insecure     bool
}

// parseCloudsYAML reads an application-credential entry of a clouds.yaml (gophercloud utils'
// clientconfig, as CAPO reads the same Secret). Only application credentials are accepted: the
// bridge never stores anything else for a cluster.
func parseCloudsYAML(data []byte, cloud string) (*cloudConfig, error) {
	configErr := func(format string, args ...any) error {
		return &Error{Op: "read clouds.yaml", Message: fmt.Sprintf(format, args...)}
	}
	if len(data) == 0 {
		return nil, configErr("empty clouds.yaml")
	}
	entry, err := clientconfig.GetCloudFromYAML(&clientconfig.ClientOpts{Cloud: cloud, YAMLOpts: cloudsYAMLBytes(data)})
	if err != nil {
		return nil, configErr("%v", err)
	}
	if entry.AuthType != "" && entry.AuthType != clientconfig.AuthV3ApplicationCredential {
		return nil, configErr("cloud %q uses auth_type %q; only %s is supported", cloud, entry.AuthType, clientconfig.AuthV3ApplicationCredential)
	}
	a := entry.AuthInfo
	if a == nil {
		return nil, configErr("cloud %q has no auth section", cloud)
	}
	u, err := url.Parse(a.AuthURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, configErr("cloud %q: auth_url %q is not an absolute http(s) URL", cloud, a.AuthURL)
	}
	if a.ApplicationCredentialSecret == "" {
		return nil, configErr("cloud %q has no application_credential_secret", cloud)
	}
	cfg := &cloudConfig{authURL: a.AuthURL, region: entry.RegionName}
	cfg.auth = tokens.AuthOptions{ApplicationCredentialSecret: a.ApplicationCredentialSecret, AllowReauth: true}
	switch {
	case a.ApplicationCredentialID != "":
		cfg.auth.ApplicationCredentialID = a.ApplicationCredentialID
	case a.ApplicationCredentialName != "" && (a.UserID != "" || a.Username != ""):
		// A credential named by its owner, as keystoneauth allows.
		cfg.auth.ApplicationCredentialName = a.ApplicationCredentialName
		cfg.auth.UserID, cfg.auth.Username = a.UserID, a.Username
		cfg.auth.DomainID, cfg.auth.DomainName = a.UserDomainID, a.UserDomainName
		if a.UserID == "" && a.UserDomainID == "" && a.UserDomainName == "" {
			cfg.auth.DomainID = "default"
		}
	default:
		return nil, configErr("cloud %q names no application credential (application_credential_id, or application_credential_name with the user)", cloud)
	}
	// GetCloudFromYAML moves `interface` to EndpointType.
	var ok bool
	if cfg.availability, ok = availabilityOf(entry.EndpointType); !ok {
		return nil, configErr("cloud %q: interface %q is not one of public, internal, admin", cloud, entry.EndpointType)
	}
	cfg.insecure = entry.Verify != nil && !*entry.Verify
	return cfg, nil
}

// availabilityOf reads a clouds.yaml `interface` (public when empty), in keystoneauth's spellings.
func availabilityOf(iface string) (gophercloud.Availability, bool) {
	switch iface {
	case "", "public", "publicURL":
		return gophercloud.AvailabilityPublic, true
	case "internal", "internalURL":
		return gophercloud.AvailabilityInternal, true
	case "admin", "adminURL":
		return gophercloud.AvailabilityAdmin, true
	}
	return "", false
}

// httpClient builds the default client: caCert (PEM) trusted in addition to the system pool.
// The clouds.yaml's own `cacert` is a path where the credential's consumers find the bundle and
// means nothing in the bridge's file system; the bridge passes the bundle's bytes instead.
func httpClient(caCert []byte, insecure bool) (*http.Client, error) {
	hc, err := tlsclient.HTTPClient(tlsclient.Options{CAPEM: caCert, SystemRoots: true, Insecure: insecure})
	if errors.Is(err, tlsclient.ErrNoCertificate) {
		return nil, &Error{Op: "configure client", Message: "the CA bundle holds no PEM certificate"}
	}
	if err != nil {
		return nil, &Error{Op: "configure client", Message: err.Error(), Err: err}
	}
	return hc, nil
}

// NewFromCloudsYAML authenticates as the application credential of a clouds.yaml (the bytes the
// bridge stores under the cloud-config Secret's `clouds.yaml` key; entry keystone.CloudName unless
// WithCloud says otherwise) and finds Nova in the token's catalog, in the entry's region_name
// (any region when empty) and interface (public when empty). caCert is the Secret's optional
// `cacert` bundle (PEM) for Keystone's and Nova's TLS.
//
// Errors are *Error: a deleted credential gives ErrNotFound (Keystone 404), a wrong secret or an
// expired credential ErrUnauthorized, a catalog without Nova a message naming region and interface.
func NewFromCloudsYAML(ctx context.Context, cloudsYAML, caCert []byte, opts ...Option) (*Client, error) {
	o := clientOptions{cloud: keystone.CloudName}
	for _, opt := range opts {
		opt(&o)
	}
	cfg, err := parseCloudsYAML(cloudsYAML, o.cloud)
	if err != nil {
		return nil, err
	}
	scrub := []string{cfg.auth.ApplicationCredentialSecret}
	provider, err := newProvider(cfg.authURL, caCert, cfg.insecure, o)
	if err != nil {
		return nil, err
	}
	credential := cfg.auth.ApplicationCredentialID
	if credential == "" {
		credential = cfg.auth.ApplicationCredentialName
	}
	op := "authenticate as application credential " + credential
	// An empty EndpointOpts makes gophercloud use auth_url itself, not the catalog's Keystone.
	if err := openstack.AuthenticateV3(ctx, provider, &cfg.auth, gophercloud.EndpointOpts{}); err != nil {
		return nil, newError(op, "", err, scrub...)
	}
	projectID := ""
	if result, ok := provider.GetAuthResult().(tokens.CreateResult); ok {
		if p, err := result.ExtractProject(); err == nil && p != nil {
			projectID = p.ID
		}
	}
	if projectID == "" {
		return nil, &Error{Op: op, Message: "the token is not project-scoped"}
	}
	return newClient(provider, projectID, gophercloud.EndpointOpts{Region: cfg.region, Availability: cfg.availability}, scrub)
}

// newProvider is a provider client for Keystone at authURL with the bridge's HTTP settings.
func newProvider(authURL string, caCert []byte, insecure bool, o clientOptions) (*gophercloud.ProviderClient, error) {
	hc := o.httpClient
	if hc == nil {
		var err error
		if hc, err = httpClient(caCert, insecure); err != nil {
			return nil, err
		}
	}
	provider, err := osclient.NewProvider(authURL, hc, o.userAgent)
	if err != nil {
		return nil, &Error{Op: "configure client", Message: err.Error()}
	}
	return provider, nil
}

// newClient finds Nova in the provider's catalog.
func newClient(provider *gophercloud.ProviderClient, projectID string, endpoint gophercloud.EndpointOpts, scrub []string) (*Client, error) {
	nova, err := openstack.NewComputeV2(provider, endpoint)
	if err != nil {
		region := endpoint.Region
		if region == "" {
			region = "any region"
		}
		var notFound *gophercloud.ErrEndpointNotFound
		if errors.As(err, &notFound) {
			return nil, &Error{Op: "find Nova", Message: fmt.Sprintf("the catalog of project %s has no compute endpoint with interface %s in %s",
				projectID, endpoint.Availability, region)}
		}
		return nil, newError("find Nova", "", err, scrub...)
	}
	return &Client{compute: nova, projectID: projectID, scrub: scrub, provider: provider, endpoint: endpoint}, nil
}

// Token is a user's Keystone token with its body as keystonemiddleware hands it on
// ({"token": {...}}, magnum-api's auth_token_info), and where in its catalog to find Nova.
type Token struct {
	AuthURL string
	Value   string
	// Info is the token's body: its project and catalog are used as they are, with no request to
	// Keystone.
	Info []byte
	// Region ("" for any) and Interface ("" for public) of the compute endpoint.
	Region, Interface string
}

// NewFromToken acts as the user of a token magnum-api passed on with a request: what it creates
// belongs to the token's project, as what the cluster's own credential creates does. It saves
// NewFromCloudsYAML's authentication (a token request, and the cloud's validation of a token it
// has not seen) where the caller's token is at hand. caCert as for NewFromCloudsYAML.
func NewFromToken(token Token, caCert []byte, opts ...Option) (*Client, error) {
	o := clientOptions{}
	for _, opt := range opts {
		opt(&o)
	}
	tokenErr := func(msg string) error { return &Error{Op: "act as the request's token", Message: msg} }
	var doc struct {
		Token *struct {
			Project *struct {
				ID string `json:"id"`
			} `json:"project"`
			Catalog []tokens.CatalogEntry `json:"catalog"`
		} `json:"token"`
	}
	switch {
	case token.Value == "":
		return nil, tokenErr("the request carries no token")
	case json.Unmarshal(token.Info, &doc) != nil || doc.Token == nil:
		return nil, tokenErr("the request carries no token body (auth_token_info)")
	case doc.Token.Project == nil || doc.Token.Project.ID == "":
		return nil, tokenErr("the token is not project-scoped")
	case len(doc.Token.Catalog) == 0:
		return nil, tokenErr("the token's body has no catalog")
	}
	availability, ok := availabilityOf(token.Interface)
	if !ok {
		return nil, tokenErr(fmt.Sprintf("interface %q is not one of public, internal, admin", token.Interface))
	}
	provider, err := newProvider(token.AuthURL, caCert, false, o)
	if err != nil {
		return nil, err
	}
	provider.SetToken(token.Value)
	catalog := &tokens.ServiceCatalog{Entries: doc.Token.Catalog}
	// Version 0: the endpoint is picked from the catalog alone, without asking it for its versions.
	provider.EndpointLocator = func(eo gophercloud.EndpointOpts) (string, error) {
		eo.Version = 0
		return openstack.V3Endpoint(context.Background(), provider, catalog, eo)
	}
	return newClient(provider, doc.Token.Project.ID, gophercloud.EndpointOpts{Region: token.Region, Availability: availability}, []string{token.Value})
}
