// Package boot is the simulator's stand-in for what a server does when it boots a Kubernetes node
// image: cloud-init reads the server's user data and runs kubeadm, which starts (or joins) a cluster.
// Nothing boots here; the package reads what CAPI's kubeadm bootstrap provider put in the user data —
// the node's name and provider ID, the API endpoint, the join token, the cluster's CAs — so that the
// simulator can answer as that node would (docs/simulated-boot-plan.md).
package boot

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	kubeadmtypes "sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/types"
	"sigs.k8s.io/yaml"
)

// Role is what kubeadm does on the node.
type Role string

const (
	RoleInit             Role = "init"               // kubeadm init: the first control-plane node
	RoleJoinControlPlane Role = "join-control-plane" // kubeadm join --control-plane
	RoleJoinWorker       Role = "join-worker"        // kubeadm join
)

// Server is what cloud-init's Jinja templates can read of the server (its metadata service).
type Server struct {
	ID   string // {{ instance_id }}
	Name string // {{ local_hostname }}
}

// Node is what a server's user data asks kubeadm to make of it.
type Node struct {
	Role Role
	// Name is the Node's name (nodeRegistration.name, Jinja rendered; the server's name if unset).
	Name string
	// ProviderID is the kubelet's --provider-id as the kubelet sees it: Jinja rendered and with the
	// quotes systemd strips from the kubeadm flags file removed. Empty when the user data sets none.
	ProviderID string
	// Endpoint is the API server the node starts or joins, host:port.
	Endpoint string
	// Token is the bootstrap token a join authenticates with.
	Token string
	// KubernetesVersion is the init's ClusterConfiguration version ("" for joins).
	KubernetesVersion string
	// KubeletVersion is the version the server's image runs (its kube_version property), which its
	// Node reports; "" leaves it to the cluster's (the init's) version.
	KubeletVersion string
	// Labels and Taints are what the kubelet registers the Node with (taints as key[=value]:effect).
	Labels map[string]string
	Taints []string
	// CA and EtcdCA are the cluster's CAs written for kubeadm: the init and control-plane joins carry
	// them, workers do not.
	CA, EtcdCA KeyPair
}

// KeyPair is a PEM certificate and its PEM private key.
type KeyPair struct {
	Cert, Key []byte
}

// Files kubeadm reads, as CABPK writes them.
const (
	initConfigPath = "/run/kubeadm/kubeadm.yaml"
	joinConfigPath = "/run/kubeadm/kubeadm-join-config.yaml"
	caCertPath     = "/etc/kubernetes/pki/ca.crt"
	caKeyPath      = "/etc/kubernetes/pki/ca.key"
	etcdCACertPath = "/etc/kubernetes/pki/etcd/ca.crt"
	etcdCAKeyPath  = "/etc/kubernetes/pki/etcd/ca.key"
)

// ErrNotKubeadm: the user data is not cloud-config with a kubeadm configuration (the server boots,
// but no node comes of it).
var ErrNotKubeadm = errors.New("user data carries no kubeadm configuration")

type cloudConfig struct {
	WriteFiles []struct {
		Path     string `json:"path"`
		Encoding string `json:"encoding"`
		Content  string `json:"content"`
	} `json:"write_files"`
}

// Parse reads a server's user data (as Nova stores it: base64; or plain) into the node it describes.
func Parse(userData string, srv Server) (*Node, error) {
	raw, err := decodeUserData(userData)
	if err != nil {
		return nil, err
	}
	if !bytes.Contains(raw, []byte("#cloud-config")) {
		return nil, ErrNotKubeadm
	}
	// cloud-init renders the whole document as a Jinja template before it reads the YAML.
	raw = []byte(renderJinja(string(raw), srv))
	var cc cloudConfig
	if err := yaml.Unmarshal(raw, &cc); err != nil {
		return nil, fmt.Errorf("user data is not valid cloud-config: %w", err)
	}
	files := map[string][]byte{}
	for _, f := range cc.WriteFiles {
		content, err := decodeFile(f.Encoding, f.Content)
		if err != nil {
			return nil, fmt.Errorf("write_files %s: %w", f.Path, err)
		}
		files[f.Path] = content
	}
	n := &Node{
		CA:     KeyPair{Cert: files[caCertPath], Key: files[caKeyPath]},
		EtcdCA: KeyPair{Cert: files[etcdCACertPath], Key: files[etcdCAKeyPath]},
	}
	var reg bootstrapv1.NodeRegistrationOptions
	switch {
	case files[initConfigPath] != nil:
		n.Role = RoleInit
		for _, doc := range yamlDocuments(files[initConfigPath]) {
			switch kindOf(doc) {
			case "ClusterConfiguration":
				cfg, extra, err := kubeadmtypes.UnmarshalClusterConfiguration(doc)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", initConfigPath, err)
				}
				n.Endpoint = cfg.ControlPlaneEndpoint
				if extra != nil && extra.KubernetesVersion != nil {
					n.KubernetesVersion = *extra.KubernetesVersion
				}
			case "InitConfiguration":
				cfg, err := kubeadmtypes.UnmarshalInitConfiguration(doc)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", initConfigPath, err)
				}
				reg = cfg.NodeRegistration
			}
		}
	case files[joinConfigPath] != nil:
		cfg, err := kubeadmtypes.UnmarshalJoinConfiguration(string(files[joinConfigPath]))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", joinConfigPath, err)
		}
		n.Role = RoleJoinWorker
		if cfg.ControlPlane != nil {
			n.Role = RoleJoinControlPlane
		}
		n.Endpoint = cfg.Discovery.BootstrapToken.APIServerEndpoint
		n.Token = cfg.Discovery.BootstrapToken.Token
		reg = cfg.NodeRegistration
	default:
		return nil, ErrNotKubeadm
	}
	if n.Endpoint == "" {
		return nil, fmt.Errorf("the kubeadm configuration names no API server endpoint")
	}
	n.Name = strings.ToLower(reg.Name)
	if n.Name == "" {
		n.Name = strings.ToLower(srv.Name) // kubeadm's default: the host name
	}
	for _, arg := range reg.KubeletExtraArgs {
		if arg.Value == nil {
			continue
		}
		switch arg.Name {
		case "provider-id":
			n.ProviderID = strings.ReplaceAll(*arg.Value, "'", "")
		case "node-labels":
			n.Labels = parseLabels(*arg.Value)
		case "register-with-taints":
			n.Taints = append(n.Taints, strings.Split(*arg.Value, ",")...)
		}
	}
	if reg.Taints != nil {
		for _, t := range *reg.Taints {
			taint := t.Key // the kubelet's --register-with-taints form, key[=value]:effect
			if t.Value != "" {
				taint += "=" + t.Value
			}
			n.Taints = append(n.Taints, taint+":"+string(t.Effect))
		}
	}
	return n, nil
}

// decodeUserData undoes Nova's base64 (plain text is taken as is) and a gzip that cloud-init accepts.
func decodeUserData(s string) ([]byte, error) {
	raw := []byte(s)
	if !strings.HasPrefix(strings.TrimSpace(s), "#") {
		decoded, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("user data is neither cloud-config nor base64: %w", err)
		}
		raw = decoded
	}
	if len(raw) > 2 && raw[0] == 0x1f && raw[1] == 0x8b {
		return gunzip(raw)
	}
	return raw, nil
}

// decodeFile decodes a write_files entry's content by its encoding, as cloud-init does.
func decodeFile(encoding, content string) ([]byte, error) {
	switch strings.ToLower(encoding) {
	case "", "text/plain":
		return []byte(content), nil
	case "b64", "base64":
		return base64.StdEncoding.DecodeString(strings.TrimSpace(content))
	case "gz+b64", "gzip+base64", "gz+base64", "gzip+b64":
		z, err := base64.StdEncoding.DecodeString(strings.TrimSpace(content))
		if err != nil {
			return nil, err
		}
		return gunzip(z)
	case "gz", "gzip":
		return gunzip([]byte(content))
	}
	return nil, fmt.Errorf("unknown encoding %q", encoding)
}

func gunzip(b []byte) ([]byte, error) {
	r, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}

// jinjaVar matches the instance variables CABPK's and the bridge's templates use, in every
// spelling cloud-init accepts: {{ local_hostname }}, {{ v1.local_hostname }},
// {{ ds.meta_data.local_hostname }}, and the same for instance_id.
var jinjaVar = regexp.MustCompile(`\{\{\s*(?:v1\.|ds\.meta_data\.)?(local_hostname|instance_id)\s*\}\}`)

func renderJinja(s string, srv Server) string {
	return jinjaVar.ReplaceAllStringFunc(s, func(m string) string {
		if strings.Contains(m, "instance_id") {
			return srv.ID
		}
		return srv.Name
	})
}

var documentSeparator = regexp.MustCompile(`(?m)^---\s*$`)

// yamlDocuments splits a multi-document YAML stream.
func yamlDocuments(b []byte) []string {
	var docs []string
	for _, d := range documentSeparator.Split(string(b), -1) {
		if strings.TrimSpace(d) != "" {
			docs = append(docs, d)
		}
	}
	return docs
}

func kindOf(doc string) string {
	var meta struct {
		Kind string `json:"kind"`
	}
	_ = yaml.Unmarshal([]byte(doc), &meta)
	return meta.Kind
}

// parseLabels reads the kubelet's --node-labels (k=v,k2=v2).
func parseLabels(s string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if k, v, ok := strings.Cut(strings.TrimSpace(kv), "="); ok && k != "" {
			out[k] = v
		}
	}
	return out
}
