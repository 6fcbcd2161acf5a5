package templates

import (
	"bytes"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// Move is what moving a live cluster to another rendering changes: the objects (by what they are
// to the cluster) and whether its control plane and which of its worker groups roll.
type Move struct {
	// Changes name what differs, e.g. "the worker class default-worker's bootstrap template".
	Changes []string
	// ControlPlane is true when Cluster API replaces the control-plane machines.
	ControlPlane bool
	// Workers are the topology names of the worker groups whose machines Cluster API replaces.
	Workers []string
}

// Rolls reports whether any machine is replaced.
func (m Move) Rolls() bool { return m.ControlPlane || len(m.Workers) > 0 }

// PlanMove compares a live cluster (its Cluster and its class's objects) with the rendering it would
// move to (the moved Cluster and its class's objects) and says what Cluster API replaces: a machine
// rolls when a template it is made from, a patch, or a variable or override the patches read
// differs. Template and patch names carry their class's name; contents are compared without it.
func PlanMove(live *clusterv1.Cluster, liveClass []*unstructured.Unstructured, moved *unstructured.Unstructured, movedClass []*unstructured.Unstructured) (Move, error) {
	var to clusterv1.Cluster
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(moved.Object, &to); err != nil {
		return Move{}, fmt.Errorf("the moved Cluster: %w", err)
	}
	from, err := readClass(liveClass, live.Spec.Topology.ClassRef.Name)
	if err != nil {
		return Move{}, fmt.Errorf("the live class: %w", err)
	}
	next, err := readClass(movedClass, to.Spec.Topology.ClassRef.Name)
	if err != nil {
		return Move{}, fmt.Errorf("the rendered class: %w", err)
	}
	var m Move
	changed := func(what string, a, b any) bool {
		if from.same(a, next, b) {
			return false
		}
		m.Changes = append(m.Changes, what)
		return true
	}
	everything := changed("the class's patches", from.class.Spec.Patches, next.class.Spec.Patches)
	everything = changed("the cluster's variables", live.Spec.Topology.Variables, to.Spec.Topology.Variables) || everything
	changed("the infrastructure cluster template", from.template(from.class.Spec.Infrastructure.TemplateRef), next.template(next.class.Spec.Infrastructure.TemplateRef))

	cp := changed("the control plane template", from.template(from.class.Spec.ControlPlane.TemplateRef), next.template(next.class.Spec.ControlPlane.TemplateRef))
	cp = changed("the control plane's machine template", from.template(from.class.Spec.ControlPlane.MachineInfrastructure.TemplateRef),
		next.template(next.class.Spec.ControlPlane.MachineInfrastructure.TemplateRef)) || cp
	cp = changed("the control plane's variable overrides", live.Spec.Topology.ControlPlane.Variables, to.Spec.Topology.ControlPlane.Variables) || cp
	m.ControlPlane = cp || everything

	for _, md := range to.Spec.Topology.Workers.MachineDeployments {
		var old *clusterv1.MachineDeploymentTopology
		for i := range live.Spec.Topology.Workers.MachineDeployments {
			if live.Spec.Topology.Workers.MachineDeployments[i].Name == md.Name {
				old = &live.Spec.Topology.Workers.MachineDeployments[i]
			}
		}
		if old == nil {
			continue // no machines yet
		}
		oc, nc := from.worker(old.Class), next.worker(md.Class)
		if oc == nil || nc == nil {
			return Move{}, fmt.Errorf("worker group %s: its class %s or %s is not in the rendering", md.Name, old.Class, md.Class)
		}
		group := "worker group " + md.Name
		rolls := changed(group+"'s bootstrap template", from.template(oc.Bootstrap.TemplateRef), next.template(nc.Bootstrap.TemplateRef))
		rolls = changed(group+"'s machine template", from.template(oc.Infrastructure.TemplateRef), next.template(nc.Infrastructure.TemplateRef)) || rolls
		rolls = changed(group+"'s variable overrides", old.Variables, md.Variables) || rolls
		rolls = changed(group+"'s failure domain", old.FailureDomain, md.FailureDomain) || rolls
		if rolls || everything {
			m.Workers = append(m.Workers, md.Name)
		}
	}
	return m, nil
}

type classObjects struct {
	name      string
	class     clusterv1.ClusterClass
	templates map[string]*unstructured.Unstructured // kind/name → object
}

func readClass(objs []*unstructured.Unstructured, name string) (*classObjects, error) {
	c := &classObjects{name: name, templates: map[string]*unstructured.Unstructured{}}
	found := false
	for _, o := range objs {
		if o.GetKind() == "ClusterClass" && o.GetName() == name {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &c.class); err != nil {
				return nil, err
			}
			found = true
			continue
		}
		c.templates[o.GetKind()+"/"+o.GetName()] = o
	}
	if !found {
		return nil, fmt.Errorf("no ClusterClass %s", name)
	}
	return c, nil
}

// template is the spec of the template ref names; nil when it is not among the objects (which
// compares as changed against one that is).
func (c *classObjects) template(ref clusterv1.ClusterClassTemplateReference) any {
	if o := c.templates[ref.Kind+"/"+ref.Name]; o != nil {
		return o.Object["spec"]
	}
	if ref.Name == "" {
		return nil
	}
	return "missing " + ref.Kind + " " + ref.Name
}

func (c *classObjects) worker(class string) *clusterv1.MachineDeploymentClass {
	for i := range c.class.Spec.Workers.MachineDeployments {
		if c.class.Spec.Workers.MachineDeployments[i].Class == class {
			return &c.class.Spec.Workers.MachineDeployments[i]
		}
	}
	return nil
}

// same compares a (of c) and b (of other) as JSON with each side's class name blanked.
func (c *classObjects) same(a any, other *classObjects, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil {
		return false
	}
	ja = bytes.ReplaceAll(ja, []byte(c.name), []byte(classPlaceholder))
	jb = bytes.ReplaceAll(jb, []byte(other.name), []byte(classPlaceholder))
	return bytes.Equal(ja, jb)
}
