package conductor

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/autoscaler"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/capi"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// TestTheAutoscalerFollowsTheCluster: it runs while a MachineDeployment carries the autoscaler's
// size annotations, is applied again only when what it is rendered from changes (here the
// Kubernetes minor), and goes when no group is autoscaled any more or the cluster is deleted.
func TestTheAutoscalerFollowsTheCluster(t *testing.T) {
	h := newHarness(t)
	h.c.opts.Autoscalers = true
	ctx := context.Background()
	const id = "1a2b3c4d-0000-4000-8000-000000000001"
	cl := &magnum.Cluster{}
	cl.UUID.Set(id)
	cl.ProjectID.Set("0123abcd")
	cl.Status.Set(magnum.StatusCreateComplete)
	labels := magnum.NewDict()
	labels.Set("auto_scaling_enabled", "true")
	labels.Set("autoscaler_expander", "priority")
	cl.Labels.Set(labels)
	capiCluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "magnum-0123abcd", Name: "web-1a2b3c4d"}}
	capiCluster.Spec.Topology.Version = "v1.36.3"
	md := func(name string, autoscaled bool) clusterv1.MachineDeployment {
		m := clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "magnum-0123abcd", Name: name, Annotations: map[string]string{}}}
		if autoscaled {
			m.Annotations[templates.AutoscalerMaxAnnotation] = "5"
		}
		return m
	}
	obs := capi.Observation{Cluster: capiCluster, MachineDeployments: []clusterv1.MachineDeployment{
		md("web-1a2b3c4d-default-worker-q9z8m", true), md("web-1a2b3c4d-fixed-x7k2p", false)}}

	note, retry := h.c.followAutoscaler(ctx, cl, obs)
	require.Empty(t, note)
	require.False(t, retry)
	applied := h.kube.autoscalers[id]
	require.NotNil(t, applied, "an autoscaled group: the autoscaler runs")
	require.Equal(t, "registry.k8s.io/autoscaling/cluster-autoscaler:v1.36.1", applied.Deployment.Spec.Template.Spec.Containers[0].Image)
	require.Contains(t, applied.Deployment.Spec.Template.Spec.Containers[0].Args, "--expander=priority")
	for _, r := range applied.Role.Rules {
		if len(r.ResourceNames) > 0 {
			require.Equal(t, []string{"web-1a2b3c4d-default-worker-q9z8m"}, r.ResourceNames, "only the autoscaled group")
		}
	}

	// The watch shows the applied Deployment: nothing to apply again.
	obs.Autoscaler = applied.Deployment.DeepCopy()
	delete(h.kube.autoscalers, id)
	h.c.followAutoscaler(ctx, cl, obs)
	require.Nil(t, h.kube.autoscalers[id], "unchanged: not applied again")

	// Its Deployment's conditions say why it is not running.
	obs.Autoscaler.Generation, obs.Autoscaler.Status.ObservedGeneration = 1, 1
	obs.Autoscaler.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
		Reason: "ProgressDeadlineExceeded", Message: "ReplicaSet has timed out progressing."}}
	note, _ = h.c.followAutoscaler(ctx, cl, obs)
	require.Contains(t, note, "the cluster autoscaler cannot run (ProgressDeadlineExceeded)")

	// An upgrade: the image follows the minor.
	capiCluster.Spec.Topology.Version = "v1.35.4"
	h.c.followAutoscaler(ctx, cl, obs)
	require.NotNil(t, h.kube.autoscalers[id])
	require.Equal(t, "registry.k8s.io/autoscaling/cluster-autoscaler:v1.35.2", h.kube.autoscalers[id].Deployment.Spec.Template.Spec.Containers[0].Image)

	// A tag for a minor the table does not know is the tenant's to give.
	capiCluster.Spec.Topology.Version = "v1.29.0"
	note, retry = h.c.followAutoscaler(ctx, cl, obs)
	require.Contains(t, note, "set autoscaler_tag")
	require.False(t, retry)
	capiCluster.Spec.Topology.Version = "v1.36.3"

	// No group autoscaled any more: gone.
	obs.MachineDeployments = []clusterv1.MachineDeployment{md("web-1a2b3c4d-fixed-x7k2p", false)}
	h.c.followAutoscaler(ctx, cl, obs)
	require.Nil(t, h.kube.autoscalers[id])

	// Being deleted: gone too.
	obs.Autoscaler = nil
	obs.MachineDeployments = []clusterv1.MachineDeployment{md("web-1a2b3c4d-default-worker-q9z8m", true)}
	h.c.followAutoscaler(ctx, cl, obs)
	require.NotNil(t, h.kube.autoscalers[id])
	now := metav1.NewTime(time.Now())
	capiCluster.DeletionTimestamp = &now
	obs.Autoscaler = h.kube.autoscalers[id].Deployment
	h.c.followAutoscaler(ctx, cl, obs)
	require.Nil(t, h.kube.autoscalers[id])

	// The management cluster refusing: a note and a retry, never an error that holds up the status sync.
	capiCluster.DeletionTimestamp = nil
	obs.Autoscaler = nil
	h.f.failNext("kube.ApplyAutoscaler", 1, errors.New("admission webhook denied the request"))
	note, retry = h.c.followAutoscaler(ctx, cl, obs)
	require.True(t, retry)
	require.Contains(t, note, "the cluster autoscaler could not be set up")
}

func TestAnAutoscalerNoteGoesWhenItsProblemDoes(t *testing.T) {
	stored := withNote("labels not implemented by magnum-capi-bridge (ignored): x", "the cluster autoscaler cannot run (FailedCreate): quota")
	require.Equal(t, "labels not implemented by magnum-capi-bridge (ignored): x; the cluster autoscaler cannot run (FailedCreate): quota", stored)
	require.Equal(t, "labels not implemented by magnum-capi-bridge (ignored): x", withoutAutoscalerNote(stored))
	require.Equal(t, "", withoutAutoscalerNote("the cluster autoscaler cannot run (FailedCreate): quota"))
	require.Equal(t, stored, withNote(withoutAutoscalerNote(stored), "the cluster autoscaler cannot run (FailedCreate): quota"), "written once")
}

type countingFlavors struct{ asked []string }

func (f *countingFlavors) FindFlavor(_ context.Context, _, _ []byte, _, ref string) (autoscaler.Flavor, error) {
	f.asked = append(f.asked, ref)
	if ref == "missing" {
		return autoscaler.Flavor{}, errors.New("nova: no flavor missing")
	}
	return autoscaler.Flavor{VCPUs: 4, RAMMiB: 8192, DiskGiB: 20}, nil
}

// TestCapacityComesFromEachGroupsFlavor: every autoscaled group gets its own flavor's size (and its
// own boot volume), the cluster's credential is read once, and a flavor Nova cannot give keeps
// what the live Cluster has.
func TestCapacityComesFromEachGroupsFlavor(t *testing.T) {
	h := newHarness(t)
	flavors := &countingFlavors{}
	h.c.opts.Flavors = flavors
	ctx := context.Background()
	cl := &magnum.Cluster{}
	cl.UUID.Set("bd71db63-28f3-4ac5-8e6e-d51a6470e5ff")
	cl.ProjectID.Set("0123abcd")
	cl.StackID.Set("web-bd71db63")
	in := templates.Input{Flavor: templates.FlavorInMemory, Namespace: "magnum-0123abcd",
		Template: templates.Template{UUID: "t", ImageID: "ubuntu-2404-kube-v1.36.3", FlavorID: "m1.medium", ExternalNetworkID: "public", FloatingIPEnabled: true},
		Cluster: templates.Cluster{UUID: cl.UUID.Or(""), Name: "web", ProjectID: "0123abcd", Labels: map[string]string{
			"auto_scaling_enabled": "true", "max_node_count": "5", "capi_infrastructure": "openstack", "boot_volume_size": "40"}},
		NodeGroups: []templates.NodeGroup{
			{UUID: "1", Name: "default-master", Role: "master", NodeCount: 1, IsDefault: true},
			{UUID: "2", Name: "default-worker", Role: "worker", NodeCount: 1, IsDefault: true},
			{UUID: "3", Name: "big", Role: "worker", NodeCount: 1, FlavorID: "m1.large", MaxNodeCount: ptr(3), Labels: map[string]string{"boot_volume_size": "100"}},
			{UUID: "4", Name: "gone", Role: "worker", NodeCount: 1, FlavorID: "missing", MaxNodeCount: ptr(3)},
			{UUID: "5", Name: "fixed", Role: "worker", NodeCount: 1},
		},
		DefaultKubernetesVersion: "v1.36.3"}
	capacityOf := func(r *templates.Rendered) map[string]map[string]string {
		mds, _, err := unstructured.NestedSlice(r.Cluster.Object, "spec", "topology", "workers", "machineDeployments")
		require.NoError(t, err)
		out := map[string]map[string]string{}
		for _, raw := range mds {
			name, _, _ := unstructured.NestedString(raw.(map[string]any), "name")
			a, _, _ := unstructured.NestedStringMap(raw.(map[string]any), "metadata", "annotations")
			out[name] = map[string]string{}
			for k, v := range a {
				if strings.HasPrefix(k, autoscaler.CapacityAnnotationPrefix) {
					out[name][k] = v
				}
			}
		}
		return out
	}
	rendered, err := templates.Render(in)
	require.NoError(t, err)
	require.NoError(t, h.c.annotateCapacity(ctx, cl, in, rendered))
	require.Empty(t, flavors.asked, "no cloud credential stored: Nova is not asked")

	h.kube.secrets[in.Namespace+"/"+templates.CloudConfigSecretName("web-bd71db63")] = map[string][]byte{cloudsYAMLKey: []byte("clouds: {}")}
	rendered, err = templates.Render(in)
	require.NoError(t, err)
	require.NoError(t, h.c.annotateCapacity(ctx, cl, in, rendered))
	require.ElementsMatch(t, []string{"m1.medium", "m1.large", "missing"}, flavors.asked)
	got := capacityOf(rendered)
	mdName := func(i int) string { return templates.MachineDeploymentName(in.NodeGroups[i]) }
	require.Equal(t, "40Gi", got[mdName(1)][autoscaler.AnnotationCapacityEphemeralDisk], "the cluster's boot volume")
	require.Equal(t, "100Gi", got[mdName(2)][autoscaler.AnnotationCapacityEphemeralDisk], "the group's own boot volume")
	require.Equal(t, "4", got[mdName(1)][autoscaler.AnnotationCapacityCPU])
	require.Empty(t, got[mdName(3)], "Nova failed and the live Cluster has nothing: nothing claimed")
	require.Empty(t, got[mdName(4)], "not autoscaled")
}
