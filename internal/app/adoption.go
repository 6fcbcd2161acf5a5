package app

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/adoption"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/conductor"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
)

// AdoptionUsage is the help of `magnum-capi-bridge adoption`.
const AdoptionUsage = `Usage: magnum-capi-bridge adoption plan [--json]
       magnum-capi-bridge adoption run [--json] [CLUSTER...]

plan: before the bridge replaces another conductor (docs/other-drivers.md), what it would do with
each cluster of the database, and why — own (built by this bridge, or adopted), adopt (another
driver's live cluster, taken over in place), leave (never taken over: a Heat stack, a driver the
bridge does not take over), refuse (not now: what to do first). A dry run: it changes nothing.

run: adopt the clusters the plan says to adopt (all, or the CLUSTERs named by uuid or name), one at
a time, no machine replaced; each line says whether it is adopted, its steps, or why it stopped. An
interrupted run is finished by running it again. Stop the old conductor first.

Both ask the running bridge over RPC (magnum.conf's transport_url).
`

// adoptionCall is how long an adoption run may take to answer: a cluster takes seconds.
const adoptionCall = 15 * time.Minute

// Adoption runs `magnum-capi-bridge adoption plan|run args...`.
func Adoption(ctx context.Context, o *Options, args []string, out io.Writer) error {
	if len(args) == 0 || (args[0] != "plan" && args[0] != "run") {
		return errors.New("adoption: want plan or run (magnum-capi-bridge --help)")
	}
	fs := flag.NewFlagSet("adoption "+args[0], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "print the result as JSON")
	if err := fs.Parse(args[1:]); err != nil {
		return fmt.Errorf("adoption %s: %w (magnum-capi-bridge --help)", args[0], err)
	}
	if args[0] == "plan" && fs.NArg() > 0 {
		return fmt.Errorf("adoption plan takes no clusters (magnum-capi-bridge --help)")
	}
	client, err := rpc.NewClient(o.RPC)
	if err != nil {
		return err
	}
	defer client.Close()
	method, call, callArgs := conductor.MethodAdoptionPlan, renderingCall, map[string]any{}
	if args[0] == "run" {
		method, call = conductor.MethodAdoptionRun, adoptionCall
		if fs.NArg() > 0 {
			callArgs["clusters"] = fs.Args()
		}
	}
	raw, err := client.Call(ctx, method, callArgs, operatorContext("adoption"), call)
	if err != nil {
		return fmt.Errorf("the bridge's adoption %s: %w", args[0], err)
	}
	if *asJSON {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("the bridge's adoption %s: %w", args[0], err)
		}
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	if args[0] == "run" {
		var results []conductor.AdoptionResult
		if err := json.Unmarshal(raw, &results); err != nil {
			return fmt.Errorf("the bridge's adoption run: %w", err)
		}
		return printAdoptionRun(out, results)
	}
	var entries []adoption.Entry
	if err := json.Unmarshal(raw, &entries); err != nil {
		return fmt.Errorf("the bridge's adoption plan: %w", err)
	}
	return printAdoptionPlan(out, entries)
}

// printAdoptionRun prints one line per cluster; an error is returned when any stopped, so that a
// script sees the run did not finish.
func printAdoptionRun(out io.Writer, results []conductor.AdoptionResult) error {
	failed := 0
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "RESULT\tNAME\tUUID\tPROJECT\tDETAIL")
	for _, r := range results {
		if r.Adopted {
			fmt.Fprintf(w, "adopted\t%s\t%s\t%s\t%s\n", r.Name, r.UUID, r.ProjectID, r.Steps)
			continue
		}
		failed++
		fmt.Fprintf(w, "stopped\t%s\t%s\t%s\t%s\n", r.Name, r.UUID, r.ProjectID, r.Error)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "%d cluster(s) to adopt: %d adopted, %d stopped\n", len(results), len(results)-failed, failed)
	if failed > 0 {
		return fmt.Errorf("%d adoption(s) stopped: run `magnum-capi-bridge adoption run` again once the cause is fixed", failed)
	}
	return nil
}

func printAdoptionPlan(out io.Writer, entries []adoption.Entry) error {
	n := adoption.Counts(entries)
	fmt.Fprintf(out, "%d cluster(s): %d own, %d adopt, %d leave, %d refuse (a dry run: nothing changed)\n",
		len(entries), n[adoption.Own], n[adoption.Adopt], n[adoption.Leave], n[adoption.Refuse])
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "PLAN\tDRIVER\tNAME\tUUID\tPROJECT\tSTATUS\tWHY")
	for _, e := range entries {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s (%s)\n", e.Action, e.Driver, e.Name, e.UUID, e.ProjectID, e.Status, e.Why, e.DriverWhy)
	}
	return w.Flush()
}
