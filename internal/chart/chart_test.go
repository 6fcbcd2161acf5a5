package chart

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/autoscaler"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/capi"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/config"
)

const magnumConf = "[DEFAULT]\ntransport_url = rabbit://magnum:secret@rabbit:5672/\n"

func render(t *testing.T, namespace string, values map[string]any) map[string]*unstructured.Unstructured {
	t.Helper()
	if values["config"] == nil {
		values["config"] = map[string]any{"magnumConf": magnumConf}
	}
	out, err := Render("mcb", namespace, values)
	require.NoError(t, err)
	objs, err := Objects(out)
	require.NoError(t, err)
	byKey := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		key := o.GetKind() + "/" + o.GetName()
		require.NotContains(t, byKey, key, "rendered twice")
		byKey[key] = o
	}
	return byKey
}

func rules(t *testing.T, role *unstructured.Unstructured) []map[string]any {
	t.Helper()
	require.NotNil(t, role)
	rs, _, err := unstructured.NestedSlice(role.Object, "rules")
	require.NoError(t, err)
	out := make([]map[string]any, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.(map[string]any))
	}
	return out
}

func container(t *testing.T, d *unstructured.Unstructured) map[string]any {
	t.Helper()
	cs, _, err := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	require.NoError(t, err)
	require.Len(t, cs, 1)
	return cs[0].(map[string]any)
}

// deploy/kubernetes is the chart's render, not a second copy.
func TestDeployKubernetesIsTheChartsRender(t *testing.T) {
	files, err := KubernetesFiles()
	require.NoError(t, err)
	require.Len(t, files, 3)
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(KubernetesDir(), name))
		require.NoError(t, err)
		require.Equal(t, want, string(got), "deploy/kubernetes/%s is stale: run `make generate`", name)
	}
}

func TestDefaultValues(t *testing.T) {
	objs := render(t, "magnum-capi-bridge", map[string]any{})
	for _, k := range []string{"Deployment/mcb-magnum-capi-bridge", "Secret/mcb-magnum-capi-bridge-config", "Service/mcb-magnum-capi-bridge-metrics",
		"PodDisruptionBudget/mcb-magnum-capi-bridge", "ServiceAccount/magnum-capi-bridge", "ClusterRole/magnum-capi-bridge",
		"ClusterRole/" + capi.SecretReaderRole, "ClusterRole/" + capi.ProjectViewerRole, "Role/magnum-capi-bridge-leader-election"} {
		require.Contains(t, objs, k)
	}
	require.NotContains(t, objs, "ServiceMonitor/mcb-magnum-capi-bridge", "off by default")
	require.NotContains(t, objs, "Namespace/magnum-capi-bridge", "helm install --create-namespace owns it")
	for _, p := range capi.AdmissionPolicies() {
		require.Contains(t, objs, "ValidatingAdmissionPolicy/"+p)
		require.Contains(t, objs, "ValidatingAdmissionPolicyBinding/"+p)
	}
	// The bridge reads each policy and binding by name at start-up, and those only.
	var policyNames []any
	for _, r := range rules(t, objs["ClusterRole/magnum-capi-bridge"]) {
		if slices.Contains(r["resources"].([]any), any("validatingadmissionpolicies")) {
			policyNames = r["resourceNames"].([]any)
		}
	}
	require.ElementsMatch(t, capi.AdmissionPolicies(), policyNames)
	// The tenant API: off by default (no webhook, no Service for it), its RBAC always there.
	require.NotContains(t, objs, "ValidatingWebhookConfiguration/magnum-capi-bridge-tenant-api")
	require.NotContains(t, objs, "Service/mcb-magnum-capi-bridge-webhook")
	tenantRBAC(t, objs)
	// The autoscalers' PriorityClass, the one their Deployments name and the quota admits.
	pc := objs["PriorityClass/"+autoscaler.PriorityClass]
	require.NotNil(t, pc)
	require.Equal(t, capi.AutoscalerPriorityClass, pc.GetName())
	require.EqualValues(t, 1000, pc.Object["value"])
	require.Equal(t, false, pc.Object["globalDefault"])
	require.Equal(t, "Never", pc.Object["preemptionPolicy"])

	d := objs["Deployment/mcb-magnum-capi-bridge"]
	replicas, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas")
	require.EqualValues(t, 2, replicas)
	c := container(t, d)
	require.Equal(t, "magnum-capi-bridge:0.1.0", c["image"])
	require.Equal(t, "/healthz", c["livenessProbe"].(map[string]any)["httpGet"].(map[string]any)["path"])
	require.Equal(t, "/readyz", c["readinessProbe"].(map[string]any)["httpGet"].(map[string]any)["path"])
	sc := c["securityContext"].(map[string]any)
	require.Equal(t, false, sc["allowPrivilegeEscalation"])
	require.Equal(t, true, sc["readOnlyRootFilesystem"])
	require.Equal(t, []any{"ALL"}, sc["capabilities"].(map[string]any)["drop"])
	podSC, _, _ := unstructured.NestedMap(d.Object, "spec", "template", "spec", "securityContext")
	require.Equal(t, true, podSC["runAsNonRoot"])
	require.EqualValues(t, 65532, podSC["runAsUser"])
	require.Equal(t, "RuntimeDefault", podSC["seccompProfile"].(map[string]any)["type"])
	require.NotEmpty(t, c["resources"].(map[string]any)["requests"])
	sa, _, _ := unstructured.NestedString(d.Object, "spec", "template", "spec", "serviceAccountName")
	require.Equal(t, "magnum-capi-bridge", sa)

	// bridge.conf parses as the bridge (and oslo.config) read it: no inline comment in a value.
	sec := objs["Secret/mcb-magnum-capi-bridge-config"]
	data, _, _ := unstructured.NestedStringMap(sec.Object, "stringData")
	require.Equal(t, magnumConf, data["magnum.conf"])
	f, err := config.Parse(data["bridge.conf"])
	require.NoError(t, err)
	require.Equal(t, "", f.String("bridge", "kubeconfig", "unset"), "in-cluster")
	require.Equal(t, "0.0.0.0:9090", f.String("bridge", "metrics_bind", ""))
	require.Equal(t, "true", f.String("bridge", "leader_election", ""))
	require.Equal(t, "magnum-capi-bridge", f.String("bridge", "leader_election_namespace", ""), "where the Role lets it hold the Lease")
	require.Equal(t, "magnum-", f.String("bridge", "namespace_prefix", ""))
	require.Equal(t, "openstack", f.String("bridge", "default_infrastructure", ""))
}

// rule is one RBAC rule, as the chart writes it: groups, resources, names and verbs.
type rule struct{ groups, resources, names, verbs []any }

func ruleOf(r map[string]any) rule {
	list := func(k string) []any {
		l, _ := r[k].([]any)
		return l
	}
	return rule{list("apiGroups"), list("resources"), list("resourceNames"), list("verbs")}
}

func strs(s ...string) []any {
	out := make([]any, len(s))
	for i, x := range s {
		out[i] = x
	}
	return out
}

// tenantRBAC: the tenant API's rules. Every project member reads MagnumClusters; the members (editor)
// write them and write, never read, Secrets; the bridge reconciles them and may bind the editor role.
func tenantRBAC(t *testing.T, objs map[string]*unstructured.Unstructured) {
	t.Helper()
	group := strs("coe.magnum.openstack.org")
	var viewer []rule
	for _, r := range rules(t, objs["ClusterRole/"+capi.ProjectViewerRole]) {
		viewer = append(viewer, ruleOf(r))
	}
	require.Contains(t, viewer, rule{group, strs("magnumclusters"), nil, strs("get", "list", "watch")})
	for _, r := range viewer {
		require.NotContains(t, r.resources, "secrets", "viewers never read Secrets")
	}

	var editor []rule
	for _, r := range rules(t, objs["ClusterRole/"+capi.ProjectEditorRole]) {
		editor = append(editor, ruleOf(r))
	}
	require.Equal(t, []rule{
		{group, strs("magnumclusters"), nil, strs("get", "list", "watch", "create", "update", "patch", "delete")},
		{strs(""), strs("secrets"), nil, strs("create", "update", "patch", "delete")},
	}, editor, "Secrets are write-only for tenants")

	var bridge []rule
	for _, r := range rules(t, objs["ClusterRole/magnum-capi-bridge"]) {
		bridge = append(bridge, ruleOf(r))
	}
	require.Contains(t, bridge, rule{group, strs("magnumclusters"), nil, strs("get", "list", "watch", "update", "patch")})
	require.Contains(t, bridge, rule{group, strs("magnumclusters/status"), nil, strs("get", "update", "patch")})
	require.Contains(t, bridge, rule{group, strs("magnumclusters/finalizers"), nil, strs("update")})
	require.Contains(t, bridge, rule{strs("rbac.authorization.k8s.io"), strs("clusterroles"),
		strs(capi.SecretReaderRole, capi.ProjectViewerRole, capi.ProjectEditorRole), strs("bind")})
	for _, r := range bridge {
		if slices.Contains(r.groups, any("coe.magnum.openstack.org")) {
			require.NotContains(t, r.verbs, "create", "the tenant creates its MagnumClusters")
			require.NotContains(t, r.verbs, "delete", "the tenant deletes its MagnumClusters")
		}
	}
}

// tenantAPIValues turn the tenant API on.
func tenantAPIValues() map[string]any {
	return map[string]any{"enabled": true, "webhook": map[string]any{"tlsSecret": "bridge-webhook-tls", "caBundle": "Y2E="}}
}

// With tenantAPI.enabled: the bridge's configuration turns on the tenant view and API, its pod serves
// the webhook port with the certificate, a Service exposes it and the apiserver is told to call it
// for MagnumClusters.
func TestTenantAPIValues(t *testing.T) {
	objs := render(t, "openstack", map[string]any{"tenantAPI": tenantAPIValues()})
	tenantRBAC(t, objs)

	data, _, _ := unstructured.NestedStringMap(objs["Secret/mcb-magnum-capi-bridge-config"].Object, "stringData")
	f, err := config.Parse(data["bridge.conf"])
	require.NoError(t, err)
	require.Equal(t, "true", f.String("bridge", "tenant_view", ""))
	require.Equal(t, "true", f.String("bridge", "tenant_api", ""))
	require.Equal(t, "0.0.0.0:9514", f.String("bridge", "token_webhook_bind", ""))
	require.Equal(t, "/etc/magnum-capi-bridge-webhook/tls.crt", f.String("bridge", "token_webhook_cert_file", ""))
	require.Equal(t, "/etc/magnum-capi-bridge-webhook/tls.key", f.String("bridge", "token_webhook_key_file", ""))

	d := objs["Deployment/mcb-magnum-capi-bridge"]
	c := container(t, d)
	require.Contains(t, c["ports"], map[string]any{"name": "webhook", "containerPort": int64(9514), "protocol": "TCP"})
	require.Contains(t, c["volumeMounts"], map[string]any{"name": "webhook-tls", "mountPath": "/etc/magnum-capi-bridge-webhook", "readOnly": true})
	vols, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "volumes")
	var tls map[string]any
	for _, v := range vols {
		if v.(map[string]any)["name"] == "webhook-tls" {
			tls = v.(map[string]any)["secret"].(map[string]any)
		}
	}
	require.NotNil(t, tls)
	require.Equal(t, "bridge-webhook-tls", tls["secretName"])

	svc := objs["Service/mcb-magnum-capi-bridge-webhook"]
	require.NotNil(t, svc)
	require.Equal(t, "openstack", svc.GetNamespace())
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	require.Equal(t, []any{map[string]any{"name": "webhook", "port": int64(443), "targetPort": "webhook", "protocol": "TCP"}}, ports)

	vwc := objs["ValidatingWebhookConfiguration/magnum-capi-bridge-tenant-api"]
	require.NotNil(t, vwc)
	hooks, _, _ := unstructured.NestedSlice(vwc.Object, "webhooks")
	require.Len(t, hooks, 1)
	h := hooks[0].(map[string]any)
	require.Equal(t, "Fail", h["failurePolicy"])
	require.Equal(t, "None", h["sideEffects"])
	require.Equal(t, []any{"v1"}, h["admissionReviewVersions"])
	require.EqualValues(t, 10, h["timeoutSeconds"])
	require.Equal(t, []any{map[string]any{"apiGroups": []any{"coe.magnum.openstack.org"}, "apiVersions": []any{"*"},
		"operations": []any{"CREATE", "UPDATE"}, "resources": []any{"magnumclusters"}, "scope": "Namespaced"}}, h["rules"])
	require.Equal(t, map[string]any{"caBundle": "Y2E=", "service": map[string]any{"name": "mcb-magnum-capi-bridge-webhook",
		"namespace": "openstack", "path": "/validate/magnumclusters", "port": int64(443)}}, h["clientConfig"])

	// Another port: the listener, the container port and the Service's target follow.
	values := tenantAPIValues()
	values["webhook"].(map[string]any)["port"] = 9600
	objs = render(t, "openstack", map[string]any{"tenantAPI": values})
	data, _, _ = unstructured.NestedStringMap(objs["Secret/mcb-magnum-capi-bridge-config"].Object, "stringData")
	f, err = config.Parse(data["bridge.conf"])
	require.NoError(t, err)
	require.Equal(t, "0.0.0.0:9600", f.String("bridge", "token_webhook_bind", ""))
	require.Contains(t, container(t, objs["Deployment/mcb-magnum-capi-bridge"])["ports"],
		map[string]any{"name": "webhook", "containerPort": int64(9600), "protocol": "TCP"})
}

func TestNonDefaultValues(t *testing.T) {
	values := map[string]any{
		"replicaCount":   1,
		"leaderElection": map[string]any{"enabled": false},
		"serviceAccount": map[string]any{"name": "bridge"},
		"image":          map[string]any{"repository": "registry.example/mcb", "digest": "sha256:0123"},
		"config": map[string]any{"existingSecret": "magnum-conf", "bridge": map[string]any{
			"namespace_prefix": "m23-", "default_infrastructure": "inmemory", "namespace_quota": "secrets=10, pods=0"}},
		"metrics": map[string]any{"port": 9191, "serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prom"}}},
	}
	objs := render(t, "openstack", values)
	require.NotContains(t, objs, "PodDisruptionBudget/mcb-magnum-capi-bridge", "one replica: a PDB would block every drain")
	require.Contains(t, objs, "ServiceMonitor/mcb-magnum-capi-bridge")
	d := objs["Deployment/mcb-magnum-capi-bridge"]
	c := container(t, d)
	require.Equal(t, "registry.example/mcb@sha256:0123", c["image"])
	require.EqualValues(t, 9191, c["ports"].([]any)[0].(map[string]any)["containerPort"])
	vols, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "volumes")
	require.Equal(t, "magnum-conf", vols[0].(map[string]any)["secret"].(map[string]any)["secretName"])

	data, _, _ := unstructured.NestedStringMap(objs["Secret/mcb-magnum-capi-bridge-config"].Object, "stringData")
	require.NotContains(t, data, "magnum.conf", "it comes from the existing Secret")
	f, err := config.Parse(data["bridge.conf"])
	require.NoError(t, err)
	require.Equal(t, "false", f.String("bridge", "leader_election", ""))
	require.Equal(t, "openstack", f.String("bridge", "leader_election_namespace", ""))
	require.Equal(t, "0.0.0.0:9191", f.String("bridge", "metrics_bind", ""))
	require.Equal(t, "secrets=10, pods=0", f.String("bridge", "namespace_quota", ""))

	// The policies and bindings name the release's ServiceAccount.
	user := "'system:serviceaccount:openstack:bridge'"
	for _, p := range capi.ConfiningPolicies {
		conds, _, _ := unstructured.NestedSlice(objs["ValidatingAdmissionPolicy/"+p].Object, "spec", "matchConditions")
		require.Contains(t, conds[0].(map[string]any)["expression"], user, p)
	}
	subjects, _, _ := unstructured.NestedSlice(objs["ClusterRoleBinding/magnum-capi-bridge"].Object, "subjects")
	require.Equal(t, map[string]any{"kind": "ServiceAccount", "name": "bridge", "namespace": "openstack"}, subjects[0])
	// Its leader election Lease: the Role and the policy's exemption are in the release namespace.
	require.Equal(t, "openstack", objs["Role/magnum-capi-bridge-leader-election"].GetNamespace())
	conds, _, _ := unstructured.NestedSlice(objs["ValidatingAdmissionPolicy/magnum-capi-bridge-project-namespaces-only"].Object, "spec", "matchConditions")
	require.Contains(t, conds[1].(map[string]any)["expression"], "request.namespace == 'openstack'")
	validations, _, _ := unstructured.NestedSlice(objs["ValidatingAdmissionPolicy/magnum-capi-bridge-binds-only-itself"].Object, "spec", "validations")
	require.Contains(t, validations[0].(map[string]any)["expression"], "s.name == 'bridge'")
	require.Contains(t, validations[0].(map[string]any)["expression"], "s.namespace == 'openstack'")
}

// A changed configuration changes the pod template (the config-hash annotation), so pods roll.
func TestConfigChangeRollsThePods(t *testing.T) {
	hash := func(prefix string) string {
		objs := render(t, "magnum-capi-bridge", map[string]any{"config": map[string]any{"magnumConf": magnumConf,
			"bridge": map[string]any{"namespace_prefix": prefix}}})
		a, _, _ := unstructured.NestedStringMap(objs["Deployment/mcb-magnum-capi-bridge"].Object, "spec", "template", "metadata", "annotations")
		require.Len(t, a["checksum/config"], 64)
		return a["checksum/config"]
	}
	require.NotEqual(t, hash("magnum-"), hash("magnum23-"))
	require.Equal(t, hash("magnum-"), hash("magnum-"))
}

func TestBadValuesAreRefused(t *testing.T) {
	_, err := Render("mcb", "ns", map[string]any{})
	require.ErrorContains(t, err, "set config.magnumConf")
	_, err = Render("mcb", "ns", map[string]any{"config": map[string]any{"magnumConf": magnumConf, "bridge": map[string]any{"kubeconfig": "/x"}}})
	require.ErrorContains(t, err, "config.bridge.kubeconfig is set by the chart")
	_, err = Render("mcb", "ns", map[string]any{"config": map[string]any{"magnumConf": magnumConf},
		"metrics": map[string]any{"service": map[string]any{"enabled": false}, "serviceMonitor": map[string]any{"enabled": true}}})
	require.ErrorContains(t, err, "metrics.serviceMonitor needs metrics.service.enabled")

	// The tenant API needs its certificate and CA, and owns the tenant view's listener keys.
	for missing, want := range map[string]string{"tlsSecret": "tenantAPI.enabled needs tenantAPI.webhook.tlsSecret",
		"caBundle": "tenantAPI.enabled needs tenantAPI.webhook.caBundle"} {
		values := tenantAPIValues()
		delete(values["webhook"].(map[string]any), missing)
		_, err = Render("mcb", "ns", map[string]any{"config": map[string]any{"magnumConf": magnumConf}, "tenantAPI": values})
		require.ErrorContains(t, err, want)
	}
	for _, key := range []string{"tenant_view", "tenant_api", "token_webhook_bind", "token_webhook_cert_file"} {
		_, err = Render("mcb", "ns", map[string]any{"config": map[string]any{"magnumConf": magnumConf, "bridge": map[string]any{key: "x"}},
			"tenantAPI": tenantAPIValues()})
		require.ErrorContains(t, err, "config.bridge."+key+" is set by the chart")
	}
	// Without the tenant API they are the operator's (the tenant view alone).
	_, err = Render("mcb", "ns", map[string]any{"config": map[string]any{"magnumConf": magnumConf, "bridge": map[string]any{"tenant_view": "true"}}})
	require.NoError(t, err)
}
