package capi

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// appliedTTL is how long an object this process applied is taken to be still as applied. Within
// it, a project's next create skips re-applying its namespace's policy objects and the template's
// ClusterClass (a dozen requests of a create's twenty): what a burst of creates, or one after the
// other, would otherwise send again unchanged. After it, the next create applies them again, which
// also repairs what someone changed by hand.
const appliedTTL = 10 * time.Minute

// appliedCache remembers, per namespace, what this process applied there and when. Any failed
// apply into a namespace forgets the namespace's entries: an object deleted behind the bridge's
// back (a ClusterClass, the namespace itself) shows up as the next apply's failure, and the retry
// applies everything again.
type appliedCache struct {
	mu sync.Mutex
	ns map[string]map[string]appliedEntry // namespace → key → entry
}

type appliedEntry struct {
	sum [sha256.Size]byte
	at  time.Time
}

// fresh reports whether key in namespace was applied with sum less than appliedTTL ago.
func (a *appliedCache) fresh(namespace, key string, sum [sha256.Size]byte, now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.ns[namespace][key]
	return ok && e.sum == sum && now.Sub(e.at) < appliedTTL
}

func (a *appliedCache) remember(namespace, key string, sum [sha256.Size]byte, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ns == nil {
		a.ns = map[string]map[string]appliedEntry{}
	}
	if len(a.ns) > 10000 {
		a.pruneLocked(now) // bounded by the projects active within the TTL
	}
	m := a.ns[namespace]
	if m == nil {
		m = map[string]appliedEntry{}
		a.ns[namespace] = m
	}
	m[key] = appliedEntry{sum: sum, at: now}
}

func (a *appliedCache) forget(namespace string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.ns, namespace)
}

func (a *appliedCache) pruneLocked(now time.Time) {
	for ns, m := range a.ns {
		for k, e := range m {
			if now.Sub(e.at) >= appliedTTL {
				delete(m, k)
			}
		}
		if len(m) == 0 {
			delete(a.ns, ns)
		}
	}
}

func objectKey(o *unstructured.Unstructured) string {
	return o.GetAPIVersion() + "/" + o.GetKind() + "/" + o.GetName()
}

func objectSum(o *unstructured.Unstructured) ([sha256.Size]byte, error) {
	raw, err := json.Marshal(o.Object)
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	return sha256.Sum256(raw), nil
}

// ApplyUnchanged applies the objects this process has not applied as they are within appliedTTL
// (the rest were applied, unchanged, moments ago). Those to apply go at once, in two waves: first
// everything but ClusterClasses (the templates), then the ClusterClasses that name them, since
// CAPI's webhook may look the templates up. One at a time, a template's ClusterClass cost a
// quarter of a second on the first create after a start.
func (c *Client) ApplyUnchanged(ctx context.Context, objs ...*unstructured.Unstructured) error {
	now := time.Now()
	var templates, classes []*unstructured.Unstructured
	sums := map[*unstructured.Unstructured][sha256.Size]byte{}
	for _, o := range objs {
		sum, err := objectSum(o)
		if err != nil {
			return err
		}
		if c.applied.fresh(o.GetNamespace(), objectKey(o), sum, now) {
			continue
		}
		sums[o] = sum
		if o.GetKind() == "ClusterClass" {
			classes = append(classes, o)
		} else {
			templates = append(templates, o)
		}
	}
	for _, wave := range [][]*unstructured.Unstructured{templates, classes} {
		g, gctx := errgroup.WithContext(ctx)
		for _, o := range wave {
			g.Go(func() error { return c.Apply(gctx, o) })
		}
		if err := g.Wait(); err != nil {
			return err
		}
		for _, o := range wave {
			c.applied.remember(o.GetNamespace(), objectKey(o), sums[o], now)
		}
	}
	return nil
}
