package autoscaler

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// The annotations from which the autoscaler's clusterapi provider builds a template node for a
// MachineDeployment with no machines: without them a group at zero is never scaled up.
const (
	// CapacityAnnotationPrefix begins each of them.
	CapacityAnnotationPrefix = "capacity.cluster-autoscaler.kubernetes.io/"

	AnnotationCapacityCPU           = "capacity.cluster-autoscaler.kubernetes.io/cpu"
	AnnotationCapacityMemory        = "capacity.cluster-autoscaler.kubernetes.io/memory"
	AnnotationCapacityEphemeralDisk = "capacity.cluster-autoscaler.kubernetes.io/ephemeral-disk"
	AnnotationCapacityGPUCount      = "capacity.cluster-autoscaler.kubernetes.io/gpu-count"
	AnnotationCapacityGPUType       = "capacity.cluster-autoscaler.kubernetes.io/gpu-type"
	AnnotationCapacityLabels        = "capacity.cluster-autoscaler.kubernetes.io/labels"
	AnnotationCapacityTaints        = "capacity.cluster-autoscaler.kubernetes.io/taints"
)

// Flavor is what the capacity of a node comes from: the Nova flavor of its node group.
type Flavor struct {
	VCPUs   int
	RAMMiB  int
	DiskGiB int
	// ExtraSpecs are the flavor's extra specs: GPUs are "resources:VGPU" (virtual) or
	// "pci_passthrough:alias" ("<alias>:<count>[,<alias>:<count>]", whole devices).
	ExtraSpecs map[string]string
}

// GPUType is the gpu-type the autoscaler is told for GPUs from a flavor; it matches nodes the
// GPU operator labels with the same accelerator name.
const GPUType = "nvidia.com/gpu"

// Group is what a node of a worker node group carries besides its flavor.
type Group struct {
	// RootVolumeGiB is the boot volume's size when the machines boot from a volume
	// (boot_volume_size), which then is the node's disk rather than the flavor's.
	RootVolumeGiB int
	NodeLabels    map[string]string
	Taints        []templates.Taint
}

// Capacity is the capacity annotations of an autoscaled MachineDeployment whose machines have
// flavor f. An amount the flavor does not give (a zero) is left out rather than claimed.
func Capacity(f Flavor, g Group) (map[string]string, error) {
	out := map[string]string{}
	if f.VCPUs > 0 {
		out[AnnotationCapacityCPU] = strconv.Itoa(f.VCPUs)
	}
	if f.RAMMiB > 0 {
		out[AnnotationCapacityMemory] = strconv.Itoa(f.RAMMiB) + "Mi"
	}
	disk := f.DiskGiB
	if g.RootVolumeGiB > 0 {
		disk = g.RootVolumeGiB
	}
	if disk > 0 {
		out[AnnotationCapacityEphemeralDisk] = strconv.Itoa(disk) + "Gi"
	}
	gpus, err := flavorGPUs(f.ExtraSpecs)
	if err != nil {
		return nil, err
	}
	if gpus > 0 {
		out[AnnotationCapacityGPUCount] = strconv.Itoa(gpus)
		out[AnnotationCapacityGPUType] = GPUType
	}
	if len(g.NodeLabels) > 0 {
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(g.NodeLabels)) {
			kv = append(kv, k+"="+g.NodeLabels[k])
		}
		out[AnnotationCapacityLabels] = strings.Join(kv, ",")
	}
	if len(g.Taints) > 0 {
		var ts []string
		for _, t := range g.Taints {
			ts = append(ts, t.Key+"="+t.Value+":"+t.Effect)
		}
		out[AnnotationCapacityTaints] = strings.Join(ts, ",")
	}
	return out, nil
}

// flavorGPUs counts a flavor's GPUs from its extra specs; a malformed spec is refused by name,
// since Nova would not boot such a flavor either.
func flavorGPUs(specs map[string]string) (int, error) {
	n := 0
	if v, ok := specs["resources:VGPU"]; ok {
		c, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || c < 0 {
			return 0, fmt.Errorf("flavor extra spec resources:VGPU=%q: want a count", v)
		}
		n += c
	}
	if v, ok := specs["pci_passthrough:alias"]; ok {
		for _, entry := range strings.Split(v, ",") {
			_, count, found := strings.Cut(strings.TrimSpace(entry), ":")
			if !found {
				count = "1" // an alias without a count asks for one device
			}
			c, err := strconv.Atoi(strings.TrimSpace(count))
			if err != nil || c < 0 {
				return 0, fmt.Errorf("flavor extra spec pci_passthrough:alias=%q: want <alias>:<count>[,...]", v)
			}
			n += c
		}
	}
	return n, nil
}
