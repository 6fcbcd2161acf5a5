package autoscaler

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func TestImage(t *testing.T) {
	cases := []struct {
		name, version, prefix, tag, want, err string
	}{
		{name: "the release of the minor", version: "v1.36.3", want: "registry.k8s.io/autoscaling/cluster-autoscaler:v1.36.1"},
		{name: "the oldest minor", version: "v1.30.0", want: "registry.k8s.io/autoscaling/cluster-autoscaler:v1.30.7"},
		{name: "a mirror", version: "v1.35.4", prefix: "mirror.example:5000/magnum/", want: "mirror.example:5000/magnum/cluster-autoscaler:v1.35.2"},
		{name: "autoscaler_tag wins", version: "v1.35.4", tag: "v1.35.0", want: "registry.k8s.io/autoscaling/cluster-autoscaler:v1.35.0"},
		{name: "autoscaler_tag for a minor the table does not know", version: "v1.40.0", tag: "v1.40.1", want: "registry.k8s.io/autoscaling/cluster-autoscaler:v1.40.1"},
		{name: "a minor the table does not know", version: "v1.29.9", err: "no cluster-autoscaler release is known for Kubernetes v1.29.9 (known: v1.30 to v1.36); set autoscaler_tag"},
		{name: "not a version", version: "latest", err: `not a Kubernetes version: "latest"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Image(tc.version, tc.prefix, tc.tag)
			if tc.err != "" {
				require.EqualError(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	require.Len(t, Releases(), 7)
	require.Equal(t, "v1.36.1", Releases()["v1.36"])
}

func TestSettingsValidate(t *testing.T) {
	require.NoError(t, DefaultSettings.Validate())
	bad := DefaultSettings
	bad.Expanders = []string{"least-waste", "cheapest"}
	require.ErrorContains(t, bad.Validate(), `expander "cheapest": want one of least-waste, random`)
	bad = DefaultSettings
	bad.ScaleDownUtilizationThreshold = 1.5
	require.ErrorContains(t, bad.Validate(), "utilization threshold 1.5")
	bad = DefaultSettings
	bad.ScaleDownUnneededTime = -time.Minute
	require.ErrorContains(t, bad.Validate(), "must not be negative")
	bad.Expanders = nil
	require.ErrorContains(t, bad.Validate(), "at least one")
}

func TestCapacity(t *testing.T) {
	cases := []struct {
		name   string
		flavor Flavor
		group  Group
		want   map[string]string
		err    string
	}{
		{name: "a flavor's vCPUs, RAM and disk", flavor: Flavor{VCPUs: 4, RAMMiB: 8192, DiskGiB: 40},
			want: map[string]string{AnnotationCapacityCPU: "4", AnnotationCapacityMemory: "8192Mi", AnnotationCapacityEphemeralDisk: "40Gi"}},
		{name: "booted from a volume: its size is the disk", flavor: Flavor{VCPUs: 2, RAMMiB: 4096}, group: Group{RootVolumeGiB: 50},
			want: map[string]string{AnnotationCapacityCPU: "2", AnnotationCapacityMemory: "4096Mi", AnnotationCapacityEphemeralDisk: "50Gi"}},
		{name: "GPUs, virtual and passed through", flavor: Flavor{VCPUs: 8, RAMMiB: 1024, DiskGiB: 10,
			ExtraSpecs: map[string]string{"resources:VGPU": "1", "pci_passthrough:alias": "a100:2,t4"}},
			want: map[string]string{AnnotationCapacityCPU: "8", AnnotationCapacityMemory: "1024Mi", AnnotationCapacityEphemeralDisk: "10Gi",
				AnnotationCapacityGPUCount: "4", AnnotationCapacityGPUType: GPUType}},
		{name: "the group's node labels and taints", flavor: Flavor{VCPUs: 1},
			group: Group{NodeLabels: map[string]string{"tier": "batch", "disk": "ssd"},
				Taints: []templates.Taint{{Key: "dedicated", Value: "batch", Effect: "NoSchedule"}, {Key: "gpu", Effect: "NoExecute"}}},
			want: map[string]string{AnnotationCapacityCPU: "1", AnnotationCapacityLabels: "disk=ssd,tier=batch",
				AnnotationCapacityTaints: "dedicated=batch:NoSchedule,gpu=:NoExecute"}},
		{name: "a malformed GPU spec", flavor: Flavor{ExtraSpecs: map[string]string{"resources:VGPU": "two"}},
			err: `flavor extra spec resources:VGPU="two": want a count`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Capacity(tc.flavor, tc.group)
			if tc.err != "" {
				require.EqualError(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func input() Input {
	return Input{Namespace: "magnum-0123abcd", Cluster: "web-1a2b3c4d", ClusterUUID: "1a2b3c4d-0000-4000-8000-000000000001",
		ProjectID: "0123abcd", KubernetesVersion: "v1.36.3", MachineDeployments: []string{"web-1a2b3c4d-extra-x7k2p", "web-1a2b3c4d-default-worker-q9z8m"},
		Settings: DefaultSettings}
}

// TestRoleConfinesTheAutoscalerToItsCluster: writes name the cluster's MachineDeployments only, and
// no rule reaches Secrets; without MachineDeployments there is no write rule at all (an empty
// resourceNames would mean all of them).
func TestRoleConfinesTheAutoscalerToItsCluster(t *testing.T) {
	o, err := Render(input())
	require.NoError(t, err)
	var writes []rbacv1.PolicyRule
	for _, r := range o.Role.Rules {
		require.NotContains(t, r.Resources, "secrets")
		require.NotContains(t, r.Verbs, "*")
		if slices.Contains(r.Resources, "machinedeployments") && slices.Contains(r.Verbs, "patch") {
			writes = append(writes, r)
		}
	}
	require.Len(t, writes, 1)
	require.Equal(t, []string{"web-1a2b3c4d-default-worker-q9z8m", "web-1a2b3c4d-extra-x7k2p"}, writes[0].ResourceNames)
	require.Contains(t, writes[0].Resources, "machinedeployments/scale")

	in := input()
	in.MachineDeployments = nil
	o, err = Render(in)
	require.NoError(t, err)
	for _, r := range o.Role.Rules {
		if slices.Contains(r.Resources, "machinedeployments") {
			require.Equal(t, []string{"get", "list", "watch"}, r.Verbs, "no MachineDeployment to write yet")
		}
	}
}

func TestRenderRefuses(t *testing.T) {
	in := input()
	in.Namespace, in.Settings.Expanders = "", []string{"cheapest"}
	_, err := Render(in)
	require.ErrorContains(t, err, "the namespace is required")
	require.ErrorContains(t, err, `expander "cheapest"`)
	in = input()
	in.KubernetesVersion = "v1.28.0"
	_, err = Render(in)
	require.ErrorContains(t, err, "set autoscaler_tag")
}

// TestGolden pins the whole rendering (go test ./internal/autoscaler -update rewrites it).
func TestGolden(t *testing.T) {
	o, err := Render(input())
	require.NoError(t, err)
	var buf bytes.Buffer
	for _, obj := range []any{o.ServiceAccount, o.Role, o.RoleBinding, o.Deployment} {
		b, err := yaml.Marshal(obj)
		require.NoError(t, err)
		buf.WriteString("---\n")
		buf.Write(b)
	}
	path := filepath.Join("testdata", "autoscaler.golden.yaml")
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "go test ./internal/autoscaler -update writes it")
	require.Equal(t, string(want), buf.String())
}

func TestSettingsFromLabels(t *testing.T) {
	s, err := SettingsFromLabels(map[string]string{"auto_scaling_enabled": "true"})
	require.NoError(t, err)
	require.Equal(t, DefaultSettings, s, "no autoscaler label: the defaults")

	s, err = SettingsFromLabels(map[string]string{
		templates.LabelAutoscalerExpander: "priority, least-waste", templates.LabelAutoscalerScaleDownEnabled: "false",
		templates.LabelAutoscalerScaleDownDelayAfterAdd: "3m", templates.LabelAutoscalerScaleDownUnneededTime: "90s",
		templates.LabelAutoscalerScaleDownUtilization: "65",
	})
	require.NoError(t, err)
	require.Equal(t, Settings{Expanders: []string{"priority", "least-waste"}, ScaleDownDisabled: true,
		ScaleDownDelayAfterAdd: 3 * time.Minute, ScaleDownUnneededTime: 90 * time.Second, ScaleDownUtilizationThreshold: 0.65}, s)
	require.Equal(t, []string{"least-waste", "random"}, DefaultSettings.Expanders, "the defaults are not changed")

	for label, v := range map[string]string{
		templates.LabelAutoscalerExpander:              "cheapest",
		templates.LabelAutoscalerScaleDownEnabled:      "maybe",
		templates.LabelAutoscalerScaleDownUnneededTime: "-1m",
		templates.LabelAutoscalerScaleDownUtilization:  "0",
	} {
		_, err := SettingsFromLabels(map[string]string{label: v})
		require.Error(t, err, label)
		if label != templates.LabelAutoscalerExpander {
			var le *templates.LabelError
			require.ErrorAs(t, err, &le, label)
			require.Equal(t, label, le.Label)
		}
	}
	// The registry refuses the same values, naming the label, before anything is applied.
	_, err = templates.ValidateLabels(templates.FlavorInMemory, map[string]string{templates.LabelAutoscalerExpander: "least-waste,cheapest"})
	require.ErrorContains(t, err, `"cheapest" is not one of least-waste, random`)
}

func TestProblem(t *testing.T) {
	dep := func(gen, observed int64, conds ...appsv1.DeploymentCondition) *appsv1.Deployment {
		d := &appsv1.Deployment{}
		d.Generation, d.Status.ObservedGeneration, d.Status.Conditions = gen, observed, conds
		return d
	}
	quota := appsv1.DeploymentCondition{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate",
		Message: `pods "web-autoscaler-5d8f-x" is forbidden: exceeded quota: magnum-project-pods`}
	stalled := appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded",
		Message: `ReplicaSet "web-autoscaler-5d8f" has timed out progressing.`}
	available := appsv1.DeploymentCondition{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}
	for name, tc := range map[string]struct {
		d    *appsv1.Deployment
		want string
	}{
		"none":              {nil, ""},
		"running":           {dep(1, 1, available), ""},
		"a Pod refused":     {dep(2, 2, stalled, quota), `the cluster autoscaler cannot run (FailedCreate): pods "web-autoscaler-5d8f-x" is forbidden: exceeded quota: magnum-project-pods`},
		"never ready":       {dep(1, 1, stalled), `the cluster autoscaler cannot run (ProgressDeadlineExceeded): ReplicaSet "web-autoscaler-5d8f" has timed out progressing`},
		"an earlier spec's": {dep(3, 2, stalled), ""},
	} {
		t.Run(name, func(t *testing.T) { require.Equal(t, tc.want, Problem(tc.d)) })
	}
}

// TestDigestFollowsWhatMatters: the Deployment's digest changes with the image and the
// MachineDeployments, not with their order.
func TestDigestFollowsWhatMatters(t *testing.T) {
	digest := func(in Input) string {
		o, err := Render(in)
		require.NoError(t, err)
		return o.Deployment.Annotations[AnnotationRendered]
	}
	base := digest(input())
	in := input()
	slices.Reverse(in.MachineDeployments)
	require.Equal(t, base, digest(in))
	in.KubernetesVersion = "v1.35.4"
	require.NotEqual(t, base, digest(in), "the image follows the minor")
	in = input()
	in.MachineDeployments = in.MachineDeployments[:1]
	require.NotEqual(t, base, digest(in))
}

// TestEveryAutoscalerLabelHasAnEffect: each label the registry says this package implements
// changes the autoscaler's Deployment.
func TestEveryAutoscalerLabelHasAnEffect(t *testing.T) {
	samples := map[string]string{
		templates.LabelAutoscalerTag: "v1.36.0", templates.LabelAutoscalerExpander: "priority",
		templates.LabelAutoscalerScaleDownEnabled: "false", templates.LabelAutoscalerScaleDownDelayAfterAdd: "1m",
		templates.LabelAutoscalerScaleDownUnneededTime: "2m", templates.LabelAutoscalerScaleDownUtilization: "70",
	}
	base, err := Render(input())
	require.NoError(t, err)
	for _, spec := range templates.Registry {
		if !spec.Autoscaler {
			continue
		}
		t.Run(spec.Name, func(t *testing.T) {
			v, ok := samples[spec.Name]
			require.True(t, ok, "no sample value for autoscaler label %s", spec.Name)
			labels := map[string]string{spec.Name: v}
			_, err := templates.ValidateLabels(templates.FlavorInMemory, labels)
			require.NoError(t, err)
			in := input()
			in.Tag = labels[templates.LabelAutoscalerTag]
			in.Settings, err = SettingsFromLabels(labels)
			require.NoError(t, err)
			changed, err := Render(in)
			require.NoError(t, err)
			require.NotEqual(t, base.Deployment.Spec, changed.Deployment.Spec, "label %s=%s changes nothing", spec.Name, v)
		})
	}
}
