// Package adoption decides what the bridge does with each cluster of a Magnum database it takes
// over from another conductor: its own clusters it keeps, magnum-capi-helm's live clusters it can
// adopt in place, and the rest (Heat stacks, magnum-cluster-api's clusters, rows nothing was built
// for) it leaves alone. The decisions are a pure function of the Magnum row and of what the
// management cluster holds under the names the cluster's driver gives; reading those is left to
// the caller.
package adoption

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// Action is what the bridge does with a cluster.
type Action string

const (
	// Own: the bridge built it; nothing to take over.
	Own Action = "own"
	// Adopt: another driver's live cluster the bridge takes over in place, no machine replaced.
	Adopt Action = "adopt"
	// Leave: not the bridge's and never taken over; every request about it is refused with
	// NotSupported naming its driver.
	Leave Action = "leave"
	// Refuse: could be adopted, but not now or not as it is (the reason says what to do first).
	Refuse Action = "refuse"
)

// Cluster is what the plan reads of a cluster's Magnum row.
type Cluster struct {
	UUID, Name, ProjectID, StackID string
	Status                         magnum.ClusterStatus
	// TemplateDriver is its template's driver column ("" before Magnum 18.0.0).
	TemplateDriver string
}

// Found is what the management cluster holds under the names the cluster's driver gives it.
type Found struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Cluster: the Cluster API Cluster exists; Topology: a ClusterClass drives it; Deleting: it is
	// being deleted.
	Cluster            bool     `json:"cluster"`
	Topology           bool     `json:"topology"`
	Class              string   `json:"class,omitempty"`
	Deleting           bool     `json:"deleting"`
	MachineDeployments []string `json:"machine_deployments"`
	Machines           int      `json:"machines"`
	// AdoptedFrom names the driver the bridge adopted the cluster from ("" when it did not).
	AdoptedFrom string `json:"adopted_from,omitempty"`
	// BridgeNamespace is the project namespace the bridge uses for the cluster's project;
	// NamespaceManaged says whether Namespace is one of the bridge's (it writes in no other).
	BridgeNamespace  string `json:"bridge_namespace,omitempty"`
	NamespaceManaged bool   `json:"namespace_managed"`
	// AutoscalerRelease: magnum-cluster-api installed a cluster-autoscaler for it (a Helm release
	// named after the cluster), which the bridge does not take over.
	AutoscalerRelease bool `json:"autoscaler_release,omitempty"`
}

// Entry is one cluster's line of the plan.
type Entry struct {
	UUID      string               `json:"uuid"`
	Name      string               `json:"name"`
	ProjectID string               `json:"project_id"`
	Status    magnum.ClusterStatus `json:"status"`
	Driver    templates.Driver     `json:"driver"`
	// DriverWhy says how the driver was told (templates.DriverOf).
	DriverWhy string `json:"driver_why"`
	Action    Action `json:"action"`
	// Why says why this action, and what an operator can do about a refusal.
	Why   string `json:"why"`
	Found *Found `json:"found,omitempty"`
}

// Naming is where the drivers put a project's clusters.
type Naming struct {
	// BridgeNamespacePrefix is the bridge's [bridge] namespace_prefix.
	BridgeNamespacePrefix string
	// CAPIHelmNamespacePrefix is magnum-capi-helm's [capi_helm] namespace_prefix (default "magnum").
	CAPIHelmNamespacePrefix string
}

var notLowerAlnum = regexp.MustCompile(`[^a-z0-9]`)

// Where is the namespace and name of the Cluster API Cluster the driver made for the cluster;
// ok is false for a driver that makes none (Heat) or that is not known.
// CAPIHelmName is the name magnum-capi-helm gives a cluster's object: its Helm release (the
// stack_id) and the part, lower case, every run of other characters than [a-z0-9] one dash
// (e.g. a node group's MachineDeployment, "<stack_id>-<node group name>").
func CAPIHelmName(release, part string) string {
	return strings.Trim(notLowerAlnumRun.ReplaceAllString(strings.ToLower(release+"-"+part), "-"), "-")
}

var notLowerAlnumRun = regexp.MustCompile(`[^a-z0-9]+`)

func (n Naming) Where(d templates.Driver, c Cluster) (namespace, name string, ok bool) {
	switch d {
	case templates.DriverBridge:
		return templates.NamespaceFor(n.BridgeNamespacePrefix, c.ProjectID), c.StackID, true
	case templates.DriverCAPIHelm:
		prefix := n.CAPIHelmNamespacePrefix
		if prefix == "" {
			prefix = "magnum"
		}
		return prefix + "-" + notLowerAlnum.ReplaceAllString(strings.ToLower(c.ProjectID), ""), c.StackID, true
	case templates.DriverClusterAPI:
		return templates.ClusterAPINamespace, c.StackID, true
	}
	return "", "", false
}

// Decide is the plan's entry for a cluster its driver d built (why: how d was told), given what
// the management cluster holds where that driver puts it (nil when Where names no place).
func Decide(c Cluster, d templates.Driver, why string, found *Found) Entry {
	e := Entry{UUID: c.UUID, Name: c.Name, ProjectID: c.ProjectID, Status: c.Status, Driver: d, DriverWhy: why, Found: found}
	e.Action, e.Why = decide(c, d, found)
	return e
}

func decide(c Cluster, d templates.Driver, found *Found) (Action, string) {
	switch d {
	case templates.DriverBridge:
		switch {
		case found != nil && found.AdoptedFrom == string(templates.DriverClusterAPI):
			return Own, "taken over from " + found.AdoptedFrom + " for its status, `coe cluster config` and delete"
		case found != nil && found.AdoptedFrom != "":
			return Own, "adopted from " + found.AdoptedFrom
		}
		return Own, "built by this bridge"
	case templates.DriverHeat:
		return Leave, "a Heat stack is not a Cluster API cluster: it stays with Magnum's Heat driver (requests about it are refused with NotSupported)"
	case templates.DriverCAPIHelm, templates.DriverClusterAPI:
	default:
		return Leave, "no driver this bridge knows built it: requests about it are refused with NotSupported"
	}
	if action, why, refused := refusal(c, d, found); refused {
		return action, why
	}
	if d == templates.DriverClusterAPI {
		return Adopt, fmt.Sprintf("magnum-cluster-api's cluster %s: to be taken over in place, its %d machine(s) in %d node group(s) kept; "+
			"the bridge then syncs its status, answers `coe cluster config` with its CA and deletes it, while resize, node groups, "+
			"upgrade and credential rotation are refused with NotSupported: its ClusterClass %s stays the old driver's%s",
			found.Name, found.Machines, len(found.MachineDeployments), found.Class, autoscalerNote(found))
	}
	return Adopt, fmt.Sprintf("magnum-capi-helm's Helm release %s: to be taken over in place, its %d machine(s) in %d node group(s) kept",
		found.Name, found.Machines, len(found.MachineDeployments))
}

// autoscalerNote tells the operator what a delete leaves of magnum-cluster-api's cluster-autoscaler.
func autoscalerNote(found *Found) string {
	if !found.AutoscalerRelease {
		return ""
	}
	return fmt.Sprintf("; its cluster-autoscaler, Helm release %s in %s, stays Helm's (`helm uninstall` it after the delete)", found.Name, found.Namespace)
}

// refusal is why a live cluster of another driver cannot be taken over now, if it cannot.
func refusal(c Cluster, d templates.Driver, found *Found) (Action, string, bool) {
	where := "the management cluster"
	if found != nil {
		where = found.Namespace + "/" + found.Name
	}
	refuse := func(why string) (Action, string, bool) { return Refuse, why, true }
	switch {
	case c.Status.IsInProgress():
		return refuse(fmt.Sprintf("%s's %s has not ended: adopt it once the cluster is *_COMPLETE or *_FAILED", d, c.Status))
	case c.Status == magnum.StatusCreateFailed:
		return refuse(fmt.Sprintf("its create failed: there is no working cluster to adopt (delete it with %s, or create it again)", d))
	case c.Status == magnum.StatusDeleteFailed:
		return refuse(fmt.Sprintf("its delete failed: finish the delete with %s first", d))
	case found == nil || !found.Cluster:
		return refuse("no Cluster API cluster " + where + " in this management cluster: it is in another one, or it is gone")
	case found.Deleting:
		return refuse("its Cluster API cluster " + where + " is being deleted")
	}
	if d == templates.DriverClusterAPI {
		switch {
		case !found.Topology:
			return refuse(fmt.Sprintf("its Cluster API cluster %s follows no ClusterClass, which magnum-cluster-api always gives: look at who changed it", where))
		case !found.NamespaceManaged:
			return refuse(fmt.Sprintf("namespace %s is magnum-cluster-api's, and the bridge writes in no namespace of another's: hand it over with "+
				"`kubectl label namespace %s app.kubernetes.io/managed-by=magnum-capi-bridge` once magnum-cluster-api's conductor is stopped", found.Namespace, found.Namespace))
		}
		return "", "", false
	}
	switch {
	case found.Topology:
		return refuse(fmt.Sprintf("its Cluster API cluster %s already follows ClusterClass %s, which magnum-capi-helm never makes: look at who changed it", where, found.Class))
	case found.BridgeNamespace != "" && found.Namespace != found.BridgeNamespace:
		return refuse(fmt.Sprintf("it lives in namespace %s, the bridge would use %s for its project: set [bridge] namespace_prefix to magnum-capi-helm's namespace_prefix followed by a dash", found.Namespace, found.BridgeNamespace))
	case !found.NamespaceManaged:
		return refuse(fmt.Sprintf("namespace %s is not a project namespace of the bridge, which writes in no other: hand it over with "+
			"`kubectl label namespace %s app.kubernetes.io/managed-by=magnum-capi-bridge magnum.openstack.org/project-id=%s`", found.Namespace, found.Namespace, c.ProjectID))
	}
	return "", "", false
}

// Counts is how many entries have each action.
func Counts(entries []Entry) map[Action]int {
	out := map[Action]int{}
	for _, e := range entries {
		out[e.Action]++
	}
	return out
}
