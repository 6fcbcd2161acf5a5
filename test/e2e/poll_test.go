package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// The waits and the reads of a cluster's or node group's state use magnum-api's REST API with one
// token per cloud, as Horizon and Terraform do; the CLI runs the operations under test (and the
// lifecycle tests' shows): an `openstack` run costs about two seconds of CPU (Python's start and a new
// Keystone token), and with four tests waiting at once that was half of the 2-core machine, taken
// from the controllers the tests wait on.

var magnumNewestURL = testutil.Env("MCB_MAGNUM_NEW_URL", "http://127.0.0.1:9512/v1")

type pollToken struct {
	id     string
	issued time.Time
}

var pollTokens = struct {
	sync.Mutex
	byCloud map[string]pollToken
}{byCloud: map[string]pollToken{}}

// pollTokenOf is a token of the cloud's user, issued by the CLI at most every 10 minutes (they live
// an hour) or after magnum-api refused it.
func pollTokenOf(cloud string, refresh bool) (string, error) {
	pollTokens.Lock()
	defer pollTokens.Unlock()
	if tok, ok := pollTokens.byCloud[cloud]; ok && !refresh && time.Since(tok.issued) < 10*time.Minute {
		return tok.id, nil
	}
	out, err := runCLI(cloud, "token", "issue", "-f", "value", "-c", "id")
	if err != nil {
		return "", err
	}
	tok := pollToken{id: strings.TrimSpace(out), issued: time.Now()}
	pollTokens.byCloud[cloud] = tok
	return tok.id, nil
}

func magnumURLOf(cloud string) string {
	if cliFor(cloud).root != "" {
		return magnumNewestURL
	}
	return magnumURL
}

// magnumGet is magnum-api's answer to GET path (below /v1) as the cloud's user: the status code and
// body, a 401 retried once with a new token.
func magnumGet(cloud, path string) (int, string, error) {
	for refresh := range 2 {
		tok, err := pollTokenOf(cloud, refresh == 1)
		if err != nil {
			return 0, "", err
		}
		code, body := getFrom(magnumURLOf(cloud), tok, path)
		switch code {
		case http.StatusUnauthorized:
			continue
		case 0:
			return 0, "", fmt.Errorf("GET %s: %s", path, body)
		}
		return code, body, nil
	}
	return 0, "", fmt.Errorf("GET %s: 401 with a new token", path)
}

// magnumShow decodes magnum-api's JSON of a cluster or node group (path below /v1) into v; a 404 is
// an error saying "could not be found", as the CLI's is.
func magnumShow(cloud, path string, v any) error {
	code, body, err := magnumGet(cloud, path)
	switch {
	case err != nil:
		return err
	case code == http.StatusNotFound:
		return fmt.Errorf("GET %s: 404: %s could not be found: %s", path, path, body)
	case code != http.StatusOK:
		return fmt.Errorf("GET %s: %d %s", path, code, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		return fmt.Errorf("GET %s: %v: %s", path, err, body)
	}
	return nil
}

// pollStatus is the status field of a cluster or node group (path below /v1) as magnum-api answers
// it now: "GONE" for a 404.
func pollStatus(cloud, path string) (string, error) {
	var v struct {
		Status string `json:"status"`
	}
	err := magnumShow(cloud, path, &v)
	if err != nil && strings.Contains(err.Error(), ": 404: ") {
		return "GONE", nil
	}
	return v.Status, err
}

// awaitPolled polls path until its status is one of want, ends in _FAILED, or the API cannot tell
// (then the caller's CLI shows what is wrong); it sleeps every between polls and stops at deadline.
func awaitPolled(cloud, path string, deadline time.Time, every time.Duration, want ...string) {
	for time.Now().Before(deadline) {
		st, err := pollStatus(cloud, path)
		if err != nil || slices.Contains(want, st) || strings.HasSuffix(st, "_FAILED") {
			return
		}
		time.Sleep(every)
	}
}
