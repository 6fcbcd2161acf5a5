package chart

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/utils/ptr"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/autoscaler"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/capi"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/kubegroup"
)

// policy is one rendered ValidatingAdmissionPolicy's expressions, compiled with the apiserver's CEL
// environment (object, oldObject, request and namespaceObject untyped: the apiserver checks the
// types against the schemas when the policy is stored; test/isolation runs the policies for real).
type policy struct {
	name       string
	conditions []cel.Program
	variables  []struct {
		name string
		prg  cel.Program
	}
	validations []validation
}

type validation struct {
	expr, messageExpr cel.Program
	message           string
}

func compilePolicies(t *testing.T) map[string]*policy {
	t.Helper()
	env, err := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).StoredExpressionsEnv().Extend(
		cel.Variable("object", cel.DynType), cel.Variable("oldObject", cel.DynType), cel.Variable("request", cel.DynType),
		cel.Variable("namespaceObject", cel.DynType), cel.Variable("variables", cel.MapType(cel.StringType, cel.DynType)))
	require.NoError(t, err)
	compile := func(where, expr string) cel.Program {
		ast, iss := env.Compile(expr)
		require.NoError(t, iss.Err(), "%s: %s", where, expr)
		prg, err := env.Program(ast)
		require.NoError(t, err, where)
		return prg
	}
	out := map[string]*policy{}
	for key, o := range render(t, "magnum-capi-bridge", map[string]any{}) {
		if o.GetKind() != "ValidatingAdmissionPolicy" {
			continue
		}
		p := &policy{name: o.GetName()}
		list := func(field string) []map[string]any {
			l, _, err := unstructured.NestedSlice(o.Object, "spec", field)
			require.NoError(t, err)
			var maps []map[string]any
			for _, x := range l {
				maps = append(maps, x.(map[string]any))
			}
			return maps
		}
		for _, c := range list("matchConditions") {
			p.conditions = append(p.conditions, compile(key+" condition "+c["name"].(string), c["expression"].(string)))
		}
		for _, v := range list("variables") {
			p.variables = append(p.variables, struct {
				name string
				prg  cel.Program
			}{v["name"].(string), compile(key+" variable "+v["name"].(string), v["expression"].(string))})
		}
		for i, v := range list("validations") {
			where := fmt.Sprintf("%s validation %d", key, i)
			val := validation{expr: compile(where, v["expression"].(string))}
			if m, ok := v["messageExpression"].(string); ok {
				val.messageExpr = compile(where+" message", m)
			} else {
				val.message, _ = v["message"].(string)
				require.NotEmpty(t, val.message, where)
			}
			p.validations = append(p.validations, val)
		}
		out[p.name] = p
	}
	require.Len(t, out, 8)
	return out
}

// admit evaluates the policy as the apiserver would for one request: "" when it matches and every
// validation holds (or it does not match), else the first refusal's message. The operation is
// CREATE without oldObject, DELETE without object, else UPDATE.
func (p *policy) admit(t *testing.T, user, namespace string, object, oldObject map[string]any) string {
	t.Helper()
	name, operation := "", "UPDATE"
	switch {
	case oldObject == nil:
		operation = "CREATE"
	case object == nil:
		operation = "DELETE"
	}
	for _, o := range []map[string]any{object, oldObject} {
		if o != nil && name == "" {
			name, _, _ = unstructured.NestedString(o, "metadata", "name")
		}
	}
	vars := map[string]any{}
	act := map[string]any{
		"object": object, "oldObject": oldObject, "variables": vars,
		"request": map[string]any{"userInfo": map[string]any{"username": user}, "namespace": namespace, "name": name,
			"operation": operation},
		"namespaceObject": map[string]any{"metadata": map[string]any{"name": namespace, "labels": map[string]any{
			"app.kubernetes.io/managed-by": "magnum-capi-bridge", "magnum.openstack.org/project-id": "0123abcd"}}},
	}
	for _, c := range p.conditions {
		v, _, err := c.Eval(act)
		require.NoError(t, err, p.name)
		if v.Value() != true {
			return ""
		}
	}
	for _, v := range p.variables {
		val, _, err := v.prg.Eval(act)
		require.NoError(t, err, "%s variable %s", p.name, v.name)
		vars[v.name] = val.Value()
	}
	for _, v := range p.validations {
		val, _, err := v.expr.Eval(act)
		require.NoError(t, err, p.name)
		if val.Value() == true {
			continue
		}
		if v.messageExpr == nil {
			return p.name + ": " + v.message
		}
		m, _, err := v.messageExpr.Eval(act)
		require.NoError(t, err, p.name+" message")
		return p.name + ": " + m.Value().(string)
	}
	return ""
}

func toMap(t *testing.T, o runtime.Object) map[string]any {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	require.NoError(t, err)
	// As the apiserver sees it: JSON round trip (no typed nils).
	u := &unstructured.Unstructured{Object: m}
	js, err := u.MarshalJSON()
	require.NoError(t, err)
	require.NoError(t, u.UnmarshalJSON(js))
	return u.Object
}

const bridgeUser = "system:serviceaccount:magnum-capi-bridge:magnum-capi-bridge"

// The autoscaler's objects as internal/autoscaler renders them pass the bridge's policies; what
// else the bridge might write of the same kinds does not, each with its policy's message.
func TestAutoscalerPolicies(t *testing.T) {
	ps := compilePolicies(t)
	o, err := autoscaler.Render(autoscaler.Input{Namespace: "magnum-0123abcd", Cluster: "web-1a2b3c4d", ClusterUUID: "1a2b3c4d-0000-4000-8000-000000000001",
		ProjectID: "0123abcd", KubernetesVersion: "v1.36.3", MachineDeployments: []string{"web-1a2b3c4d-default-worker-q9z8m"},
		Settings: autoscaler.DefaultSettings})
	require.NoError(t, err)
	ns := "magnum-0123abcd"
	roles, deployments, binds := ps["magnum-capi-bridge-autoscaler-roles"], ps["magnum-capi-bridge-autoscaler-deployments"], ps["magnum-capi-bridge-binds-only-itself"]
	require.Empty(t, roles.admit(t, bridgeUser, ns, toMap(t, o.Role), nil))
	require.Empty(t, binds.admit(t, bridgeUser, ns, toMap(t, o.RoleBinding), nil))
	require.Empty(t, deployments.admit(t, bridgeUser, ns, toMap(t, o.Deployment), nil))
	require.Empty(t, roles.admit(t, "someone-else", ns, map[string]any{"metadata": map[string]any{"name": "x"}}, nil), "not the bridge: not matched")

	role := func(mutate func(*rbacv1.Role)) map[string]any {
		r := o.Role.DeepCopy()
		mutate(r)
		return toMap(t, r)
	}
	for what, c := range map[string]struct {
		role map[string]any
		want string
	}{
		"secrets": {role(func(r *rbacv1.Role) {
			r.Rules = append(r.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}})
		}), "may only get, list and watch"},
		"no names": {role(func(r *rbacv1.Role) { r.Rules[3].ResourceNames = nil }), "each starting with web-1a2b3c4d-"},
		"other": {role(func(r *rbacv1.Role) {
			r.Rules[3].ResourceNames = append(r.Rules[3].ResourceNames, "web-9-default-worker-x")
		}), "each starting with web-1a2b3c4d-"},
		"wildcard":  {role(func(r *rbacv1.Role) { r.Rules[0].Verbs = []string{"*"} }), "no wildcard"},
		"resources": {role(func(r *rbacv1.Role) { r.Rules[0].Resources = []string{"*"} }), "no wildcard"},
		"delete":    {role(func(r *rbacv1.Role) { r.Rules[2].Verbs = append(r.Rules[2].Verbs, "delete") }), "update and patch machines"},
		"md create": {role(func(r *rbacv1.Role) { r.Rules[3].Verbs = append(r.Rules[3].Verbs, "create") }), "may only get"},
		"two groups": {role(func(r *rbacv1.Role) {
			r.Rules[2].APIGroups = append(r.Rules[2].APIGroups, "")
		}), "may only get"},
		"urls": {role(func(r *rbacv1.Role) {
			r.Rules = append(r.Rules, rbacv1.PolicyRule{NonResourceURLs: []string{"/x"}, Verbs: []string{"get"}})
		}), "no nonResourceURLs"},
		"name": {role(func(r *rbacv1.Role) { r.Name = "admin" }), "not admin"},
	} {
		got := roles.admit(t, bridgeUser, ns, c.role, nil)
		require.True(t, strings.HasPrefix(got, roles.name+": "), "%s: %q", what, got)
		require.Contains(t, got, c.want, what)
	}

	binding := func(mutate func(*rbacv1.RoleBinding)) map[string]any {
		b := o.RoleBinding.DeepCopy()
		mutate(b)
		return toMap(t, b)
	}
	for what, b := range map[string]map[string]any{
		"another account":   binding(func(b *rbacv1.RoleBinding) { b.Subjects[0].Name = "default" }),
		"another namespace": binding(func(b *rbacv1.RoleBinding) { b.Subjects[0].Namespace = "kube-system" }),
		"two subjects":      binding(func(b *rbacv1.RoleBinding) { b.Subjects = append(b.Subjects, b.Subjects[0]) }),
		"another role":      binding(func(b *rbacv1.RoleBinding) { b.RoleRef.Name = "web-9-autoscaler" }),
		"a group":           binding(func(b *rbacv1.RoleBinding) { b.Subjects[0].Kind = "Group" }),
		"not an autoscaler": binding(func(b *rbacv1.RoleBinding) { b.Name, b.RoleRef.Name, b.Subjects[0].Name = "x", "x", "x" }),
		"a ClusterRole":     binding(func(b *rbacv1.RoleBinding) { b.RoleRef.Kind = "ClusterRole" }),
	} {
		require.Contains(t, binds.admit(t, bridgeUser, ns, b, nil), "a Role <cluster>-autoscaler", what)
	}

	deployment := func(mutate func(*corev1.PodSpec)) map[string]any {
		d := o.Deployment.DeepCopy()
		mutate(&d.Spec.Template.Spec)
		return toMap(t, d)
	}
	for what, c := range map[string]struct {
		d    map[string]any
		want string
	}{
		"secret": {deployment(func(p *corev1.PodSpec) { p.Volumes[0].Secret.SecretName = "web-1a2b3c4d-ca" }), "its only volume may be the Secret web-1a2b3c4d-kubeconfig"},
		"hostPath": {deployment(func(p *corev1.PodSpec) {
			p.Volumes[0] = corev1.Volume{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}
		}), "its only volume"},
		"account":    {deployment(func(p *corev1.PodSpec) { p.ServiceAccountName = "default" }), "must run as the ServiceAccount web-1a2b3c4d-autoscaler"},
		"image":      {deployment(func(p *corev1.PodSpec) { p.Containers[0].Image = "busybox:1" }), "<repository>/cluster-autoscaler:<tag>"},
		"digest":     {deployment(func(p *corev1.PodSpec) { p.Containers[0].Image = "x/cluster-autoscaler:v1@sha256:00" }), "<repository>/cluster-autoscaler:<tag>"},
		"evil tag":   {deployment(func(p *corev1.PodSpec) { p.Containers[0].Image = "x/cluster-autoscaler:v1/../busybox:1" }), "<repository>/cluster-autoscaler:<tag>"},
		"two":        {deployment(func(p *corev1.PodSpec) { p.Containers = append(p.Containers, p.Containers[0]) }), "exactly one container"},
		"init":       {deployment(func(p *corev1.PodSpec) { p.InitContainers = p.Containers }), "no init or ephemeral containers"},
		"class":      {deployment(func(p *corev1.PodSpec) { p.PriorityClassName = "" }), "priorityClassName magnum-cluster-autoscaler"},
		"privileged": {deployment(func(p *corev1.PodSpec) { p.Containers[0].SecurityContext.Privileged = ptr.To(true) }), "neither privileged"},
		"escalation": {deployment(func(p *corev1.PodSpec) { p.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptr.To(true) }), "neither privileged"},
		"hostPID":    {deployment(func(p *corev1.PodSpec) { p.HostPID = true }), "no hostNetwork, hostPID or hostIPC"},
	} {
		got := deployments.admit(t, bridgeUser, ns, c.d, nil)
		require.True(t, strings.HasPrefix(got, deployments.name+": "), "%s: %q", what, got)
		require.Contains(t, got, c.want, what)
	}
	// Another mirror, a tag of its own: allowed.
	require.Empty(t, deployments.admit(t, bridgeUser, ns, deployment(func(p *corev1.PodSpec) {
		p.Containers[0].Image = "mirror.example:5000/k8s/cluster-autoscaler:v1.36.1-custom"
	}), nil))

	// The autoscaler's own token: its cluster's Machines, annotated only.
	own := ps["magnum-cluster-autoscaler-own-cluster"]
	machine := func(cluster string, minReady int64) map[string]any {
		return map[string]any{"metadata": map[string]any{"name": cluster + "-m", "labels": map[string]any{"cluster.x-k8s.io/cluster-name": cluster}},
			"spec": map[string]any{"clusterName": cluster, "minReadySeconds": minReady}}
	}
	sa := "system:serviceaccount:" + ns + ":web-1a2b3c4d-autoscaler"
	require.Empty(t, own.admit(t, sa, ns, machine("web-1a2b3c4d", 0), machine("web-1a2b3c4d", 0)))
	require.Contains(t, own.admit(t, sa, ns, machine("web-9", 0), machine("web-9", 0)), "web-1a2b3c4d-autoscaler may only change the Machines of its own cluster, not web-9-m")
	require.Contains(t, own.admit(t, sa, ns, machine("web-1a2b3c4d", 0), machine("web-9", 0)), "may only change the Machines of its own cluster")
	require.Contains(t, own.admit(t, sa, ns, machine("web-1a2b3c4d", 5), machine("web-1a2b3c4d", 0)), "may only annotate Machine web-1a2b3c4d-m")
	require.Empty(t, own.admit(t, bridgeUser, ns, machine("web-9", 5), machine("web-9", 0)), "the bridge: not matched")
	require.Empty(t, own.admit(t, "system:serviceaccount:other:web-9-autoscaler", ns, machine("web-9", 5), machine("web-9", 0)), "another namespace's account: not matched")
}

// The tenant API's RoleBinding: the bridge may bind magnum-project-cluster-editor to the group of the
// namespace's own project's members, and to nobody else; the viewer role keeps its own subject.
func TestBridgeBindsTheEditorRole(t *testing.T) {
	binds := compilePolicies(t)["magnum-capi-bridge-binds-only-itself"]
	ns := "magnum-0123abcd" // admit's namespace is labelled with project id 0123abcd
	binding := func(role string, subjects ...rbacv1.Subject) map[string]any {
		return toMap(t, &rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}, Subjects: subjects})
	}
	group := func(name string) rbacv1.Subject {
		return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name}
	}
	members := group(kubegroup.ProjectRole("0123abcd", capi.EditorKeystoneRole))
	require.Equal(t, "keystone:project:0123abcd:role:member", members.Name)

	require.Empty(t, binds.admit(t, bridgeUser, ns, binding(capi.ProjectEditorRole, members), nil))
	require.Empty(t, binds.admit(t, bridgeUser, ns, binding(capi.ProjectViewerRole, group(kubegroup.Project("0123abcd"))), nil))
	require.Empty(t, binds.admit(t, "system:admin", ns, binding(capi.ProjectEditorRole, group("system:authenticated")), nil), "not the bridge: not matched")
	for what, b := range map[string]map[string]any{
		"the project's every token":     binding(capi.ProjectEditorRole, group(kubegroup.Project("0123abcd"))),
		"its readers":                   binding(capi.ProjectEditorRole, group(kubegroup.ProjectRole("0123abcd", "reader"))),
		"its admins":                    binding(capi.ProjectEditorRole, group(kubegroup.ProjectRole("0123abcd", "admin"))),
		"another project's members":     binding(capi.ProjectEditorRole, group(kubegroup.ProjectRole("4567ef", capi.EditorKeystoneRole))),
		"a user":                        binding(capi.ProjectEditorRole, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "keystone:u1"}),
		"everyone":                      binding(capi.ProjectEditorRole, group("system:authenticated")),
		"two subjects":                  binding(capi.ProjectEditorRole, members, members),
		"no subject":                    binding(capi.ProjectEditorRole),
		"the viewer role, to members":   binding(capi.ProjectViewerRole, members),
		"the secret reader, to members": binding(capi.SecretReaderRole, members),
	} {
		got := binds.admit(t, bridgeUser, ns, b, nil)
		require.True(t, strings.HasPrefix(got, binds.name+": "), "%s: %q", what, got)
		require.Contains(t, got, "magnum-project-cluster-editor to the group keystone:project:<the namespace's project id>:role:member", what)
	}
}

// Tenants (Keystone users) write, and delete, Secrets of the application-credential type only.
func TestTenantsWriteOnlyCredentialSecrets(t *testing.T) {
	secrets := compilePolicies(t)[capi.CredentialSecretsPolicy]
	require.NotNil(t, secrets)
	ns, tenant := "magnum-0123abcd", "keystone:1f2e3d4c"
	secret := func(typ corev1.SecretType) map[string]any {
		return toMap(t, &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Name: "my-credential", Namespace: ns}, Type: typ,
			Data: map[string][]byte{"clouds.yaml": []byte("clouds: {}")}})
	}
	credential := secret("magnum.openstack.org/application-credential") // tenantapi.SecretType

	// Allowed: create, update and delete an application credential.
	require.Empty(t, secrets.admit(t, tenant, ns, credential, nil))
	require.Empty(t, secrets.admit(t, tenant, ns, credential, credential))
	require.Empty(t, secrets.admit(t, tenant, ns, nil, credential))
	// Not matched: the bridge, an administrator, a ServiceAccount.
	for _, user := range []string{bridgeUser, "magnum-capi-bridge-admin", "system:serviceaccount:" + ns + ":web-autoscaler"} {
		require.Empty(t, secrets.admit(t, user, ns, secret(corev1.SecretTypeOpaque), nil), user)
		require.Empty(t, secrets.admit(t, user, ns, nil, secret(corev1.SecretTypeTLS)), user)
	}

	for what, c := range map[string]struct{ object, oldObject map[string]any }{
		"create Opaque":                    {secret(corev1.SecretTypeOpaque), nil},
		"create without a type":            {secret(""), nil},
		"create a ServiceAccount token":    {secret(corev1.SecretTypeServiceAccountToken), nil},
		"create a CA (kubernetes.io/tls)":  {secret(corev1.SecretTypeTLS), nil},
		"overwrite a cluster's Secret":     {credential, secret("cluster.x-k8s.io/secret")},
		"update an Opaque Secret":          {secret(corev1.SecretTypeOpaque), secret(corev1.SecretTypeOpaque)},
		"turn a credential into Opaque":    {secret(corev1.SecretTypeOpaque), credential},
		"delete a kubeconfig Secret":       {nil, secret("cluster.x-k8s.io/secret")},
		"delete the cloud-config (Opaque)": {nil, secret(corev1.SecretTypeOpaque)},
	} {
		got := secrets.admit(t, tenant, ns, c.object, c.oldObject)
		require.True(t, strings.HasPrefix(got, secrets.name+": "), "%s: %q", what, got)
		require.Contains(t, got, "Secret my-credential: tenants may only write Secrets of type magnum.openstack.org/application-credential", what)
		require.Contains(t, got, "kubectl create secret generic NAME --type=magnum.openstack.org/application-credential --from-file=clouds.yaml", what)
	}
}
