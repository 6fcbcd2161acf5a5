package main

import (
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

var testCA = []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")

// moduleDir finds a module of this tools module's build list in the module cache, the same way
// deploy/local/mgmt-up.sh does.
func moduleDir(t *testing.T, mod string) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", mod).Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", mod, err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		t.Fatalf("go list -m %s: module not downloaded (run go mod download in tools/k8s/capi)", mod)
	}
	return dir
}

// TestResolveCAPIProviders renders the real v1.14 provider configs and checks what the managers and
// the topology controller depend on: counts, names, labels, and every webhook reaching its own port.
func TestResolveCAPIProviders(t *testing.T) {
	capi := moduleDir(t, "sigs.k8s.io/cluster-api")
	capiTest := moduleDir(t, "sigs.k8s.io/cluster-api/test")
	cases := []struct {
		config, name, prefix string
		port, crds           int
		contracts            bool
	}{
		{filepath.Join(capi, "core/config"), "cluster-api", "capi-", 19443, 13, false},
		{filepath.Join(capi, "controlplane/kubeadm/config"), "control-plane-kubeadm", "capi-kubeadm-control-plane-", 19444, 2, true},
		{filepath.Join(capi, "bootstrap/kubeadm/config"), "bootstrap-kubeadm", "capi-kubeadm-bootstrap-", 19445, 2, true},
		{filepath.Join(capiTest, "infrastructure/docker/config"), "infrastructure-docker", "capd-", 19446, 12, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec, err := parseProviderSpec("config=" + c.config + ",port=" + strconv.Itoa(c.port))
			if err != nil {
				t.Fatal(err)
			}
			p, err := resolve(spec, "127.0.0.1", testCA)
			if err != nil {
				t.Fatal(err)
			}
			if p.Name != c.name || len(p.CRDs) != c.crds || len(p.Webhooks) != 2 {
				t.Fatalf("got provider %q with %d CRDs and %d webhook configurations, want %q/%d/2", p.Name, len(p.CRDs), len(p.Webhooks), c.name, c.crds)
			}
			base := "https://127.0.0.1:" + strconv.Itoa(c.port) + "/"
			for _, crd := range p.CRDs {
				labels := crd.GetLabels()
				if labels[providerLabel] != c.name {
					t.Errorf("%s: provider label %q", crd.GetName(), labels[providerLabel])
				}
				if got := labels["cluster.x-k8s.io/v1beta2"] == "v1beta2"; got != c.contracts {
					t.Errorf("%s: has v1beta2 contract label = %v, want %v", crd.GetName(), got, c.contracts)
				}
				url, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "webhook", "clientConfig", "url")
				if url != base+"convert" {
					t.Errorf("%s: conversion URL %q", crd.GetName(), url)
				}
				checkCABundle(t, crd.GetName(), crd.Object, "spec", "conversion", "webhook", "clientConfig")
			}
			for _, wh := range p.Webhooks {
				if !strings.HasPrefix(wh.GetName(), c.prefix) {
					t.Errorf("webhook configuration %q lacks prefix %q", wh.GetName(), c.prefix)
				}
				hooks, _, _ := unstructured.NestedSlice(wh.Object, "webhooks")
				if len(hooks) == 0 {
					t.Errorf("%s: no webhooks", wh.GetName())
				}
				for _, h := range hooks {
					hook := h.(map[string]any)
					if _, hasService, _ := unstructured.NestedMap(hook, "clientConfig", "service"); hasService {
						t.Errorf("%s/%v: still points at a Service", wh.GetName(), hook["name"])
					}
					url, _, _ := unstructured.NestedString(hook, "clientConfig", "url")
					if !strings.HasPrefix(url, base) || len(url) <= len(base) {
						t.Errorf("%s/%v: URL %q is not under %s", wh.GetName(), hook["name"], url, base)
					}
					checkCABundle(t, wh.GetName(), hook, "clientConfig")
				}
			}
		})
	}
}

func checkCABundle(t *testing.T, what string, obj map[string]any, path ...string) {
	t.Helper()
	enc, _, _ := unstructured.NestedString(obj, append(path, "caBundle")...)
	got, err := base64.StdEncoding.DecodeString(enc)
	if err != nil || string(got) != string(testCA) {
		t.Errorf("%s: caBundle %q does not carry the CA (decode error %v)", what, enc, err)
	}
}

// TestResolveCRDOnlyBundle covers a folder of CRDs without kustomization or webhooks (ORC's shape).
func TestResolveCRDOnlyBundle(t *testing.T) {
	dir := t.TempDir()
	crd := "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: images.example.org\nspec:\n  group: example.org\n"
	if err := os.WriteFile(filepath.Join(dir, "example.org_images.yaml"), []byte("---\n"+crd+"---\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := resolve(providerSpec{CRDs: dir}, "127.0.0.1", nil); err == nil || !strings.Contains(err.Error(), "name=") {
		t.Fatalf("resolve without a provider name: got %v, want an error asking for name=", err)
	}
	spec, err := parseProviderSpec("name=orc,contracts=v1beta1,crds=" + dir)
	if err != nil {
		t.Fatal(err)
	}
	p, err := resolve(spec, "127.0.0.1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.CRDs) != 1 || len(p.Webhooks) != 0 {
		t.Fatalf("got %d CRDs, %d webhook configurations; want 1, 0", len(p.CRDs), len(p.Webhooks))
	}
	want := map[string]string{providerLabel: "orc", "cluster.x-k8s.io/v1beta1": "v1beta1"}
	for k, v := range want {
		if p.CRDs[0].GetLabels()[k] != v {
			t.Errorf("label %s = %q, want %q", k, p.CRDs[0].GetLabels()[k], v)
		}
	}
	if _, found, _ := unstructured.NestedMap(p.CRDs[0].Object, "spec", "conversion"); found {
		t.Error("a CRD without a conversion patch got a conversion webhook")
	}
}

func TestProviderNeedsPortForWebhooks(t *testing.T) {
	spec, err := parseProviderSpec("config=" + filepath.Join(moduleDir(t, "sigs.k8s.io/cluster-api"), "core/config"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := resolve(spec, "127.0.0.1", testCA); err == nil || !strings.Contains(err.Error(), "port=") {
		t.Fatalf("got %v, want an error asking for port=", err)
	}
}

func TestResolveMissingFolder(t *testing.T) {
	_, err := resolve(providerSpec{Config: filepath.Join(t.TempDir(), "missing"), Port: 19443}, "127.0.0.1", testCA)
	if err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("got %v, want an error naming the missing folder", err)
	}
}

func TestParseProviderSpecErrors(t *testing.T) {
	for _, bad := range []string{"", "port=19443", "config=/x,port=0", "config=/x,port=http", "config=/x,colour=blue", "config"} {
		if _, err := parseProviderSpec(bad); err == nil {
			t.Errorf("parseProviderSpec(%q) accepted bad input", bad)
		}
	}
	p, err := parseProviderSpec(" config=/c , port=19447, name=infrastructure-openstack, prefix=capo-, contracts=v1beta1 ")
	if err != nil {
		t.Fatal(err)
	}
	if p.Config != "/c" || p.Port != 19447 || p.Name != "infrastructure-openstack" || p.Prefix != "capo-" || strings.Join(p.Contracts, "+") != "v1beta1" {
		t.Fatalf("parsed %+v", p)
	}
}
