package capi

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/autoscaler"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/kubegroup"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// Names of the per-project objects next to the namespace.
const (
	NetworkPolicyName = "default-deny"
	// ResourceQuotaName is the project's quota: [bridge] namespace_quota but its pods entry.
	ResourceQuotaName = "magnum-project-quota"
	// PodsQuotaName limits the Pods of any PriorityClass but AutoscalerPriorityClass to the pods
	// entry of namespace_quota (0 by default: nothing runs in a project namespace).
	PodsQuotaName = "magnum-project-pods"
	// AutoscalerQuotaName limits the Pods of AutoscalerPriorityClass (the cluster-autoscalers, one
	// per autoscaled cluster) to the count/clusters.cluster.x-k8s.io entry of namespace_quota
	// (AutoscalerPodsDefault without one).
	AutoscalerQuotaName = "magnum-cluster-autoscalers"
	// AutoscalerPriorityClass is the PriorityClass of the cluster-autoscalers' Pods
	// (deploy/kubernetes/priority-class.yaml; internal/autoscaler renders it into their Deployments).
	AutoscalerPriorityClass = "magnum-cluster-autoscaler"
	// RoleBindingName binds SecretReaderRole to the bridge's own identity in a project namespace.
	RoleBindingName = "magnum-capi-bridge"
	// SecretReaderRole is the ClusterRole (deploy/kubernetes/rbac.yaml) that lets the bridge read
	// Secrets. It is bound only in project namespaces: every other permission of the bridge is
	// cluster-wide and its writes are confined to project namespaces by admission policy, but a read
	// cannot be confined that way, and Secrets elsewhere (kube-system, CAPO's) are none of its business.
	SecretReaderRole = "magnum-capi-bridge-secret-reader"
	// ViewerBindingName binds ProjectViewerRole to the project's Keystone group
	// (kubegroup.Project) in a project namespace, when [bridge] tenant_view is on.
	ViewerBindingName = "magnum-project-viewers"
	// ProjectViewerRole is the ClusterRole (deploy/kubernetes/rbac.yaml) of a project's members in
	// their namespace: get, list and watch of the CAPI objects and events; no Secrets, no writes.
	ProjectViewerRole = "magnum-project-viewer"
	// EditorBindingName binds ProjectEditorRole to the group of the project's members
	// (kubegroup.ProjectRole(project, EditorKeystoneRole)) in a project namespace, when [bridge]
	// tenant_api is on.
	EditorBindingName = "magnum-project-cluster-editors"
	// ProjectEditorRole is the ClusterRole (deploy/kubernetes/rbac.yaml) of a project's members in
	// their namespace with the tenant API: MagnumClusters, and writes (never reads) of the Secrets
	// holding their application credentials (admission policy CredentialSecretsPolicy).
	ProjectEditorRole = "magnum-project-cluster-editor"
	// EditorKeystoneRole is the Keystone role whose holders get ProjectEditorRole; the admission
	// policy magnum-capi-bridge-binds-only-itself allows the bridge to bind it to that group only.
	EditorKeystoneRole = "member"
)

// DefaultNamespaceQuota is [bridge] namespace_quota when unset: object-count limits that stop one
// project from flooding the management cluster's etcd while staying well above what Magnum's own
// quotas allow (max_clusters_per_project defaults to 20). A tenant namespace holds only CAPI objects
// and their Secrets, never workloads, hence pods=0 and services=0; the pods entry does not count the
// cluster-autoscalers' Pods, which have a quota of their own (resourceQuotas).
const DefaultNamespaceQuota = "count/clusters.cluster.x-k8s.io=50, count/clusterclasses.cluster.x-k8s.io=50, " +
	"count/machinedeployments.cluster.x-k8s.io=500, count/machinesets.cluster.x-k8s.io=1000, " +
	"count/machines.cluster.x-k8s.io=2000, secrets=3000, configmaps=100, pods=0, services=0"

// AutoscalerPodsDefault is the Pods of AutoscalerPriorityClass a project namespace admits when
// namespace_quota does not limit count/clusters.cluster.x-k8s.io.
const AutoscalerPodsDefault = 50

// clustersQuotaName is the quota entry that counts a project's Cluster API clusters.
const clustersQuotaName corev1.ResourceName = "count/clusters.cluster.x-k8s.io"

// standardQuotaNames are the resource names without a "/" that a ResourceQuota accepts (the
// apiserver's own list); anything else must be "count/<resource>[.<group>]" or an extended resource.
var standardQuotaNames = map[corev1.ResourceName]bool{
	corev1.ResourcePods: true, corev1.ResourceServices: true, corev1.ResourceReplicationControllers: true,
	corev1.ResourceQuotas: true, corev1.ResourceSecrets: true, corev1.ResourceConfigMaps: true,
	corev1.ResourcePersistentVolumeClaims: true, corev1.ResourceServicesNodePorts: true,
	corev1.ResourceServicesLoadBalancers: true, corev1.ResourceCPU: true, corev1.ResourceMemory: true,
	corev1.ResourceEphemeralStorage: true, corev1.ResourceRequestsCPU: true, corev1.ResourceRequestsMemory: true,
	corev1.ResourceRequestsStorage: true, corev1.ResourceRequestsEphemeralStorage: true,
	corev1.ResourceLimitsCPU: true, corev1.ResourceLimitsMemory: true, corev1.ResourceLimitsEphemeralStorage: true,
}

// ParseNamespaceQuota reads a quota in the form "resource=quantity, resource=quantity, …" (oslo's
// dict form "resource:quantity" is accepted too). An empty string is a quota without limits.
// Resource names and quantities are those of a ResourceQuota's spec.hard, e.g.
// "count/machines.cluster.x-k8s.io=2000, secrets=3000".
func ParseNamespaceQuota(s string) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		i := strings.IndexAny(item, "=:")
		if i < 0 {
			return nil, fmt.Errorf("%q: want resource=quantity", item)
		}
		name := corev1.ResourceName(strings.TrimSpace(item[:i]))
		value := strings.TrimSpace(item[i+1:])
		if err := validQuotaName(name); err != nil {
			return nil, fmt.Errorf("%q: %w", item, err)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%q: %s is given twice", item, name)
		}
		q, err := resource.ParseQuantity(value)
		if err != nil {
			return nil, fmt.Errorf("%q: %q is not a quantity (e.g. 100, 500m, 10Gi)", item, value)
		}
		if q.Sign() < 0 {
			return nil, fmt.Errorf("%q: a quota cannot be negative", item)
		}
		out[name] = q
	}
	return out, nil
}

func validQuotaName(name corev1.ResourceName) error {
	if errs := validation.IsQualifiedName(string(name)); len(errs) > 0 {
		return fmt.Errorf("%q is not a resource name: %s", name, strings.Join(errs, "; "))
	}
	if strings.Contains(string(name), "/") || standardQuotaNames[name] || strings.HasPrefix(string(name), "hugepages-") ||
		strings.HasPrefix(string(name), "requests.hugepages-") {
		return nil
	}
	std := make([]string, 0, len(standardQuotaNames))
	for n := range standardQuotaNames {
		std = append(std, string(n))
	}
	sort.Strings(std)
	return fmt.Errorf("%q is neither count/<resource>.<group> nor one of %s", name, strings.Join(std, ", "))
}

// EnsureProjectNamespace makes the project's namespace, labelled with the project id, with its
// default-deny NetworkPolicy, its ResourceQuotas (c.NamespaceQuota, see resourceQuotas), the
// RoleBinding that lets the bridge read Secrets there, and those of the project's Keystone groups
// (c.ProjectViewers, c.ProjectEditors). Everything is server-side applied, so running it again is a no-op
// and a changed quota reaches an existing namespace the next time it is ensured (a cluster create,
// or EnsureProjectNamespaces at start-up).
func (c *Client) EnsureProjectNamespace(ctx context.Context, name, projectID string) error {
	ns := &unstructured.Unstructured{Object: map[string]any{}}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	ns.SetName(name)
	ns.SetLabels(map[string]string{templates.LabelProjectID: projectID, templates.LabelManagedBy: templates.ManagedByValue})
	quota := c.NamespaceQuota
	if quota == nil {
		var err error
		if quota, err = ParseNamespaceQuota(DefaultNamespaceQuota); err != nil {
			return err
		}
	}
	rb, err := c.secretReader(ctx, name)
	if err != nil {
		return err
	}
	np, err := toApply(defaultDenyPolicy(name))
	if err != nil {
		return err
	}
	egress, err := toApply(autoscalerEgressPolicy(name))
	if err != nil {
		return err
	}
	objects := []*unstructured.Unstructured{ns, rb, np, egress}
	for _, q := range resourceQuotas(name, quota) {
		rq, err := toApply(q)
		if err != nil {
			return err
		}
		objects = append(objects, rq)
	}
	if c.ProjectViewers {
		vb, err := toApply(viewerBinding(name, projectID))
		if err != nil {
			return err
		}
		objects = append(objects, vb)
	}
	if c.ProjectEditors {
		eb, err := toApply(editorBinding(name, projectID))
		if err != nil {
			return err
		}
		objects = append(objects, eb)
	}
	// Applied moments ago with the same content (the project's previous create): nothing to do.
	sum, err := objectsSum(objects)
	if err != nil {
		return err
	}
	now := time.Now()
	if c.applied.fresh(name, projectNamespaceKey, sum, now) {
		return nil
	}
	if err := c.Apply(ctx, objects...); err != nil {
		return err
	}
	if err := c.waitSecretAccess(ctx, name); err != nil {
		return err
	}
	c.applied.remember(name, projectNamespaceKey, sum, now)
	return nil
}

// projectNamespaceKey is the applied-cache key of a project namespace's own objects (namespace,
// bindings, policy, quota), remembered together.
const projectNamespaceKey = "project-namespace"

func objectsSum(objs []*unstructured.Unstructured) ([sha256.Size]byte, error) {
	h := sha256.New()
	for _, o := range objs {
		sum, err := objectSum(o)
		if err != nil {
			return [sha256.Size]byte{}, err
		}
		h.Write(sum[:])
	}
	return [sha256.Size]byte(h.Sum(nil)), nil
}

// EnsureProjectNamespaces re-applies the policy, quota and binding of every project namespace
// (those labelled as the bridge's, with a project id, named with the prefix), so that a changed
// namespace_quota, or a namespace made by an older bridge, is brought up to date at start-up rather
// than only when the project creates its next cluster.
func (c *Client) EnsureProjectNamespaces(ctx context.Context, prefix string) (int, error) {
	var list corev1.NamespaceList
	if err := c.List(ctx, &list, client.MatchingLabels{templates.LabelManagedBy: templates.ManagedByValue},
		client.HasLabels{templates.LabelProjectID}); err != nil {
		return 0, fmt.Errorf("list project namespaces: %w", err)
	}
	n := 0
	for _, ns := range list.Items {
		project := ns.Labels[templates.LabelProjectID]
		if ns.DeletionTimestamp != nil || ns.Name != templates.NamespaceFor(prefix, project) {
			continue // being deleted, or another bridge instance's (another prefix)
		}
		if err := c.EnsureProjectNamespace(ctx, ns.Name, project); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// selfSubject is who the bridge is to the management cluster, learned once (SelfSubjectReview).
type selfSubject struct {
	mu  sync.Mutex
	sub *rbacv1.Subject
}

func (s *selfSubject) subject(ctx context.Context, c client.Client) (rbacv1.Subject, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sub != nil {
		return *s.sub, nil
	}
	r := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, r); err != nil {
		return rbacv1.Subject{}, fmt.Errorf("who am I (SelfSubjectReview): %w", err)
	}
	sub := SubjectFor(r.Status.UserInfo.Username)
	s.sub = &sub
	return sub, nil
}

// SubjectFor is the RBAC subject of a username: a ServiceAccount for "system:serviceaccount:<ns>:<name>",
// otherwise a User.
func SubjectFor(username string) rbacv1.Subject {
	if rest, ok := strings.CutPrefix(username, "system:serviceaccount:"); ok {
		if ns, name, ok := strings.Cut(rest, ":"); ok {
			return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}
		}
	}
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: username}
}

// waitSecretAccess returns once the binding just applied is in force: the apiserver's authorizer
// follows RoleBindings through a watch, and the next step of a create reads the namespace's Secrets.
func (c *Client) waitSecretAccess(ctx context.Context, namespace string) error {
	var reason string
	var checkErr error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		r := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: "get", Resource: "secrets"}}}
		if err := c.Create(ctx, r); err != nil {
			if ctx.Err() != nil {
				return false, nil // the poll's own deadline: reported below as a refusal
			}
			checkErr = fmt.Errorf("check access to the Secrets of %s: %w", namespace, err)
			return false, checkErr
		}
		reason = r.Status.Reason
		return r.Status.Allowed, nil
	})
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case checkErr != nil:
		return checkErr
	}
	return fmt.Errorf("the bridge cannot read Secrets in %s although it bound %s there: is deploy/kubernetes/rbac.yaml applied? (%s)",
		namespace, SecretReaderRole, reason)
}

// secretReader is the RoleBinding that lets the bridge read the Secrets of namespace, to apply.
func (c *Client) secretReader(ctx context.Context, namespace string) (*unstructured.Unstructured, error) {
	self, err := c.self.subject(ctx, c.Client)
	if err != nil {
		return nil, err
	}
	return toApply(secretReaderBinding(namespace, self))
}

func secretReaderBinding(namespace string, self rbacv1.Subject) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: RoleBindingName, Namespace: namespace,
			Labels: map[string]string{templates.LabelManagedBy: templates.ManagedByValue}},
		Subjects: []rbacv1.Subject{self},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: SecretReaderRole},
	}
}

// viewerBinding lets the tokens scoped to the project read its CAPI objects (docs/tenant-view.md).
func viewerBinding(namespace, projectID string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: ViewerBindingName, Namespace: namespace,
			Labels: map[string]string{templates.LabelManagedBy: templates.ManagedByValue}},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: kubegroup.Project(projectID)}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ProjectViewerRole},
	}
}

// editorBinding lets the tokens scoped to the project with the member role declare its clusters as
// MagnumClusters and write their credential Secrets (docs/tenant-api.md).
func editorBinding(namespace, projectID string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: EditorBindingName, Namespace: namespace,
			Labels: map[string]string{templates.LabelManagedBy: templates.ManagedByValue}},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName,
			Name: kubegroup.ProjectRole(projectID, EditorKeystoneRole)}},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ProjectEditorRole},
	}
}

// defaultDenyPolicy selects every pod of the namespace and allows no traffic in or out.
//
// Nothing is meant to run in a tenant namespace: it holds the project's CAPI objects and Secrets,
// which the controllers (CAPI, CAPO, the bridge) read from their own namespaces through the API
// server, and NetworkPolicies do not govern API access. The policy is there for a pod that appears
// anyway (a mistake, or a compromised controller creating one; the default quota also has pods=0
// for every Pod but the cluster-autoscalers'):
// it can neither be reached from another project's namespace (no ingress) nor reach one, the
// workload clusters or the cloud's metadata service (no egress, not even DNS). Another project's
// pods are covered by the same policy in their own namespace, so traffic between two projects is
// denied at both ends.
func defaultDenyPolicy(namespace string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: NetworkPolicyName, Namespace: namespace,
			Labels: map[string]string{templates.LabelManagedBy: templates.ManagedByValue}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{}, // every pod of the namespace
			// Both types with no rules: nothing is allowed in either direction.
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
}

// AutoscalerEgressPolicyName is the NetworkPolicy that lets the cluster-autoscalers of a project
// namespace reach what they need through its default deny.
const AutoscalerEgressPolicyName = "cluster-autoscaler-egress"

// autoscalerEgressPolicy: a cluster-autoscaler (internal/autoscaler) talks to two API servers, the
// management cluster's (in-cluster, 443 or its endpoints' 6443) and its workload cluster's (6443
// behind the API load balancer, or 443), after resolving their names. Nothing else leaves, and
// nothing may reach it.
func autoscalerEgressPolicy(namespace string) *networkingv1.NetworkPolicy {
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	port := func(p corev1.Protocol, n int) networkingv1.NetworkPolicyPort {
		return networkingv1.NetworkPolicyPort{Protocol: &p, Port: ptr.To(intstr.FromInt32(int32(n)))}
	}
	return &networkingv1.NetworkPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: AutoscalerEgressPolicyName, Namespace: namespace,
			Labels: map[string]string{templates.LabelManagedBy: templates.ManagedByValue}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/component": autoscaler.Component}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				Ports: []networkingv1.NetworkPolicyPort{port(tcp, 443), port(tcp, 6443), port(udp, 53), port(tcp, 53)},
			}},
		},
	}
}

// resourceQuotas are the project's quotas, from namespace_quota (quota):
//   - ResourceQuotaName: everything but the pods entry;
//   - PodsQuotaName: the pods entry, for the Pods of any PriorityClass but AutoscalerPriorityClass
//     (and those without one);
//   - AutoscalerQuotaName: as many Pods of AutoscalerPriorityClass as the project may have clusters
//     (count/clusters.cluster.x-k8s.io, else AutoscalerPodsDefault), its cluster-autoscalers.
//
// A quota without an entry is applied without limits (rather than deleted, which would need one more
// permission). Applied with the same field manager, the main quota of a namespace ensured by an
// older bridge loses its pods entry.
func resourceQuotas(namespace string, quota corev1.ResourceList) []*corev1.ResourceQuota {
	main := corev1.ResourceList{}
	pods := corev1.ResourceList{}
	for name, q := range quota {
		if name == corev1.ResourcePods {
			pods[name] = q
		} else {
			main[name] = q
		}
	}
	autoscalers := resource.MustParse(fmt.Sprint(AutoscalerPodsDefault))
	if q, ok := quota[clustersQuotaName]; ok {
		autoscalers = q
	}
	byClass := func(op corev1.ScopeSelectorOperator) *corev1.ScopeSelector {
		return &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{{
			ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: op, Values: []string{AutoscalerPriorityClass}}}}
	}
	return []*corev1.ResourceQuota{
		resourceQuota(namespace, ResourceQuotaName, corev1.ResourceQuotaSpec{Hard: main}),
		resourceQuota(namespace, PodsQuotaName, corev1.ResourceQuotaSpec{Hard: pods, ScopeSelector: byClass(corev1.ScopeSelectorOpNotIn)}),
		resourceQuota(namespace, AutoscalerQuotaName, corev1.ResourceQuotaSpec{
			Hard: corev1.ResourceList{corev1.ResourcePods: autoscalers}, ScopeSelector: byClass(corev1.ScopeSelectorOpIn)}),
	}
}

func resourceQuota(namespace, name string, spec corev1.ResourceQuotaSpec) *corev1.ResourceQuota {
	return &corev1.ResourceQuota{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ResourceQuota"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace,
			Labels: map[string]string{templates.LabelManagedBy: templates.ManagedByValue}},
		Spec: spec,
	}
}

func toApply(o runtime.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	delete(u.Object, "status")
	return u, nil
}
