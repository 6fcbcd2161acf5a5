package main

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// providerLabel is the label clusterctl puts on everything a provider installs; CAPI's topology
// and CRD-migration code look objects up by it.
const providerLabel = "cluster.x-k8s.io/provider"

// providerSpec is one -provider flag: where a provider's kustomize config lives and how its manager
// is reached. Every field except Config (or CRDs) may be left empty and is then read from the
// provider's own kustomization files, so the same code serves CAPI core, KCP, CABPK, CAPD, CAPO and
// a CRD-only bundle such as ORC.
type providerSpec struct {
	Config       string   // provider's config/ dir (crd/, webhook/, default/ kustomizations)
	CRDs         string   // CRD folder; default <Config>/crd
	Webhooks     string   // webhook folder; default <Config>/webhook; "none" disables
	Port         int      // manager's webhook port; 0 = provider serves no webhooks
	Name         string   // value of cluster.x-k8s.io/provider; default from default/kustomization.yaml
	Prefix       string   // name prefix of webhook configurations; default namePrefix of default/kustomization.yaml
	Contracts    []string // contract labels (cluster.x-k8s.io/<c>=<c>); default from crd/kustomization.yaml
	contractsSet bool
}

// parseProviderSpec reads "config=DIR,port=N[,name=L][,prefix=P][,contracts=v1beta1+v1beta2][,crds=DIR][,webhooks=DIR|none]".
func parseProviderSpec(s string) (providerSpec, error) {
	var p providerSpec
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return p, fmt.Errorf("provider %q: %q is not key=value", s, kv)
		}
		switch k {
		case "config":
			p.Config = v
		case "crds":
			p.CRDs = v
		case "webhooks":
			p.Webhooks = v
		case "port":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 || n > 65535 {
				return p, fmt.Errorf("provider %q: port %q is not a TCP port", s, v)
			}
			p.Port = n
		case "name":
			p.Name = v
		case "prefix":
			p.Prefix = v
		case "contracts":
			p.contractsSet = true
			p.Contracts = nil
			for _, c := range strings.Split(v, "+") {
				if c = strings.TrimSpace(c); c != "" {
					p.Contracts = append(p.Contracts, c)
				}
			}
		default:
			return p, fmt.Errorf("provider %q: unknown key %q (want config, crds, webhooks, port, name, prefix, contracts)", s, k)
		}
	}
	if p.Config == "" && p.CRDs == "" {
		return p, fmt.Errorf("provider %q: needs config=DIR or crds=DIR", s)
	}
	return p, nil
}

// kustomization is the small part of kustomize's file format that CAPI providers' config uses and
// that this tool interprets. Everything else (replacements, configurations, cert-manager wiring) is
// what this tool does itself for a process-based install.
type kustomization struct {
	NamePrefix string   `json:"namePrefix"`
	Resources  []string `json:"resources"`
	Labels     []struct {
		Pairs map[string]string `json:"pairs"`
	} `json:"labels"`
	Patches []struct {
		Path string `json:"path"`
	} `json:"patches"`
}

// readKustomization returns the kustomization in dir, or nil when dir has none.
func readKustomization(dir string) (*kustomization, error) {
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var k kustomization
	if err := yaml.Unmarshal(data, &k); err != nil {
		return nil, fmt.Errorf("%s/kustomization.yaml: %w", dir, err)
	}
	return &k, nil
}

// readObjects decodes every YAML document of a file into unstructured objects.
func readObjects(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(m) == 0 {
			continue // empty document between "---" separators
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// resourceFiles lists the YAML files a kustomization names (folders such as "../crd" are skipped:
// they are handled as their own step), or every *.yaml in dir when there is no kustomization.
func resourceFiles(dir string, k *kustomization) ([]string, error) {
	if k == nil {
		files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			return nil, err
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("%s: no kustomization.yaml and no *.yaml files", dir)
		}
		sort.Strings(files)
		return files, nil
	}
	var files []string
	for _, r := range k.Resources {
		if strings.HasSuffix(r, ".yaml") || strings.HasSuffix(r, ".yml") {
			files = append(files, filepath.Join(dir, r))
		}
	}
	return files, nil
}

// provider is a providerSpec resolved against its config: the objects to apply, already rewritten.
type provider struct {
	Name     string
	CRDs     []*unstructured.Unstructured
	Webhooks []*unstructured.Unstructured
}

// resolve reads the provider's config and renders its CRDs and webhook configurations for managers
// that run as local processes: webhooks are reached at https://<host>:<port><path> and trusted
// through caBundle, instead of through a Service and cert-manager's CA injection.
func resolve(spec providerSpec, host string, caBundle []byte) (*provider, error) {
	for _, dir := range []string{spec.Config, spec.CRDs} {
		if dir == "" {
			continue
		}
		if st, err := os.Stat(dir); err != nil {
			return nil, fmt.Errorf("provider folder: %w", err)
		} else if !st.IsDir() {
			return nil, fmt.Errorf("provider folder %s is not a directory", dir)
		}
	}
	crdDir := spec.CRDs
	if crdDir == "" {
		crdDir = filepath.Join(spec.Config, "crd")
	}
	webhookDir := spec.Webhooks
	if webhookDir == "" && spec.Config != "" {
		webhookDir = filepath.Join(spec.Config, "webhook")
	}
	if webhookDir == "none" {
		webhookDir = ""
	}

	// Provider name and prefix: what config/default/kustomization.yaml would give a clusterctl install.
	name, prefix := spec.Name, spec.Prefix
	if spec.Config != "" && (name == "" || prefix == "") {
		def, err := readKustomization(filepath.Join(spec.Config, "default"))
		if err != nil {
			return nil, err
		}
		if def != nil {
			if prefix == "" {
				prefix = def.NamePrefix
			}
			for _, l := range def.Labels {
				if v := l.Pairs[providerLabel]; v != "" && name == "" {
					name = v
				}
			}
		}
	}
	if name == "" {
		return nil, fmt.Errorf("provider in %s: no name=… given and no %s label in its default kustomization", firstNonEmpty(spec.Config, crdDir), providerLabel)
	}

	crdKust, err := readKustomization(crdDir)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{providerLabel: name}
	if spec.contractsSet {
		for _, c := range spec.Contracts {
			labels["cluster.x-k8s.io/"+c] = c
		}
	} else if crdKust != nil {
		// The contract labels ("cluster.x-k8s.io/v1beta2: v1beta2") tell the topology controller
		// which API version of a provider's kinds implements which CAPI contract.
		for _, l := range crdKust.Labels {
			for k, v := range l.Pairs {
				labels[k] = v
			}
		}
	}

	conversion, err := conversionWebhookCRDs(crdDir, crdKust)
	if err != nil {
		return nil, err
	}
	if len(conversion) > 0 && spec.Port == 0 {
		return nil, fmt.Errorf("provider %s: its CRDs use conversion webhooks, so it needs port=…", name)
	}
	baseURL := fmt.Sprintf("https://%s:%d", host, spec.Port)

	files, err := resourceFiles(crdDir, crdKust)
	if err != nil {
		return nil, err
	}
	p := &provider{Name: name}
	for _, f := range files {
		objs, err := readObjects(f)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if o.GetKind() != "CustomResourceDefinition" {
				return nil, fmt.Errorf("%s: expected CustomResourceDefinition, found %s %q", f, o.GetKind(), o.GetName())
			}
			addLabels(o, labels)
			if conversion[o.GetName()] {
				webhook := map[string]any{
					"conversionReviewVersions": []any{"v1"},
					"clientConfig":             clientConfig(baseURL+"/convert", caBundle),
				}
				if err := unstructured.SetNestedField(o.Object, map[string]any{"strategy": "Webhook", "webhook": webhook}, "spec", "conversion"); err != nil {
					return nil, err
				}
			}
			p.CRDs = append(p.CRDs, o)
		}
	}

	if webhookDir != "" {
		whKust, err := readKustomization(webhookDir)
		if err != nil {
			return nil, err
		}
		if whKust == nil {
			if _, statErr := os.Stat(webhookDir); errors.Is(statErr, os.ErrNotExist) && spec.Webhooks == "" {
				return p, nil // provider without admission webhooks (config/ has no webhook/ folder)
			}
		}
		files, err := resourceFiles(webhookDir, whKust)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			objs, err := readObjects(f)
			if err != nil {
				return nil, err
			}
			for _, o := range objs {
				switch o.GetKind() {
				case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
				default:
					continue // the webhook Service: not needed, the apiserver calls a URL
				}
				if spec.Port == 0 {
					return nil, fmt.Errorf("provider %s: %s has admission webhooks, so it needs port=…", name, f)
				}
				if err := rewriteWebhooks(o, prefix, baseURL, caBundle); err != nil {
					return nil, fmt.Errorf("%s: %w", f, err)
				}
				addLabels(o, map[string]string{providerLabel: name})
				p.Webhooks = append(p.Webhooks, o)
			}
		}
	}
	return p, nil
}

// conversionWebhookCRDs names the CRDs that the kustomization's patches switch to webhook conversion.
func conversionWebhookCRDs(dir string, k *kustomization) (map[string]bool, error) {
	out := map[string]bool{}
	if k == nil {
		return out, nil
	}
	for _, patch := range k.Patches {
		objs, err := readObjects(filepath.Join(dir, patch.Path))
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			strategy, _, _ := unstructured.NestedString(o.Object, "spec", "conversion", "strategy")
			if o.GetKind() == "CustomResourceDefinition" && strategy == "Webhook" {
				out[o.GetName()] = true
			}
		}
	}
	return out, nil
}

// rewriteWebhooks prefixes a webhook configuration's name the way kustomize's namePrefix does and
// points each webhook's clientConfig at the manager's local URL.
func rewriteWebhooks(o *unstructured.Unstructured, prefix, baseURL string, caBundle []byte) error {
	o.SetName(prefix + o.GetName())
	hooks, _, err := unstructured.NestedSlice(o.Object, "webhooks")
	if err != nil {
		return err
	}
	for i, h := range hooks {
		hook, ok := h.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: webhooks[%d] is not an object", o.GetName(), i)
		}
		path, _, _ := unstructured.NestedString(hook, "clientConfig", "service", "path")
		if path == "" {
			return fmt.Errorf("%s: webhook %v has no clientConfig.service.path", o.GetName(), hook["name"])
		}
		hook["clientConfig"] = clientConfig(baseURL+path, caBundle)
		hooks[i] = hook
	}
	return unstructured.SetNestedSlice(o.Object, hooks, "webhooks")
}

func clientConfig(url string, caBundle []byte) map[string]any {
	// caBundle is []byte in the Go types, so it travels base64-encoded in JSON.
	return map[string]any{"url": url, "caBundle": base64.StdEncoding.EncodeToString(caBundle)}
}

func addLabels(o *unstructured.Unstructured, add map[string]string) {
	labels := o.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	for k, v := range add {
		labels[k] = v
	}
	o.SetLabels(labels)
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
