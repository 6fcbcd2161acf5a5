package mgmt_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"sort"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// applyClusterClass creates every object of a multi-document YAML file in the namespace and
// returns them as "Kind.group/name".
func applyClusterClass(ctx context.Context, t *testing.T, c client.Client, ns, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var names []string
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("%s: %v", path, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		obj.SetNamespace(ns)
		if err := c.Create(ctx, &obj); err != nil {
			t.Fatalf("create %s %s from %s: %v", obj.GetKind(), obj.GetName(), path, err)
		}
		names = append(names, objectName(obj.GroupVersionKind(), obj.GetName()))
	}
	if len(names) == 0 {
		t.Fatalf("%s holds no objects", path)
	}
	return names
}

func objectName(gvk schema.GroupVersionKind, name string) string {
	kind := gvk.Kind
	if gvk.Group != "" {
		kind += "." + gvk.Group
	}
	return kind + "/" + name
}

// namespaceObjects lists every object in the namespace, of every namespaced resource type the
// apiserver serves (CAPI's and the providers' CRDs included), except Events, which outlive their
// objects by design. Metadata-only lists keep this cheap enough to poll.
func namespaceObjects(ctx context.Context, t *testing.T, c client.Client, cfg *rest.Config, ns string) []string {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lists, err := dc.ServerPreferredNamespacedResources()
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	var names []string
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range l.APIResources {
			if r.Name == "events" || !canList(r) {
				continue
			}
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(gv.WithKind(r.Kind + "List"))
			if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
				t.Fatalf("list %s in %s: %v", r.Name, ns, err)
			}
			for _, item := range list.Items {
				names = append(names, objectName(gv.WithKind(r.Kind), item.Name))
			}
		}
	}
	sort.Strings(names)
	return names
}

func canList(r metav1.APIResource) bool {
	for _, v := range r.Verbs {
		if v == "list" {
			return true
		}
	}
	return false
}
