// Package kubegroup names the Kubernetes users and groups that Keystone identities become. The
// Keystone webhook (tenantview) hands these names to the apiserver and the CAPI layer binds roles to
// them; the package depends on nothing so that binding a project's group does not pull Keystone in.
package kubegroup

import "strings"

// Prefix starts every user and group name, so that no Keystone name can collide with a Kubernetes
// one ("system:masters", a ServiceAccount, another authenticator's users).
const Prefix = "keystone:"

// Project is the group of every token scoped to the project, whatever its roles: the subject of the
// project namespace's viewer RoleBinding.
func Project(projectID string) string { return Prefix + "project:" + projectID }

// ProjectRole is the group of the tokens scoped to the project with the role (lower case, as
// Keystone role names compare case-insensitively).
func ProjectRole(projectID, role string) string {
	return Project(projectID) + ":role:" + strings.ToLower(role)
}
