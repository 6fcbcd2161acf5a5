package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// Where deploy/local/horizon-up.sh (run by `make up`) serves Horizon and leaves the browser driver.
var (
	horizonURL = testutil.Env("MCB_HORIZON_URL", "http://127.0.0.1:8080")
	chromium   = testutil.Env("MCB_CHROMIUM", "/usr/bin/chromium")
	logDir     = testutil.Env("MCB_LOG", "/var/log/magnum-capi-bridge")
	cloudsYAML = testutil.Env("MCB_CLOUDS_YAML", "/etc/openstack/clouds.yaml")
)

// playwrightDir is horizon-up.sh's npm prefix of the pinned playwright-core (versions.env).
func playwrightDir(t *testing.T) string {
	if d := os.Getenv("MCB_PLAYWRIGHT_DIR"); d != "" {
		return d
	}
	b, err := os.ReadFile("../../deploy/local/versions.env")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^PLAYWRIGHT_CORE_VERSION=(\S+)$`).FindSubmatch(b)
	require.NotNil(t, m, "no PLAYWRIGHT_CORE_VERSION in versions.env")
	return filepath.Join(os.Getenv("HOME"), ".cache/magnum-capi-bridge", "playwright-core-"+string(m[1]))
}

// requireHorizon skips when the browser side is not installed (a stack brought up before
// horizon-up.sh existed) and fails when it is installed but Horizon does not answer.
func requireHorizon(t *testing.T) string {
	t.Helper()
	pw := playwrightDir(t)
	for _, f := range []string{chromium, filepath.Join(pw, "node_modules/playwright-core/package.json")} {
		if _, err := os.Stat(f); err != nil {
			// `make up` installs it, like the rest of the stack: its absence is a broken stack, not a reason to skip.
			t.Fatalf("the Horizon test's browser is not installed (%v): run deploy/local/horizon-up.sh (`make up` runs it)", err)
		}
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("no node to run playwright-core (deploy/local/horizon-up.sh installs it): %v", err)
	}
	c := http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get(horizonURL + "/auth/login/")
	require.NoError(t, err, "Horizon does not answer; run deploy/local/horizon-up.sh")
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "Horizon's login page")
	return pw
}

// cloudPassword is the password of a cloud of clouds.yaml (the stack's tenants log in with them).
func cloudPassword(t *testing.T, cloud string) string {
	t.Helper()
	b, err := os.ReadFile(cloudsYAML)
	require.NoError(t, err)
	var doc struct {
		Clouds map[string]struct {
			Auth struct {
				Password string `json:"password"`
			} `json:"auth"`
		} `json:"clouds"`
	}
	require.NoError(t, yaml.Unmarshal(b, &doc))
	pw := doc.Clouds[cloud].Auth.Password
	require.NotEmpty(t, pw, "no password of cloud %s in %s", cloud, cloudsYAML)
	return pw
}

// A horizonJob is the input of test/e2e/horizon/magnum-ui.cjs (one phase, one browser, one login).
type horizonJob struct {
	Phase      string `json:"phase"`
	Base       string `json:"base"`
	User       string `json:"user"`
	Password   string `json:"password"`
	Next       string `json:"next"`
	Playwright string `json:"playwright"`
	Chromium   string `json:"chromium"`
	Shots      string `json:"shots"`
	Downloads  string `json:"downloads"`

	Template  string `json:"template"`
	Image     string `json:"image"`
	Labels    string `json:"labels"`
	Cluster   string `json:"cluster"`
	ClusterID string `json:"clusterId"`
	UpgradeTo string `json:"upgradeTo"`

	CreateTimeout  int `json:"createTimeout"`
	UpgradeTimeout int `json:"upgradeTimeout"`
	DeleteTimeout  int `json:"deleteTimeout"`
}

// horizonResult is what a phase saw in the page.
type horizonResult struct {
	ClusterID      string              `json:"clusterId"`
	Row            string              `json:"row"`
	CreateSeconds  float64             `json:"createSeconds"`
	UpgradeSeconds float64             `json:"upgradeSeconds"`
	Details        map[string][]string `json:"details"`
	CAFile         string              `json:"caFile"`
	ClusterRows    []string            `json:"clusterRows"`
	TemplateRows   []string            `json:"templateRows"`
	URLStatus      int                 `json:"urlStatus"`
	URLBody        string              `json:"urlBody"`
	URLMessage     string              `json:"urlMessage"`
}

// detail is one field of the detail page ("" when absent).
func (r horizonResult) detail(name string) string {
	if v := r.Details[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// runHorizon runs one phase of the browser script; its steps become TIMING lines as they finish.
func runHorizon(t *testing.T, job horizonJob, timeout time.Duration) horizonResult {
	t.Helper()
	in, err := json.Marshal(job)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// The lowest priority: the browser shares two cores with the stack it is testing.
	cmd := exec.CommandContext(ctx, "nice", "-n", "10", "node", "horizon/magnum-ui.cjs", string(in))
	cmd.WaitDelay = 10 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	// What Horizon and magnum-api log while the phase runs: their errors explain a 500 the page saw.
	serverLogs := []*logTail{newLogTail(filepath.Join(logDir, "horizon.log")), newLogTail(filepath.Join(logDir, "magnum-api.log"))}
	serverErrors := func() string {
		var b strings.Builder
		for _, l := range serverLogs {
			b.WriteString(l.errors(80))
		}
		return b.String()
	}
	require.NoError(t, cmd.Start())
	var res horizonResult
	var got bool
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "STEP "):
			var s struct {
				Step    string  `json:"step"`
				Seconds float64 `json:"seconds"`
			}
			if json.Unmarshal([]byte(line[5:]), &s) == nil {
				timed(t, "horizon: "+s.Step, time.Now().Add(-time.Duration(s.Seconds*float64(time.Second))))
				continue
			}
		case strings.HasPrefix(line, "NOTE "):
			t.Logf("%s\nserver-side errors since the phase began or its last NOTE:\n%s", line, serverErrors())
			continue
		case strings.HasPrefix(line, "RESULT "):
			require.NoError(t, json.Unmarshal([]byte(line[7:]), &res), line)
			got = true
			continue
		}
		t.Log(line)
	}
	err = cmd.Wait()
	if err != nil || !got {
		t.Fatalf("Horizon, phase %s as %s: %v\n%s\n(screenshots: %s)\nserver-side errors (since the phase began or its last NOTE):\n%s", job.Phase, job.User, err,
			strings.TrimSpace(stderr.String()), job.Shots, serverErrors())
	}
	return res
}

// horizonShots is this run's screenshot directory, kept as a CI artifact under the log directory.
func horizonShots(t *testing.T, name string) string {
	dir := filepath.Join(logDir, "horizon", fmt.Sprintf("%s-%s", time.Now().UTC().Format("20060102T150405"), name))
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

// A logTail reads what a service's log gained since it was made, or since it was last read.
type logTail struct {
	path   string
	offset int64
}

func newLogTail(path string) *logTail {
	l := &logTail{path: path}
	if fi, err := os.Stat(path); err == nil {
		l.offset = fi.Size()
	}
	return l
}

// errors is the lines added since the last call that report an error — ERROR lines, Python
// tracebacks, HTTP 5xx answers —, at most max of them, with the log's name in front; "" when there
// are none.
func (l *logTail) errors(max int) string {
	f, err := os.Open(l.path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(l.offset, io.SeekStart); err != nil {
		return ""
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return ""
	}
	l.offset += int64(len(data))
	var out []string
	inTraceback := false
	for _, line := range strings.Split(string(data), "\n") {
		if len(out) == max {
			out = append(out, "…")
			break
		}
		switch {
		case strings.HasPrefix(line, "Traceback "):
			inTraceback = true
		case inTraceback && !strings.HasPrefix(line, " "):
			inTraceback = false
			out = append(out, line) // the exception itself
			continue
		}
		if inTraceback || strings.Contains(line, " ERROR ") || strings.HasPrefix(line, "ERROR ") ||
			strings.Contains(line, "(HTTP/1.1 5") || strings.Contains(line, "status: 5") {
			out = append(out, line)
		}
	}
	if len(out) == 0 {
		return ""
	}
	return filepath.Base(l.path) + ":\n  " + strings.Join(out, "\n  ") + "\n"
}
