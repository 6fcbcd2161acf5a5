package scale

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// The harness's own management cluster: etcd and kube-apiserver from the binaries `make up` builds
// (deploy/local/build-k8s.sh caches them), on free loopback ports, with state in a temporary
// directory. No CAPI controller or webhook runs: the CAPI simulation (capisim_test.go) writes what
// they would. The shared stack is never touched.

// bridgeUser is the client-certificate identity the bridge uses; the audit policy records only its
// requests, so the apiserver itself counts what the bridge costs it.
const bridgeUser = "mcb-scale-bridge"

type apiServer struct {
	dir        string
	url        string
	auditLog   string
	adminKube  string // kubeconfig of the harness (admin)
	bridgeKube string // kubeconfig of the bridge (bridgeUser)
	admin      *rest.Config
	procs      []*exec.Cmd
}

// binDir is where build-k8s.sh caches etcd and kube-apiserver.
func binDir() string {
	cache := os.Getenv("MCB_CACHE")
	if cache == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, _ := os.UserHomeDir()
			base = filepath.Join(home, ".cache")
		}
		cache = filepath.Join(base, "magnum-capi-bridge")
	}
	return filepath.Join(cache, "bin")
}

// pki is a throw-away CA with the serving and client certificates the harness needs.
func writeFile(tb testing.TB, path string, data []byte) string {
	tb.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  users: ["` + bridgeUser + `"]
- level: None
`

// startAPIServer starts etcd and kube-apiserver in dir and installs the CAPI CRDs; both processes
// are stopped when the test ends.
func startAPIServer(tb testing.TB, dir string) *apiServer {
	tb.Helper()
	bin := binDir()
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			tb.Fatalf("%s: %v (deploy/local/build-k8s.sh apiserver etcd builds it; `make up` does too)", filepath.Join(bin, b), err)
		}
	}
	a := &apiServer{dir: dir, auditLog: filepath.Join(dir, "audit.log")}
	p := testutil.NewTestCA(tb, "scale harness CA")
	ca := writeFile(tb, filepath.Join(dir, "ca.crt"), p.CertPEM)
	sc, sk := p.Issue(tb, "127.0.0.1", nil, true)
	serving, servingKey := writeFile(tb, filepath.Join(dir, "serving.crt"), sc), writeFile(tb, filepath.Join(dir, "serving.key"), sk)
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	saDER, _ := x509.MarshalECPrivateKey(saKey)
	saPubDER, _ := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	saPriv := writeFile(tb, filepath.Join(dir, "sa.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: saDER}))
	saPub := writeFile(tb, filepath.Join(dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPubDER}))
	policy := writeFile(tb, filepath.Join(dir, "audit-policy.yaml"), []byte(auditPolicy))

	ports := testutil.FreePorts(tb, 3)
	etcdPort, peerPort, apiPort := ports[0], ports[1], ports[2]
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	a.start(tb, filepath.Join(bin, "etcd"), "--name=scale", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL, "--initial-cluster=scale="+peerURL,
		"--unsafe-no-fsync", "--quota-backend-bytes=8589934592")
	waitHTTP(tb, &http.Client{Timeout: 2 * time.Second}, etcdURL+"/health", time.Minute)

	// ResourceQuota admission is off: without kube-controller-manager no quota usage is ever
	// computed and every create in a project namespace would be refused ("status unknown").
	a.start(tb, filepath.Join(bin, "kube-apiserver"), "--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", apiPort),
		"--tls-cert-file="+serving, "--tls-private-key-file="+servingKey, "--client-ca-file="+ca,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+saPub, "--service-account-signing-key-file="+saPriv,
		"--service-cluster-ip-range=10.0.0.0/24", "--authorization-mode=RBAC",
		"--disable-admission-plugins=ServiceAccount,ResourceQuota", "--enable-priority-and-fairness=false", "--profiling=false",
		"--audit-policy-file="+policy, "--audit-log-path="+a.auditLog, "--audit-log-format=json", "--audit-log-mode=batch",
		"--audit-log-maxsize=0")
	a.url = fmt.Sprintf("https://127.0.0.1:%d", apiPort)

	ac, ak := p.Issue(tb, "scale-harness-admin", []string{"system:masters"}, false)
	bc, bk := p.Issue(tb, bridgeUser, []string{"system:masters"}, false)
	a.adminKube = writeKubeconfig(tb, filepath.Join(dir, "admin.kubeconfig"), a.url, p.CertPEM, ac, ak)
	a.bridgeKube = writeKubeconfig(tb, filepath.Join(dir, "bridge.kubeconfig"), a.url, p.CertPEM, bc, bk)
	a.admin, err = clientcmd.BuildConfigFromFlags("", a.adminKube)
	if err != nil {
		tb.Fatal(err)
	}
	a.admin.QPS, a.admin.Burst = -1, 0 // the harness is never throttled client-side
	pair, err := tls.X509KeyPair(ac, ak)
	if err != nil {
		tb.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.CertPEM)
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}}}
	waitHTTP(tb, hc, a.url+"/readyz", 2*time.Minute)
	return a
}

func (a *apiServer) start(tb testing.TB, bin string, args ...string) {
	tb.Helper()
	name := filepath.Base(bin)
	logf, err := os.Create(filepath.Join(a.dir, name+".log"))
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the test binary
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	a.procs = append(a.procs, cmd)
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logf.Close()
	})
}

func waitHTTP(tb testing.TB, hc *http.Client, url string, timeout time.Duration) {
	tb.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		resp, err := hc.Get(url)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		tb.Fatalf("%s not ready within %s", url, timeout)
	}
}

func writeKubeconfig(tb testing.TB, path, server string, ca, cert, key []byte) string {
	tb.Helper()
	cfg := map[string]any{
		"apiVersion": "v1", "kind": "Config", "current-context": "scale",
		"clusters": []any{map[string]any{"name": "scale", "cluster": map[string]any{"server": server, "certificate-authority-data": ca}}},
		"users":    []any{map[string]any{"name": "scale", "user": map[string]any{"client-certificate-data": cert, "client-key-data": key}}},
		"contexts": []any{map[string]any{"name": "scale", "context": map[string]any{"cluster": "scale", "user": "scale"}}},
	}
	// []byte marshals as base64, which is what the *-data fields hold.
	data, err := json.Marshal(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return writeFile(tb, path, data)
}

// crdDirs are the CRDs of the CAPI version `make up` runs (core, kubeadm control plane and
// bootstrap, and CAPD's in-memory Dev* kinds), from the module cache of tools/k8s/capi as in
// mgmt-up.sh. Their conversion webhooks are left out: the bridge and the simulation use v1beta2 only.
func crdDirs(tb testing.TB) []string {
	tb.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/cluster-api", "sigs.k8s.io/cluster-api/test")
	cmd.Dir = filepath.Join(testutil.RepoRoot(), "tools", "k8s", "capi")
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("locate the cluster-api modules (cd tools/k8s/capi && go mod download): %v", err)
	}
	mods := strings.Fields(string(out))
	if len(mods) != 2 {
		tb.Fatalf("cluster-api modules not found: %q", out)
	}
	return []string{filepath.Join(mods[0], "core", "config", "crd", "bases"),
		filepath.Join(mods[0], "controlplane", "kubeadm", "config", "crd", "bases"),
		filepath.Join(mods[0], "bootstrap", "kubeadm", "config", "crd", "bases"),
		filepath.Join(mods[1], "infrastructure", "docker", "config", "crd", "bases")}
}

// installCRDs creates every CRD of crdDirs and waits until all are Established.
func (a *apiServer) installCRDs(tb testing.TB) {
	tb.Helper()
	cs, err := apiextclient.NewForConfig(a.admin)
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	var names []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, dir := range crdDirs(tb) {
		files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				tb.Fatal(err)
			}
			var crd apiextensionsv1.CustomResourceDefinition
			if err := yaml.Unmarshal(data, &crd); err != nil {
				tb.Fatalf("%s: %v", f, err)
			}
			if crd.Name == "" {
				continue
			}
			crd.Spec.Conversion = nil
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &crd, metav1.CreateOptions{}); err != nil {
					tb.Errorf("create CRD %s: %v", crd.Name, err)
					return
				}
				mu.Lock()
				names = append(names, crd.Name)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	if tb.Failed() {
		tb.FailNow()
	}
	for _, n := range names {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			crd, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			tb.Fatalf("CRD %s not established: %v", n, err)
		}
	}
}

// auditEvent is the part of an audit.k8s.io/v1 Event the harness counts.
type auditEvent struct {
	AuditID string `json:"auditID"`
	Stage   string `json:"stage"`
	Verb    string `json:"verb"`
	User    struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource string `json:"resource"`
	} `json:"objectRef"`
	RequestReceived time.Time `json:"requestReceivedTimestamp"`
}

// bridgeRequests counts the bridge's requests the apiserver received in [from, to), by
// "verb resource" (a watch counts once, when it started).
func (a *apiServer) bridgeRequests(tb testing.TB, from, to time.Time) (int, map[string]int) {
	tb.Helper()
	f, err := os.Open(a.auditLog)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	seen := map[string]bool{}
	by := map[string]int{}
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			continue // a line being written
		}
		if ev.User.Username != bridgeUser || seen[ev.AuditID] || ev.RequestReceived.Before(from) || !ev.RequestReceived.Before(to) {
			continue
		}
		seen[ev.AuditID] = true
		n++
		res := ""
		if ev.ObjectRef != nil {
			res = ev.ObjectRef.Resource
		}
		by[ev.Verb+" "+res]++
	}
	return n, by
}
