// Command capi-install installs Cluster API providers' CRDs and webhook configurations into a
// management cluster whose provider managers run as plain local processes instead of Deployments.
//
// It does the part of a clusterctl/kustomize/cert-manager install that the managers cannot do
// themselves: it labels CRDs with the provider name and contract versions, points conversion and
// admission webhooks at https://127.0.0.1:<port> (one port per manager) with the local CA as
// caBundle, applies everything in parallel with server-side apply (so re-running it is a cheap
// no-op), and waits until every CRD is Established.
//
//	capi-install -kubeconfig admin.kubeconfig -ca-bundle ca.crt \
//	  -provider config=$CAPI/core/config,port=19443 \
//	  -provider config=$CAPI/controlplane/kubeadm/config,port=19444 …
//
// A -provider value is comma-separated key=value pairs: config=DIR (the provider's config/ folder),
// port=N (its manager's webhook port), and optionally name=, prefix=, contracts=v1beta1+v1beta2,
// crds=DIR and webhooks=DIR|none, which otherwise come from the provider's kustomization files.
// A CRD-only bundle such as ORC's is "name=orc,crds=$ORC/config/crd/bases".
package main

import (
	"context"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

const fieldManager = "capi-install"

type providerFlags []providerSpec

func (p *providerFlags) String() string { return fmt.Sprint(len(*p), " providers") }
func (p *providerFlags) Set(v string) error {
	spec, err := parseProviderSpec(v)
	if err != nil {
		return err
	}
	*p = append(*p, spec)
	return nil
}

func main() {
	var specs providerFlags
	flag.Var(&specs, "provider", "provider to install: config=DIR,port=N[,name=L][,prefix=P][,contracts=a+b][,crds=DIR][,webhooks=DIR|none] (repeatable)")
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the management cluster (admin)")
	caFile := flag.String("ca-bundle", "", "PEM file of the CA that signed the managers' webhook serving certificate")
	host := flag.String("webhook-host", "127.0.0.1", "host the apiserver uses to reach the managers' webhooks")
	qps := flag.Float64("qps", 200, "client QPS (client-go's default of 5 makes a 29-CRD install take ~3x longer)")
	concurrency := flag.Int("concurrency", 32, "objects applied at the same time")
	timeout := flag.Duration("timeout", 2*time.Minute, "overall deadline, including waiting for Established")
	printOnly := flag.Bool("print", false, "print the rendered objects as YAML instead of applying them")
	flag.Parse()

	if err := run(specs, *kubeconfig, *caFile, *host, *qps, *concurrency, *timeout, *printOnly); err != nil {
		fmt.Fprintln(os.Stderr, "capi-install:", err)
		os.Exit(1)
	}
}

func run(specs []providerSpec, kubeconfig, caFile, host string, qps float64, concurrency int, timeout time.Duration, printOnly bool) error {
	if len(specs) == 0 {
		return errors.New("no -provider given")
	}
	if concurrency < 1 {
		return errors.New("-concurrency must be at least 1")
	}
	var caBundle []byte
	if caFile != "" {
		var err error
		if caBundle, err = readCABundle(caFile); err != nil {
			return err
		}
	}

	var providers []*provider
	for _, s := range specs {
		if s.Port != 0 && caBundle == nil {
			return errors.New("-ca-bundle is required for providers with webhooks (port=…)")
		}
		p, err := resolve(s, host, caBundle)
		if err != nil {
			return err
		}
		providers = append(providers, p)
	}

	if printOnly {
		for _, p := range providers {
			for _, o := range append(append([]*unstructured.Unstructured{}, p.CRDs...), p.Webhooks...) {
				out, err := yaml.Marshal(o.Object)
				if err != nil {
					return err
				}
				fmt.Printf("---\n%s", out)
			}
		}
		return nil
	}

	if kubeconfig == "" {
		return errors.New("-kubeconfig (or KUBECONFIG) is required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = float32(qps), int(2*qps)
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	var objs []*unstructured.Unstructured
	for _, p := range providers {
		objs = append(objs, p.CRDs...)
		objs = append(objs, p.Webhooks...)
	}
	if err := applyAll(ctx, client, objs, concurrency); err != nil {
		return err
	}
	for _, p := range providers {
		fmt.Printf("capi-install: %s: %d CRDs, %d webhook configurations\n", p.Name, len(p.CRDs), len(p.Webhooks))
	}
	fmt.Printf("capi-install: %d objects applied, all CRDs Established, in %s\n", len(objs), time.Since(start).Round(time.Millisecond))
	return nil
}

func readCABundle(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-ca-bundle: %w", err)
	}
	if block, _ := pem.Decode(data); block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("-ca-bundle %s: not a PEM certificate", path)
	}
	return data, nil
}

var resources = map[string]schema.GroupVersionResource{
	"CustomResourceDefinition":       {Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"},
	"MutatingWebhookConfiguration":   {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"},
	"ValidatingWebhookConfiguration": {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"},
}

// applyAll server-side applies the objects with bounded parallelism; each CRD's worker then waits
// for it to be Established, so slow CRDs overlap with the remaining applies.
func applyAll(ctx context.Context, client dynamic.Interface, objs []*unstructured.Unstructured, concurrency int) error {
	sem := make(chan struct{}, concurrency)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, o := range objs {
		gvr, ok := resources[o.GetKind()]
		if !ok {
			return fmt.Errorf("%s %q: kind not supported", o.GetKind(), o.GetName())
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := applyOne(ctx, client.Resource(gvr), o); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func applyOne(ctx context.Context, res dynamic.ResourceInterface, o *unstructured.Unstructured) error {
	got, err := res.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
	if err != nil {
		return err
	}
	if o.GetKind() != "CustomResourceDefinition" {
		return nil
	}
	for {
		established, err := crdEstablished(got)
		if established || err != nil {
			return err
		}
		if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, false, func(ctx context.Context) (bool, error) {
			got, err = res.Get(ctx, o.GetName(), metav1.GetOptions{})
			return err == nil, err
		}); err != nil {
			return fmt.Errorf("waiting for Established: %w", err)
		}
	}
}

// crdEstablished reports whether the apiserver serves the CRD; a NamesAccepted=False condition is a
// permanent error (a name clash with another CRD), not something to wait out.
func crdEstablished(crd *unstructured.Unstructured) (bool, error) {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		switch {
		case m["type"] == "Established" && m["status"] == "True":
			return true, nil
		case m["type"] == "NamesAccepted" && m["status"] == "False":
			return false, fmt.Errorf("names not accepted: %v", strings.TrimSpace(fmt.Sprint(m["message"])))
		}
	}
	return false, nil
}
