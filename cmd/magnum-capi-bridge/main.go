// Command magnum-capi-bridge replaces magnum-conductor for Cluster API clusters. It reads the same
// magnum.conf as the Python services (plus its own [bridge] section) and serves magnum-api's RPC.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/app"
)

// version and commit are stamped at build time with -ldflags "-X main.version=… -X main.commit=…";
// a plain `go build` names the commit from the build's VCS stamp.
var (
	version = "dev"
	commit  = ""
)

func buildCommit() string {
	if commit != "" {
		return commit
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return s.Value[:12]
			}
		}
	}
	return "unknown"
}

type fileList []string

func (f *fileList) String() string     { return strings.Join(*f, ",") }
func (f *fileList) Set(v string) error { *f = append(*f, v); return nil }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("magnum-capi-bridge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var files fileList
	fs.Var(&files, "config-file", "configuration file, repeatable; later files win (default: "+strings.Join(app.DefaultConfigFiles, ", ")+")")
	showVersion := fs.Bool("version", false, "print the version and exit")
	check := fs.Bool("check-config", false, "load and validate the configuration, connect to every dependency, then exit")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `magnum-capi-bridge %s — OpenStack Magnum's conductor for Cluster API clusters.

It consumes magnum-api's RPC (oslo.messaging on RabbitMQ), owns Magnum's cluster, nodegroup,
x509keypair and magnum_service rows, and builds clusters with Cluster API in a management cluster.
Configuration: magnum.conf ([DEFAULT] transport_url/host, [database] connection,
[oslo_messaging_rabbit], [conductor]) and the bridge's own [bridge] section.

Usage: magnum-capi-bridge [flags]
       magnum-capi-bridge [--config-file FILE]... rendering plan|apply [flags]
       magnum-capi-bridge [--config-file FILE]... adoption plan|run [flags]
`, version)
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), "\n"+app.RenderingUsage+"\n"+app.AdoptionUsage)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *showVersion {
		fmt.Fprintf(stdout, "magnum-capi-bridge %s (commit %s)\n", version, buildCommit())
		return 0
	}
	commands := map[string]func(context.Context, *app.Options, []string, io.Writer) error{
		"rendering": app.Rendering,
		"adoption":  app.Adoption,
	}
	command, known := commands[fs.Arg(0)]
	if fs.NArg() > 0 && !known {
		fmt.Fprintf(stderr, "magnum-capi-bridge: unknown command %q\n", fs.Arg(0))
		return 2
	}
	if len(files) == 0 {
		files = app.ExistingDefaultConfigFiles()
	}
	opts, err := app.LoadOptions(files...)
	if err != nil {
		fmt.Fprintln(stderr, "magnum-capi-bridge: configuration error:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if fs.NArg() > 0 {
		if err := command(ctx, opts, fs.Args()[1:], stdout); err != nil {
			fmt.Fprintln(stderr, "magnum-capi-bridge:", err)
			return 1
		}
		return 0
	}
	if *check {
		for _, w := range opts.Warnings {
			fmt.Fprintln(stdout, "warning:", w)
		}
		if err := app.Check(ctx, opts, stdout); err != nil {
			fmt.Fprintln(stderr, "magnum-capi-bridge:", err)
			return 1
		}
		fmt.Fprintln(stdout, "configuration and dependencies OK")
		return 0
	}
	if err := app.Run(ctx, opts, version); err != nil {
		fmt.Fprintln(stderr, "magnum-capi-bridge:", err)
		return 1
	}
	return 0
}
