package e2e

import (
	"context"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/config"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

var magnumURL = testutil.Env("MCB_MAGNUM_URL", "http://127.0.0.1:9511/v1")

// TestDeleteNeverShowsAClusterWithoutNodeGroups: magnum-api 15 reads a cluster's row and then, in
// separate queries, its node groups (master_count, node_count). Clients polling while the bridge
// ends deletes — Terraform's delete poll, Horizon's table, `coe cluster list` — must only ever get
// the cluster (200) or 404, never 400 "master_count … Value: '0'". The clusters are written the way
// cluster_create writes them and deleted by the bridge's own store code (db.Store.DeleteCluster,
// what the end of cluster_delete calls), with the production delay, while readers poll the single
// GET and the project's list through the real magnum-api.
func TestDeleteNeverShowsAClusterWithoutNodeGroups(t *testing.T) {
	requireStack(t)
	t.Parallel()
	const clusters = 50

	conf, err := config.Load(testutil.Env("MCB_MAGNUM_CONF", "/etc/magnum/magnum.conf"))
	require.NoError(t, err)
	store := magnumStore(t, conf)
	tok := demoToken(t)
	tmpl := createTemplate(t, cloudDemo)
	tmplUUID := strings.TrimSpace(mustOpenstack(t, cloudDemo, "coe", "cluster", "template", "show", tmpl, "-f", "value", "-c", "uuid"))

	// Fifty deletes, with at most five of the test's clusters alive at a time: a list of many
	// clusters gets slow on a loaded host, and a short list lets the readers overlap every delete.
	const live = 5
	ctx := context.Background()
	var (
		ids, alive []string
		lastGone   bool // alive holds only a deleted cluster, kept for the single-GET readers
		aliveMu    sync.Mutex
	)
	create := func() {
		id := insertClusterRows(t, store, tok, tmplUUID, fmt.Sprintf("race-%s-%02d", testutil.RandomHex(3), len(ids)), "")
		aliveMu.Lock()
		defer aliveMu.Unlock()
		ids = append(ids, id)
		if lastGone {
			alive, lastGone = alive[:0], false
		}
		alive = append(alive, id)
	}
	for range live {
		create()
	}
	// No answer within the client's timeout is the loaded host, not magnum-api's answer (the readers
	// below count it apart too): ask again, a few times, before calling it a failure.
	var (
		code     int
		body     string
		listTook time.Duration
	)
	for attempt := 1; ; attempt++ {
		listStart := time.Now()
		code, body = get(tok.ID, "/clusters/detail")
		listTook = time.Since(listStart)
		if code != 0 || attempt == 4 {
			break
		}
		t.Logf("list before the deletes, attempt %d: no answer in %s: %s", attempt, listTook.Round(time.Millisecond), body)
	}
	require.Equal(t, http.StatusOK, code, body)
	for _, id := range ids {
		require.Contains(t, body, id, "cluster %s listed before the deletes", id)
	}
	// The deletes are spread over a few list requests' time, so that every request overlaps some.
	pace := min(max(2*listTook, 10*time.Second), time.Minute) / clusters

	// Readers, all the time: two on the project's list (each request reads every cluster's row and
	// then, cluster by cluster, its node groups), two on single clusters picked among the live ones.
	var (
		done    = make(chan struct{})
		wg      sync.WaitGroup
		mu      sync.Mutex
		answers = map[string]map[int]int{}
		bad     []string
		noReply int
	)
	record := func(what string, code int, body string) {
		mu.Lock()
		defer mu.Unlock()
		if code == 0 { // no answer in time on a loaded host: not an answer of magnum-api
			noReply++
			return
		}
		if answers[what] == nil {
			answers[what] = map[int]int{}
		}
		answers[what][code]++
		if code != http.StatusOK && code != http.StatusNotFound && len(bad) < 5 {
			if len(body) > 300 {
				body = body[:300] + "…"
			}
			bad = append(bad, fmt.Sprintf("%s: %d %s", what, code, body))
		}
	}
	const listWhat, getWhat = "GET /v1/clusters/detail", "GET /v1/clusters/<id>"
	poll := func(what string, path func() string) {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			code, body := get(tok.ID, path())
			record(what, code, body)
		}
	}
	wg.Add(4)
	for range 2 {
		go poll(listWhat, func() string { return "/clusters/detail" })
		go poll(getWhat, func() string {
			aliveMu.Lock()
			defer aliveMu.Unlock()
			return "/clusters/" + alive[mrand.IntN(len(alive))]
		})
	}

	// At least `clusters` deletes, and on until both kinds of reader have had the cluster back while
	// deletes went on (on a loaded CI host a list of five took 30 s and none came back within the
	// first minute of deletes); then the clusters still alive are deleted too, so that every
	// cluster the test made is one the node-group check below covers.
	readersAnswered := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return answers[getWhat][http.StatusOK] > 0 && answers[listWhat][http.StatusOK] > 0
	}
	const longest = 6 * time.Minute
	start := time.Now()
	deleted := 0
	moreClusters := func() bool {
		return len(ids) < clusters || (!readersAnswered() && time.Since(start) < longest)
	}
	for ; deleted < len(ids); deleted++ {
		time.Sleep(pace)
		aliveMu.Lock()
		i := mrand.IntN(len(alive)) // from anywhere in the list (ordered by id), not only its first
		id := alive[i]
		aliveMu.Unlock()
		ok, err := store.DeleteCluster(ctx, id)
		require.NoError(t, err)
		require.True(t, ok)
		aliveMu.Lock()
		if len(alive) > 1 {
			alive = append(alive[:i], alive[i+1:]...)
		} else { // the single-GET readers keep one to ask for; 404 is fine for it
			lastGone = true
		}
		aliveMu.Unlock()
		if moreClusters() {
			create()
		}
	}
	deletes := time.Since(start)
	close(done)
	wg.Wait() // requests under way finish: they overlapped the last deletes
	t.Logf("%d deletes in %s (a list of %d clusters took %s); answers seen: %v; no answer within %s: %d",
		deleted, deletes.Round(time.Millisecond), live, listTook.Round(time.Millisecond), answers, magnumHTTP.Timeout, noReply)
	require.Empty(t, bad, "a reader got something other than the cluster or 404")
	require.Greater(t, answers[getWhat][http.StatusOK], 0, "the single-GET readers saw clusters")
	require.Greater(t, answers[listWhat][http.StatusOK], 0, "the list readers got answers")

	// The node groups go after the delay, nothing is left behind.
	var left []string
	require.Eventually(t, func() bool {
		left = left[:0]
		for _, id := range ids {
			if ngs, err := store.ListNodeGroups(ctx, id); err != nil || len(ngs) > 0 {
				_, clErr := store.GetCluster(ctx, id)
				left = append(left, fmt.Sprintf("%s (%d node groups, error %v; cluster row: %v)", id, len(ngs), err, clErr))
			}
		}
		return len(left) == 0
	}, db.DefaultNodeGroupDeleteDelay+30*time.Second, time.Second, "node groups of the deleted clusters still in Magnum's database: %v", &left)
	for _, id := range ids {
		require.Equal(t, http.StatusNotFound, getStatus(tok.ID, "/clusters/"+id))
	}
}

func demoToken(t *testing.T) testutil.Token { t.Helper(); return tokenOf(t, cloudDemo) }

// insertClusterRows writes a CREATE_COMPLETE cluster of demo's with its two default node groups,
// as cluster_create does (one transaction), and deletes it at cleanup if the test did not. Its
// stack_id is the bridge's name for it, or stackID when set (another driver's cluster).
func insertClusterRows(t *testing.T, store *db.Store, tok testutil.Token, templateUUID, name, stackID string) string {
	t.Helper()
	id := uuid.NewString()
	if stackID == "" {
		stackID = templates.ClusterName(name, id)
	}
	c := &db.Cluster{UUID: id, Name: db.Ptr(name), ProjectID: db.Ptr(tok.ProjectID), UserID: db.Ptr(tok.UserID),
		ClusterTemplateID: db.Ptr(templateUUID), Keypair: db.Ptr("default"), Labels: magnum.NewDict(),
		MasterFlavorID: db.Ptr("m1.medium"), FlavorID: db.Ptr("m1.small"), StackID: db.Ptr(stackID),
		Status: magnum.StatusCreateComplete, StatusReason: db.Ptr("written by TestDeleteNeverShowsAClusterWithoutNodeGroups"),
		CreateTimeout: db.Ptr[int64](60), FloatingIPEnabled: true}
	ng := func(role, flavor string) *db.NodeGroup {
		return &db.NodeGroup{UUID: uuid.NewString(), Name: "default-" + role, ProjectID: tok.ProjectID, Labels: magnum.NewDict(),
			FlavorID: db.Ptr(flavor), ImageID: db.Ptr(image), NodeAddresses: []string{}, NodeCount: db.Ptr[int64](1),
			MinNodeCount: db.Ptr[int64](0), Role: db.Ptr(role), IsDefault: true, StackID: db.Ptr(stackID),
			Status: magnum.StatusCreateComplete}
	}
	_, _, err := store.CreateCluster(context.Background(), c, ng("master", "m1.medium"), ng("worker", "m1.small"))
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = store.DeleteCluster(context.Background(), id) })
	return id
}

var magnumHTTP = &http.Client{Timeout: 60 * time.Second}

// get asks magnum-api (15) as the token's user.
func get(tok, path string) (int, string) { return getFrom(magnumURL, tok, path) }

// getFrom asks the magnum-api at base as the token's user.
func getFrom(base, tok, path string) (int, string) {
	return requestTo(http.MethodGet, base, tok, path, nil)
}

// requestTo sends body (JSON, or none when nil) to magnum-api as the token's user.
func requestTo(method, base, tok, path string, body io.Reader) (int, string) {
	req, err := http.NewRequest(method, base+path, body)
	if err != nil {
		return 0, err.Error()
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("X-Auth-Token", tok)
	req.Header.Set("OpenStack-API-Version", "container-infra latest")
	req.Header.Set("Accept", "application/json")
	resp, err := magnumHTTP.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(answer)
}

func getStatus(tok, path string) int {
	code, _ := get(tok, path)
	return code
}
