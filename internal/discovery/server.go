package discovery

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Source gathers the cloud's facts (OpenStackCloud; tests use a fixed one).
type Source interface {
	Facts(ctx context.Context) (Facts, error)
}

// DefaultCacheTTL is [bridge] discovery_cache_ttl's default: a flavor added to Nova shows up within it.
const DefaultCacheTTL = 60 * time.Second

// Handler serves the document at WellKnownPath. It keeps one document (the cache is bounded by
// construction) for TTL; the first request after that rebuilds it, concurrent ones share the
// rebuild. When the cloud cannot be asked, an older document is served for at most another TTL
// (with a Warning header), then 503.
type Handler struct {
	source   Source
	settings Settings
	ttl      time.Duration
	log      *slog.Logger
	now      func() time.Time

	mu      sync.Mutex
	body    []byte
	builtAt time.Time
}

// NewHandler builds the handler; ttl 0 rebuilds on every request.
func NewHandler(source Source, settings Settings, ttl time.Duration, log *slog.Logger) *Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Handler{source: source, settings: settings, ttl: ttl, log: log, now: time.Now}
}

// Mux serves the document at WellKnownPath and 404 elsewhere.
func (h *Handler) Mux() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET "+WellKnownPath, h)
	return mux
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, stale, err := h.document(r.Context())
	if err != nil {
		http.Error(w, "the cloud could not be asked for the discovery document; try again later", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age="+strconv.Itoa(int(h.ttl/time.Second)))
	if stale {
		w.Header().Set("Warning", `110 - "stale: the cloud did not answer"`)
	}
	_, _ = w.Write(body)
}

func (h *Handler) document(ctx context.Context) ([]byte, bool, error) {
	h.mu.Lock() // one rebuild at a time; the others wait for it and share it
	defer h.mu.Unlock()
	now := h.now()
	if h.body != nil && now.Sub(h.builtAt) < h.ttl {
		return h.body, false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	facts, err := h.source.Facts(ctx)
	if err != nil {
		h.log.Warn("discovery document: asking the cloud failed", "error", err)
		if h.body != nil && now.Sub(h.builtAt) < 2*h.ttl {
			return h.body, true, nil
		}
		return nil, false, err
	}
	body, err := json.MarshalIndent(Build(facts, h.settings, now), "", "  ")
	if err != nil {
		return nil, false, err
	}
	h.body, h.builtAt = append(body, '\n'), now
	return h.body, false, nil
}
