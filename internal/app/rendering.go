package app

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/conductor"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
)

// RenderingUsage is the help of `magnum-capi-bridge rendering`.
const RenderingUsage = `Usage: magnum-capi-bridge rendering plan  [--cluster UUID]... [--json]
       magnum-capi-bridge rendering apply [--cluster UUID]... [--concurrency N] [--timeout D]

A live cluster keeps the rendering it was built with when the bridge is upgraded (docs/upgrades.md).
plan lists the clusters whose rendering differs from the running bridge's: what differs, whether the
control plane and which worker groups would roll, and their machines. apply moves them, at most N
clusters at a time (default 1): each goes UPDATE_IN_PROGRESS in Magnum while Cluster API rolls what
changed, and the next starts when one ends UPDATE_COMPLETE; the first failure stops it. Both ask the
running bridge over RPC (magnum.conf's transport_url); the Kubernetes version is never changed.
`

// renderingCall is how long a plan or a move may take to answer.
const renderingCall = 2 * time.Minute

// Rendering runs `magnum-capi-bridge rendering plan|apply args...`.
func Rendering(ctx context.Context, o *Options, args []string, out io.Writer) error {
	if len(args) == 0 || (args[0] != "plan" && args[0] != "apply") {
		return errors.New("rendering: want plan or apply (magnum-capi-bridge --help)")
	}
	fs := flag.NewFlagSet("rendering "+args[0], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var clusters stringList
	fs.Var(&clusters, "cluster", "a cluster's UUID, repeatable (default: every cluster)")
	asJSON := fs.Bool("json", false, "plan: print the plan as JSON")
	concurrency := fs.Int("concurrency", 1, "apply: clusters moved at a time")
	timeout := fs.Duration("timeout", time.Hour, "apply: how long to wait for one cluster")
	poll := fs.Duration("poll", 5*time.Second, "apply: how often a moving cluster's status is read")
	if err := fs.Parse(args[1:]); err != nil {
		return fmt.Errorf("rendering %s: %w (magnum-capi-bridge --help)", args[0], err)
	}
	if *concurrency < 1 {
		return errors.New("rendering apply: --concurrency must be at least 1")
	}
	client, err := rpc.NewClient(o.RPC)
	if err != nil {
		return err
	}
	defer client.Close()
	r := &renderingClient{rpc: client}
	plans, err := r.plan(ctx, clusters)
	if err != nil {
		return err
	}
	if args[0] == "plan" {
		if *asJSON {
			enc := json.NewEncoder(out)
			enc.SetIndent("", "  ")
			return enc.Encode(plans)
		}
		printPlan(out, plans)
		return nil
	}
	printPlan(out, plans)
	return r.apply(ctx, plans, *concurrency, *timeout, *poll, out)
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

type renderingClient struct{ rpc *rpc.Client }

func (r *renderingClient) plan(ctx context.Context, clusters []string) ([]conductor.RenderingPlan, error) {
	args := map[string]any{}
	if len(clusters) > 0 {
		args["clusters"] = clusters
	}
	raw, err := r.rpc.Call(ctx, conductor.MethodRenderingPlan, args, operatorContext("rendering"), renderingCall)
	if err != nil {
		return nil, fmt.Errorf("the bridge's plan: %w", err)
	}
	var plans []conductor.RenderingPlan
	if err := json.Unmarshal(raw, &plans); err != nil {
		return nil, fmt.Errorf("the bridge's plan: %w", err)
	}
	return plans, nil
}

// operatorContext is the RPC context of an operator's command (the bridge's own methods want an admin).
func operatorContext(command string) *rpc.Context {
	return &rpc.Context{IsAdmin: true, UserName: "magnum-capi-bridge " + command, RequestID: "req-" + time.Now().UTC().Format("20060102T150405.000000")}
}

func printPlan(out io.Writer, plans []conductor.RenderingPlan) {
	moving := 0
	for _, p := range plans {
		if p.Moves() {
			moving++
		}
	}
	fmt.Fprintf(out, "%d cluster(s), %d with another rendering than the running bridge's\n", len(plans), moving)
	for _, p := range plans {
		head := fmt.Sprintf("%s %s (project %s, %s)", p.Name, p.UUID, p.ProjectID, p.Status)
		switch {
		case p.Error != "":
			fmt.Fprintf(out, "- %s: cannot be planned: %s\n", head, p.Error)
			continue
		case !p.Moves():
			fmt.Fprintf(out, "- %s: current (class %s)\n", head, p.Class)
			continue
		}
		by := p.RenderedBy
		if by == "" {
			by = "a bridge before v0.1.0"
		}
		fmt.Fprintf(out, "- %s: class %s (rendered by %s) → %s\n", head, p.Class, by, p.CurrentClass)
		fmt.Fprintf(out, "    changes: %s\n", strings.Join(p.Changes, "; "))
		var rolls []string
		if p.ControlPlane {
			rolls = append(rolls, "the control plane")
		}
		for _, w := range p.Workers {
			rolls = append(rolls, "worker group "+w)
		}
		if len(rolls) == 0 {
			fmt.Fprintf(out, "    rolls: no machine\n")
			continue
		}
		fmt.Fprintf(out, "    rolls: %s — %d machine(s): %s\n", strings.Join(rolls, ", "), len(p.Machines), strings.Join(p.Machines, " "))
	}
}

// apply moves the clusters whose rendering differs, concurrency at a time, each to its end.
func (r *renderingClient) apply(ctx context.Context, plans []conductor.RenderingPlan, concurrency int, timeout, poll time.Duration, out io.Writer) error {
	var todo []conductor.RenderingPlan
	for _, p := range plans {
		if !p.Moves() {
			continue
		}
		if !magnum.OpRenderingMove.Allowed(p.Status) {
			fmt.Fprintf(out, "skipping %s (%s): %s; move it once it is *_COMPLETE\n", p.Name, p.UUID, p.Status)
			continue
		}
		todo = append(todo, p)
	}
	if len(todo) == 0 {
		fmt.Fprintln(out, "nothing to move")
		return nil
	}
	var (
		mu     sync.Mutex
		failed error
		next   int
		wg     sync.WaitGroup
		outMu  sync.Mutex
	)
	say := func(format string, a ...any) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Fprintf(out, time.Now().UTC().Format("15:04:05 ")+format+"\n", a...)
	}
	take := func() (conductor.RenderingPlan, bool) {
		mu.Lock()
		defer mu.Unlock()
		if failed != nil || next == len(todo) {
			return conductor.RenderingPlan{}, false
		}
		next++
		return todo[next-1], true
	}
	for range min(concurrency, len(todo)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p, ok := take(); ok; p, ok = take() {
				if err := r.move(ctx, p, timeout, poll, say); err != nil {
					mu.Lock()
					if failed == nil {
						failed = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if failed != nil {
		return fmt.Errorf("rendering apply stopped: %w", failed)
	}
	say("moved %d cluster(s)", len(todo))
	return nil
}

func (r *renderingClient) move(ctx context.Context, p conductor.RenderingPlan, timeout, poll time.Duration, say func(string, ...any)) error {
	start := time.Now()
	if _, err := r.rpc.Call(ctx, string(magnum.OpRenderingMove), map[string]any{"cluster": p.UUID}, operatorContext("rendering"), renderingCall); err != nil {
		return fmt.Errorf("%s (%s): %w", p.Name, p.UUID, err)
	}
	say("%s (%s): UPDATE_IN_PROGRESS, %d machine(s) to roll", p.Name, p.UUID, len(p.Machines))
	var final conductor.RenderingPlan
	err := wait.PollUntilContextTimeout(ctx, poll, timeout, false, func(ctx context.Context) (bool, error) {
		now, err := r.plan(ctx, []string{p.UUID})
		if err != nil || len(now) != 1 {
			return false, nil // the bridge may be restarting; the move is recorded in Magnum
		}
		switch st := now[0].Status; st {
		case magnum.StatusUpdateInProgress:
			return false, nil
		case magnum.StatusUpdateComplete:
			final = now[0]
			return true, nil
		default:
			return false, fmt.Errorf("%s (%s): %s", p.Name, p.UUID, st)
		}
	})
	switch {
	case wait.Interrupted(err):
		return fmt.Errorf("%s (%s): not final within %s", p.Name, p.UUID, timeout)
	case err != nil:
		return err
	case final.Moves():
		return fmt.Errorf("%s (%s): UPDATE_COMPLETE but still on class %s (the move was lost; run apply again)", p.Name, p.UUID, final.Class)
	}
	say("%s (%s): UPDATE_COMPLETE after %s, class %s", p.Name, p.UUID, time.Since(start).Round(time.Second), final.Class)
	return nil
}
