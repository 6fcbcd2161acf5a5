// Package autoscaler renders the cluster-autoscaler of one workload cluster. It runs in the
// management cluster, in the cluster's project namespace next to its Cluster API objects (the
// workload cluster's kubeconfig Secret is there to be mounted), with the clusterapi provider: it
// reads the cluster's Cluster API objects and changes the replicas of that cluster's
// MachineDeployments, and nothing else — its Role names those MachineDeployments and grants no
// Secret. The rendering is a pure function of its inputs, tested with tables and a golden file.
package autoscaler

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// DefaultRepository is where the autoscaler's image comes from unless container_infra_prefix
// names a mirror.
const DefaultRepository = "registry.k8s.io/autoscaling"

// imageName is the image's name under its repository (and under container_infra_prefix).
const imageName = "cluster-autoscaler"

// releases maps a Kubernetes 1.x minor to the newest cluster-autoscaler release for it: the
// autoscaler is released per Kubernetes minor and supports the workload clusters of that minor.
var releases = map[int]string{
	30: "v1.30.7", 31: "v1.31.5", 32: "v1.32.7", 33: "v1.33.6", 34: "v1.34.5", 35: "v1.35.2", 36: "v1.36.1",
}

// Releases is the version table (Kubernetes minor → autoscaler release), for documents and checks.
func Releases() map[string]string {
	out := make(map[string]string, len(releases))
	for minor, tag := range releases {
		out[fmt.Sprintf("v1.%d", minor)] = tag
	}
	return out
}

// Image is the autoscaler image for a cluster of the given Kubernetes version ("v1.36.3"): the
// release of its minor, or tag (autoscaler_tag) when set, under prefix (container_infra_prefix)
// when set. A minor outside the table is refused: an autoscaler of another minor may mis-read the
// cluster's scheduler and scale wrongly.
func Image(kubernetesVersion, prefix, tag string) (string, error) {
	repo := DefaultRepository
	if p := strings.TrimSpace(prefix); p != "" {
		repo = strings.TrimSuffix(p, "/")
	}
	if tag = strings.TrimSpace(tag); tag != "" {
		return repo + "/" + imageName + ":" + tag, nil
	}
	minor, err := minorOf(kubernetesVersion)
	if err != nil {
		return "", err
	}
	release, ok := releases[minor]
	if !ok {
		known := slices.Sorted(maps.Keys(releases))
		return "", fmt.Errorf("no cluster-autoscaler release is known for Kubernetes %s (known: v1.%d to v1.%d); set autoscaler_tag",
			kubernetesVersion, known[0], known[len(known)-1])
	}
	return repo + "/" + imageName + ":" + release, nil
}

func minorOf(kubernetesVersion string) (int, error) {
	v, err := templates.ParseVersion(kubernetesVersion)
	if err != nil {
		return 0, err
	}
	if v.Major() != 1 {
		return 0, fmt.Errorf("no cluster-autoscaler release is known for Kubernetes %s", kubernetesVersion)
	}
	return int(v.Minor()), nil
}

// Expanders the autoscaler accepts (--expander); several are tried in the order given.
var Expanders = templates.AutoscalerExpanders

// Settings are how the autoscaler scales, per cluster.
type Settings struct {
	// Expanders choose the node group to grow (default least-waste, then random to break ties).
	Expanders []string
	// ScaleDown off keeps every node the autoscaler added (default on).
	ScaleDownDisabled bool
	// ScaleDownDelayAfterAdd is how long after a scale-up scale-down waits (default 10m).
	ScaleDownDelayAfterAdd time.Duration
	// ScaleDownUnneededTime is how long a node must be unneeded before it goes (default 10m).
	ScaleDownUnneededTime time.Duration
	// ScaleDownUtilizationThreshold: below this share of requested over allocatable a node is
	// unneeded (default 0.5).
	ScaleDownUtilizationThreshold float64
}

// DefaultSettings are the autoscaler's own defaults, least-waste first as both peers configure it.
var DefaultSettings = Settings{
	Expanders:                     []string{"least-waste", "random"},
	ScaleDownDelayAfterAdd:        10 * time.Minute,
	ScaleDownUnneededTime:         10 * time.Minute,
	ScaleDownUtilizationThreshold: 0.5,
}

// SettingsFromLabels reads the autoscaler's settings from a cluster's labels (autoscaler_expander
// and the autoscaler_scale_down_* labels), the defaults where one is absent. The registry has
// validated the labels already; a value it would refuse is refused here too, naming the label.
func SettingsFromLabels(labels map[string]string) (Settings, error) {
	s := DefaultSettings
	s.Expanders = slices.Clone(s.Expanders)
	bad := func(label, v, want string) error {
		return &templates.LabelError{Label: label, Value: v, Reason: want}
	}
	if v, ok := labels[templates.LabelAutoscalerExpander]; ok {
		s.Expanders = nil
		for _, e := range strings.Split(v, ",") {
			if e = strings.TrimSpace(e); e != "" {
				s.Expanders = append(s.Expanders, e)
			}
		}
	}
	if v, ok := labels[templates.LabelAutoscalerScaleDownEnabled]; ok {
		on, err := templates.ParseBool(v)
		if err != nil {
			return Settings{}, bad(templates.LabelAutoscalerScaleDownEnabled, v, "want true or false")
		}
		s.ScaleDownDisabled = !on
	}
	for label, field := range map[string]*time.Duration{
		templates.LabelAutoscalerScaleDownDelayAfterAdd: &s.ScaleDownDelayAfterAdd,
		templates.LabelAutoscalerScaleDownUnneededTime:  &s.ScaleDownUnneededTime,
	} {
		if v, ok := labels[label]; ok {
			d, err := time.ParseDuration(strings.TrimSpace(v))
			if err != nil || d < 0 {
				return Settings{}, bad(label, v, "want a duration like 10s or 5m")
			}
			*field = d
		}
	}
	if v, ok := labels[templates.LabelAutoscalerScaleDownUtilization]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 || n > 100 {
			return Settings{}, bad(templates.LabelAutoscalerScaleDownUtilization, v, "want a whole number of percent from 1 to 100")
		}
		s.ScaleDownUtilizationThreshold = float64(n) / 100
	}
	if err := s.Validate(); err != nil {
		return Settings{}, err
	}
	return s, nil
}

// Validate refuses settings the autoscaler would refuse at start, naming the setting.
func (s Settings) Validate() error {
	var errs []error
	if len(s.Expanders) == 0 {
		errs = append(errs, errors.New("expander: at least one is needed"))
	}
	for _, e := range s.Expanders {
		if !slices.Contains(Expanders, e) {
			errs = append(errs, fmt.Errorf("expander %q: want one of %s", e, strings.Join(Expanders, ", ")))
		}
	}
	if s.ScaleDownDelayAfterAdd < 0 || s.ScaleDownUnneededTime < 0 {
		errs = append(errs, errors.New("scale-down delays must not be negative"))
	}
	if s.ScaleDownUtilizationThreshold <= 0 || s.ScaleDownUtilizationThreshold > 1 {
		errs = append(errs, fmt.Errorf("scale-down utilization threshold %g: want more than 0 and at most 1", s.ScaleDownUtilizationThreshold))
	}
	return errors.Join(errs...)
}

// Input is everything the autoscaler of one cluster depends on.
type Input struct {
	// Namespace is the cluster's project namespace, Cluster its Cluster API name there.
	Namespace string
	Cluster   string
	// ClusterUUID and ProjectID label the objects as the cluster's (deleted with it by label).
	ClusterUUID string
	ProjectID   string
	// KubernetesVersion is the workload cluster's version: the image follows its minor.
	KubernetesVersion string
	// Prefix is container_infra_prefix, Tag autoscaler_tag (both may be empty).
	Prefix, Tag string
	// MachineDeployments are the names of the cluster's autoscaled MachineDeployments: the only
	// objects whose replicas the autoscaler may change.
	MachineDeployments []string
	Settings           Settings
}

// Name is the name of the autoscaler's objects for the Cluster API cluster named cluster.
func Name(cluster string) string { return cluster + "-autoscaler" }

// KubeconfigSecret is the Secret Cluster API writes the workload cluster's admin kubeconfig to,
// under key "value".
func KubeconfigSecret(cluster string) string { return cluster + "-kubeconfig" }

// Component is the value of the app.kubernetes.io/component label on the autoscaler's objects.
const Component = "cluster-autoscaler"

// PriorityClass is the PriorityClass of the autoscaler's Pods: the project namespace's quota
// admits Pods of this class only (the chart creates it).
const PriorityClass = "magnum-cluster-autoscaler"

// kubeconfigDir is where the workload cluster's kubeconfig is mounted in the autoscaler's Pod.
const kubeconfigDir = "/etc/kubernetes/workload"

func (in Input) validate() error {
	var errs []error
	for field, v := range map[string]string{"namespace": in.Namespace, "cluster": in.Cluster, "cluster uuid": in.ClusterUUID, "project id": in.ProjectID} {
		if v == "" {
			errs = append(errs, fmt.Errorf("autoscaler: the %s is required", field))
		}
	}
	if err := in.Settings.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("autoscaler: %w", err))
	}
	return errors.Join(errs...)
}

// Args are the autoscaler's command-line arguments: the clusterapi provider with the management
// cluster reached in-cluster and the workload cluster through its kubeconfig, node groups discovered
// by the cluster's namespace and name, sizes enforced from the MachineDeployments' annotations.
func (in Input) Args() []string {
	s := in.Settings
	return []string{
		"--cloud-provider=clusterapi",
		"--clusterapi-cloud-config-authoritative",
		"--kubeconfig=" + kubeconfigDir + "/value",
		"--node-group-auto-discovery=clusterapi:namespace=" + in.Namespace + ",clusterName=" + in.Cluster,
		"--enforce-node-group-min-size=true",
		"--expander=" + strings.Join(s.Expanders, ","),
		"--scale-down-enabled=" + strconv.FormatBool(!s.ScaleDownDisabled),
		"--scale-down-delay-after-add=" + s.ScaleDownDelayAfterAdd.String(),
		"--scale-down-unneeded-time=" + s.ScaleDownUnneededTime.String(),
		"--scale-down-utilization-threshold=" + strconv.FormatFloat(s.ScaleDownUtilizationThreshold, 'g', -1, 64),
		// Machines are drained by Cluster API when they are deleted; the autoscaler only picks them.
		"--cordon-node-before-terminating=true",
		"--logtostderr=true",
		"--v=2",
	}
}

// labels are the labels every object of the autoscaler carries.
func (in Input) labels() map[string]string {
	return map[string]string{
		templates.LabelManagedBy:      templates.ManagedByValue,
		templates.LabelClusterUUID:    in.ClusterUUID,
		templates.LabelProjectID:      in.ProjectID,
		"app.kubernetes.io/name":      Component,
		"app.kubernetes.io/instance":  Name(in.Cluster),
		"app.kubernetes.io/component": Component,
	}
}
