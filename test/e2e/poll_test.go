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

// The waits poll magnum-api's REST API with one token per cloud, as Horizon and Terraform do, and
// run the real CLI once the state they wait for shows: an `openstack` run per poll costs about two
// seconds of CPU (Python's start and a new Keystone token), and with four tests waiting at once
// that was half of the 2-core machine, taken from the controllers the tests wait on.

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

// pollStatus is the status field of a cluster or node group (path below /v1) as magnum-api answers
// it now: "GONE" for a 404.
func pollStatus(cloud, path string) (string, error) {
	for refresh := range 2 {
		tok, err := pollTokenOf(cloud, refresh == 1)
		if err != nil {
			return "", err
		}
		code, body := getFrom(magnumURLOf(cloud), tok, path)
		switch code {
		case http.StatusOK:
			var v struct {
				Status string `json:"status"`
			}
			if err := json.Unmarshal([]byte(body), &v); err != nil {
				return "", fmt.Errorf("GET %s: %v: %s", path, err, body)
			}
			return v.Status, nil
		case http.StatusNotFound:
			return "GONE", nil
		case http.StatusUnauthorized:
			continue
		default:
			return "", fmt.Errorf("GET %s: %d %s", path, code, body)
		}
	}
	return "", fmt.Errorf("GET %s: 401 with a new token", path)
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
