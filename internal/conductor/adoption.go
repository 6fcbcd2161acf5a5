package conductor

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/adoption"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/certs"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/keystone"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// An operator who replaces another conductor asks first what the bridge would do with each
// cluster of the database (`magnum-capi-bridge adoption plan`): a dry run that reads the rows and
// the management cluster and changes nothing. `adoption run` then takes over the clusters the plan
// says to adopt. Like the rendering plan these are the bridge's own RPC methods, answered by any
// replica; magnum-api never sends them.

// MethodAdoptionPlan and MethodAdoptionRun are the RPC methods of the adoption.
const (
	MethodAdoptionPlan = "bridge_adoption_plan"
	MethodAdoptionRun  = "bridge_adoption_run"
)

// BridgeAdoptionPlan answers bridge_adoption_plan(): an adoption.Entry for every cluster of the
// database that is not deleted, by project and name.
func (c *Conductor) BridgeAdoptionPlan(ctx context.Context, req *rpc.Request) (any, error) {
	if req.Context == nil || !req.Context.IsAdmin {
		return nil, authorizationFailure("the adoption plan is an operator's: it needs an admin context")
	}
	entries, _, err := c.adoptionPlan(ctx)
	return entries, err
}

// AdoptionResult is what bridge_adoption_run did with a cluster the plan said to adopt.
type AdoptionResult struct {
	adoption.Entry
	// Adopted is true once the bridge drives the cluster; Error says why not (run again to resume).
	Adopted bool   `json:"adopted"`
	Error   string `json:"error,omitempty"`
	// Steps are the steps taken, in order, with their durations.
	Steps string `json:"steps,omitempty"`
}

// BridgeAdoptionRun answers bridge_adoption_run(clusters): it adopts every cluster the plan says to
// adopt (all of them, or those whose uuid or name the clusters argument lists), one at a time, and
// reports each. Every step is idempotent: a run interrupted anywhere is finished by the next.
func (c *Conductor) BridgeAdoptionRun(ctx context.Context, req *rpc.Request) (any, error) {
	if req.Context == nil || !req.Context.IsAdmin {
		return nil, authorizationFailure("adoption is an operator's: it needs an admin context")
	}
	var only []string
	if raw, ok := req.Args["clusters"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &only); err != nil {
			return nil, invalidParameter("clusters must be a list of cluster uuids or names: " + err.Error())
		}
	}
	// One run at a time in a replica: a run redelivered after a restart may meet the operator's next.
	c.adoptionRunning.Lock()
	defer c.adoptionRunning.Unlock()
	entries, rows, err := c.adoptionPlan(ctx)
	if err != nil {
		return nil, err
	}
	results := []AdoptionResult{}
	for _, e := range entries {
		if len(only) > 0 && !slices.Contains(only, e.UUID) && !slices.Contains(only, e.Name) {
			continue
		}
		if e.Action != adoption.Adopt {
			continue
		}
		r := AdoptionResult{Entry: e}
		steps := newStepTimer()
		adopt := c.adopt
		if e.Driver == templates.DriverClusterAPI {
			adopt = c.takeOver
		}
		err := adopt(ctx, rows[e.UUID], steps)
		r.Steps = steps.String()
		if err != nil {
			r.Error = c.reasonFor(e.UUID, err)
			c.log.WarnContext(ctx, "adoption of a cluster stopped; run it again to resume", "cluster", e.UUID, "error", err, "steps", r.Steps)
		} else {
			r.Adopted = true
			c.log.InfoContext(ctx, "cluster adopted", "cluster", e.UUID, "from", string(e.Driver), "steps", r.Steps)
		}
		results = append(results, r)
	}
	return results, nil
}

// adoptionPlan is the plan's entries, by project and name, and the rows they were decided on.
func (c *Conductor) adoptionPlan(ctx context.Context) ([]adoption.Entry, map[string]*magnum.Cluster, error) {
	var statuses []magnum.ClusterStatus
	for _, s := range magnum.AllClusterStatuses {
		if s != magnum.StatusDeleteComplete {
			statuses = append(statuses, s)
		}
	}
	clusters, err := c.store.ListClustersByStatus(ctx, statuses...)
	if err != nil {
		return nil, nil, rpc.Retry(err)
	}
	naming := adoption.Naming{BridgeNamespacePrefix: c.opts.NamespacePrefix, CAPIHelmNamespacePrefix: c.opts.CAPIHelmNamespacePrefix}
	entries := make([]adoption.Entry, 0, len(clusters))
	rows := make(map[string]*magnum.Cluster, len(clusters))
	for _, cl := range clusters {
		row := adoption.Cluster{UUID: cl.UUID.Or(""), Name: cl.Name.Or(""), ProjectID: cl.ProjectID.Or(""),
			StackID: cl.StackID.Or(""), Status: cl.Status.Or("")}
		d, why, err := c.driverOf(ctx, cl)
		if err != nil {
			return nil, nil, rpc.Retry(err)
		}
		var found *adoption.Found
		ns, name, ok := naming.Where(d, row)
		if d == templates.DriverBridge {
			// Its own, or adopted: where its objects are.
			if ns, err = c.placeOf(ctx, cl); err != nil {
				return nil, nil, rpc.Retry(err)
			}
		}
		if ok && name != "" {
			found, err = c.lookForCluster(ctx, ns, name)
			if err != nil {
				return nil, nil, rpc.Retry(err)
			}
			found.BridgeNamespace = c.namespace(row.ProjectID)
			// magnum-cluster-api runs a cluster-autoscaler, a Helm release, for the clusters that ask.
			found.AutoscalerRelease = d == templates.DriverClusterAPI && templates.LabelEnabled(dictMap(cl.Labels), templates.LabelAutoScalingEnabled)
		}
		entries = append(entries, adoption.Decide(row, d, why, found))
		rows[row.UUID] = cl
	}
	slices.SortFunc(entries, func(a, b adoption.Entry) int {
		return cmp.Or(cmp.Compare(a.ProjectID, b.ProjectID), cmp.Compare(a.Name, b.Name), cmp.Compare(a.UUID, b.UUID))
	})
	return entries, rows, nil
}

// lookForCluster is what the management cluster holds of the Cluster API cluster namespace/name.
func (c *Conductor) lookForCluster(ctx context.Context, namespace, name string) (*adoption.Found, error) {
	f := &adoption.Found{Namespace: namespace, Name: name}
	_, managed, err := c.kube.NamespaceManaged(ctx, namespace)
	if err != nil {
		return nil, err
	}
	f.NamespaceManaged = managed
	obs, found, err := c.kube.Observe(ctx, namespace, name)
	if err != nil || !found {
		return f, err
	}
	f.Cluster = true
	f.Deleting = !obs.Cluster.DeletionTimestamp.IsZero()
	f.AdoptedFrom = obs.Cluster.Annotations[templates.AnnotationAdoptedFrom]
	if t := obs.Cluster.Spec.Topology; t.IsDefined() && f.AdoptedFrom == "" {
		f.Topology, f.Class = true, t.ClassRef.Name
	}
	for _, md := range obs.MachineDeployments {
		f.MachineDeployments = append(f.MachineDeployments, md.Name)
	}
	f.Machines = len(obs.Machines)
	return f, nil
}

// adopt takes over a magnum-capi-helm cluster in place. The steps, each of which a later run
// repeats harmlessly:
//  1. Helm forgets the release (its Secrets go, the Cluster loses Helm's ownership): from then
//     on neither `helm uninstall` nor the old conductor can delete the cluster.
//  2. The cluster's credential, which the chart's Secret holds, is stored the bridge's way.
//  3. The cluster's rows are rendered and the rendering turned into the live cluster's
//     (templates.Rendered.Adopt): a ClusterClass copied from the live objects.
//  4. The CA Secrets are written from Magnum's certificate store, as the old driver did.
//  5. The class is applied, owned by the Cluster (it goes with it); the live objects are labelled
//     as the topology's, for Cluster API's topology controller; the Cluster gets its topology.
//
// The chart's credential Secret stays: the old driver's add-ons (the cloud controller manager the
// add-on provider installed) read it. A rotation writes the new workload credential into it too
// (refreshAddons), and the cluster's delete removes it with the bridge's own.
func (c *Conductor) adopt(ctx context.Context, cl *magnum.Cluster, steps *stepTimer) error {
	id, name := cl.UUID.Or(""), cl.StackID.Or("")
	ns := c.namespace(cl.ProjectID.Or(""))
	live, found, err := c.kube.ReadLive(ctx, ns, name)
	switch {
	case err != nil:
		return err
	case !found:
		return &permanentError{fmt.Errorf("its Cluster %s/%s is gone", ns, name)}
	}
	steps.mark("read")
	if err := c.kube.RetireHelmRelease(ctx, ns, name, name); err != nil {
		return err
	}
	steps.mark("helm-retired")
	if templates.IsAdopted(live.Cluster) && live.Cluster.Spec.Topology.IsDefined() {
		return c.finishAdoption(ns, name, steps)
	}
	tmpl, err := c.store.GetClusterTemplate(ctx, cl.ClusterTemplateID.Or(""))
	if err != nil {
		return fmt.Errorf("its cluster template %s: %w", cl.ClusterTemplateID.Or(""), err)
	}
	groups, err := c.store.ListNodeGroups(ctx, id)
	if err != nil {
		return err
	}
	for i := range live.Workers {
		md := live.Workers[i].MachineDeployment.GetName()
		for _, g := range groups {
			if g.Role.Or("") != "master" && adoption.CAPIHelmName(name, g.Name.Or("")) == md {
				live.Workers[i].NodeGroupUUID = g.UUID.Or("")
			}
		}
		if live.Workers[i].NodeGroupUUID == "" {
			return &permanentError{fmt.Errorf("MachineDeployment %s/%s is none of the cluster's node groups", ns, md)}
		}
	}
	live.Driver = string(templates.DriverCAPIHelm)
	// The project namespace's policies, quota and the bridge's Secret reader, before any Secret is read.
	if err := c.kube.EnsureProjectNamespace(ctx, ns, cl.ProjectID.Or("")); err != nil {
		return err
	}
	if err := c.adoptCredential(ctx, cl, ns, name); err != nil {
		return err
	}
	steps.mark("credential")
	in := c.renderInput(cl, tmpl, groups, nil)
	in.Cluster.AdoptedName = name
	rendered, err := templates.Render(in)
	if err != nil {
		return &permanentError{fmt.Errorf("rendering its rows: %w", err)}
	}
	labels, err := rendered.Adopt(live)
	if err != nil {
		return &permanentError{err}
	}
	steps.mark("render")
	if err := c.ensureCertificateSecrets(ctx, cl, ns, name); err != nil {
		return err
	}
	steps.mark("certificates")
	owner := metav1.OwnerReference{APIVersion: live.Cluster.APIVersion, Kind: "Cluster", Name: live.Cluster.Name, UID: live.Cluster.UID}
	if owner.APIVersion == "" {
		owner.APIVersion = "cluster.x-k8s.io/v1beta2"
	}
	for _, o := range rendered.ClassObjects {
		o.SetOwnerReferences([]metav1.OwnerReference{owner})
	}
	if err := c.kube.Apply(ctx, rendered.ClassObjects...); err != nil {
		return err
	}
	if err := c.kube.LabelObjects(ctx, ns, labels); err != nil {
		return err
	}
	steps.mark("class")
	// Cluster API's webhook refuses the topology (an internal error) until its controller has
	// reconciled the new class: that is retried, a real refusal is not.
	var applyErr error
	err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		applyErr = c.kube.Apply(ctx, rendered.Cluster)
		if applyErr != nil && permanent(applyErr) {
			return false, applyErr
		}
		return applyErr == nil, nil
	})
	if err != nil && applyErr != nil {
		err = applyErr
	}
	if err != nil {
		return err
	}
	steps.mark("topology")
	c.adopted.Store(id, live.Driver)
	return c.finishAdoption(ns, name, steps)
}

// takeOver takes a magnum-cluster-api cluster over in place, for its status, CA and delete: its
// Cluster, under the old driver's ClusterClass, is left as it runs. The steps, each repeatable:
//  1. The bridge may read Secrets in the namespace handed over to it.
//  2. The cluster's credential, in the old driver's Secret (which CAPO reads), gets the bridge's
//     record of it, so that the delete revokes it.
//  3. The Cluster is marked (templates.TakeOverMarks): from then on the status sync follows it.
func (c *Conductor) takeOver(ctx context.Context, cl *magnum.Cluster, steps *stepTimer) error {
	id, ns, name := cl.UUID.Or(""), templates.ClusterAPINamespace, cl.StackID.Or("")
	live, found, err := c.kube.GetCluster(ctx, ns, name)
	switch {
	case err != nil:
		return err
	case !found:
		return &permanentError{fmt.Errorf("its Cluster %s/%s is gone", ns, name)}
	case !live.Spec.Topology.IsDefined():
		return &permanentError{fmt.Errorf("its Cluster %s/%s follows no ClusterClass", ns, name)}
	}
	steps.mark("read")
	if err := c.kube.EnsureSecretAccess(ctx, ns); err != nil {
		return err
	}
	if err := c.takeOverCredential(ctx, cl, ns, name); err != nil {
		return err
	}
	steps.mark("credential")
	if err := c.kube.LabelObjects(ctx, ns, []templates.ObjectLabels{templates.TakeOverMarks(name, id)}); err != nil {
		return err
	}
	steps.mark("marked")
	c.adopted.Store(id, string(templates.DriverClusterAPI))
	return c.finishAdoption(ns, name, steps)
}

// takeOverCredential records in magnum-cluster-api's credential Secret (the bridge's own name for
// it, too) which application credential it holds; what CAPO reads of it stays as it is.
func (c *Conductor) takeOverCredential(ctx context.Context, cl *magnum.Cluster, ns, name string) error {
	data, found, err := c.kube.ReadSecret(ctx, ns, templates.CloudConfigSecretName(name))
	switch {
	case err != nil:
		return err
	case !found:
		return &permanentError{fmt.Errorf("its credential Secret %s/%s is gone", ns, templates.CloudConfigSecretName(name))}
	case len(data[credentialRefsKey]) > 0:
		return nil
	}
	ref, err := cloudsCredential(data[cloudsYAMLKey], clusterAPICloudName)
	if err != nil {
		return &permanentError{fmt.Errorf("the credential Secret %s/%s: %w", ns, templates.CloudConfigSecretName(name), err)}
	}
	if ref.UserID == "" {
		ref.UserID = cl.UserID.Or("") // magnum-cluster-api makes it for the cluster's user
	}
	secrets, err := cloudConfigSecrets(name, &IssuedCredentials{Refs: []keystone.CredentialRef{ref},
		CAPOCloudsYAML: data[cloudsYAMLKey], WorkloadCloudsYAML: data[cloudsYAMLKey], CACert: data[cloudCACertKey]})
	if err != nil {
		return &permanentError{err}
	}
	return c.kube.ApplyClusterSecrets(ctx, ns, cl.UUID.Or(""), secrets)
}

// clusterAPICloudName is the cloud of magnum-cluster-api's clouds.yaml.
const clusterAPICloudName = "default"

// finishAdoption has the status sync look at the adopted cluster at once.
func (c *Conductor) finishAdoption(ns, name string, steps *stepTimer) error {
	c.kube.Kick(ns, name)
	steps.mark("kick")
	return nil
}

func capiHelmCredentialSecret(release string) string {
	return adoption.CAPIHelmName(release, "cloud-credentials")
}

// adoptCredential stores the application credential magnum-capi-helm made for the cluster the
// bridge's way (both of the bridge's Secrets hold it: the old driver gave CAPO and the workload
// cluster one credential), so that a rotation replaces it and a delete revokes it.
func (c *Conductor) adoptCredential(ctx context.Context, cl *magnum.Cluster, ns, name string) error {
	if _, found, err := c.storedCredentialRefs(ctx, cl); err != nil || found {
		return err
	}
	data, found, err := c.kube.ReadSecret(ctx, ns, capiHelmCredentialSecret(name))
	if err != nil {
		return err
	}
	if !found {
		return &permanentError{fmt.Errorf("neither its credential Secret %s nor the bridge's %s exists", capiHelmCredentialSecret(name), templates.CloudConfigSecretName(name))}
	}
	ref, err := cloudsCredential(data[cloudsYAMLKey], templates.CloudConfigCloudName)
	if err != nil {
		return &permanentError{fmt.Errorf("the credential Secret %s/%s: %w", ns, capiHelmCredentialSecret(name), err)}
	}
	if ref.UserID == "" {
		ref.UserID = cl.UserID.Or("")
	}
	secrets, err := cloudConfigSecrets(name, &IssuedCredentials{Refs: []keystone.CredentialRef{ref},
		CAPOCloudsYAML: data[cloudsYAMLKey], WorkloadCloudsYAML: data[cloudsYAMLKey], CACert: data[cloudCACertKey]})
	if err != nil {
		return &permanentError{err}
	}
	return c.kube.ApplyClusterSecrets(ctx, ns, cl.UUID.Or(""), secrets)
}

// cloudsCredential is the application credential of a cloud of another driver's clouds.yaml
// (magnum-capi-helm's "openstack", magnum-cluster-api's clusterAPICloudName).
func cloudsCredential(cloudsYAML []byte, cloudName string) (keystone.CredentialRef, error) {
	var clouds struct {
		Clouds map[string]struct {
			Auth struct {
				ID     string `json:"application_credential_id"`
				Name   string `json:"application_credential_name"`
				UserID string `json:"user_id"`
			} `json:"auth"`
		} `json:"clouds"`
	}
	if err := yaml.Unmarshal(cloudsYAML, &clouds); err != nil {
		return keystone.CredentialRef{}, fmt.Errorf("its clouds.yaml: %w", err)
	}
	cloud, ok := clouds.Clouds[cloudName]
	if !ok || cloud.Auth.ID == "" {
		return keystone.CredentialRef{}, errors.New("its clouds.yaml has no application credential in cloud " + cloudName)
	}
	return keystone.CredentialRef{ID: cloud.Auth.ID, Name: cloud.Auth.Name, UserID: cloud.Auth.UserID}, nil
}

// refreshChartCredential writes the cluster's workload credential into magnum-capi-helm's
// credential Secret of an adopted cluster, which its add-ons read.
func (c *Conductor) refreshChartCredential(ctx context.Context, cl *magnum.Cluster, ns, name string) error {
	data, found, err := c.kube.ReadSecret(ctx, ns, workloadCloudConfigSecretName(name))
	if err != nil || !found {
		return err
	}
	chart := map[string][]byte{cloudsYAMLKey: data[cloudsYAMLKey]}
	if ca := data[cloudCACertKey]; len(ca) > 0 {
		chart[cloudCACertKey] = ca
	}
	return c.kube.ApplyClusterSecrets(ctx, ns, cl.UUID.Or(""), []certs.CAPISecret{{Name: capiHelmCredentialSecret(name), Type: "Opaque", Data: chart}})
}
