package capi

import (
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/addons"
)

// A create whose add-on set CAPI has not applied is not complete; at the timeout the reason names
// the set and CAPI's message.
func TestCreateWaitsForItsAddons(t *testing.T) {
	early := time.Date(2026, 1, 1, 0, 5, 0, 0, time.UTC)
	late := time.Date(2026, 1, 1, 1, 0, 1, 0, time.UTC)
	converged := func() Observation {
		c := cluster(cond(clusterv1.AvailableCondition, metav1.ConditionTrue, ""))
		c.Status.Workers.ReadyReplicas, c.Status.Workers.AvailableReplicas = ptr.To[int32](2), ptr.To[int32](2)
		c.Name = "demo-0a1b2c3d"
		c.Annotations = map[string]string{addons.AnnotationAddonSet: "demo-0a1b2c3d-addons"}
		return Observation{Cluster: c, MachineDeployments: []clusterv1.MachineDeployment{md(2, 2)}}
	}
	binding := func(set string, applied ...bool) *addonsv1.ClusterResourceSetBinding {
		b := &addonsv1.ClusterResourceSetBinding{}
		rs := addonsv1.ResourceSetBinding{ClusterResourceSetName: set}
		for _, a := range applied {
			rs.Resources = append(rs.Resources, addonsv1.ResourceBinding{ResourceRef: addonsv1.ResourceRef{Kind: "Secret", Name: set}, Applied: ptr.To(a)})
		}
		b.Spec.Bindings = []addonsv1.ResourceSetBinding{rs}
		return b
	}
	failedSet := &addonsv1.ClusterResourceSet{}
	failedSet.Status.Conditions = []metav1.Condition{cond(addonsv1.ClusterResourceSetResourcesAppliedCondition, metav1.ConditionFalse,
		"failed to create object apps/v1, Kind=Deployment kube-system/metrics-server: boom")}

	for _, tc := range []struct {
		name       string
		obs        func(Observation) Observation
		now        time.Time
		wantStatus magnum.ClusterStatus
		wantReason string
	}{
		{"no binding yet", func(o Observation) Observation { return o }, early, magnum.StatusCreateInProgress, "add-ons (ClusterResourceSet demo-0a1b2c3d-addons) not applied yet"},
		{"binding of another set", func(o Observation) Observation { o.AddonBinding = binding("other", true); return o }, early, magnum.StatusCreateInProgress, "not applied yet"},
		{"not applied", func(o Observation) Observation { o.AddonBinding = binding("demo-0a1b2c3d-addons", false); return o }, early, magnum.StatusCreateInProgress, "not applied yet"},
		{"applied", func(o Observation) Observation { o.AddonBinding = binding("demo-0a1b2c3d-addons", true); return o }, early, magnum.StatusCreateComplete, ""},
		{"failed, at the timeout", func(o Observation) Observation {
			o.AddonBinding, o.AddonSet = binding("demo-0a1b2c3d-addons", false), failedSet
			return o
		}, late, magnum.StatusCreateFailed, "add-ons (ClusterResourceSet demo-0a1b2c3d-addons) not applied: failed to create object apps/v1, Kind=Deployment kube-system/metrics-server: boom"},
		{"a cluster without an add-on set completes as before", func(o Observation) Observation {
			o.Cluster.Annotations = nil
			return o
		}, early, magnum.StatusCreateComplete, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(current(magnum.StatusCreateInProgress), tc.obs(converged()), tc.now)
			require.Equal(t, tc.wantStatus, d.Status)
			require.Contains(t, d.StatusReason, tc.wantReason)
		})
	}
}
