package keystone

import (
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/config"
)

// ServiceAuthFromConfig reads Magnum's service user from magnum.conf, as magnum-conductor's admin
// context does: the `[keystone_auth]` section (keystoneauth password plugin options), falling back
// key by key to `[keystone_authtoken]`, where deployments configure the same service user for
// keystonemiddleware. (Zed's legacy fallback to `admin_user`/`admin_tenant_name` is not supported.)
// Only the password plugin is supported.
func ServiceAuthFromConfig(f *config.File) (PasswordAuth, error) {
	get := func(key string) string {
		if v := f.String("keystone_auth", key, ""); v != "" {
			return v
		}
		return f.String("keystone_authtoken", key, "")
	}
	authType := get("auth_type")
	if authType != "" && authType != "password" && authType != "v3password" {
		return PasswordAuth{}, &config.Error{Section: "keystone_auth", Key: "auth_type",
			Reason: "only the password plugin is supported for the service user, got " + authType}
	}
	insecureSection := "keystone_auth"
	if _, ok := f.Lookup(insecureSection, "insecure"); !ok {
		insecureSection = "keystone_authtoken"
	}
	insecure, err := f.Bool(insecureSection, "insecure", false)
	if err != nil {
		return PasswordAuth{}, err
	}
	auth := PasswordAuth{
		AuthURL:           get("auth_url"),
		UserID:            get("user_id"),
		Username:          get("username"),
		UserDomainName:    get("user_domain_name"),
		UserDomainID:      get("user_domain_id"),
		Password:          NewSecret(get("password")),
		ProjectID:         get("project_id"),
		ProjectName:       get("project_name"),
		ProjectDomainName: get("project_domain_name"),
		ProjectDomainID:   get("project_domain_id"),
		CAFile:            get("cafile"),
		Insecure:          insecure,
	}
	missing := func(key string) error {
		return &config.Error{Section: "keystone_auth", Key: key, Reason: "required for the service user (also looked up in [keystone_authtoken])"}
	}
	switch {
	case auth.AuthURL == "":
		return PasswordAuth{}, missing("auth_url")
	case auth.UserID == "" && auth.Username == "":
		return PasswordAuth{}, missing("username")
	case auth.Password.IsZero():
		return PasswordAuth{}, missing("password")
	case auth.ProjectID == "" && auth.ProjectName == "":
		return PasswordAuth{}, missing("project_name")
	}
	if auth.UserID == "" && auth.UserDomainName == "" && auth.UserDomainID == "" {
		auth.UserDomainID = "default"
	}
	if auth.ProjectID == "" && auth.ProjectDomainName == "" && auth.ProjectDomainID == "" {
		auth.ProjectDomainID = "default"
	}
	return auth, nil
}
