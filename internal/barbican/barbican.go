// Package barbican keeps clusters' key pairs in OpenStack Barbican the way Magnum's barbican cert
// manager does ([certificates] cert_manager_type = barbican, Magnum's default), so that a CA the
// Python conductor stored is read by the bridge and one the bridge stored is read by Magnum:
//
//   - each key pair is a "certificate" container, named as Magnum names it (the cluster's name or
//     uuid for a CA, "Magnum-Conductor" for the client certificate), whose secret_refs are named
//     certificate, private_key, intermediates (only when there are any) and
//     private_key_passphrase, pointing at secrets named "Certificate", "Private Key",
//     "Intermediates" and "Private Key Passphrase";
//   - the private key is stored as Magnum stores it: PKCS#8 PEM encrypted with the passphrase;
//   - the ref kept in the cluster row is the container's href;
//   - everything lives in the project of Magnum's service user ([keystone_auth]), which acts.
//
// What differs between Magnum releases is a Dialect: up to 2026.1 (python-barbicanclient) a read
// registers the cluster as a consumer of the container, and certificates and keys, handed over as
// bytes, are stored as application/octet-stream; from 2026.2 (openstacksdk) every secret is
// text/plain and reads register nothing.
package barbican

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/google/uuid"
	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/keymanager/v1/containers"
	"github.com/gophercloud/gophercloud/v2/openstack/keymanager/v1/secrets"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/certs"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/keystone"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
)

// The names Magnum gives what it stores: the container's secret_refs, and the secrets.
const (
	refCertificate   = "certificate"
	refPrivateKey    = "private_key"
	refIntermediates = "intermediates"
	refPassphrase    = "private_key_passphrase"

	secretCertificate   = "Certificate"
	secretPrivateKey    = "Private Key"
	secretIntermediates = "Intermediates"
	secretPassphrase    = "Private Key Passphrase"

	// ConsumerName is the consumer Magnum registers on a container it reads; its URL is the
	// cluster's uuid.
	ConsumerName = "Magnum"

	// CatalogType is Barbican's service type in Keystone's catalog.
	CatalogType = "key-manager"

	textPlain   = "text/plain"
	octetStream = "application/octet-stream"
)

// Dialect is how one Magnum release uses Barbican.
type Dialect struct {
	// RegisterConsumers: reading a container registers the consumer {ConsumerName, cluster uuid}
	// (python-barbicanclient's register_consumer in get_cert).
	RegisterConsumers bool
	// TextPEM: certificates and keys are stored text/plain; otherwise application/octet-stream,
	// as python-barbicanclient stores the bytes Magnum hands it. The passphrase, a string, is
	// text/plain in both.
	TextPEM bool
}

var (
	// DialectBarbicanClient is Magnum's up to 2026.1 (Zed's included).
	DialectBarbicanClient = Dialect{RegisterConsumers: true}
	// DialectOpenStackSDK is Magnum's from 2026.2 (23.0.0) on.
	DialectOpenStackSDK = Dialect{TextPEM: true}
)

// DialectFor is the dialect of a [bridge] magnum_release value; empty (not configured) is the
// oldest's, as the bridge's object versions are.
func DialectFor(release string) (Dialect, error) {
	r := strings.ToLower(strings.TrimSpace(release))
	if r == "" {
		return DialectBarbicanClient, nil
	}
	if _, err := magnum.ReleaseVersions(r); err != nil {
		return Dialect{}, err
	}
	switch r {
	case "2026.2", "23", "master":
		return DialectOpenStackSDK, nil
	}
	return DialectBarbicanClient, nil
}

// secretOpts is the create request of one secret.
func (d Dialect) secretOpts(name, payload string, pem bool) secrets.CreateOpts {
	if pem && !d.TextPEM {
		return secrets.CreateOpts{Name: name, Payload: base64.StdEncoding.EncodeToString([]byte(payload)),
			PayloadContentType: octetStream, PayloadContentEncoding: "base64"}
	}
	return secrets.CreateOpts{Name: name, Payload: payload, PayloadContentType: textPlain}
}

// Options say where Barbican is and who acts.
type Options struct {
	// Service is Magnum's service user ([keystone_auth]); the containers live in its project.
	Service keystone.PasswordAuth
	// Region and Interface select Barbican's catalog endpoint ([barbican_client] region_name and
	// endpoint_type); an empty region takes the catalog's first, an empty interface public.
	Region, Interface string
	Dialect           Dialect
	// HTTPClient carries TLS trust and timeouts; nil: the service user's own TLS settings.
	HTTPClient *http.Client
}

// Availability maps Magnum's endpoint_type values (publicURL, internalURL, adminURL, or the
// plain names) to gophercloud's.
func Availability(endpointType string) (gophercloud.Availability, error) {
	switch strings.TrimSuffix(strings.ToLower(endpointType), "url") {
	case "", "public":
		return gophercloud.AvailabilityPublic, nil
	case "internal":
		return gophercloud.AvailabilityInternal, nil
	case "admin":
		return gophercloud.AvailabilityAdmin, nil
	}
	return "", fmt.Errorf("endpoint type %q is none of publicURL, internalURL, adminURL", endpointType)
}

// Backend is the certificate store in Barbican (certs.Backend, certs.ClusterLoader,
// certs.MagnumDeleteScope). Safe for concurrent use: the service user authenticates on first use
// and again when its token expires.
type Backend struct {
	opts Options

	mu     sync.Mutex
	client *gophercloud.ServiceClient

	// leftovers are the hrefs of secrets and containers that a failed store wrote and could not
	// delete again (Barbican went away half-way): the next store deletes them first.
	leftoverMu sync.Mutex
	leftovers  []string
}

var (
	_ certs.Backend           = (*Backend)(nil)
	_ certs.ClusterLoader     = (*Backend)(nil)
	_ certs.MagnumDeleteScope = (*Backend)(nil)
)

// New returns a Backend; nothing is contacted before the first operation.
func New(opts Options) *Backend { return &Backend{opts: opts} }

// DeletesOnlyMagnumsRefs implements certs.MagnumDeleteScope.
func (*Backend) DeletesOnlyMagnumsRefs() {}

// keyManager authenticates the service user once and finds Barbican in its catalog. A failure is
// not kept: the next operation tries again.
func (b *Backend) keyManager(ctx context.Context) (*gophercloud.ServiceClient, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.client != nil {
		return b.client, nil
	}
	availability, err := Availability(b.opts.Interface)
	if err != nil {
		return nil, &Error{Op: "find the key-manager endpoint", Message: err.Error(), Reason: "misconfigured endpoint type"}
	}
	opts := []keystone.Option{keystone.WithUserAgent("magnum-capi-bridge")}
	if b.opts.HTTPClient != nil {
		opts = append(opts, keystone.WithHTTPClient(b.opts.HTTPClient))
	}
	kc, err := keystone.NewPasswordClient(ctx, b.opts.Service, opts...)
	if err != nil {
		// Keystone's status stays in the message: Status is Barbican's own (a 404 here must not
		// read as a container that is gone).
		return nil, &Error{Op: "authenticate Magnum's service user", Message: err.Error(), Reason: "Keystone refused or did not answer", Err: err}
	}
	// gophercloud asks the endpoint for its versions here: an unreachable Barbican fails now.
	client, err := openstack.NewKeyManagerV1(kc.ProviderClient(), gophercloud.EndpointOpts{Region: b.opts.Region, Availability: availability})
	var notInCatalog *gophercloud.ErrEndpointNotFound
	if err != nil && !errors.As(err, &notInCatalog) {
		return nil, newError("reach the key-manager endpoint", "", err)
	}
	if err != nil {
		region := b.opts.Region
		if region == "" {
			region = "any region"
		}
		return nil, &Error{Op: "find the key-manager endpoint", Err: err, Reason: "not in the catalog",
			Message: fmt.Sprintf("no %s endpoint of type %s in %s of the service user's catalog", availability, CatalogType, region)}
	}
	b.client = client
	return client, nil
}

// Endpoint is Barbican's URL from the catalog (it authenticates when needed).
func (b *Backend) Endpoint(ctx context.Context) (string, error) {
	kc, err := b.keyManager(ctx)
	if err != nil {
		return "", err
	}
	return kc.Endpoint, nil
}

// lastSegment is the uuid at the end of an href; Magnum's readers take it the same way and reach
// it through their own catalog endpoint, whatever host the href names.
func lastSegment(href string) string {
	href = strings.TrimRight(href, "/")
	if i := strings.LastIndexByte(href, '/'); i >= 0 {
		return href[i+1:]
	}
	return href
}

// idOf is the uuid of a container or secret href, checked so that a malformed ref (an x509keypair
// uuid is one too) is not sent as a path.
func idOf(kind, href string) (string, error) {
	id := lastSegment(href)
	if _, err := uuid.Parse(id); err != nil || href == "" {
		return "", &Error{Op: "read " + kind, Ref: href, Message: "not a Barbican " + kind + " href", Reason: "not a " + kind + " href"}
	}
	if u, err := url.Parse(href); err == nil && u.Scheme != "" && !strings.Contains(u.Path, "/"+kind+"s/") {
		return "", &Error{Op: "read " + kind, Ref: href, Message: "not a Barbican " + kind + " href", Reason: "not a " + kind + " href"}
	}
	return id, nil
}

// Store implements certs.Backend: the secrets, then the container that refers to them, as Magnum
// stores them. When a step fails, the secrets already written are deleted again.
func (b *Backend) Store(ctx context.Context, name string, kp certs.KeyPair, _ certs.Owner) (string, error) {
	kc, err := b.keyManager(ctx)
	if err != nil {
		return "", during(err, fmt.Sprintf("store certificate container %q", name), "")
	}
	b.deleteLeftovers(ctx, kc)
	var created []string
	var refs []containers.SecretRef
	add := func(refName, secretName, payload string, pem bool) error {
		s, err := secrets.Create(ctx, kc, b.opts.Dialect.secretOpts(secretName, payload, pem)).Extract()
		if err != nil {
			return newError(fmt.Sprintf("store secret %q of container %q", secretName, name), "", err, payload)
		}
		created = append(created, s.SecretRef)
		refs = append(refs, containers.SecretRef{Name: refName, SecretRef: s.SecretRef})
		return nil
	}
	err = add(refCertificate, secretCertificate, kp.Certificate, true)
	if err == nil {
		err = add(refPrivateKey, secretPrivateKey, kp.PrivateKey, true)
	}
	if err == nil && kp.Intermediates != "" {
		err = add(refIntermediates, secretIntermediates, kp.Intermediates, true)
	}
	if err == nil && kp.Passphrase != "" {
		err = add(refPassphrase, secretPassphrase, kp.Passphrase, false)
	}
	var container *containers.Container
	if err == nil {
		container, err = containers.Create(ctx, kc, containers.CreateOpts{Type: containers.CertificateContainer, Name: name, SecretRefs: refs}).Extract()
		if err != nil {
			err = newError(fmt.Sprintf("store certificate container %q", name), "", err)
		}
	}
	if err != nil {
		for _, ref := range created {
			if derr := b.deleteSecret(ctx, kc, ref); derr != nil {
				b.DeleteLater(ref)
				err = errors.Join(err, fmt.Errorf("roll back (retried by the next store): %w", derr))
			}
		}
		return "", err
	}
	return container.ContainerRef, nil
}

// DeleteLater records a secret or container href that a rollback could not delete: the next
// Store deletes it before writing anything.
func (b *Backend) DeleteLater(ref string) {
	b.leftoverMu.Lock()
	defer b.leftoverMu.Unlock()
	b.leftovers = append(b.leftovers, ref)
}

// Leftovers are the hrefs still waiting for DeleteLater's deletion.
func (b *Backend) Leftovers() []string {
	b.leftoverMu.Lock()
	defer b.leftoverMu.Unlock()
	return append([]string(nil), b.leftovers...)
}

// deleteLeftovers deletes what earlier rollbacks left; what fails again stays for the next time.
func (b *Backend) deleteLeftovers(ctx context.Context, kc *gophercloud.ServiceClient) {
	b.leftoverMu.Lock()
	refs := b.leftovers
	b.leftovers = nil
	b.leftoverMu.Unlock()
	for _, ref := range refs {
		var err error
		if strings.Contains(ref, "/containers/") {
			if err = b.Delete(ctx, ref); errors.Is(err, certs.ErrKeyPairNotFound) {
				err = nil
			}
		} else {
			err = b.deleteSecret(ctx, kc, ref)
		}
		if err != nil {
			b.DeleteLater(ref)
		}
	}
}

// Load implements certs.Backend without registering a consumer (Magnum's check_only read).
func (b *Backend) Load(ctx context.Context, ref string) (certs.KeyPair, error) {
	return b.LoadForCluster(ctx, ref, "")
}

// LoadForCluster implements certs.ClusterLoader: with a dialect that registers consumers, the read
// registers the cluster as Magnum does (name ConsumerName, URL the cluster's uuid).
func (b *Backend) LoadForCluster(ctx context.Context, ref, clusterUUID string) (certs.KeyPair, error) {
	id, err := idOf("container", ref)
	if err != nil {
		return certs.KeyPair{}, err
	}
	kc, err := b.keyManager(ctx)
	if err != nil {
		return certs.KeyPair{}, during(err, "read certificate container", ref)
	}
	var c *containers.Container
	if b.opts.Dialect.RegisterConsumers && clusterUUID != "" {
		c, err = containers.CreateConsumer(ctx, kc, id, containers.CreateConsumerOpts{Name: ConsumerName, URL: clusterUUID}).Extract()
		if err != nil {
			return certs.KeyPair{}, newError("register as consumer of certificate container", ref, err)
		}
	} else {
		c, err = containers.Get(ctx, kc, id).Extract()
		if err != nil {
			return certs.KeyPair{}, newError("read certificate container", ref, err)
		}
	}
	if c.Type != string(containers.CertificateContainer) {
		return certs.KeyPair{}, errors.Join(certs.ErrBadKeyPair,
			&Error{Op: "read certificate container", Ref: ref, Message: fmt.Sprintf("a %q container, not a certificate container", c.Type),
				Reason: "not a certificate container"})
	}
	var kp certs.KeyPair
	fields := map[string]*string{refCertificate: &kp.Certificate, refPrivateKey: &kp.PrivateKey,
		refIntermediates: &kp.Intermediates, refPassphrase: &kp.Passphrase}
	for _, sr := range c.SecretRefs {
		dst, ok := fields[sr.Name]
		if !ok {
			continue
		}
		if *dst, err = b.payload(ctx, kc, sr.SecretRef); err != nil {
			return certs.KeyPair{}, err
		}
	}
	return kp, nil
}

// payload reads a secret's payload in the content type it was stored with.
func (b *Backend) payload(ctx context.Context, kc *gophercloud.ServiceClient, ref string) (string, error) {
	id, err := idOf("secret", ref)
	if err != nil {
		return "", err
	}
	meta, err := secrets.Get(ctx, kc, id).Extract()
	if err != nil {
		return "", newError("read secret", ref, err)
	}
	contentType := meta.ContentTypes["default"]
	if contentType == "" {
		return "", &Error{Op: "read secret", Ref: ref, Message: "the secret has no payload", Reason: "no payload"}
	}
	body, err := secrets.GetPayload(ctx, kc, id, secrets.GetPayloadOpts{PayloadContentType: contentType}).Extract()
	if err != nil {
		return "", newError("read the payload of secret", ref, err)
	}
	return string(body), nil
}

// Delete implements certs.Backend as Magnum's delete_cert does: the container's certificate,
// intermediates, passphrase and private key secrets, then the container. What is gone already
// counts as deleted, so that a delete interrupted half-way completes when repeated; a container
// that is gone altogether wraps certs.ErrKeyPairNotFound.
func (b *Backend) Delete(ctx context.Context, ref string) error {
	id, err := idOf("container", ref)
	if err != nil {
		return err
	}
	kc, err := b.keyManager(ctx)
	if err != nil {
		return during(err, "delete certificate container", ref)
	}
	c, err := containers.Get(ctx, kc, id).Extract()
	if err != nil {
		return newError("read certificate container", ref, err)
	}
	byName := map[string]string{}
	for _, sr := range c.SecretRefs {
		byName[sr.Name] = sr.SecretRef
	}
	for _, name := range []string{refCertificate, refIntermediates, refPassphrase, refPrivateKey} {
		if secret, ok := byName[name]; ok {
			if err := b.deleteSecret(ctx, kc, secret); err != nil {
				return err
			}
		}
	}
	if err := containers.Delete(ctx, kc, id).ExtractErr(); err != nil && !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		return newError("delete certificate container", ref, err)
	}
	return nil
}

// deleteSecret deletes a secret; one already gone is not an error.
func (b *Backend) deleteSecret(ctx context.Context, kc *gophercloud.ServiceClient, ref string) error {
	id, err := idOf("secret", ref)
	if err != nil {
		return err
	}
	if err := secrets.Delete(ctx, kc, id).ExtractErr(); err != nil && !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		return newError("delete secret", ref, err)
	}
	return nil
}

// Probe proves that the service user may create, read and delete a secret: --check-config. It
// returns Barbican's endpoint.
func (b *Backend) Probe(ctx context.Context) (string, error) {
	kc, err := b.keyManager(ctx)
	if err != nil {
		return "", err
	}
	payload := "magnum-capi-bridge check " + uuid.NewString()
	s, err := secrets.Create(ctx, kc, secrets.CreateOpts{Name: "magnum-capi-bridge --check-config", Payload: payload, PayloadContentType: textPlain}).Extract()
	if err != nil {
		return "", newError("create a secret", "", err, payload)
	}
	got, readErr := b.payload(ctx, kc, s.SecretRef)
	if err := b.deleteSecret(ctx, kc, s.SecretRef); err != nil {
		return "", err
	}
	if readErr != nil {
		return "", readErr
	}
	if got != payload {
		return "", &Error{Op: "read a secret back", Ref: s.SecretRef, Message: "the payload read differs from the one stored", Reason: "payload differs"}
	}
	return kc.Endpoint, nil
}
