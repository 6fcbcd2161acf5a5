package templates

import (
	"fmt"
	"math"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// Node labels and taints of Magnum 23 node groups (NodeGroup 1.2 node_labels / node_taints), and the
// rollout of a cluster_upgrade. Validation is the same for every flavor, so a node group one flavor
// accepts is never refused by the other; how the result reaches the nodes differs:
//   - openstack: kubelet registers them (--node-labels, kubeadm nodeRegistration.taints);
//   - inmemory: there is no kubelet, so they go on the Machines (MachineDeployment metadata labels,
//     topology taints) and the CAPI core manager copies them to the Nodes. That needs the manager's
//     --additional-sync-machine-labels (labels outside CAPI's few default domains) and the
//     MachineTaintPropagation feature gate, both set by deploy/local/mgmt-up.sh.

// Field names in errors: the node group fields, reported as LabelError so the tenant sees which
// entry to fix.
const (
	FieldNodeLabels = "node_labels"
	FieldNodeTaints = "node_taints"
)

// maxNodeTaints is Cluster API's limit on a MachineDeployment topology's taints.
const maxNodeTaints = 64

// restrictedLabelDomains are the node label domains kubelet may not set on itself (the
// NodeRestriction admission plugin, and Magnum 23's API check), except the prefixes in
// allowedKubeletLabelPrefixes.
var (
	restrictedLabelDomains      = []string{"kubernetes.io", "k8s.io"}
	allowedKubeletLabelPrefixes = []string{"kubelet.kubernetes.io/", "node.kubernetes.io/"}
)

// Domains whose labels others keep their bookkeeping in: a node label there would be overwritten
// or would confuse them. Cluster API's node.cluster.x-k8s.io is meant for node labels and stays open.
const (
	capiLabelDomain   = "cluster.x-k8s.io"
	capiNodeDomain    = clusterv1.ManagedNodeLabelDomain
	bridgeLabelDomain = "magnum.openstack.org"
)

// inDomain reports whether a label key's prefix is the domain or one of its subdomains.
func inDomain(key, domain string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	return ok && (prefix == domain || strings.HasSuffix(prefix, "."+domain))
}

func restrictedLabelKey(k string) bool {
	for _, a := range allowedKubeletLabelPrefixes {
		if strings.HasPrefix(k, a) {
			return false
		}
	}
	for _, d := range restrictedLabelDomains {
		if inDomain(k, d) {
			return true
		}
	}
	return false
}

func nodeLabelError(ng NodeGroup, k, v, reason string) *LabelError {
	return &LabelError{Label: FieldNodeLabels, Value: k + "=" + v, Reason: "node group " + ng.Name + ": " + reason}
}

// validateNodeLabels checks a node group's node_labels: Kubernetes label syntax, no domain kubelet
// may not set on itself, none of Cluster API's or the bridge's bookkeeping labels.
func validateNodeLabels(ng NodeGroup) error {
	for _, k := range sortedKeys(ng.NodeLabels) {
		v := ng.NodeLabels[k]
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nodeLabelError(ng, k, v, "the key is not a valid label key: "+strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return nodeLabelError(ng, k, v, "the value is not a valid label value: "+strings.Join(errs, "; "))
		}
		switch {
		case restrictedLabelKey(k):
			return nodeLabelError(ng, k, v, "kubelet may not set labels in the kubernetes.io and k8s.io domains (except node.kubernetes.io/ and kubelet.kubernetes.io/)")
		case inDomain(k, capiLabelDomain) && !inDomain(k, capiNodeDomain):
			return nodeLabelError(ng, k, v, "the cluster.x-k8s.io domain is Cluster API's (use node.cluster.x-k8s.io/ or another domain)")
		case inDomain(k, bridgeLabelDomain):
			return nodeLabelError(ng, k, v, "the magnum.openstack.org domain is reserved for the bridge")
		case k == clusterv1.MachineDeploymentUniqueLabel:
			return nodeLabelError(ng, k, v, "the key is reserved for Cluster API")
		}
	}
	return nil
}

// kubeletNodeLabels is kubelet's --node-labels value for validated node labels (sorted, stable).
func kubeletNodeLabels(labels map[string]string) string {
	var parts []string
	for _, k := range sortedKeys(labels) {
		parts = append(parts, k+"="+labels[k])
	}
	return strings.Join(parts, ",")
}

// reservedTaint explains why a taint key is not the tenant's to set, or returns "". These are the
// keys Cluster API's webhooks refuse on Machines: the node lifecycle controller, kubelet, the cloud
// controller manager and Cluster API itself own them.
func reservedTaint(key string) string {
	switch {
	case key == clusterv1.NodeUninitializedTaint.Key || key == clusterv1.NodeOutdatedRevisionTaint.Key:
		return "the key is Cluster API's"
	case strings.HasPrefix(key, "node.kubernetes.io/") && key != "node.kubernetes.io/out-of-service":
		return "node.kubernetes.io/ taints are kept by Kubernetes itself (only node.kubernetes.io/out-of-service may be set)"
	case strings.HasPrefix(key, "node.cloudprovider.kubernetes.io/"):
		return "node.cloudprovider.kubernetes.io/ taints are kept by the cloud controller manager"
	case key == "node-role.kubernetes.io/master":
		return "the taint is deprecated since Kubernetes 1.24"
	}
	return ""
}

// taintText is a taint as Magnum's CLI writes it: key[=value]:Effect.
func taintText(t Taint) string {
	s := t.Key
	if t.Value != "" {
		s += "=" + t.Value
	}
	return s + ":" + t.Effect
}

// validateNodeTaints checks a node group's node_taints: key and value syntax, one of the three
// effects, each key and effect once, no key Kubernetes or Cluster API keep themselves.
func validateNodeTaints(ng NodeGroup) error {
	if len(ng.NodeTaints) > maxNodeTaints {
		return &LabelError{Label: FieldNodeTaints, Value: fmt.Sprintf("%d taints", len(ng.NodeTaints)),
			Reason: fmt.Sprintf("node group %s: at most %d taints", ng.Name, maxNodeTaints)}
	}
	seen := map[string]bool{}
	for _, t := range ng.NodeTaints {
		bad := func(reason string) error {
			return &LabelError{Label: FieldNodeTaints, Value: taintText(t), Reason: "node group " + ng.Name + ": " + reason}
		}
		if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
			return bad("the key is not a valid taint key: " + strings.Join(errs, "; "))
		}
		if t.Value != "" {
			if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
				return bad("the value is not a valid taint value: " + strings.Join(errs, "; "))
			}
		}
		switch corev1.TaintEffect(t.Effect) {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			return bad(fmt.Sprintf("the effect %q is not NoSchedule, PreferNoSchedule or NoExecute", t.Effect))
		}
		if why := reservedTaint(t.Key); why != "" {
			return bad(why)
		}
		id := t.Key + ":" + t.Effect
		if seen[id] {
			return bad("the key " + t.Key + " is given twice with the effect " + t.Effect)
		}
		seen[id] = true
	}
	return nil
}

// validateNodeGroupNodes validates a node group's node labels and taints; Magnum 23's API allows
// neither on the control-plane group, and neither does the bridge.
func validateNodeGroupNodes(ng NodeGroup) error {
	if ng.IsControlPlane() {
		if len(ng.NodeLabels) > 0 {
			k := sortedKeys(ng.NodeLabels)[0]
			return nodeLabelError(ng, k, ng.NodeLabels[k], "the control-plane node group cannot have node labels")
		}
		if len(ng.NodeTaints) > 0 {
			return &LabelError{Label: FieldNodeTaints, Value: taintText(ng.NodeTaints[0]),
				Reason: "node group " + ng.Name + ": the control-plane node group cannot have node taints"}
		}
		return nil
	}
	if err := validateNodeLabels(ng); err != nil {
		return err
	}
	return validateNodeTaints(ng)
}

// kubeadmTaints are validated taints as kubeadm's nodeRegistration.taints (the openstack class's
// nodeTaints variable), in the node group's order.
func kubeadmTaints(ts []Taint) []map[string]any {
	var out []map[string]any
	for _, t := range ts {
		m := map[string]any{"key": t.Key, "effect": t.Effect}
		if t.Value != "" {
			m["value"] = t.Value
		}
		out = append(out, m)
	}
	return out
}

// machineTaints are validated taints as Cluster API Machine taints, sorted by key and effect (the
// list is a map keyed by both). They are kept on the nodes (Always): a node group's taints are
// what its nodes carry, and an update that removes one removes it from the nodes.
func machineTaints(ts []Taint) []clusterv1.MachineTaint {
	var out []clusterv1.MachineTaint
	for _, t := range ts {
		out = append(out, clusterv1.MachineTaint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect),
			Propagation: clusterv1.MachineTaintPropagationAlways})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Key != out[j].Key {
			return out[i].Key < out[j].Key
		}
		return out[i].Effect < out[j].Effect
	})
	return out
}

// inMemoryNodes puts the worker node groups' node labels and taints on their Machines (see the top
// of this file for how they reach the Nodes).
func inMemoryNodes(c *clusterv1.Cluster, topo topology, labels map[string]string) {
	for i := range c.Spec.Topology.Workers.MachineDeployments {
		md := &c.Spec.Topology.Workers.MachineDeployments[i]
		ng := topo.workers[i]
		// availability_zone (Horizon sends one on every create) is the machines' failure domain, as
		// on OpenStack; the in-memory machines accept any.
		if az := labelOr(groupLabels(labels, ng), LabelAvailabilityZone); az != "" {
			md.FailureDomain = az
		}
		// Validation keeps node labels out of the bridge's domain, so the node group label stays.
		md.Metadata.Labels = MergeLabels(ng.NodeLabels, md.Metadata.Labels)
		md.Taints = machineTaints(ng.NodeTaints)
	}
}

// Upgrade is the cluster_upgrade being applied: Magnum's max_batch_size and nodegroup arguments.
type Upgrade struct {
	// MaxBatchSize is how many machines of a worker node group are replaced at a time (at least 1).
	MaxBatchSize int
	// NodeGroup is the UUID of the node group the upgrade was asked for. magnum-api names its
	// default worker group when the tenant names none.
	NodeGroup string
}

// UpgradeCovers reports whether the input's upgrade (if any) upgrades the node group. Naming a
// default group or the control plane upgrades the whole cluster: Cluster API's managed topology runs
// one Kubernetes version, the control plane first. Naming another worker group limits the upgrade
// to that group; magnum-api allows that only with the cluster's current template, to bring the group
// in line with the cluster.
func (in Input) UpgradeCovers(ng NodeGroup) bool {
	if in.Upgrade == nil {
		return false
	}
	named, ok := in.upgradeNodeGroup()
	if !ok || named.IsDefault || named.IsControlPlane() {
		return true
	}
	return ng.UUID == named.UUID
}

func (in Input) upgradeNodeGroup() (NodeGroup, bool) {
	for _, ng := range in.NodeGroups {
		if ng.UUID == in.Upgrade.NodeGroup {
			return ng, true
		}
	}
	return NodeGroup{}, false
}

// validateUpgrade checks the upgrade arguments against the cluster.
func validateUpgrade(in Input) error {
	u := in.Upgrade
	if u == nil {
		return nil
	}
	if u.MaxBatchSize < 1 || u.MaxBatchSize > math.MaxInt32 {
		return fmt.Errorf("max_batch_size must be at least 1 (and fit in 32 bits), not %d", u.MaxBatchSize)
	}
	if _, ok := in.upgradeNodeGroup(); u.NodeGroup != "" && !ok {
		return fmt.Errorf("the cluster has no node group %s to upgrade", u.NodeGroup)
	}
	return nil
}

// upgradeRollout is the rolling update of a worker group an upgrade covers: at most MaxBatchSize new
// machines at a time, and no old one removed before its replacement is up.
func upgradeRollout(u Upgrade) clusterv1.MachineDeploymentTopologyRolloutSpec {
	return clusterv1.MachineDeploymentTopologyRolloutSpec{Strategy: clusterv1.MachineDeploymentTopologyRolloutStrategy{
		Type: clusterv1.RollingUpdateMachineDeploymentStrategyType,
		RollingUpdate: clusterv1.MachineDeploymentTopologyRolloutStrategyRollingUpdate{
			MaxSurge:       ptr.To(intstr.FromInt32(int32(u.MaxBatchSize))),
			MaxUnavailable: ptr.To(intstr.FromInt32(0)),
		},
	}}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
