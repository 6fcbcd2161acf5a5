package conductor

import (
	"context"
	"errors"
	"strings"
	"time"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/autoscaler"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/capi"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// Flavors finds a Nova flavor as the cluster's own cloud credential (its project sees its private
// flavors too), for the size the autoscaler is told a node of an empty group would have.
type Flavors interface {
	FindFlavor(ctx context.Context, cloudsYAML, caCert []byte, projectID, ref string) (autoscaler.Flavor, error)
}

// autoscalerRetryAfter is how soon a refused autoscaler change is tried again.
const autoscalerRetryAfter = 30 * time.Second

// errNoFlavors: Nova cannot be asked (no cloud credentials configured, or none stored for the cluster).
var errNoFlavors = errors.New("no cloud credential to look the flavor up with")

// annotateCapacity gives each autoscaled worker MachineDeployment the capacity of a node of its
// flavor, so the autoscaler can grow the group from zero machines. Where Nova cannot be asked (no
// cloud credential, Nova failing) the live Cluster's annotations are kept: an apply never takes
// back what an earlier one gave.
func (c *Conductor) annotateCapacity(ctx context.Context, cl *magnum.Cluster, in templates.Input, rendered *templates.Rendered) error {
	byMD := map[string]map[string]string{}
	var (
		clouds, ca     []byte
		cloud, cloudOK bool
		live           *clusterv1.Cluster
		liveRead       bool
	)
	for _, ng := range in.NodeGroups {
		if !in.Autoscaled(ng) {
			continue
		}
		if !cloudOK { // the credential is read once per apply, for all groups
			var err error
			if clouds, ca, cloud, err = c.flavorCredential(ctx, cl); err != nil {
				return err
			}
			cloudOK = true
		}
		md := templates.MachineDeploymentName(ng)
		capacity, err := c.capacity(ctx, clouds, ca, cloud, in, ng)
		if err != nil {
			if permanent(err) {
				return err
			}
			if !errors.Is(err, errNoFlavors) {
				c.log.WarnContext(ctx, "autoscaler capacity: the flavor could not be read; the cluster keeps what it has", "cluster", in.Cluster.UUID,
					"nodegroup", ng.Name, "flavor", in.WorkerFlavor(ng), "error", err)
			}
			if !liveRead {
				if live, _, err = c.kube.GetCluster(ctx, in.Namespace, rendered.Cluster.GetName()); err != nil {
					return err
				}
				liveRead = true
			}
			capacity = liveCapacity(live, md)
		}
		if len(capacity) > 0 {
			byMD[md] = capacity
		}
	}
	return templates.AnnotateMachineDeployments(rendered.Cluster, byMD)
}

// flavorCredential is the cluster's cloud credential to ask Nova with; found is false when the
// bridge looks no flavors up or the cluster has no credential.
func (c *Conductor) flavorCredential(ctx context.Context, cl *magnum.Cluster) (clouds, caCert []byte, found bool, err error) {
	if c.opts.Flavors == nil {
		return nil, nil, false, nil
	}
	return c.capoCloudConfig(ctx, cl)
}

func (c *Conductor) capacity(ctx context.Context, clouds, ca []byte, cloud bool, in templates.Input, ng templates.NodeGroup) (map[string]string, error) {
	if !cloud {
		return nil, errNoFlavors
	}
	flavor, err := c.opts.Flavors.FindFlavor(ctx, clouds, ca, in.Cluster.ProjectID, in.WorkerFlavor(ng))
	if err != nil {
		return nil, err
	}
	capacity, err := autoscaler.Capacity(flavor, autoscaler.Group{RootVolumeGiB: in.WorkerRootVolumeGiB(ng), NodeLabels: ng.NodeLabels, Taints: ng.NodeTaints})
	if err != nil {
		return nil, &permanentError{err}
	}
	return capacity, nil
}

// liveCapacity is the capacity annotations the live Cluster gives the MachineDeployment topology md.
func liveCapacity(live *clusterv1.Cluster, md string) map[string]string {
	if live == nil {
		return nil
	}
	for _, t := range live.Spec.Topology.Workers.MachineDeployments {
		if t.Name != md {
			continue
		}
		out := map[string]string{}
		for k, v := range t.Metadata.Annotations {
			if strings.HasPrefix(k, autoscaler.CapacityAnnotationPrefix) {
				out[k] = v
			}
		}
		return out
	}
	return nil
}

// followAutoscaler keeps a cluster's cluster-autoscaler in step with what the watch shows: running
// while a worker MachineDeployment carries the autoscaler's size annotations (the rendering puts
// them on the autoscaled groups), on the image of the cluster's Kubernetes minor, allowed to resize
// exactly those MachineDeployments; gone when none does, or when the cluster is being deleted. It
// returns what keeps it from running, for the status reason ("" when nothing); retry is set when
// the management cluster refused a change, which is tried again without holding up the status sync.
func (c *Conductor) followAutoscaler(ctx context.Context, cl *magnum.Cluster, obs capi.Observation) (note string, retry bool) {
	note, err := c.applyAutoscaler(ctx, cl, obs)
	if err != nil {
		c.log.WarnContext(ctx, "cluster autoscaler: the management cluster refused a change; tried again", "cluster", cl.UUID.Or(""), "error", err)
		return autoscalerNotePrefix + "could not be set up: " + err.Error(), true
	}
	return note, false
}

func (c *Conductor) applyAutoscaler(ctx context.Context, cl *magnum.Cluster, obs capi.Observation) (string, error) {
	if !c.opts.Autoscalers || obs.Cluster == nil {
		return "", nil
	}
	id := cl.UUID.Or("")
	var mds []string
	for _, md := range obs.MachineDeployments {
		if _, ok := md.Annotations[templates.AutoscalerMaxAnnotation]; ok && md.DeletionTimestamp.IsZero() {
			mds = append(mds, md.Name)
		}
	}
	if len(mds) == 0 || !obs.Cluster.DeletionTimestamp.IsZero() || magnum.Deleting(cl.Status.Or("")) {
		if obs.Autoscaler == nil {
			return "", nil
		}
		c.log.InfoContext(ctx, "cluster autoscaler removed", "cluster", id)
		return "", c.deleteAutoscaler(ctx, obs.Cluster.Namespace, id)
	}
	labels := dictMap(cl.Labels)
	settings, err := autoscaler.SettingsFromLabels(labels)
	if err != nil {
		return autoscalerNotePrefix + "cannot run: " + err.Error(), nil
	}
	objs, err := autoscaler.Render(autoscaler.Input{
		Namespace: obs.Cluster.Namespace, Cluster: obs.Cluster.Name, ClusterUUID: id, ProjectID: cl.ProjectID.Or(""),
		KubernetesVersion: obs.Cluster.Spec.Topology.Version, Prefix: labels[templates.LabelContainerInfraPrefix],
		Tag: labels[templates.LabelAutoscalerTag], MachineDeployments: mds, Settings: settings,
	})
	if err != nil {
		return autoscalerNotePrefix + "cannot run: " + err.Error(), nil
	}
	if obs.Autoscaler != nil && obs.Autoscaler.Annotations[autoscaler.AnnotationRendered] == objs.Deployment.Annotations[autoscaler.AnnotationRendered] {
		return autoscaler.Problem(obs.Autoscaler), nil
	}
	if err := c.kube.ApplyAutoscaler(ctx, objs); err != nil {
		return "", err
	}
	c.log.InfoContext(ctx, "cluster autoscaler applied", "cluster", id, "image", objs.Deployment.Spec.Template.Spec.Containers[0].Image,
		"machinedeployments", strings.Join(mds, ","))
	return "", nil
}

// autoscalerNotePrefix begins every note followAutoscaler gives.
const autoscalerNotePrefix = "the cluster autoscaler "

// withoutAutoscalerNote drops an earlier autoscaler note from a stored status reason: a steady
// cluster keeps its reason, and a problem that went away must not stay in it.
func withoutAutoscalerNote(reason string) string {
	parts := strings.Split(reason, "; ")
	kept := parts[:0]
	for _, p := range parts {
		if !strings.HasPrefix(p, autoscalerNotePrefix) {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, "; ")
}

// withNote appends note to a status reason once.
func withNote(reason, note string) string {
	if note == "" || strings.Contains(reason, note) {
		return reason
	}
	return strings.TrimPrefix(strings.TrimSuffix(reason, ".")+"; "+note, "; ")
}

// deleteAutoscaler removes a deleted cluster's autoscaler (nothing when the bridge runs none).
func (c *Conductor) deleteAutoscaler(ctx context.Context, namespace, id string) error {
	if !c.opts.Autoscalers {
		return nil
	}
	return c.kube.DeleteAutoscaler(ctx, namespace, id)
}
