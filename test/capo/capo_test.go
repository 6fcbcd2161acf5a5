// Package capo_test checks the OpenStack (CAPO) flavor of internal/templates against the real
// Cluster API and CAPO v0.14.2 CRDs and admission webhooks of the local management cluster,
// without an OpenStack cloud: every rendered object and every object CAPI's patch engine derives
// from it is sent as a server-side dry run (nothing is stored, so CAPO never reconciles anything),
// and the ClusterClass is created for real so the Cluster webhook validates the Cluster's variables
// against the class's schemas. No Cluster or OpenStackCluster is ever created for real.
//
//	deploy/local/mgmt-up.sh && go test -tags e2e -v -count=1 ./test/capo/
//
// The test runs deploy/local/capo-up.sh itself (CAPO's and ORC's CRDs, CAPO's webhooks and
// manager; idempotent). MCB_KUBECONFIG names the management cluster's kubeconfig (default
// /var/lib/magnum-capi-bridge/mgmt/admin.kubeconfig). It is the e2e tier: skipped without the `e2e`
// build tag; with it, a management cluster that is not up is a test failure, not a skip.
package capo_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates/templatestest"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates/topologysim"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

const (
	fieldOwner        = "magnum-capi-bridge-capo-test"
	classReadyTimeout = 60 * time.Second
)

// warningRecorder keeps the apiserver's and webhooks' warnings (e.g. "Cluster topology has not
// been fully validated"), which are not errors but mean a check was skipped.
type warningRecorder struct {
	mu       sync.Mutex
	warnings []string
}

func (w *warningRecorder) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warnings = append(w.warnings, text)
}

func (w *warningRecorder) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.warnings
	w.warnings = nil
	return out
}

// managementCluster returns a REST config for the local management cluster.
func managementCluster(t *testing.T) *rest.Config {
	_, cfg := testutil.ManagementCluster(t)
	return cfg
}

// ensureCAPO installs CAPO's CRDs and webhooks and starts its manager unless they already run.
func ensureCAPO(t *testing.T) {
	t.Helper()
	start := time.Now()
	cmd := exec.Command(filepath.Join(testutil.RepoRoot(), "deploy", "local", "capo-up.sh"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("deploy/local/capo-up.sh: %v\n%s", err, out)
	}
	t.Logf("capo-up.sh took %s", time.Since(start).Round(time.Millisecond))
}

// newNamespace creates a namespace for one case and deletes it (with the ClusterClass) afterwards.
func newNamespace(ctx context.Context, t *testing.T, c client.Client) string {
	t.Helper()
	ns := "mcb-capo-" + testutil.RandomHex(4)
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{templates.LabelManagedBy: fieldOwner}}}))
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.Delete(cctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Errorf("delete namespace %s: %v", ns, err)
		}
	})
	return ns
}

func describe(o *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
}

// dryRunApply server-side applies the object as a dry run with strict field validation: unknown
// or duplicate fields are errors instead of being pruned silently.
func dryRunApply(ctx context.Context, c client.Client, o *unstructured.Unstructured) error {
	obj := o.DeepCopy()
	//lint:ignore SA1019 Client.Apply has no FieldValidation option, and Strict validation is what this checks
	return c.Patch(ctx, obj, client.Apply, client.FieldOwner(fieldOwner), client.ForceOwnership,
		client.DryRunAll, client.FieldValidation("Strict"))
}

func TestRenderedObjectsPassCAPIAndCAPOAdmission(t *testing.T) {
	cfg := managementCluster(t)
	ensureCAPO(t)
	warnings := &warningRecorder{}
	cfg.WarningHandlerWithContext = warnings
	c, err := client.New(cfg, client.Options{})
	require.NoError(t, err)

	matrix := templatestest.OpenStackMatrix()
	accepted := 0
	for _, name := range templatestest.SortedNames(matrix) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			ns := newNamespace(ctx, t, c)
			in := matrix[name]
			in.Namespace = ns
			r, err := templates.Render(in)
			require.NoError(t, err)

			// 1. Every rendered object, as the conductor would apply it, in a dry run.
			for _, o := range append(append([]*unstructured.Unstructured{}, r.ClassObjects...), r.Cluster) {
				if err := dryRunApply(ctx, c, o); err != nil {
					t.Errorf("dry run of %s refused: %v", describe(o), err)
					continue
				}
				accepted++
			}
			warnings.take()
			if t.Failed() {
				return
			}

			// 2. The class for real (a ClusterClass and templates make CAPO do nothing), so the
			// Cluster webhook validates the Cluster's variables against the reconciled class.
			for _, o := range r.ClassObjects {
				obj := o.DeepCopy()
				//lint:ignore SA1019 Client.Apply has no FieldValidation option, and Strict validation is what this checks
				require.NoError(t, c.Patch(ctx, obj, client.Apply, client.FieldOwner(fieldOwner), client.ForceOwnership,
					client.FieldValidation("Strict")), "apply %s", describe(o))
			}
			waitClassReconciled(ctx, t, c, ns, r.ClassName)
			warnings.take()
			require.NoError(t, dryRunApply(ctx, c, r.Cluster), "dry run of the Cluster against its reconciled ClusterClass")
			require.Empty(t, warnings.take(), "the Cluster webhook skipped checks")
			accepted++

			// 3. What CAPI's topology controller would create from it, after the class's patches.
			d, err := topologysim.Compute(ctx, r.ClassObjects, r.Cluster)
			require.NoError(t, err)
			for _, o := range d.Objects() {
				obj := o.DeepCopy()
				obj.SetResourceVersion("")
				if err := c.Create(ctx, obj, client.DryRunAll, client.FieldValidation("Strict")); err != nil {
					t.Errorf("dry run of derived %s refused: %v", describe(o), err)
					continue
				}
				accepted++
			}
			if w := warnings.take(); len(w) > 0 {
				t.Logf("warnings: %s", strings.Join(w, "; "))
			}
		})
	}
	t.Logf("%d objects accepted by the apiserver, CAPI's and CAPO's webhooks over %d cases", accepted, len(matrix))
}

// waitClassReconciled waits until CAPI's ClusterClass controller has reconciled the class: its
// variables are published and every template it references was found with a supported contract.
func waitClassReconciled(ctx context.Context, t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	deadline := time.Now().Add(classReadyTimeout)
	var last string
	for time.Now().Before(deadline) {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("cluster.x-k8s.io/v1beta2")
		u.SetKind("ClusterClass")
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u))
		observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		status := map[string]string{}
		var parts []string
		for _, x := range conds {
			m := x.(map[string]any)
			status[fmt.Sprint(m["type"])] = fmt.Sprint(m["status"])
			parts = append(parts, fmt.Sprintf("%v=%v (%v)", m["type"], m["status"], m["message"]))
		}
		last = strings.Join(parts, ", ")
		if observed == u.GetGeneration() && status["VariablesReady"] == "True" {
			require.Equal(t, "True", status["RefVersionsUpToDate"], "ClusterClass conditions: %s", last)
			vars, _, _ := unstructured.NestedSlice(u.Object, "status", "variables")
			require.NotEmpty(t, vars, "published variables")
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("ClusterClass %s/%s not reconciled after %s: %s", ns, name, classReadyTimeout, last)
}

// The checks above must be able to fail: broken variants of rendered objects are refused by the
// layer each one targets (CRD schema, strict field validation, CAPO's and CAPI's webhooks, the
// Cluster's variables against the reconciled class).
func TestAdmissionRefusesBrokenObjects(t *testing.T) {
	cfg := managementCluster(t)
	ensureCAPO(t)
	c, err := client.New(cfg, client.Options{})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := newNamespace(ctx, t, c)
	in := templatestest.BaseOpenStackInput()
	in.Namespace = ns
	r, err := templates.Render(in)
	require.NoError(t, err)
	d, err := topologysim.Compute(ctx, r.ClassObjects, r.Cluster)
	require.NoError(t, err)
	machine := d.ControlPlaneMachineTemplate

	broken := []struct {
		name   string
		obj    *unstructured.Unstructured
		change func(*unstructured.Unstructured)
		want   string
	}{
		{"CAPO webhook: providerID in a machine template", machine, func(u *unstructured.Unstructured) {
			require.NoError(t, unstructured.SetNestedField(u.Object, "openstack:///x", "spec", "template", "spec", "providerID"))
		}, "cannot be set in templates"},
		{"strict field validation: unknown field", machine, func(u *unstructured.Unstructured) {
			require.NoError(t, unstructured.SetNestedField(u.Object, "m1.small", "spec", "template", "spec", "flavour"))
		}, "flavour"},
		{"CRD validation: no flavor at all", machine, func(u *unstructured.Unstructured) {
			unstructured.RemoveNestedField(u.Object, "spec", "template", "spec", "flavor")
		}, "flavor"},
		{"CRD validation: image ID that is not a UUID", machine, func(u *unstructured.Unstructured) {
			require.NoError(t, unstructured.SetNestedMap(u.Object, map[string]any{"id": "not-a-uuid"}, "spec", "template", "spec", "image"))
		}, "uuid"},
		{"CAPI webhook: patch using an undefined variable", r.ClassObjects[len(r.ClassObjects)-1], func(u *unstructured.Unstructured) {
			patches, _, _ := unstructured.NestedSlice(u.Object, "spec", "patches")
			p := patches[len(patches)-1].(map[string]any)
			p["enabledIf"] = "{{ if .noSuchVariable }}true{{ end }}"
			jp := p["definitions"].([]any)[0].(map[string]any)["jsonPatches"].([]any)[0].(map[string]any)
			jp["valueFrom"] = map[string]any{"variable": "noSuchVariable"}
			require.NoError(t, unstructured.SetNestedSlice(u.Object, patches, "spec", "patches"))
		}, "noSuchVariable"},
	}
	for _, b := range broken {
		t.Run(b.name, func(t *testing.T) {
			obj := b.obj.DeepCopy()
			obj.SetName(obj.GetName() + "-broken")
			b.change(obj)
			err := c.Create(ctx, obj, client.DryRunAll, client.FieldValidation("Strict"))
			require.Error(t, err, "%s was accepted", describe(obj))
			require.Contains(t, err.Error(), b.want)
		})
	}

	t.Run("Cluster webhook: variable of the wrong type", func(t *testing.T) {
		for _, o := range r.ClassObjects {
			require.NoError(t, c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.FieldOwner(fieldOwner), client.ForceOwnership))
		}
		waitClassReconciled(ctx, t, c, ns, r.ClassName)
		cl := r.Cluster.DeepCopy()
		vars, _, _ := unstructured.NestedSlice(cl.Object, "spec", "topology", "variables")
		for _, v := range vars {
			if m := v.(map[string]any); m["name"] == templates.VarDisableAPIServerFloatingIP {
				m["value"] = "yes"
			}
		}
		require.NoError(t, unstructured.SetNestedSlice(cl.Object, vars, "spec", "topology", "variables"))
		err := dryRunApply(ctx, c, cl)
		require.Error(t, err)
		require.Contains(t, err.Error(), templates.VarDisableAPIServerFloatingIP)
	})
}
