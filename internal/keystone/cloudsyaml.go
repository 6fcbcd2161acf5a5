package keystone

import (
	"fmt"
	"net/url"

	"sigs.k8s.io/yaml"
)

// CloudName is the cloud entry in the rendered clouds.yaml. CAPO's OpenStackCluster
// `identityRef.cloudName` and the cloud controller manager's `--cloud`/`[Global] cloud` must name it.
const CloudName = "openstack"

// CloudsYAMLParams are the inputs of RenderCloudsYAML.
type CloudsYAMLParams struct {
	// AuthURL is Keystone's v3 endpoint as seen from where the consumer runs (the management
	// cluster for CAPO, the workload cluster's nodes for CCM/CSI).
	AuthURL string
	// RegionName, e.g. "RegionOne"; omitted when empty (single-region clouds).
	RegionName string
	// Interface is the endpoint interface: "public" (default), "internal" or "admin".
	Interface string
	// ApplicationCredentialID and ApplicationCredentialSecret authenticate.
	ApplicationCredentialID     string
	ApplicationCredentialSecret Secret
	// CACertFile, when set, is the path where the consumer finds the CA bundle of the OpenStack
	// endpoints (CAPO reads the Secret's `cacert` key instead and ignores this).
	CACertFile string
}

// cloudsFile mirrors the clouds.yaml schema of os-client-config / gophercloud utils.
type cloudsFile struct {
	Clouds map[string]cloudEntry `json:"clouds"`
}

type cloudEntry struct {
	Auth               cloudAuth `json:"auth"`
	AuthType           string    `json:"auth_type"`
	RegionName         string    `json:"region_name,omitempty"`
	Interface          string    `json:"interface"`
	IdentityAPIVersion int       `json:"identity_api_version"`
	CACert             string    `json:"cacert,omitempty"`
}

type cloudAuth struct {
	AuthURL                     string `json:"auth_url"`
	ApplicationCredentialID     string `json:"application_credential_id"`
	ApplicationCredentialSecret string `json:"application_credential_secret"`
}

// RenderCloudsYAML renders the clouds.yaml that CAPO (identityRef Secret key `clouds.yaml`) and the
// OpenStack cloud controller manager / Cinder CSI read, for one application credential. It is a
// pure function; the output holds the secret in clear and belongs in a Kubernetes Secret only.
// Keys are emitted in sorted order so the output is stable.
func RenderCloudsYAML(p CloudsYAMLParams) ([]byte, error) {
	u, err := url.Parse(p.AuthURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("keystone: clouds.yaml: auth_url %q is not an absolute http(s) URL", p.AuthURL)
	}
	if p.ApplicationCredentialID == "" {
		return nil, fmt.Errorf("keystone: clouds.yaml: application credential id is empty")
	}
	if p.ApplicationCredentialSecret.IsZero() {
		return nil, fmt.Errorf("keystone: clouds.yaml: application credential secret is empty")
	}
	iface := p.Interface
	switch iface {
	case "":
		iface = "public"
	case "public", "internal", "admin":
	default:
		return nil, fmt.Errorf("keystone: clouds.yaml: interface %q is not one of public, internal, admin", p.Interface)
	}
	file := cloudsFile{Clouds: map[string]cloudEntry{CloudName: {
		Auth: cloudAuth{
			AuthURL:                     p.AuthURL,
			ApplicationCredentialID:     p.ApplicationCredentialID,
			ApplicationCredentialSecret: p.ApplicationCredentialSecret.Reveal(),
		},
		AuthType:           "v3applicationcredential",
		RegionName:         p.RegionName,
		Interface:          iface,
		IdentityAPIVersion: 3,
		CACert:             p.CACertFile,
	}}}
	out, err := yaml.Marshal(file)
	if err != nil {
		// Unreachable for these plain types; the message must not include the value.
		return nil, fmt.Errorf("keystone: clouds.yaml: encode failed")
	}
	return out, nil
}
