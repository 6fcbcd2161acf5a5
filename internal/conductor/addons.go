package conductor

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/addons"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// nameAddonSet annotates the Cluster with its add-on set: the status sync completes an operation
// only once CAPI has applied that set.
func nameAddonSet(rendered *templates.Rendered) {
	rendered.Cluster.SetAnnotations(templates.MergeLabels(rendered.Cluster.GetAnnotations(),
		map[string]string{addons.AnnotationAddonSet: addons.ResourceSetName(rendered.Cluster.GetName())}))
}

// applyAddons renders the cluster's add-ons next to its Cluster and hands them to its
// ClusterResourceSet (internal/addons). The OpenStack integrations get the workload credential the
// bridge stored for them (<cluster>-workload-cloud-config), never CAPO's. A create's set replaces
// nothing, so only later applies prune what an earlier set delivered (Kube.ApplyAddons).
func (c *Conductor) applyAddons(ctx context.Context, in templates.Input, rendered *templates.Rendered, prune bool) error {
	name := rendered.Cluster.GetName()
	var cloud *addons.Credential
	data, found, err := c.kube.ReadSecret(ctx, in.Namespace, workloadCloudConfigSecretName(name))
	if err != nil {
		return err
	}
	if found {
		cloud = &addons.Credential{CloudsYAML: data[cloudsYAMLKey], CACert: data[cloudCACertKey]}
	}
	pods, _, _ := unstructured.NestedStringSlice(rendered.Cluster.Object, "spec", "clusterNetwork", "pods", "cidrBlocks")
	if len(pods) == 0 {
		return &permanentError{fmt.Errorf("the rendered cluster %s has no pod network", name)}
	}
	set, err := addons.Render(addons.Input{
		Flavor: rendered.Flavor, Namespace: in.Namespace, ClusterName: name, ClusterUUID: in.Cluster.UUID,
		ProjectID: in.Cluster.ProjectID, KubernetesVersion: rendered.Version, NetworkDriver: in.Template.NetworkDriver,
		PodCIDR: pods[0], Labels: in.Cluster.Labels, Cloud: cloud,
	})
	if err != nil {
		return &permanentError{fmt.Errorf("the cluster's add-ons: %w", err)}
	}
	return c.kube.ApplyAddons(ctx, name, set, prune)
}

// refreshAddons re-applies a cluster's add-on set outside an operation: a credential rotation must
// put the new workload credential into kube-system/cloud-config before the old one is deleted. An
// adopted cluster's add-ons are its old driver's, which read the credential from that driver's
// Secret: the new workload credential goes there.
func (c *Conductor) refreshAddons(ctx context.Context, cl *magnum.Cluster) error {
	in, rendered, err := c.render(ctx, cl, nil)
	if err != nil {
		return err
	}
	adopted, err := c.keepRendering(ctx, in, rendered, false, false)
	if err != nil {
		return err
	}
	if adopted {
		return c.refreshChartCredential(ctx, cl, in.Namespace, rendered.Cluster.GetName())
	}
	return c.applyAddons(ctx, in, rendered, true)
}
