// Package chart renders the Helm chart deploy/helm/magnum-capi-bridge with the Helm SDK, as
// `helm template` does. It is the single source of the bridge's Kubernetes objects:
// deploy/kubernetes/*.yaml are this chart's RBAC and admission policies rendered for the default
// namespace (`make generate`; a test fails when they are stale).
package chart

//go:generate go run ./gen

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Name is the chart's name, and the release and namespace deploy/kubernetes is rendered for.
const Name = "magnum-capi-bridge"

// Dir is the chart's directory in this checkout: found above the working directory (go test and
// go generate run in a package's directory), else next to this source file. The working directory
// comes first because `make test` builds with -trimpath, which leaves source file names without
// their directory.
func Dir() string {
	rel := filepath.Join("deploy", "helm", Name)
	if dir, err := os.Getwd(); err == nil {
		for {
			if _, err := os.Stat(filepath.Join(dir, rel, "Chart.yaml")); err == nil {
				return filepath.Join(dir, rel)
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", rel)
}

// Render renders every template of the chart for a release; the result maps template paths
// ("magnum-capi-bridge/templates/rbac.yaml") to their output, empty ones left out.
func Render(release, namespace string, values map[string]any) (map[string]string, error) {
	ch, err := loader.LoadDir(Dir())
	if err != nil {
		return nil, fmt.Errorf("load chart: %w", err)
	}
	if err := ch.Validate(); err != nil {
		return nil, fmt.Errorf("chart: %w", err)
	}
	vals, err := chartutil.ToRenderValues(ch, values,
		chartutil.ReleaseOptions{Name: release, Namespace: namespace, Revision: 1, IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	out, err := engine.Render(ch, vals)
	if err != nil {
		return nil, err
	}
	for k, v := range out {
		if strings.TrimSpace(v) == "" || strings.HasSuffix(k, "NOTES.txt") {
			delete(out, k)
		}
	}
	return out, nil
}

// Template is one template's output by its file name ("rbac.yaml").
func Template(rendered map[string]string, file string) string {
	return rendered[Name+"/templates/"+file]
}

// Objects decodes rendered templates into objects, in template file order.
func Objects(rendered map[string]string) ([]*unstructured.Unstructured, error) {
	names := make([]string, 0, len(rendered))
	for k := range rendered {
		names = append(names, k)
	}
	sort.Strings(names)
	var objs []*unstructured.Unstructured
	for _, n := range names {
		for _, doc := range strings.Split(rendered[n], "\n---\n") {
			js, err := yaml.YAMLToJSON([]byte(doc))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", n, err)
			}
			if s := strings.TrimSpace(string(js)); s == "null" || s == "{}" {
				continue // only comments
			}
			obj := &unstructured.Unstructured{}
			if err := obj.UnmarshalJSON(js); err != nil {
				return nil, fmt.Errorf("%s: %w", n, err)
			}
			objs = append(objs, obj)
		}
	}
	return objs, nil
}

// Manifest is the rendered templates as one multi-document YAML stream, in template file order.
func Manifest(rendered map[string]string) string {
	names := make([]string, 0, len(rendered))
	for k := range rendered {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", n, strings.TrimSpace(rendered[n]))
	}
	return b.String()
}

// KubernetesFiles are deploy/kubernetes's files: the chart's RBAC (with the namespace), admission
// policies and the cluster-autoscalers' PriorityClass, rendered for release and namespace
// magnum-capi-bridge.
func KubernetesFiles() (map[string]string, error) {
	rendered, err := Render(Name, Name, map[string]any{
		"createNamespace": true,
		"config":          map[string]any{"magnumConf": "# not used: only the RBAC and policies are kept"},
	})
	if err != nil {
		return nil, err
	}
	header := "# Generated from the Helm chart deploy/helm/magnum-capi-bridge (templates/%s) by `make generate`:\n" +
		"# edit the chart, not this file. Apply with\n" +
		"#   kubectl apply --server-side -f deploy/kubernetes/rbac.yaml -f deploy/kubernetes/admission-policy.yaml \\\n" +
		"#     -f deploy/kubernetes/priority-class.yaml\n"
	return map[string]string{
		"rbac.yaml": fmt.Sprintf(header, "namespace.yaml, rbac.yaml") + strings.TrimSpace(Template(rendered, "namespace.yaml")) +
			"\n---\n" + strings.TrimSpace(Template(rendered, "rbac.yaml")) + "\n",
		"admission-policy.yaml": fmt.Sprintf(header, "admission-policy.yaml") + strings.TrimSpace(Template(rendered, "admission-policy.yaml")) + "\n",
		"priority-class.yaml":   fmt.Sprintf(header, "priority-class.yaml") + strings.TrimSpace(Template(rendered, "priority-class.yaml")) + "\n",
	}, nil
}

// KubernetesDir is deploy/kubernetes in this checkout.
func KubernetesDir() string { return filepath.Join(Dir(), "..", "..", "kubernetes") }
