package keystone

// End-to-end tests against the real Keystone of the local stack (deploy/local/openstack/up.sh:
// Keystone 22.0.x, "Zed", on 127.0.0.1:5000). The identities come from the clouds.yaml that the
// stack writes (/etc/openstack/clouds.yaml, or OS_CLIENT_CONFIG_FILE): `devstack` (user demo,
// member of project demo), `devstack-alt` (alt_demo in alt_demo) and `devstack-admin` (admin), read
// with gophercloud utils' clientconfig, the library CAPO itself uses.
//
// They are of the e2e tier (build tag `e2e`, testutil.E2E): skipped without the tag; with it, an
// unreachable Keystone fails them.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/utils/v2/openstack/clientconfig"
	"sigs.k8s.io/yaml"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

const (
	cloudDemo  = "devstack"
	cloudAlt   = "devstack-alt"
	cloudAdmin = "devstack-admin"
)

type e2eEnv struct {
	authURL string
	region  string
	// demo, alt and admin act as those users through their password-issued tokens, the way the
	// RPC context carries a user's token; admin stands in for Magnum's service user (admin role).
	demo, alt, admin *Client
	// tokens of demo and alt, to build more clients; never logged.
	demoToken Secret
}

// keystoneE2E connects to the local Keystone or fails the test with instructions.
func keystoneE2E(t testing.TB) *e2eEnv {
	t.Helper()
	testutil.Require(t, testutil.E2E)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	demoCloud, err := clientconfig.GetCloudFromYAML(&clientconfig.ClientOpts{Cloud: cloudDemo})
	if err != nil {
		e2eUnavailable(t, fmt.Sprintf("no cloud %q in clouds.yaml (written by deploy/local/openstack/up.sh to /etc/openstack/clouds.yaml; OS_CLIENT_CONFIG_FILE overrides): %v", cloudDemo, err))
	}
	env := &e2eEnv{authURL: demoCloud.AuthInfo.AuthURL, region: demoCloud.RegionName}
	probe, err := http.NewRequestWithContext(ctx, http.MethodGet, env.authURL, nil)
	if err == nil {
		var resp *http.Response
		resp, err = (&http.Client{Timeout: 5 * time.Second}).Do(probe)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("GET %s answered %s", env.authURL, resp.Status)
			}
		}
	}
	if err != nil {
		e2eUnavailable(t, fmt.Sprintf("Keystone at %s is unreachable (%v); start the local stack with deploy/local/openstack/up.sh", env.authURL, err))
	}

	var demoToken, altToken Secret
	demoToken = passwordToken(ctx, t, cloudDemo)
	altToken = passwordToken(ctx, t, cloudAlt)
	env.demoToken = demoToken
	if env.demo, err = NewClient(ctx, env.authURL, demoToken); err != nil {
		t.Fatalf("demo client: %v", err)
	}
	if env.alt, err = NewClient(ctx, env.authURL, altToken); err != nil {
		t.Fatalf("alt_demo client: %v", err)
	}
	adminCloud, err := clientconfig.GetCloudFromYAML(&clientconfig.ClientOpts{Cloud: cloudAdmin})
	if err != nil {
		t.Fatalf("cloud %s: %v", cloudAdmin, err)
	}
	a := adminCloud.AuthInfo
	env.admin, err = NewPasswordClient(ctx, PasswordAuth{
		AuthURL: a.AuthURL, Username: a.Username, UserDomainName: a.UserDomainName, Password: NewSecret(a.Password),
		ProjectName: a.ProjectName, ProjectDomainName: a.ProjectDomainName,
	})
	if err != nil {
		t.Fatalf("admin client: %v", err)
	}
	return env
}

func e2eUnavailable(t testing.TB, why string) {
	t.Helper()
	t.Fatalf("%s (the e2e tier needs the local stack: `make up`)", why)
}

// passwordToken gets a project-scoped token with gophercloud password auth from a clouds.yaml
// entry, as magnum-api's keystonemiddleware would have received it from the user.
func passwordToken(ctx context.Context, t testing.TB, cloud string) Secret {
	t.Helper()
	opts, err := clientconfig.AuthOptions(&clientconfig.ClientOpts{Cloud: cloud})
	if err != nil {
		t.Fatalf("auth options for %s: %v", cloud, err)
	}
	provider, err := openstack.AuthenticatedClient(ctx, *opts)
	if err != nil {
		t.Fatalf("password authentication as %s: %v", cloud, newError("authenticate", "", err, opts.Password))
	}
	return NewSecret(provider.Token())
}

// newClusterUUID returns a fresh fake cluster and registers a last-resort sweep with the admin
// client, so that a failing test leaves nothing in Keystone either.
func (env *e2eEnv) newClusterUUID(t testing.TB) string {
	t.Helper()
	id := uuid.NewString()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, owner := range []string{env.demo.Identity().UserID, env.alt.Identity().UserID} {
			refs, err := env.admin.ListClusterCredentials(ctx, id, owner)
			if err != nil {
				t.Errorf("cleanup: list: %v", err)
				continue
			}
			for _, r := range refs {
				t.Errorf("cleanup: %s was left behind; deleting it", r)
				if err := env.admin.DeleteApplicationCredential(ctx, r); err != nil {
					t.Errorf("cleanup: %v", err)
				}
			}
		}
	})
	return id
}

func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// tokenViaCloudsYAML does what CAPO does with the Secret: unmarshal the clouds.yaml with
// sigs.k8s.io/yaml into clientconfig.Clouds, build auth options with clientconfig.AuthOptions,
// authenticate with gophercloud. The issued token is then inspected through Keystone.
func (env *e2eEnv) tokenViaCloudsYAML(ctx context.Context, t testing.TB, cloudsYAML []byte) (Identity, error) {
	t.Helper()
	var clouds clientconfig.Clouds
	if err := yaml.Unmarshal(cloudsYAML, &clouds); err != nil {
		t.Fatalf("clouds.yaml does not parse: %v", err)
	}
	cloud, ok := clouds.Clouds[CloudName]
	if !ok {
		t.Fatalf("clouds.yaml has no cloud %q", CloudName)
	}
	opts, err := clientconfig.AuthOptions(&clientconfig.ClientOpts{AuthInfo: cloud.AuthInfo, AuthType: cloud.AuthType, RegionName: cloud.RegionName})
	if err != nil {
		t.Fatalf("clientconfig.AuthOptions: %v", err)
	}
	provider, err := openstack.AuthenticatedClient(ctx, *opts)
	if err != nil {
		return Identity{}, newError("authenticate with clouds.yaml", "", err, opts.ApplicationCredentialSecret)
	}
	inspector, err := NewClient(ctx, env.authURL, NewSecret(provider.Token()))
	if err != nil {
		return Identity{}, err
	}
	return inspector.Identity(), nil
}

func (env *e2eEnv) render(t testing.TB, cred ApplicationCredential) []byte {
	t.Helper()
	out, err := RenderCloudsYAML(CloudsYAMLParams{
		AuthURL: env.authURL, RegionName: env.region, Interface: "public",
		ApplicationCredentialID: cred.ID, ApplicationCredentialSecret: cred.Secret,
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func refIDs(refs []CredentialRef) []string {
	var ids []string
	for _, r := range refs {
		ids = append(ids, r.ID)
	}
	sort.Strings(ids)
	return ids
}

func deletedIDs(ds []Deletion) []string {
	var ids []string
	for _, d := range ds {
		ids = append(ids, d.Credential.ID)
	}
	sort.Strings(ids)
	return ids
}

func TestE2EClusterCredentialsLifecycle(t *testing.T) {
	env := keystoneE2E(t)
	ctx := ctxFor(t)
	clusterUUID := env.newClusterUUID(t)
	demo := env.demo.Identity()
	if demo.UserName != "demo" || demo.ProjectName != "demo" || !demo.HasRole("member") {
		t.Fatalf("unexpected demo identity: %s roles %v", demo, demo.Roles)
	}

	expires := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	start := time.Now()
	creds, err := env.demo.CreateClusterCredentials(ctx, clusterUUID, CreateOptions{ClusterName: "e2e-lifecycle", ExpiresAt: &expires})
	createTime := time.Since(start)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Logf("created %s and %s in %s", creds.CAPO.Ref(), creds.Workload.Ref(), createTime)

	for _, c := range []ApplicationCredential{creds.CAPO, creds.Workload} {
		if c.UserID != demo.UserID || c.ProjectID != demo.ProjectID || !slices.Equal(c.Roles, []string{"member"}) ||
			c.Secret.IsZero() || !c.ExpiresAt.Equal(expires) {
			t.Fatalf("unexpected credential %s (want user %s project %s, roles [member], expiry %s)", c, demo.UserID, demo.ProjectID, expires)
		}
	}
	if creds.CAPO.Name != CredentialName(clusterUUID, PurposeCAPO, 0) || creds.Workload.Name != CredentialName(clusterUUID, PurposeWorkload, 0) ||
		creds.CAPO.Secret.Reveal() == creds.Workload.Secret.Reveal() || creds.CAPO.ID == creds.Workload.ID {
		t.Fatalf("the two credentials must be distinct and named after the cluster: %s / %s", creds.CAPO, creds.Workload)
	}

	// The rendered clouds.yaml works the way CAPO uses it: a token for project demo with only the
	// member role, issued to this application credential.
	for _, c := range []ApplicationCredential{creds.CAPO, creds.Workload} {
		got, err := env.tokenViaCloudsYAML(ctx, t, env.render(t, c))
		if err != nil {
			t.Fatalf("%s: the rendered clouds.yaml does not authenticate: %v", c.Name, err)
		}
		if got.ProjectID != demo.ProjectID || got.UserID != demo.UserID || got.ApplicationCredentialID != c.ID ||
			!slices.Equal(got.Roles, []string{"member"}) || !slices.Equal(got.Methods, []string{"application_credential"}) {
			t.Fatalf("%s: token identity %s roles %v methods %v", c.Name, got, got.Roles, got.Methods)
		}
	}

	// Restricted: the credential cannot mint further credentials (Keystone 403).
	self, err := NewApplicationCredentialClient(ctx, env.authURL, creds.CAPO.ID, creds.CAPO.Secret)
	if err != nil {
		t.Fatalf("authenticate as the CAPO credential: %v", err)
	}
	if _, err := self.CreateClusterCredentials(ctx, env.newClusterUUID(t), CreateOptions{}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("a restricted credential created credentials: %v", err)
	}

	// Idempotent re-create: same names, new ids and secrets, the old ones are gone and no longer
	// authenticate, and there are exactly two.
	start = time.Now()
	again, err := env.demo.CreateClusterCredentials(ctx, clusterUUID, CreateOptions{ClusterName: "e2e-lifecycle"})
	recreateTime := time.Since(start)
	if err != nil {
		t.Fatalf("re-create: %v", err)
	}
	t.Logf("re-created (replacing by name) in %s", recreateTime)
	if again.CAPO.Name != creds.CAPO.Name || again.CAPO.ID == creds.CAPO.ID || again.Workload.ID == creds.Workload.ID ||
		again.CAPO.Secret.Reveal() == creds.CAPO.Secret.Reveal() || !again.CAPO.ExpiresAt.IsZero() {
		t.Fatalf("re-create should replace both credentials: %s", again)
	}
	listed, err := env.demo.ListClusterCredentials(ctx, clusterUUID, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := refIDs(again.Refs()); !slices.Equal(refIDs(listed), want) {
		t.Fatalf("after re-create Keystone lists %v, want exactly %v", refIDs(listed), want)
	}
	if _, err := NewApplicationCredentialClient(ctx, env.authURL, creds.CAPO.ID, creds.CAPO.Secret); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the replaced credential should be gone: %v", err)
	}
	if _, err := env.tokenViaCloudsYAML(ctx, t, env.render(t, again.CAPO)); err != nil {
		t.Fatalf("the re-created credential does not authenticate: %v", err)
	}

	// Delete as the owner.
	start = time.Now()
	deleted, err := DeleteClusterCredentials(ctx, Cleanup{ClusterUUID: clusterUUID, Known: again.Refs(), Owners: []string{demo.UserID}}, env.demo)
	deleteTime := time.Since(start)
	if err != nil {
		t.Fatalf("delete as owner: %v", err)
	}
	t.Logf("deleted both as the owner in %s", deleteTime)
	if !slices.Equal(deletedIDs(deleted), refIDs(again.Refs())) || !strings.Contains(deleted[0].By, "user demo") {
		t.Fatalf("deleted %v", deleted)
	}

	// A second delete reports not-found, distinctly.
	deleted, err = DeleteClusterCredentials(ctx, Cleanup{ClusterUUID: clusterUUID, Known: again.Refs()}, env.demo)
	if len(deleted) != 0 || !OnlyNotFound(err) || !errors.Is(err, ErrNotFound) || errors.Is(err, ErrForbidden) {
		t.Fatalf("second delete: deleted %v, err %v (want only not-found)", deleted, err)
	}
	t.Logf("second delete reports: %v", err)

	// Nothing left behind.
	listed, err = env.demo.ListClusterCredentials(ctx, clusterUUID, "")
	if err != nil || len(listed) != 0 {
		t.Fatalf("left behind: %v %v", listed, err)
	}
	if _, err := NewApplicationCredentialClient(ctx, env.authURL, again.Workload.ID, again.Workload.Secret); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a deleted credential should be gone: %v", err)
	}
}

// Deleting by authenticating as the credential itself. Keystone 22 (Zed) — and later releases —
// refuse every application-credential management call made with a restricted application
// credential's token (keystone/api/users.py _check_unrestricted_application_credential), including
// deleting itself. This test pins that behaviour (if a Keystone ever allows it, it fails and
// docs/credentials.md must change) and exercises the alternative: the self-authenticated client
// still identifies the owner and lists the cluster's credentials, and the service user (admin)
// deletes them; a non-owner's 403 hands over down the chain.
func TestE2EDeleteBySelfAuthenticationAndAdminFallback(t *testing.T) {
	env := keystoneE2E(t)
	ctx := ctxFor(t)
	clusterUUID := env.newClusterUUID(t)
	creds, err := env.demo.CreateClusterCredentials(ctx, clusterUUID, CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}

	self, err := NewApplicationCredentialClient(ctx, env.authURL, creds.CAPO.ID, creds.CAPO.Secret)
	if err != nil {
		t.Fatalf("authenticate as the CAPO credential: %v", err)
	}
	who := self.Identity()
	if who.UserID != env.demo.Identity().UserID || who.ApplicationCredentialID != creds.CAPO.ID {
		t.Fatalf("self-authenticated identity %s does not name the owner", who)
	}
	start := time.Now()
	err = self.DeleteApplicationCredential(ctx, creds.CAPO.Ref())
	t.Logf("self-delete answered in %s: %v", time.Since(start), err)
	if !errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), "application_credential") {
		t.Fatalf("Keystone was expected to refuse a restricted credential deleting itself; got %v", err)
	}
	listed, err := self.ListClusterCredentials(ctx, clusterUUID, "")
	if err != nil || !slices.Equal(refIDs(listed), refIDs(creds.Refs())) {
		t.Fatalf("the credential should be able to list its owner's cluster credentials: %v %v", listed, err)
	}

	// A different, non-admin user gets 403 and must not be mistaken for "already gone".
	err = env.alt.DeleteApplicationCredential(ctx, creds.Workload.Ref())
	if !errors.Is(err, ErrForbidden) || OnlyNotFound(err) {
		t.Fatalf("another user's delete: %v", err)
	}
	deleted, err := DeleteClusterCredentials(ctx, Cleanup{ClusterUUID: clusterUUID, Known: creds.Refs()}, env.alt)
	if len(deleted) != 0 || !errors.Is(err, ErrForbidden) || OnlyNotFound(err) {
		t.Fatalf("cleanup with only a non-owner must report forbidden: %v %v", deleted, err)
	}

	// The chain the bridge uses when the deleting user is not the owner: caller, the credential
	// itself, then the service user.
	start = time.Now()
	deleted, err = DeleteClusterCredentials(ctx, Cleanup{ClusterUUID: clusterUUID, Known: []CredentialRef{creds.CAPO.Ref()}}, env.alt, self, env.admin)
	t.Logf("chain delete in %s", time.Since(start))
	if err != nil {
		t.Fatalf("chain delete: %v", err)
	}
	// The sweep found the workload credential through the CAPO credential's owner.
	if !slices.Equal(deletedIDs(deleted), refIDs(creds.Refs())) {
		t.Fatalf("deleted %v, want both", deleted)
	}
	for _, d := range deleted {
		if !strings.Contains(d.By, "user admin") {
			t.Fatalf("%s was deleted by %q, expected the admin fallback", d.Credential, d.By)
		}
	}
	if _, err := NewApplicationCredentialClient(ctx, env.authURL, creds.CAPO.ID, creds.CAPO.Secret); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after deletion, authenticating as the credential should answer not-found: %v", err)
	}
	if err := env.admin.DeleteApplicationCredential(ctx, creds.CAPO.Ref()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("admin delete of a deleted credential: %v", err)
	}
	if listed, err := env.admin.ListClusterCredentials(ctx, clusterUUID, env.demo.Identity().UserID); err != nil || len(listed) != 0 {
		t.Fatalf("left behind: %v %v", listed, err)
	}
}

func TestE2ERotateClusterCredentials(t *testing.T) {
	env := keystoneE2E(t)
	ctx := ctxFor(t)
	clusterUUID := env.newClusterUUID(t)
	gen0, err := env.demo.CreateClusterCredentials(ctx, clusterUUID, CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}

	start := time.Now()
	rot, err := env.demo.RotateClusterCredentials(ctx, clusterUUID, gen0.Refs(), CreateOptions{})
	if err != nil {
		t.Fatalf("rotate: %v", err)
	}
	t.Logf("rotation phase 1 in %s", time.Since(start))
	if rot.New.CAPO.Name != CredentialName(clusterUUID, PurposeCAPO, 1) || rot.New.Workload.Name != CredentialName(clusterUUID, PurposeWorkload, 1) {
		t.Fatalf("new generation named %s / %s", rot.New.CAPO.Name, rot.New.Workload.Name)
	}
	// Between the phases both generations work, so the running cluster is never without one.
	for _, c := range []ApplicationCredential{gen0.CAPO, rot.New.CAPO, rot.New.Workload} {
		if _, err := env.tokenViaCloudsYAML(ctx, t, env.render(t, c)); err != nil {
			t.Fatalf("%s should authenticate between the phases: %v", c.Name, err)
		}
	}
	deleted, err := rot.Commit(ctx, env.demo)
	if err != nil || !slices.Equal(deletedIDs(deleted), refIDs(gen0.Refs())) {
		t.Fatalf("commit: %v %v", deleted, err)
	}
	if _, err := NewApplicationCredentialClient(ctx, env.authURL, gen0.CAPO.ID, gen0.CAPO.Secret); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the rotated-out credential should be gone: %v", err)
	}
	if _, err := env.tokenViaCloudsYAML(ctx, t, env.render(t, rot.New.CAPO)); err != nil {
		t.Fatalf("the new credential stopped working after commit: %v", err)
	}

	// A second rotation that the caller could not store is aborted: generation 2 disappears and
	// generation 1 stays in use.
	rot2, err := env.demo.RotateClusterCredentials(ctx, clusterUUID, rot.New.Refs(), CreateOptions{})
	if err != nil {
		t.Fatalf("second rotation: %v", err)
	}
	if rot2.New.CAPO.Name != CredentialName(clusterUUID, PurposeCAPO, 2) {
		t.Fatalf("second rotation named %s", rot2.New.CAPO.Name)
	}
	if _, err := rot2.Abort(ctx, env.demo); err != nil {
		t.Fatalf("abort: %v", err)
	}
	listed, err := env.demo.ListClusterCredentials(ctx, clusterUUID, "")
	if err != nil || !slices.Equal(refIDs(listed), refIDs(rot.New.Refs())) {
		t.Fatalf("after abort Keystone lists %v (%v), want generation 1 only", listed, err)
	}
	// Committing again reports the old generation as already gone.
	if _, err := rot.Commit(ctx, env.demo); !OnlyNotFound(err) {
		t.Fatalf("second commit: %v", err)
	}

	// Cluster delete sweeps every generation, including one whose secret was never stored (a
	// rotation that crashed between phases).
	if _, err := env.demo.RotateClusterCredentials(ctx, clusterUUID, rot.New.Refs(), CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted, err = DeleteClusterCredentials(ctx, Cleanup{ClusterUUID: clusterUUID, Known: rot.New.Refs()}, env.demo)
	if err != nil || len(deleted) != 4 {
		t.Fatalf("cluster delete after an interrupted rotation: deleted %d (%v), err %v", len(deleted), deleted, err)
	}
	if listed, err := env.demo.ListClusterCredentials(ctx, clusterUUID, ""); err != nil || len(listed) != 0 {
		t.Fatalf("left behind: %v %v", listed, err)
	}
}

// No error produced along the way may contain a secret or token that took part in the request.
func TestE2ESecretsNeverInErrors(t *testing.T) {
	env := keystoneE2E(t)
	ctx := ctxFor(t)
	clusterUUID := env.newClusterUUID(t)
	creds, err := env.demo.CreateClusterCredentials(ctx, clusterUUID, CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	defer func() {
		if _, err := DeleteClusterCredentials(ctx, Cleanup{ClusterUUID: clusterUUID, Known: creds.Refs()}, env.demo); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	}()
	secret := creds.CAPO.Secret.Reveal()
	token := env.demoToken.Reveal()
	secrets := []string{secret, creds.Workload.Secret.Reveal(), token, "secretdemo", "secretadmin"}

	var errs []error
	collect := func(_ any, err error) {
		if err == nil {
			t.Fatalf("call %d: expected an error", len(errs)+1)
		}
		errs = append(errs, err)
	}
	// A wrong secret: change the first character (Keystone's bcrypt hash ignores bytes after the
	// 72nd, so appending would not make it wrong).
	wrong := "A" + secret[1:]
	if secret[0] == 'A' {
		wrong = "B" + secret[1:]
	}
	secrets = append(secrets, wrong)
	collect(NewApplicationCredentialClient(ctx, env.authURL, creds.CAPO.ID, NewSecret(wrong)))
	collect(NewApplicationCredentialClient(ctx, env.authURL, "0000"+creds.CAPO.ID[4:], creds.CAPO.Secret))
	collect(NewApplicationCredentialClient(ctx, "http://127.0.0.1:1/v3", creds.CAPO.ID, creds.CAPO.Secret))
	collect(NewClient(ctx, env.authURL, NewSecret(token[:len(token)-4]+"AAAA")))
	collect(NewClient(ctx, strings.TrimSuffix(env.authURL, "/v3")+"/identity/v3", env.demoToken))
	collect(NewPasswordClient(ctx, PasswordAuth{AuthURL: env.authURL, Username: "demo", UserDomainName: "Default",
		Password: NewSecret("secretdemo" + "-wrong"), ProjectName: "demo", ProjectDomainName: "Default"}))
	collect(NewPasswordClient(ctx, PasswordAuth{AuthURL: env.authURL, Username: "demo", UserDomainName: "Default",
		Password: NewSecret("secretdemo"), ProjectName: "admin", ProjectDomainName: "Default"}))
	self, err := NewApplicationCredentialClient(ctx, env.authURL, creds.CAPO.ID, creds.CAPO.Secret)
	if err != nil {
		t.Fatal(err)
	}
	collect(self.CreateClusterCredentials(ctx, uuid.NewString(), CreateOptions{}))
	collect(nil, self.DeleteApplicationCredential(ctx, creds.Workload.Ref()))
	collect(nil, env.alt.DeleteApplicationCredential(ctx, creds.CAPO.Ref()))
	collect(env.alt.ListClusterCredentials(ctx, clusterUUID, env.demo.Identity().UserID))

	for _, err := range errs {
		msg := fmt.Sprintf("%v | %+v | %#v | %s", err, err, err.Error(), err)
		leaks := false
		for _, s := range secrets {
			if strings.Contains(msg, s) {
				leaks = true
				t.Errorf("error %d leaks a secret", len(errs))
			}
		}
		if !leaks {
			t.Logf("%v", err) // shown only once known to be clean: the messages are for operators
		}
		var kerr *Error
		if !errors.As(err, &kerr) {
			t.Errorf("not a *keystone.Error: %T %v", err, err)
		}
	}
	t.Logf("checked %d error messages", len(errs))

	for _, c := range []*Client{env.demo, self, env.admin} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
			out := fmt.Sprintf(verb, c) + fmt.Sprintf(verb, *c) + fmt.Sprintf(verb, []*Client{c})
			if strings.Contains(out, token) || strings.Contains(out, secret) {
				t.Errorf("printing a client with %s leaks its token", verb)
			}
		}
	}
}

// BenchmarkE2ECreateDeleteClusterCredentials measures the Keystone round trips of one cluster's
// credentials: create (list by name + create, twice) and delete (sweep list + two deletes).
func BenchmarkE2ECreateDeleteClusterCredentials(b *testing.B) {
	env := keystoneE2E(b)
	ctx := context.Background()
	var creates, deletes []time.Duration
	for b.Loop() {
		clusterUUID := uuid.NewString()
		start := time.Now()
		creds, err := env.demo.CreateClusterCredentials(ctx, clusterUUID, CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		creates = append(creates, time.Since(start))
		start = time.Now()
		if _, err := DeleteClusterCredentials(ctx, Cleanup{ClusterUUID: clusterUUID, Known: creds.Refs()}, env.demo); err != nil {
			b.Fatal(err)
		}
		deletes = append(deletes, time.Since(start))
	}
	report := func(name string, ds []time.Duration) {
		slices.Sort(ds)
		pct := func(p float64) float64 {
			return float64(ds[int(p*float64(len(ds)-1))].Microseconds()) / 1000
		}
		b.ReportMetric(pct(0.50), name+"-p50-ms")
		b.ReportMetric(pct(0.95), name+"-p95-ms")
	}
	report("create", creates)
	report("delete", deletes)
}
