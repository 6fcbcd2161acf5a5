package keystone

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gophercloud/utils/v2/openstack/clientconfig"
	"sigs.k8s.io/yaml"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

func goldenParams() CloudsYAMLParams {
	return CloudsYAMLParams{
		AuthURL:                     "https://keystone.example.org:5000/v3",
		RegionName:                  "RegionOne",
		ApplicationCredentialID:     "0f3c9a6b2d8e4f1a9c7b5d3e1f2a4b6c",
		ApplicationCredentialSecret: NewSecret("-L0ng_secret-with:yaml*special#chars"),
	}
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *updateGolden {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run with -update to create it): %v", err)
	}
	if string(got) != string(want) {
		t.Fatalf("%s differs from the golden file:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestRenderCloudsYAMLGolden(t *testing.T) {
	out, err := RenderCloudsYAML(goldenParams())
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "clouds.yaml.golden", out)

	withCA := goldenParams()
	withCA.Interface = "internal"
	withCA.RegionName = ""
	withCA.CACertFile = "/etc/config/cacert"
	out, err = RenderCloudsYAML(withCA)
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "clouds-internal-cacert.yaml.golden", out)
}

// CAPO reads the Secret's clouds.yaml with sigs.k8s.io/yaml into gophercloud utils'
// clientconfig.Clouds and builds its auth options with clientconfig.AuthOptions
// (cluster-api-provider-openstack pkg/scope/provider.go). Do the same and check what comes out.
func TestRenderedCloudsYAMLReadsLikeCAPO(t *testing.T) {
	p := goldenParams()
	out, err := RenderCloudsYAML(p)
	if err != nil {
		t.Fatal(err)
	}
	var clouds clientconfig.Clouds
	if err := yaml.Unmarshal(out, &clouds); err != nil {
		t.Fatalf("CAPO could not parse the clouds.yaml: %v", err)
	}
	cloud, ok := clouds.Clouds[CloudName]
	if !ok {
		t.Fatalf("no cloud %q in %s", CloudName, out)
	}
	if cloud.AuthType != clientconfig.AuthV3ApplicationCredential || cloud.IdentityAPIVersion != "3" ||
		cloud.Interface != "public" || cloud.RegionName != "RegionOne" {
		t.Fatalf("unexpected cloud entry: type=%q identity=%q interface=%q region=%q", cloud.AuthType, cloud.IdentityAPIVersion, cloud.Interface, cloud.RegionName)
	}
	opts, err := clientconfig.AuthOptions(&clientconfig.ClientOpts{AuthInfo: cloud.AuthInfo, AuthType: cloud.AuthType, RegionName: cloud.RegionName})
	if err != nil {
		t.Fatalf("clientconfig.AuthOptions: %v", err)
	}
	if opts.IdentityEndpoint != p.AuthURL || opts.ApplicationCredentialID != p.ApplicationCredentialID ||
		opts.ApplicationCredentialSecret != p.ApplicationCredentialSecret.Reveal() {
		t.Fatalf("auth options do not carry the credential: endpoint=%q id=%q secret matches=%v",
			opts.IdentityEndpoint, opts.ApplicationCredentialID, opts.ApplicationCredentialSecret == p.ApplicationCredentialSecret.Reveal())
	}
}

func TestRenderCloudsYAMLRejectsBadInput(t *testing.T) {
	cases := map[string]func(*CloudsYAMLParams){
		"relative auth url": func(p *CloudsYAMLParams) { p.AuthURL = "/v3" },
		"no scheme":         func(p *CloudsYAMLParams) { p.AuthURL = "keystone:5000/v3" },
		"ftp auth url":      func(p *CloudsYAMLParams) { p.AuthURL = "ftp://keystone/v3" },
		"empty id":          func(p *CloudsYAMLParams) { p.ApplicationCredentialID = "" },
		"empty secret":      func(p *CloudsYAMLParams) { p.ApplicationCredentialSecret = Secret{} },
		"unknown interface": func(p *CloudsYAMLParams) { p.Interface = "publicURL" },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			p := goldenParams()
			mutate(&p)
			out, err := RenderCloudsYAML(p)
			if err == nil {
				t.Fatalf("accepted, rendered:\n%s", out)
			}
			if strings.Contains(err.Error(), goldenParams().ApplicationCredentialSecret.Reveal()) {
				t.Fatalf("error leaks the secret: %v", err)
			}
		})
	}
}
