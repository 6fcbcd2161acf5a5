package tenantapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/containerinfra/v1/clusters"
	"github.com/gophercloud/gophercloud/v2/openstack/containerinfra/v1/clustertemplates"
	"github.com/gophercloud/gophercloud/v2/openstack/containerinfra/v1/nodegroups"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/tokens"
	"k8s.io/utils/lru"
	"sigs.k8s.io/yaml"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/osclient"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/tenantapi/v1alpha1"
)

// SecretType is the only Secret type tenants may write (an admission policy says so): one holding
// a clouds.yaml with an application credential.
const SecretType = "magnum.openstack.org/application-credential"

// CloudsYAMLKey is the Secret's key of the clouds.yaml.
const CloudsYAMLKey = "clouds.yaml"

// microversion is the container-infra API version the requests need: node groups (1.9) and
// resize and upgrade (1.7, 1.8), served by every Magnum the bridge supports.
const microversion = "1.10"

// Credential is an application credential from a tenant's Secret. Only its id and secret are
// read: the bridge authenticates at its own Keystone, never at a URL a tenant wrote.
type Credential struct {
	ID, Secret string
	Region     string
}

// String never shows the secret.
func (c Credential) String() string { return "application credential " + c.ID }

// GoString keeps %#v from printing the secret.
func (c Credential) GoString() string { return c.String() }

// CredentialFromCloudsYAML reads the application credential of one cloud of a clouds.yaml.
func CredentialFromCloudsYAML(data []byte, cloud string) (Credential, error) {
	var clouds struct {
		Clouds map[string]struct {
			Auth struct {
				ID     string `json:"application_credential_id"`
				Secret string `json:"application_credential_secret"`
			} `json:"auth"`
			Region string `json:"region_name"`
		} `json:"clouds"`
	}
	if err := yaml.Unmarshal(data, &clouds); err != nil {
		return Credential{}, errors.New("its clouds.yaml does not parse as YAML")
	}
	c, ok := clouds.Clouds[cloud]
	switch {
	case !ok:
		return Credential{}, fmt.Errorf("its clouds.yaml has no cloud %q", cloud)
	case c.Auth.ID == "" || c.Auth.Secret == "":
		return Credential{}, fmt.Errorf("cloud %q of its clouds.yaml has no application_credential_id and application_credential_secret", cloud)
	}
	return Credential{ID: c.Auth.ID, Secret: c.Auth.Secret, Region: c.Region}, nil
}

// AuthError is a credential Keystone refused; Message is Keystone's reason.
type AuthError struct{ Message string }

func (e *AuthError) Error() string { return e.Message }

// Clients hands out magnum-api clients authenticated with tenants' credentials, one per credential
// (by its Secret's resourceVersion), so that a reconcile costs no token request.
type Clients struct {
	// KeystoneURL is the bridge's Keystone ([keystone_authtoken] auth_url).
	KeystoneURL string
	// Interface and Region pick magnum-api in the catalog (default: public, the credential's region).
	Interface, Region string
	HTTP              *http.Client
	once              sync.Once
	cache             *lru.Cache
}

// API is magnum-api as one project sees it.
type API struct {
	sc *gophercloud.ServiceClient
	// templates caches the uuids of template names (templateSeen by ident).
	templates sync.Map
	// ProjectID is the credential's project.
	ProjectID string
}

// For returns the client of a credential; key identifies the credential's version (namespace,
// Secret name and resourceVersion).
func (c *Clients) For(ctx context.Context, key string, cred Credential) (*API, error) {
	c.once.Do(func() { c.cache = lru.New(256) })
	if v, ok := c.cache.Get(key); ok {
		return v.(*API), nil
	}
	provider, err := osclient.NewProvider(c.KeystoneURL, c.HTTP, "magnum-capi-bridge-tenant-api")
	if err != nil {
		return nil, err
	}
	opts := gophercloud.AuthOptions{IdentityEndpoint: c.KeystoneURL, ApplicationCredentialID: cred.ID,
		ApplicationCredentialSecret: cred.Secret, AllowReauth: true}
	if err := openstack.Authenticate(ctx, provider, opts); err != nil {
		a := osclient.Classify(err, cred.Secret)
		if a.Status == http.StatusUnauthorized || a.Status == http.StatusForbidden || a.Status == http.StatusNotFound {
			return nil, &AuthError{Message: a.Describe("Keystone", "authenticate with", cred.String())}
		}
		return nil, errors.New(a.Describe("Keystone", "authenticate with", cred.String()))
	}
	var project string
	if r, ok := provider.GetAuthResult().(tokens.CreateResult); ok {
		if p, err := r.ExtractProject(); err == nil && p != nil {
			project = p.ID
		}
		var token struct {
			Token struct {
				ApplicationCredential struct {
					Restricted bool `json:"restricted"`
				} `json:"application_credential"`
			} `json:"token"`
		}
		if r.ExtractInto(&token) == nil && token.Token.ApplicationCredential.Restricted {
			return nil, &AuthError{Message: "Keystone: " + cred.String() + " is restricted: a cluster create makes the cluster's own " +
				"application credentials as its caller, which Keystone allows only to an unrestricted one " +
				"(openstack application credential create --unrestricted)"}
		}
	}
	region := cred.Region
	if c.Region != "" {
		region = c.Region
	}
	eo := gophercloud.EndpointOpts{Region: region, Availability: gophercloud.Availability(c.Interface)}
	if eo.Availability == "" {
		eo.Availability = gophercloud.AvailabilityPublic
	}
	sc, err := openstack.NewContainerInfraV1(provider, eo)
	if err != nil {
		return nil, fmt.Errorf("magnum-api is not in the catalog of %s: %w", cred, err)
	}
	sc.Microversion = microversion
	api := &API{sc: sc, ProjectID: project}
	c.cache.Add(key, api)
	return api, nil
}

// Forget drops a credential's client (after Keystone refused it mid-way: revoked).
func (c *Clients) Forget(key string) {
	if c.cache != nil {
		c.cache.Remove(key)
	}
}

// Observe reads the object's cluster (by uuid once known, else by name), its node groups and the
// uuid of the spec's template. The reads run side by side: the status follows Magnum by as much as
// they take.
func (a *API) Observe(ctx context.Context, obj *v1alpha1.MagnumCluster) (Magnum, error) {
	var m Magnum
	var templateErr, groupsErr error
	var groups []nodegroups.NodeGroup
	var wg sync.WaitGroup
	wg.Go(func() { m.TemplateID, templateErr = a.templateID(ctx, obj.Spec.ClusterTemplate) })
	known := obj.Status.UUID
	if known != "" {
		wg.Go(func() { groups, groupsErr = a.nodeGroups(ctx, known) })
	}
	c, err := a.cluster(ctx, obj)
	wg.Wait()
	switch {
	case templateErr != nil:
		return m, templateErr
	case gophercloud.ResponseCodeIs(err, http.StatusNotFound):
		return m, nil
	case err != nil:
		return m, err
	}
	m.Cluster = c
	if known == "" || c.UUID != known || groupsErr != nil {
		if groups, err = a.nodeGroups(ctx, c.UUID); err != nil {
			return m, err
		}
	}
	// The list leaves out autoscaling bounds: read those of the node groups whose bounds the spec sets.
	for i, g := range groups {
		for _, s := range obj.Spec.NodeGroups {
			if s.Name == g.Name && (s.MinNodeCount != nil || s.MaxNodeCount != nil) {
				full, err := nodegroups.Get(ctx, a.sc, c.UUID, g.UUID).Extract()
				if err != nil {
					return m, a.err("get node group", g.Name, err)
				}
				groups[i] = *full
			}
		}
	}
	m.NodeGroups = groups
	return m, nil
}

// templateTTL is how long a template's uuid is reused: a name that comes to mean another template
// is seen that much later.
const templateTTL = 30 * time.Second

type templateSeen struct {
	uuid string
	at   time.Time
}

// templateID is the uuid of the template ident names ("" when the project sees none).
func (a *API) templateID(ctx context.Context, ident string) (string, error) {
	if v, ok := a.templates.Load(ident); ok && time.Since(v.(templateSeen).at) < templateTTL {
		return v.(templateSeen).uuid, nil
	}
	t, err := clustertemplates.Get(ctx, a.sc, ident).Extract()
	switch {
	case gophercloud.ResponseCodeIs(err, http.StatusNotFound):
		return "", nil
	case err != nil:
		return "", a.err("get cluster template", ident, err)
	}
	a.templates.Store(ident, templateSeen{uuid: t.UUID, at: time.Now()})
	return t.UUID, nil
}

// cluster reads the object's cluster; a 404 error when the project has none of its uuid or name.
func (a *API) cluster(ctx context.Context, obj *v1alpha1.MagnumCluster) (*clusters.Cluster, error) {
	ident := obj.Status.UUID
	if ident == "" {
		ident = obj.Name
	}
	c, err := clusters.Get(ctx, a.sc, ident).Extract()
	if gophercloud.ResponseCodeIs(err, http.StatusNotFound) && ident != obj.Name {
		// The uuid is gone; a cluster of the name may be there (a create the status did not record).
		c, err = clusters.Get(ctx, a.sc, obj.Name).Extract()
	}
	if err != nil && !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		return nil, a.err("get cluster", ident, err)
	}
	return c, err
}

func (a *API) nodeGroups(ctx context.Context, clusterUUID string) ([]nodegroups.NodeGroup, error) {
	pages, err := nodegroups.List(a.sc, clusterUUID, nil).AllPages(ctx)
	if err != nil {
		return nil, a.err("list node groups of cluster", clusterUUID, err)
	}
	return nodegroups.ExtractNodeGroups(pages)
}

// Do makes the action's request; for a create it returns the new cluster's uuid.
func (a *API) Do(ctx context.Context, obj *v1alpha1.MagnumCluster, m Magnum, act Action) (string, error) {
	spec := obj.Spec
	switch act.Kind {
	case ActCreate:
		if m.TemplateID == "" {
			return "", &RefusedError{Message: fmt.Sprintf("spec.clusterTemplate: no cluster template %q is visible to the project", spec.ClusterTemplate)}
		}
		nodes := int(spec.NodeCount)
		opts := clusters.CreateOpts{Name: obj.Name, ClusterTemplateID: m.TemplateID, NodeCount: &nodes, Keypair: spec.Keypair,
			Labels: spec.Labels, FlavorID: spec.Flavor, MasterFlavorID: spec.MasterFlavor}
		if spec.MasterCount != nil {
			n := int(*spec.MasterCount)
			opts.MasterCount = &n
		}
		if spec.CreateTimeout != nil {
			n := int(*spec.CreateTimeout)
			opts.CreateTimeout = &n
		}
		if spec.MergeLabels {
			opts.MergeLabels = &spec.MergeLabels
		}
		uuid, err := clusters.Create(ctx, a.sc, opts).Extract()
		return uuid, a.err("create cluster", obj.Name, err)
	case ActDelete:
		err := clusters.Delete(ctx, a.sc, m.Cluster.UUID).ExtractErr()
		if gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
			err = nil
		}
		return "", a.err("delete cluster", m.Cluster.UUID, err)
	case ActUpgrade:
		_, err := clusters.Upgrade(ctx, a.sc, m.Cluster.UUID, clusters.UpgradeOpts{ClusterTemplate: m.TemplateID}).Extract()
		return "", a.err("upgrade cluster", m.Cluster.UUID, err)
	case ActResize:
		n := act.NodeCount
		_, err := clusters.Resize(ctx, a.sc, m.Cluster.UUID, clusters.ResizeOpts{NodeCount: &n, NodeGroup: act.NodeGroup}).Extract()
		return "", a.err("resize cluster", m.Cluster.UUID, err)
	case ActCreateNodeGroup:
		n := act.NodeCount
		opts := nodegroups.CreateOpts{Name: act.NodeGroup, NodeCount: &n, MaxNodeCount: act.Max}
		for _, s := range spec.NodeGroups {
			if s.Name == act.NodeGroup {
				opts.FlavorID, opts.Labels = s.Flavor, s.Labels
			}
		}
		if act.Min != nil {
			opts.MinNodeCount = *act.Min
		}
		_, err := nodegroups.Create(ctx, a.sc, m.Cluster.UUID, opts).Extract()
		return "", a.err("create node group", act.NodeGroup, err)
	case ActUpdateNodeGroup:
		var ops []nodegroups.UpdateOpts
		if act.Min != nil {
			ops = append(ops, nodegroups.UpdateOpts{Op: nodegroups.ReplaceOp, Path: "/min_node_count", Value: *act.Min})
		}
		if act.Max != nil {
			ops = append(ops, nodegroups.UpdateOpts{Op: nodegroups.ReplaceOp, Path: "/max_node_count", Value: *act.Max})
		}
		_, err := nodegroups.Update(ctx, a.sc, m.Cluster.UUID, act.NodeGroup, ops).Extract()
		return "", a.err("update node group", act.NodeGroup, err)
	case ActDeleteNodeGroup:
		err := nodegroups.Delete(ctx, a.sc, m.Cluster.UUID, act.NodeGroup).ExtractErr()
		if gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
			err = nil
		}
		return "", a.err("delete node group", act.NodeGroup, err)
	}
	return "", nil
}

// RefusedError is a request magnum-api (or Keystone, for a token gone mid-way) refused: the
// tenant must change something; Message is the service's reason.
type RefusedError struct {
	Status  int
	Message string
}

func (e *RefusedError) Error() string { return e.Message }

// err turns a failed request into a RefusedError (4xx: the tenant's to fix) or an error to retry.
func (a *API) err(op, subject string, err error) error {
	if err == nil {
		return nil
	}
	ans := osclient.Classify(err)
	msg := ans.Describe("magnum-api", op, subject)
	if ans.Status == http.StatusUnauthorized {
		return &AuthError{Message: msg}
	}
	if ans.Status >= 400 && ans.Status < 500 {
		return &RefusedError{Status: ans.Status, Message: msg}
	}
	return errors.New(msg)
}
