package fakeopenstack

import (
	"encoding/json"
	"io"
	"sync"
	"time"
)

// Request is one logged request. The token itself is never recorded, only whether one was sent.
type Request struct {
	Time      time.Time `json:"time"`
	Service   Service   `json:"service"`
	Method    string    `json:"method"`
	Path      string    `json:"path"`
	Query     string    `json:"query,omitempty"`
	Route     string    `json:"route,omitempty"` // the matched route pattern; empty for a 404 of an unknown route
	Status    int       `json:"status"`
	Token     bool      `json:"token"`
	UserAgent string    `json:"user_agent,omitempty"`
	// Who the token belonged to, when the route validated it (every stateful route does).
	ProjectID               string   `json:"project_id,omitempty"`
	UserID                  string   `json:"user_id,omitempty"`
	AuthMethods             []string `json:"auth_methods,omitempty"`
	ApplicationCredentialID string   `json:"application_credential_id,omitempty"`
}

// auditKey carries a *Caller slot through the request context, so the route that validates the
// token can tell the request log who it was.
type auditKey struct{}

// requestLog keeps the last few requests for Requests() and streams every request as a JSON line to an
// optional sink (the fake's request log file).
type requestLog struct {
	mu      sync.Mutex
	sink    io.Writer
	keep    int
	entries []Request
}

func (l *requestLog) add(r Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.keep > 0 {
		if len(l.entries) == l.keep {
			copy(l.entries, l.entries[1:])
			l.entries = l.entries[:l.keep-1]
		}
		l.entries = append(l.entries, r)
	}
	if l.sink != nil {
		line, err := json.Marshal(r)
		if err == nil {
			// A failing log sink must not fail the request it describes.
			_, _ = l.sink.Write(append(line, '\n'))
		}
	}
}

func (l *requestLog) snapshot() []Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Request(nil), l.entries...)
}
