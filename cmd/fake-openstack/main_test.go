package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/test/fakeopenstack"
)

func TestPrintSeedMergesTheSeedFile(t *testing.T) {
	var out, errOut bytes.Buffer
	require.NoError(t, run([]string{"--print-seed"}, &out, &errOut))
	var seed fakeopenstack.Seed
	require.NoError(t, json.Unmarshal(out.Bytes(), &seed))
	assert.Len(t, seed.Images, 2)

	file := filepath.Join(t.TempDir(), "seed.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"flavors":[{"id":"42","name":"g1.gpu","vcpus":8,"ram":32768,"disk":100}]}`), 0o600))
	out.Reset()
	require.NoError(t, run([]string{"--seed", file, "--print-seed"}, &out, &errOut))
	require.NoError(t, json.Unmarshal(out.Bytes(), &seed))
	assert.Len(t, seed.Flavors, 4)
	assert.Equal(t, "g1.gpu", seed.Flavors[3].Name)
}

func TestBadInvocationsFailWithAClearError(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"flavours": []}`), 0o600))

	cases := map[string][]string{
		"unknown field":                  {"--seed", bad},
		"no such file":                   {"--seed", filepath.Join(t.TempDir(), "missing.json")},
		"unexpected arguments":           {"extra-argument"},
		"every listener is disabled":     {"--image-listen", "", "--compute-listen", "", "--network-listen", ""},
		"flag provided but not defined":  {"--no-such-flag"},
		"is not an absolute http(s) URL": {"--keystone-url", "127.0.0.1:5000/v3"},
		"missing port in address":        {"--image-listen", "127.0.0.1"},
		"network API": {"--image-listen", "127.0.0.1:0", "--compute-listen", "127.0.0.1:0",
			"--network-listen", "256.0.0.1:1"},
	}
	for want, args := range cases {
		var out, errOut bytes.Buffer
		err := run(args, &out, &errOut)
		if assert.Error(t, err, args) {
			assert.Contains(t, err.Error()+errOut.String(), want, args)
		}
	}
}

func TestPortInUseFailsTheWholeStart(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()

	var out, errOut bytes.Buffer
	err = run([]string{"--image-listen", "127.0.0.1:0", "--compute-listen", busy.Addr().String(),
		"--network-listen", "127.0.0.1:0"}, &out, &errOut)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "compute API")
	assert.Contains(t, err.Error(), "address already in use")
}

// The simulator's optional listeners: Octavia and the inspection API answer once enabled.
func TestOptionalListeners(t *testing.T) {
	addrs := make([]string, 2)
	for i := range addrs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addrs[i] = ln.Addr().String()
		ln.Close()
	}
	var out, errOut bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run([]string{"--image-listen", "", "--compute-listen", "", "--network-listen", "",
			"--load-balancer-listen", addrs[0], "--inspect-listen", addrs[1], "--instance-quota", "1"}, &out, &errOut)
	}()
	get := func(url string) (int, string) {
		var resp *http.Response
		var err error
		for range 50 {
			if resp, err = http.Get(url); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		require.NoError(t, err, "%s never answered; stderr: %s", url, errOut.String())
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	status, body := get("http://" + addrs[0] + "/")
	assert.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, "CURRENT")
	status, _ = get("http://" + addrs[0] + "/v2.0/lbaas/loadbalancers")
	assert.Equal(t, http.StatusUnauthorized, status, "the load balancer API wants a token")
	status, body = get("http://" + addrs[1] + "/requests")
	assert.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, `"/v2.0/lbaas/loadbalancers"`)
	status, body = get("http://" + addrs[1] + "/projects/nobody/resources")
	assert.Equal(t, http.StatusOK, status)
	assert.JSONEq(t, `{}`, body)
	select {
	case err := <-done:
		t.Fatalf("the fake stopped early: %v", err)
	default:
	}
}
