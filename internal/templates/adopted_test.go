package templates_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates/templatestest"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates/topologysim"
)

// readLive reads testdata/adopt-live.yaml: a magnum-capi-helm cluster as the apiserver answers.
func readLive(t *testing.T) templates.LiveCluster {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "adopt-live.yaml"))
	require.NoError(t, err)
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	live := templates.LiveCluster{Driver: string(templates.DriverCAPIHelm)}
	var worker templates.LiveWorker
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			break
		}
		switch name := u.GetName(); {
		case u.GetKind() == "Cluster":
			live.Cluster = &clusterv1.Cluster{}
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, live.Cluster))
		case u.GetKind() == "OpenStackCluster":
			live.InfrastructureCluster = u
		case u.GetKind() == "KubeadmControlPlane":
			live.ControlPlane = u
		case strings.HasSuffix(name, "-control-plane") && u.GetKind() == "OpenStackMachineTemplate":
			live.ControlPlaneMachines = u
		case strings.HasSuffix(name, "-control-plane") && u.GetKind() == "MachineHealthCheck":
			live.ControlPlaneHealthCheck = u
		case u.GetKind() == "MachineDeployment":
			worker.MachineDeployment = u
		case u.GetKind() == "KubeadmConfigTemplate":
			worker.Bootstrap = u
		case u.GetKind() == "OpenStackMachineTemplate":
			worker.Infrastructure = u
		case u.GetKind() == "MachineHealthCheck":
			worker.HealthCheck = u
		}
	}
	worker.NodeGroupUUID = "22222222-2222-2222-2222-222222222222" // templatestest's default worker
	worker.MachineSets = []string{"k8s-demo-x2kq7mzpa4bt-default-worker-4wns6"}
	worker.Machines = []string{"k8s-demo-x2kq7mzpa4bt-default-worker-4wns6-742fv", "k8s-demo-x2kq7mzpa4bt-default-worker-4wns6-x2m6g"}
	live.Workers = []templates.LiveWorker{worker}
	return live
}

// adoptInput is templatestest's OpenStack cluster as the rows of the live one: its stack_id, and a
// second worker group created after the adoption.
func adoptInput() templates.Input {
	in := templatestest.BaseOpenStackInput()
	in.Cluster.AdoptedName = "k8s-demo-x2kq7mzpa4bt"
	in.Template.ImageID = "ubuntu-2404-kube-v1.35.2"
	return in
}

// Adoption copies the live objects into the cluster's own class, so the topology renders exactly
// what runs; the node groups made later get the bridge's worker class and patches.
func TestAdopt(t *testing.T) {
	live := readLive(t)
	r, err := templates.Render(adoptInput())
	require.NoError(t, err)
	labels, err := r.Adopt(live)
	require.NoError(t, err)
	templates.CheckGolden(t, "openstack-adopted", templates.GoldenYAML(t, r))
	owned := map[string]string{clusterv1.ClusterTopologyOwnedLabel: ""}
	topologyMember := map[string]string{clusterv1.ClusterTopologyOwnedLabel: "", clusterv1.ClusterTopologyMachineDeploymentNameLabel: "default-worker"}
	require.Equal(t, []templates.ObjectLabels{
		{APIVersion: templates.CAPOGroupVersion, Kind: "OpenStackCluster", Name: "k8s-demo-x2kq7mzpa4bt", Labels: owned},
		{APIVersion: templates.ControlPlaneGroupVersion, Kind: "KubeadmControlPlane", Name: "k8s-demo-x2kq7mzpa4bt-control-plane", Labels: owned},
		{APIVersion: templates.CAPOGroupVersion, Kind: "OpenStackMachineTemplate", Name: "k8s-demo-x2kq7mzpa4bt-control-plane", Labels: owned, Disown: true},
		{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineDeployment", Name: "k8s-demo-x2kq7mzpa4bt-default-worker", Labels: topologyMember},
		{APIVersion: templates.BootstrapGroupVersion, Kind: "KubeadmConfigTemplate", Name: "k8s-demo-x2kq7mzpa4bt-default-worker", Labels: owned},
		{APIVersion: templates.CAPOGroupVersion, Kind: "OpenStackMachineTemplate", Name: "k8s-demo-x2kq7mzpa4bt-default-worker", Labels: owned, Disown: true},
		{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineSet", Name: "k8s-demo-x2kq7mzpa4bt-default-worker-4wns6", Labels: topologyMember},
		{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: "k8s-demo-x2kq7mzpa4bt-default-worker-4wns6-742fv", Labels: topologyMember},
		{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: "k8s-demo-x2kq7mzpa4bt-default-worker-4wns6-x2m6g", Labels: topologyMember},
	}, labels, "Cluster API's topology controller takes over only objects labelled as its own; its MachineDeployment selector must match the machines")
	require.Equal(t, "k8s-demo-x2kq7mzpa4bt-adopted", r.ClassName)
	require.Equal(t, "v1.35.2", r.Version, "the control plane's version, not the template's")
	require.Empty(t, r.ServerGroups, "the copied machines name no server group")

	var c clusterv1.Cluster
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(r.Cluster.Object, &c))
	require.Equal(t, "adopted-default-worker", c.Spec.Topology.Workers.MachineDeployments[0].Class)
	require.Equal(t, live.Cluster.Spec.ClusterNetwork, c.Spec.ClusterNetwork)
	require.Contains(t, c.Annotations, clusterv1.ClusterTopologyUnsafeUpdateClassNameAnnotation)
	require.Equal(t, "magnum-capi-helm", c.Annotations[templates.AnnotationAdoptedFrom])

	// What Cluster API's topology controller derives (its patch engine applied) is what runs:
	// nothing for it to roll. The one change is the credential Secret, which CAPO allows.
	d, err := topologysim.Compute(context.Background(), r.ClassObjects, r.Cluster)
	require.NoError(t, err, "CAPI's patch engine refused the adopted rendering")
	spec := func(o *unstructured.Unstructured, path ...string) map[string]any {
		m, found, err := unstructured.NestedMap(o.Object, append([]string{"spec"}, path...)...)
		require.NoError(t, err)
		require.True(t, found, "%s %s: spec.%v", o.GetKind(), o.GetName(), path)
		return m
	}
	require.Equal(t, spec(live.ControlPlaneMachines, "template"), spec(d.ControlPlaneMachineTemplate, "template"))
	require.Equal(t, spec(live.ControlPlane, "kubeadmConfigSpec"), spec(d.ControlPlane, "kubeadmConfigSpec"))
	require.Equal(t, spec(live.ControlPlane, "rollout"), spec(d.ControlPlane, "rollout"))
	md := d.MachineDeployments["default-worker"]
	require.Equal(t, spec(live.Workers[0].Infrastructure, "template"), spec(md.InfrastructureMachineTemplate, "template"))
	require.Equal(t, spec(live.Workers[0].Bootstrap, "template"), spec(md.BootstrapTemplate, "template"))
	wantInfra := spec(live.InfrastructureCluster)
	delete(wantInfra, "controlPlaneEndpoint") // CAPO's to set
	wantInfra["identityRef"] = map[string]any{"name": "k8s-demo-x2kq7mzpa4bt-cloud-config", "cloudName": "openstack"}
	require.Equal(t, jsonOf(t, wantInfra), jsonOf(t, spec(d.InfrastructureCluster)))

	// A later operation keeps all of it (Keep), and a new node group uses the bridge's class.
	in := adoptInput()
	in.NodeGroups = append(in.NodeGroups, templates.NodeGroup{UUID: "33333333-3333-3333-3333-333333333333", Name: "gpu", Role: "worker", NodeCount: 1, FlavorID: "g1.large"})
	in.NodeGroups[1].NodeCount = 3
	next, err := templates.Render(in)
	require.NoError(t, err)
	require.NoError(t, next.Keep(&c))
	var kept clusterv1.Cluster
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(next.Cluster.Object, &kept))
	require.Equal(t, c.Spec.Topology.ClassRef, kept.Spec.Topology.ClassRef)
	require.Equal(t, "magnum-capi-helm", kept.Annotations[templates.AnnotationAdoptedFrom], "the mark stays")
	require.NotContains(t, kept.Annotations, clusterv1.ClusterTopologyUnsafeUpdateClassNameAnnotation, "needed once")
	mds := kept.Spec.Topology.Workers.MachineDeployments
	require.Len(t, mds, 2)
	require.Equal(t, "adopted-default-worker", mds[0].Class)
	require.Equal(t, int32(3), *mds[0].Replicas)
	require.Equal(t, templates.WorkerClass, mds[1].Class)
	require.Equal(t, []templates.ServerGroup{{Name: "k8s-demo-x2kq7mzpa4bt-gpu", Policy: "soft-anti-affinity"}}, next.ServerGroups,
		"only the new group gets a server group")

	// An upgrade keeps the class and changes the version and the image within it.
	up := adoptInput()
	up.Template.ImageID = "ubuntu-2404-kube-v1.36.3"
	upgraded, err := templates.Render(up)
	require.NoError(t, err)
	require.NoError(t, upgraded.KeepAdopted(&c))
	var u clusterv1.Cluster
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(upgraded.Cluster.Object, &u))
	require.Equal(t, c.Spec.Topology.ClassRef, u.Spec.Topology.ClassRef)
	require.Equal(t, "v1.36.3", u.Spec.Topology.Version)
	require.Equal(t, "adopted-default-worker", u.Spec.Topology.Workers.MachineDeployments[0].Class)
	require.Nil(t, upgraded.ClassObjects)
	for _, v := range u.Spec.Topology.Variables {
		if v.Name == templates.VarMachineImage {
			require.JSONEq(t, `{"filter":{"name":"ubuntu-2404-kube-v1.36.3"}}`, string(v.Value.Raw))
		}
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	return string(raw)
}

func TestAdoptRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func(*templates.LiveCluster)
		want   string
	}{
		"a topology already": {func(l *templates.LiveCluster) { l.Cluster.Spec.Topology.ClassRef.Name = "other" }, "already has a topology"},
		"a worker mid-upgrade": {func(l *templates.LiveCluster) {
			_ = unstructured.SetNestedField(l.Workers[0].MachineDeployment.Object, "v1.34.1", "spec", "template", "spec", "version")
		}, "adopt it once the upgrade has ended"},
		"an image by reference": {func(l *templates.LiveCluster) {
			_ = unstructured.SetNestedMap(l.ControlPlaneMachines.Object, map[string]any{"imageRef": map[string]any{"name": "x"}}, "spec", "template", "spec", "image")
		}, "only an id or a name filter"},
		"a node group the rows lack": {func(l *templates.LiveCluster) { l.Workers[0].NodeGroupUUID = "gone" }, "which the cluster's rows do not hold"},
	} {
		t.Run(name, func(t *testing.T) {
			live := readLive(t)
			tc.mutate(&live)
			r, err := templates.Render(adoptInput())
			require.NoError(t, err)
			_, err = r.Adopt(live)
			require.ErrorContains(t, err, tc.want)
		})
	}
}
