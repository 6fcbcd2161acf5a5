package templates

import (
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Defaults of the cluster network: Magnum's (Heat driver) defaults, which tenants' templates assume.
const (
	defaultPodCIDR       = "10.100.0.0/16"
	defaultServiceCIDR   = "10.254.0.0/16"
	defaultServiceDomain = "cluster.local"
	defaultNodeCIDR      = "10.0.0.0/24"
)

// clusterNetwork is the Cluster's spec.clusterNetwork and, for OpenStack, the node subnet CAPO creates.
type clusterNetwork struct {
	Pods, Services netip.Prefix
	ServiceDomain  string
	// Node is the node subnet when the bridge asks CAPO to create the network (no fixed_network).
	Node netip.Prefix
	// podLabel is the label the pod CIDR came from, for error messages.
	podLabel string
}

// podCIDRLabel picks the label holding the pod CIDR: the one of the template's network driver; for
// another or no driver, the first of them that is set.
func podCIDRLabel(networkDriver string, labels map[string]string) string {
	switch strings.ToLower(networkDriver) {
	case "calico":
		return LabelCalicoIPv4Pool
	case "cilium":
		return LabelCiliumIPv4Pool
	case "flannel":
		return LabelFlannelNetworkCIDR
	}
	for _, l := range []string{LabelCalicoIPv4Pool, LabelCiliumIPv4Pool, LabelFlannelNetworkCIDR} {
		if labels[l] != "" {
			return l
		}
	}
	return LabelCalicoIPv4Pool
}

// resolveNetwork computes the cluster network from the labels and checks the ranges do not overlap:
// overlapping pod, service and node ranges break routing in ways that only show up much later.
func resolveNetwork(in Input) (clusterNetwork, error) {
	labels := in.Cluster.Labels
	var n clusterNetwork
	n.podLabel = podCIDRLabel(in.Template.NetworkDriver, labels)
	var err error
	parse := func(label string) (netip.Prefix, error) {
		v := labelOr(labels, label)
		p, perr := parseCIDR(v)
		if perr != nil {
			return p, &LabelError{Label: label, Value: v, Reason: perr.Error()}
		}
		return p, nil
	}
	if n.Pods, err = parse(n.podLabel); err != nil {
		return n, err
	}
	if n.Services, err = parse(LabelServiceClusterIPRange); err != nil {
		return n, err
	}
	n.ServiceDomain = labelOr(labels, LabelDNSClusterDomain)
	if errs := validation.IsDNS1123Subdomain(n.ServiceDomain); len(errs) > 0 {
		return n, &LabelError{Label: LabelDNSClusterDomain, Value: n.ServiceDomain, Reason: "want a DNS name like cluster.local"}
	}
	if n.Pods.Overlaps(n.Services) {
		return n, &LabelError{Label: LabelServiceClusterIPRange, Value: n.Services.String(),
			Reason: fmt.Sprintf("overlaps the pod network %s (%s)", n.Pods, n.podLabel)}
	}
	if in.Flavor == FlavorOpenStack && in.Template.FixedNetwork == "" {
		if n.Node, err = parse(LabelFixedSubnetCIDR); err != nil {
			return n, err
		}
		for _, other := range []struct {
			p     netip.Prefix
			label string
		}{{n.Pods, n.podLabel}, {n.Services, LabelServiceClusterIPRange}} {
			if n.Node.Overlaps(other.p) {
				return n, &LabelError{Label: LabelFixedSubnetCIDR, Value: n.Node.String(),
					Reason: fmt.Sprintf("overlaps %s (%s)", other.p, other.label)}
			}
		}
	}
	return n, nil
}
