package capi

import (
	"context"
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// ConfiningPolicies are the ValidatingAdmissionPolicies of deploy/kubernetes/admission-policy.yaml
// (the chart's templates/admission-policy.yaml) that confine the bridge's cluster-wide RBAC to project
// namespaces. Each names the bridge's username in a match condition, so it confines only the identity
// it names.
var ConfiningPolicies = []string{
	"magnum-capi-bridge-project-namespaces-only",
	"magnum-capi-bridge-own-namespaces",
	"magnum-capi-bridge-binds-only-itself",
	"magnum-capi-bridge-autoscaler-roles",
	"magnum-capi-bridge-autoscaler-deployments",
}

// ClassPolicy keeps every Cluster in a project namespace on a ClusterClass of its own namespace;
// it applies to everyone.
const ClassPolicy = "magnum-project-clusters-use-own-classes"

// AutoscalerPolicy keeps each cluster-autoscaler (ServiceAccount <cluster>-autoscaler of a project
// namespace) to annotating the Machines of its own cluster; it applies to the autoscalers, not to
// the bridge.
const AutoscalerPolicy = "magnum-cluster-autoscaler-own-cluster"

// CredentialSecretsPolicy keeps the Secret writes of Keystone users (usernames keystone:…, the
// tenant API's ProjectEditorRole) to Secrets of type magnum.openstack.org/application-credential
// (tenantapi.SecretType), their application credentials; it applies to the tenants, not to the bridge.
const CredentialSecretsPolicy = "magnum-project-credential-secrets"

// AdmissionPolicies are all the policies CheckAdmissionPolicies requires: ConfiningPolicies, then
// ClassPolicy, AutoscalerPolicy and CredentialSecretsPolicy.
func AdmissionPolicies() []string {
	return append(slices.Clone(ConfiningPolicies), ClassPolicy, AutoscalerPolicy, CredentialSecretsPolicy)
}

// APIResource is a resource the bridge reads or writes, by group/version and plural name.
type APIResource struct{ GroupVersion, Resource string }

// WhoAmI is the username the management cluster knows the configured credentials as.
func WhoAmI(ctx context.Context, cfg *rest.Config) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("cannot reach the API server at %s as the configured identity: %w", cfg.Host, err)
	}
	return r.Status.UserInfo.Username, nil
}

// CheckAPIResources finds every resource in the API server's discovery: missing ones mean a Cluster
// API provider (or its CRDs) is not installed.
func CheckAPIResources(ctx context.Context, cfg *rest.Config, want []APIResource) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var missing []string
	served := map[string][]string{}
	for _, w := range want {
		names, ok := served[w.GroupVersion]
		if !ok {
			list, err := cs.Discovery().ServerResourcesForGroupVersion(w.GroupVersion)
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("discover %s: %w", w.GroupVersion, err)
			}
			if list != nil {
				for _, r := range list.APIResources {
					names = append(names, r.Name)
				}
			}
			served[w.GroupVersion] = names
		}
		if !slices.Contains(names, w.Resource) {
			missing = append(missing, w.Resource+"."+w.GroupVersion)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the API server does not serve %s: install Cluster API and its providers (CRDs)", strings.Join(missing, ", "))
	}
	return nil
}

// CheckAdmissionPolicies verifies that the policies confining the bridge exist, are bound with
// the Deny action, and name username (the bridge's own identity). Without them the bridge's
// cluster-wide RBAC is not confined to project namespaces (docs/isolation.md).
func CheckAdmissionPolicies(ctx context.Context, cfg *rest.Config, username string) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	api := cs.AdmissionregistrationV1()
	for _, name := range AdmissionPolicies() {
		p, err := api.ValidatingAdmissionPolicies().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("ValidatingAdmissionPolicy %s does not exist: apply deploy/kubernetes/admission-policy.yaml (or install the Helm chart)", name)
		}
		if err != nil {
			return fmt.Errorf("read ValidatingAdmissionPolicy %s: %w", name, err)
		}
		if slices.Contains(ConfiningPolicies, name) && !namesUser(p, username) {
			return fmt.Errorf("ValidatingAdmissionPolicy %s does not apply to %s, the identity the bridge runs as: its ServiceAccount and the policies must name the same account", name, username)
		}
		b, err := api.ValidatingAdmissionPolicyBindings().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("ValidatingAdmissionPolicyBinding %s does not exist: the policy is not in force", name)
		}
		if err != nil {
			return fmt.Errorf("read ValidatingAdmissionPolicyBinding %s: %w", name, err)
		}
		if b.Spec.PolicyName != name || !slices.Contains(b.Spec.ValidationActions, admissionregistrationv1.Deny) {
			return fmt.Errorf("ValidatingAdmissionPolicyBinding %s does not bind %s with the Deny action", name, name)
		}
	}
	return nil
}

// namesUser reports whether one of the policy's match conditions compares the request's username
// with this one, as the policies of admission-policy.yaml do.
func namesUser(p *admissionregistrationv1.ValidatingAdmissionPolicy, username string) bool {
	for _, c := range p.Spec.MatchConditions {
		if strings.Contains(c.Expression, "request.userInfo.username") && strings.Contains(c.Expression, "'"+username+"'") {
			return true
		}
	}
	return false
}
