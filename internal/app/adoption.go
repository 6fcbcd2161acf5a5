package app

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/adoption"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/conductor"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
)

// AdoptionUsage is the help of `magnum-capi-bridge adoption`.
const AdoptionUsage = `Usage: magnum-capi-bridge adoption plan [--json]

Before the bridge replaces another conductor (docs/other-drivers.md): what it would do with each
cluster of the database, and why — own (built by this bridge), adopt (another driver's live cluster,
taken over in place), leave (never taken over: a Heat stack, a driver the bridge does not take over),
refuse (not now: what to do first). A dry run: it changes nothing. It asks the running bridge over RPC
(magnum.conf's transport_url).
`

// Adoption runs `magnum-capi-bridge adoption plan args...`.
func Adoption(ctx context.Context, o *Options, args []string, out io.Writer) error {
	if len(args) == 0 || args[0] != "plan" {
		return errors.New("adoption: want plan (magnum-capi-bridge --help)")
	}
	fs := flag.NewFlagSet("adoption plan", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "print the plan as JSON")
	if err := fs.Parse(args[1:]); err != nil {
		return fmt.Errorf("adoption plan: %w (magnum-capi-bridge --help)", err)
	}
	client, err := rpc.NewClient(o.RPC)
	if err != nil {
		return err
	}
	defer client.Close()
	raw, err := client.Call(ctx, conductor.MethodAdoptionPlan, map[string]any{}, operatorContext("adoption"), renderingCall)
	if err != nil {
		return fmt.Errorf("the bridge's adoption plan: %w", err)
	}
	var entries []adoption.Entry
	if err := json.Unmarshal(raw, &entries); err != nil {
		return fmt.Errorf("the bridge's adoption plan: %w", err)
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(entries)
	}
	return printAdoptionPlan(out, entries)
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
