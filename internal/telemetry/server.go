package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Check is one readiness condition. Fn returns a short state ("consuming", "leader") or an error
// that makes the bridge not ready. An Informational check is shown but never fails readiness
// (leadership: a follower is as ready to serve RPC as the leader).
type Check struct {
	Name          string
	Fn            func(ctx context.Context) (string, error)
	Informational bool
}

// checkTimeout bounds one check (a hung database must not hang the probe).
const checkTimeout = 2 * time.Second

// Handler serves /metrics, /healthz (the process is alive and serving HTTP) and /readyz (every
// non-informational check passes; the body lists each check as [+] or [-], like kube-apiserver's,
// and ?verbose is implied).
func Handler(m *Metrics, checks []Check) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		ok, body := Ready(r.Context(), checks)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_, _ = w.Write([]byte(body))
	})
	return mux
}

// Ready runs the checks concurrently and reports whether the bridge is ready, with one line per
// check.
func Ready(ctx context.Context, checks []Check) (bool, string) {
	type result struct {
		state string
		err   error
	}
	results := make([]chan result, len(checks))
	for i, c := range checks {
		results[i] = make(chan result, 1)
		go func() {
			cctx, cancel := context.WithTimeout(ctx, checkTimeout)
			defer cancel()
			s, err := c.Fn(cctx)
			results[i] <- result{s, err}
		}()
	}
	ok := true
	var b strings.Builder
	for i, c := range checks {
		r := <-results[i]
		switch {
		case r.err != nil && !c.Informational:
			ok = false
			fmt.Fprintf(&b, "[-]%s failed: %s\n", c.Name, oneLine(r.err.Error()))
		case r.err != nil:
			fmt.Fprintf(&b, "[+]%s: %s\n", c.Name, oneLine(r.err.Error()))
		default:
			fmt.Fprintf(&b, "[+]%s %s\n", c.Name, r.state)
		}
	}
	if ok {
		b.WriteString("readyz check passed\n")
	} else {
		b.WriteString("readyz check failed\n")
	}
	return ok, b.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Serve listens on addr and serves h until ctx ends. ready, if set, is called with the bound
// address once listening (addr may end in :0).
func Serve(ctx context.Context, addr string, h http.Handler, log *slog.Logger, ready func(net.Addr)) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("[bridge] metrics_bind %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	if ready != nil {
		ready(l.Addr())
	}
	log.Info("metrics and health listening", "metrics", "http://"+l.Addr().String()+"/metrics",
		"healthz", "http://"+l.Addr().String()+"/healthz", "readyz", "http://"+l.Addr().String()+"/readyz")
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-done
		return nil
	case err := <-done:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}
