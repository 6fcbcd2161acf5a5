package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// tofuDir is where deploy/local/build-tofu.sh (run by `make up`) leaves OpenTofu, the provider's
// filesystem mirror and the CLI config that installs from it.
var tofuDir = testutil.Env("MCB_TOFU_DIR", filepath.Join(os.Getenv("HOME"), ".cache/magnum-capi-bridge/tofu"))

// A tofu is one OpenTofu working directory: one configuration, its state, one cloud of clouds.yaml.
type tofu struct {
	t   *testing.T
	dir string
	env []string
}

// newTofu writes the configuration into a fresh directory and runs `tofu init` (offline: the
// provider comes from the mirror). It fails when OpenTofu is not built, and registers a destroy so
// that nothing the configuration made outlives the test.
func newTofu(t *testing.T, cloud, config string) *tofu {
	t.Helper()
	for _, f := range []string{"tofu", "tofurc"} {
		if _, err := os.Stat(filepath.Join(tofuDir, f)); err != nil {
			t.Fatalf("OpenTofu is not built (%v): run deploy/local/build-tofu.sh (`make up` runs it)", err)
		}
	}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.tf"), []byte(config), 0o600))
	tf := &tofu{t: t, dir: dir, env: append(testutil.OpenStackCLIEnv(),
		"OS_CLOUD="+cloud,
		"TF_CLI_CONFIG_FILE="+filepath.Join(tofuDir, "tofurc"),
		"TF_IN_AUTOMATION=1", "TF_INPUT=0", "CHECKPOINT_DISABLE=1",
		"TF_DATA_DIR="+filepath.Join(dir, ".terraform"))}
	tf.must(2*time.Minute, "init", "-no-color")
	t.Cleanup(func() {
		if out, err := tf.run(time.Minute, "state", "list"); err == nil && strings.TrimSpace(out) == "" {
			return
		}
		if out, err := tf.run(15*time.Minute, "destroy", "-auto-approve", "-no-color"); err != nil {
			t.Errorf("cleanup: tofu destroy: %v\n%s", err, out)
		}
	})
	return tf
}

// run runs tofu in the working directory; the error carries stderr.
func (tf *tofu) run(timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(tofuDir, "tofu"), args...)
	cmd.Dir, cmd.Env = tf.dir, tf.env
	// The provider is a child of tofu: on a timeout, end both (tofu's own SIGINT handling would wait).
	cmd.WaitDelay = 10 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("tofu %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

func (tf *tofu) must(timeout time.Duration, args ...string) string {
	tf.t.Helper()
	out, err := tf.run(timeout, args...)
	require.NoError(tf.t, err, out)
	return out
}

func varArgs(vars map[string]string) []string {
	var args []string
	for k, v := range vars {
		args = append(args, "-var", k+"="+v)
	}
	return args
}

// apply applies the configuration with vars (a cluster operation: create, resize, ...).
func (tf *tofu) apply(vars map[string]string) {
	tf.t.Helper()
	tf.must(20*time.Minute, append([]string{"apply", "-auto-approve", "-no-color"}, varArgs(vars)...)...)
}

// requireNoChanges fails unless `tofu plan -detailed-exitcode` finds nothing to do (exit 0; 2 is a
// diff, shown in the failure).
func (tf *tofu) requireNoChanges(vars map[string]string) {
	tf.t.Helper()
	out, err := tf.run(5*time.Minute, append([]string{"plan", "-detailed-exitcode", "-no-color"}, varArgs(vars)...)...)
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 2 {
		tf.t.Fatalf("plan after apply is not empty:\n%s", out)
	}
	require.NoError(tf.t, err, out)
}

// output is one output of the state, raw.
func (tf *tofu) output(name string) string {
	tf.t.Helper()
	return tf.must(time.Minute, "output", "-raw", "-no-color", name)
}

func (tf *tofu) destroy(vars map[string]string) {
	tf.t.Helper()
	tf.must(15*time.Minute, append([]string{"destroy", "-auto-approve", "-no-color"}, varArgs(vars)...)...)
}
