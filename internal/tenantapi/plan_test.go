package tenantapi

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/containerinfra/v1/clusters"
	"github.com/gophercloud/gophercloud/v2/openstack/containerinfra/v1/nodegroups"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/tenantapi/v1alpha1"
)

func object(mut ...func(*v1alpha1.MagnumCluster)) *v1alpha1.MagnumCluster {
	o := &v1alpha1.MagnumCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "magnum-p1", Generation: 3},
		Spec:       v1alpha1.MagnumClusterSpec{ClusterTemplate: "k8s", NodeCount: 2, CredentialsRef: v1alpha1.CredentialsRef{Name: "cred"}},
	}
	for _, m := range mut {
		m(o)
	}
	return o
}

func magnumCluster(status string, workers int, groups ...nodegroups.NodeGroup) Magnum {
	all := append([]nodegroups.NodeGroup{
		{Name: "default-master", Role: "master", IsDefault: true, NodeCount: 1, Status: status},
		{Name: "default-worker", Role: "worker", IsDefault: true, NodeCount: workers, Status: status},
	}, groups...)
	return Magnum{TemplateID: "t-1", NodeGroups: all,
		Cluster: &clusters.Cluster{UUID: "c-1", Name: "web", Status: status, ClusterTemplateID: "t-1", NodeCount: workers, MasterCount: 1}}
}

func ptr(v int32) *int32 { return &v }

var now = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

// requested is an object whose create was requested ago.
func requested(ago time.Duration) func(*v1alpha1.MagnumCluster) {
	return func(o *v1alpha1.MagnumCluster) {
		o.Status.Conditions = []metav1.Condition{{Type: ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonCreateRequested,
			LastTransitionTime: metav1.NewTime(now.Add(-ago))}}
	}
}

func TestDecide(t *testing.T) {
	deleting := func(o *v1alpha1.MagnumCluster) { o.DeletionTimestamp = &metav1.Time{} }
	extra := nodegroups.NodeGroup{Name: "gpu", Role: "worker", NodeCount: 1, Status: "CREATE_COMPLETE"}
	withGPU := func(o *v1alpha1.MagnumCluster) {
		o.Spec.NodeGroups = []v1alpha1.NodeGroupSpec{{Name: "gpu", NodeCount: 1}}
	}
	ownsGPU := func(o *v1alpha1.MagnumCluster) {
		o.Status.NodeGroups = []v1alpha1.NodeGroupStatus{{Name: "gpu", Owned: true}}
	}
	cases := []struct {
		name      string
		obj       *v1alpha1.MagnumCluster
		magnum    Magnum
		want      Action
		wantDrift []string
	}{
		{name: "no cluster: create", obj: object(), magnum: Magnum{TemplateID: "t-1"},
			want: Action{Kind: ActCreate, Why: "no cluster of this name in the project"}},
		{name: "deleted outside: not created again", obj: object(func(o *v1alpha1.MagnumCluster) { o.Status.UUID, o.Status.Status = "c-0", "CREATE_COMPLETE" }),
			magnum:    Magnum{TemplateID: "t-1"},
			wantDrift: []string{"cluster c-0 is gone from Magnum; delete the object, or apply it again under a new name, to create another"}},
		{name: "created, not yet in Magnum: wait", obj: object(func(o *v1alpha1.MagnumCluster) { o.Status.UUID = "c-0" }), magnum: Magnum{TemplateID: "t-1"}},
		{name: "create requested, answer lost: wait", obj: object(requested(time.Minute)), magnum: Magnum{TemplateID: "t-1"}},
		{name: "create requested long ago: again", obj: object(requested(CreateGrace + time.Second)), magnum: Magnum{TemplateID: "t-1"},
			want: Action{Kind: ActCreate, Why: "no cluster of this name in the project"}},
		{name: "in sync: nothing", obj: object(), magnum: magnumCluster("CREATE_COMPLETE", 2)},
		{name: "in progress: wait, drift reported", obj: object(), magnum: magnumCluster("UPDATE_IN_PROGRESS", 3),
			wantDrift: []string{"nodeCount: 3 in Magnum, 2 in the spec"}},
		{name: "failed: wait for the tenant", obj: object(), magnum: magnumCluster("UPDATE_FAILED", 3),
			wantDrift: []string{"nodeCount: 3 in Magnum, 2 in the spec"}},
		{name: "resized outside: resized back", obj: object(), magnum: magnumCluster("UPDATE_COMPLETE", 3),
			want:      Action{Kind: ActResize, NodeCount: 2, Why: "nodeCount: 3 in Magnum, 2 in the spec"},
			wantDrift: []string{"nodeCount: 3 in Magnum, 2 in the spec"}},
		{name: "template changed: upgrade first", obj: object(), magnum: func() Magnum { m := magnumCluster("CREATE_COMPLETE", 3); m.TemplateID = "t-2"; return m }(),
			want:      Action{Kind: ActUpgrade, Why: "clusterTemplate: t-1 in Magnum, k8s (t-2) in the spec"},
			wantDrift: []string{"clusterTemplate: t-1 in Magnum, k8s (t-2) in the spec", "nodeCount: 3 in Magnum, 2 in the spec"}},
		{name: "node group in the spec, not in Magnum: created", obj: object(withGPU), magnum: magnumCluster("CREATE_COMPLETE", 2),
			want:      Action{Kind: ActCreateNodeGroup, NodeGroup: "gpu", NodeCount: 1, Why: "nodeGroups[gpu]: not in Magnum"},
			wantDrift: []string{"nodeGroups[gpu]: not in Magnum"}},
		{name: "node group resized", obj: object(func(o *v1alpha1.MagnumCluster) {
			o.Spec.NodeGroups = []v1alpha1.NodeGroupSpec{{Name: "gpu", NodeCount: 3}}
		}), magnum: magnumCluster("CREATE_COMPLETE", 2, extra),
			want:      Action{Kind: ActResize, NodeGroup: "gpu", NodeCount: 3, Why: "nodeGroups[gpu].nodeCount: 1 in Magnum, 3 in the spec"},
			wantDrift: []string{"nodeGroups[gpu].nodeCount: 1 in Magnum, 3 in the spec"}},
		{name: "node group bounds", obj: object(func(o *v1alpha1.MagnumCluster) {
			o.Spec.NodeGroups = []v1alpha1.NodeGroupSpec{{Name: "gpu", NodeCount: 1, MinNodeCount: ptr(1), MaxNodeCount: ptr(4)}}
		}), magnum: magnumCluster("CREATE_COMPLETE", 2, extra),
			want: Action{Kind: ActUpdateNodeGroup, NodeGroup: "gpu", Min: new(1), Max: new(4),
				Why: "nodeGroups[gpu].minNodeCount: 0 in Magnum, 1 in the spec; nodeGroups[gpu].maxNodeCount: none in Magnum, 4 in the spec"},
			wantDrift: []string{"nodeGroups[gpu].minNodeCount: 0 in Magnum, 1 in the spec", "nodeGroups[gpu].maxNodeCount: none in Magnum, 4 in the spec"}},
		{name: "owned node group removed from the spec: deleted", obj: object(ownsGPU), magnum: magnumCluster("UPDATE_COMPLETE", 2, extra),
			want:      Action{Kind: ActDeleteNodeGroup, NodeGroup: "gpu", Why: "nodeGroups[gpu]: removed from the spec"},
			wantDrift: []string{"nodeGroups[gpu]: removed from the spec"}},
		{name: "foreign node group: left alone", obj: object(), magnum: magnumCluster("UPDATE_COMPLETE", 2, extra),
			wantDrift: []string{"nodeGroups[gpu]: in Magnum, not in the spec; left alone (list it to manage it)"}},
		{name: "node group busy: wait", obj: object(withGPU), magnum: magnumCluster("UPDATE_COMPLETE", 3,
			nodegroups.NodeGroup{Name: "gpu", NodeCount: 1, Status: "CREATE_IN_PROGRESS"}),
			wantDrift: []string{"nodeCount: 3 in Magnum, 2 in the spec"}},
		{name: "deleting: delete", obj: object(deleting), magnum: magnumCluster("CREATE_COMPLETE", 2),
			want: Action{Kind: ActDelete, Why: "the object is being deleted"}},
		{name: "deleting, delete running: wait", obj: object(deleting), magnum: magnumCluster("DELETE_IN_PROGRESS", 2)},
		{name: "deleting, gone: forget", obj: object(deleting), magnum: Magnum{}, want: Action{Kind: ActForget}},
		{name: "deleting while a create may still show up: wait", obj: object(deleting, requested(time.Minute)), magnum: Magnum{}},
		{name: "deleting, the create never showed: forget", obj: object(deleting, requested(CreateGrace+time.Second)), magnum: Magnum{},
			want: Action{Kind: ActForget}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, drift := Decide(tc.obj, tc.magnum, now)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.wantDrift, drift)
		})
	}
}

func TestStatusOf(t *testing.T) {
	ready := func(st v1alpha1.MagnumClusterStatus) *metav1.Condition {
		return meta.FindStatusCondition(st.Conditions, ConditionReady)
	}

	m := magnumCluster("CREATE_COMPLETE", 2, nodegroups.NodeGroup{Name: "gpu", UUID: "g-1", Role: "worker", NodeCount: 1, Status: "CREATE_COMPLETE"})
	m.Cluster.APIAddress, m.Cluster.COEVersion, m.Cluster.HealthStatus = "https://10.0.0.1:6443", "v1.33.1", "HEALTHY"
	obj := object(func(o *v1alpha1.MagnumCluster) {
		o.Spec.NodeGroups = []v1alpha1.NodeGroupSpec{{Name: "gpu", NodeCount: 1}}
	})
	st := StatusOf(obj, m, nil)
	assert.Equal(t, "c-1", st.UUID)
	assert.Equal(t, int64(3), st.ObservedGeneration)
	assert.Equal(t, int32(2), st.NodeCount)
	assert.Equal(t, "v1.33.1", st.COEVersion)
	require.Len(t, st.NodeGroups, 3)
	assert.Equal(t, v1alpha1.NodeGroupStatus{Name: "gpu", UUID: "g-1", Role: "worker", NodeCount: 1, Status: "CREATE_COMPLETE", Owned: true}, st.NodeGroups[2])
	assert.False(t, st.NodeGroups[1].Owned, "the default workers belong to the cluster")
	c := ready(st)
	require.NotNil(t, c)
	assert.Equal(t, metav1.ConditionTrue, c.Status)
	assert.Equal(t, "CREATE_COMPLETE", c.Reason)
	assert.Equal(t, int64(3), c.ObservedGeneration)

	drifting := StatusOf(obj, m, []string{"nodeCount: 3 in Magnum, 2 in the spec"})
	assert.Equal(t, metav1.ConditionFalse, ready(drifting).Status)
	assert.Equal(t, ReasonDrift, ready(drifting).Reason)
	assert.Contains(t, ready(drifting).Message, "nodeCount: 3 in Magnum, 2 in the spec")

	foreign := StatusOf(obj, m, []string{"nodeGroups[x]: in Magnum, not in the spec; left alone (list it to manage it)"})
	assert.Equal(t, metav1.ConditionTrue, ready(foreign).Status, "a node group the object does not own keeps it Ready")

	failed := magnumCluster("CREATE_FAILED", 2)
	failed.Cluster.StatusReason = "Nova: quota exceeded"
	c = ready(StatusOf(object(), failed, nil))
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, "CREATE_FAILED", c.Reason)
	assert.Equal(t, "Nova: quota exceeded", c.Message)

	c = ready(KnownStatus(object(), ReasonCredentialRejected, "keystone: authenticate: 401 Unauthorized"))
	assert.Equal(t, ReasonCredentialRejected, c.Reason)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	known := object(func(o *v1alpha1.MagnumCluster) { o.Status = st })
	rejected := KnownStatus(known, ReasonCredentialRejected, "revoked")
	assert.Equal(t, "c-1", rejected.UUID, "what was last known of the cluster stays")
	assert.Equal(t, int32(2), rejected.NodeCount)
	assert.Equal(t, ReasonCredentialRejected, ready(rejected).Reason)
	c = ready(StatusOf(object(), Magnum{}, nil))
	assert.Equal(t, ReasonCreating, c.Reason)
	c = ready(StatusOf(object(requested(time.Second)), Magnum{}, nil))
	assert.Equal(t, ReasonCreateRequested, c.Reason, "kept until Magnum shows the cluster")
	c = ready(StatusOf(object(requested(time.Second), func(o *v1alpha1.MagnumCluster) { o.DeletionTimestamp = &metav1.Time{} }), Magnum{}, nil))
	assert.Equal(t, ReasonCreateRequested, c.Reason, "kept through a delete, which waits for it")
	gone := object(func(o *v1alpha1.MagnumCluster) { o.Status.UUID, o.Status.Status = "c-0", "CREATE_COMPLETE" })
	_, drift := Decide(gone, Magnum{}, now)
	c = ready(StatusOf(gone, Magnum{}, drift))
	assert.Equal(t, ReasonGone, c.Reason)
	assert.Contains(t, c.Message, "cluster c-0 is gone from Magnum")

	// The transition time stays while the condition does not change.
	before := StatusOf(obj, m, nil)
	obj.Status = before
	again := StatusOf(obj, m, nil)
	assert.Equal(t, ready(before).LastTransitionTime, ready(again).LastTransitionTime)
}

func TestCredentialFromCloudsYAML(t *testing.T) {
	yaml := []byte(`clouds:
  openstack:
    auth_type: v3applicationcredential
    auth:
      auth_url: https://evil.example/v3
      application_credential_id: abc
      application_credential_secret: s3cret
    region_name: RegionOne
`)
	c, err := CredentialFromCloudsYAML(yaml, "openstack")
	require.NoError(t, err)
	assert.Equal(t, Credential{ID: "abc", Secret: "s3cret", Region: "RegionOne"}, c)
	assert.NotContains(t, c.String(), "s3cret")
	assert.NotContains(t, fmt.Sprintf("%v %+v %#v %s", c, c, c, c), "s3cret")

	_, err = CredentialFromCloudsYAML(yaml, "other")
	assert.EqualError(t, err, `its clouds.yaml has no cloud "other"`)
	_, err = CredentialFromCloudsYAML([]byte("clouds: {openstack: {auth: {username: demo}}}"), "openstack")
	assert.ErrorContains(t, err, "no application_credential_id")
	_, err = CredentialFromCloudsYAML([]byte("\t: ["), "openstack")
	assert.ErrorContains(t, err, "does not parse")
}

func TestReasonOf(t *testing.T) {
	assert.Equal(t, ReasonCredentialRejected, reasonOf(&AuthError{Message: "401"}))
	assert.Equal(t, ReasonCredentialMissing, reasonOf(fmt.Errorf("%w: no Secret", errCredential)))
	assert.Equal(t, ReasonMagnumRefused, reasonOf(fmt.Errorf("create: %w", &RefusedError{Status: 403, Message: "quota"})))
	assert.Equal(t, ReasonMagnumUnreachable, reasonOf(errors.New("connection refused")))
}
