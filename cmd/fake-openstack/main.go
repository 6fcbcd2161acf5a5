// Command fake-openstack serves the Glance, Nova and Neutron GETs that magnum-api makes while it
// validates cluster templates and clusters, from seed data, on three loopback listeners. It is part of
// the local development stack (deploy/local/openstack/up.sh), not of the bridge. It also keeps Nova
// server groups in memory, per project; with --keystone-url the project is the one of the request's
// token, validated with that Keystone. With --boot, servers boot their kubeadm user data into nodes of
// simulated workload clusters (test/fakeopenstack/boot).
//
//	fake-openstack [--image-listen 127.0.0.1:9292] [--compute-listen 127.0.0.1:8774]
//	               [--network-listen 127.0.0.1:9696] [--seed extra.json] [--request-log file.jsonl]
//	               [--keystone-url http://127.0.0.1:5000/v3] [--boot --public-cidr 127.24.4.0/24]
//	fake-openstack --print-seed [--seed extra.json]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/test/fakeopenstack"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/test/fakeopenstack/boot"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "fake-openstack:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("fake-openstack", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := map[fakeopenstack.Service]*string{
		fakeopenstack.ImageService:   fs.String("image-listen", "127.0.0.1:9292", "listen address of the image (Glance) API; empty disables it"),
		fakeopenstack.ComputeService: fs.String("compute-listen", "127.0.0.1:8774", "listen address of the compute (Nova) API; empty disables it"),
		fakeopenstack.NetworkService: fs.String("network-listen", "127.0.0.1:9696", "listen address of the network (Neutron) API; empty disables it"),
		// Off by default: the local stack's catalog has no load-balancer or block-storage endpoint yet.
		fakeopenstack.VolumeService:       fs.String("volume-listen", "", "listen address of the block-storage (Cinder v3) API, e.g. 127.0.0.1:8776; empty disables it"),
		fakeopenstack.LoadBalancerService: fs.String("load-balancer-listen", "", "listen address of the load-balancer (Octavia) API, e.g. 127.0.0.1:9876; empty disables it"),
	}
	inspectListen := fs.String("inspect-listen", "", "listen address of the simulator's inspection API (GET /requests, GET /projects/{id}/resources); empty disables it")
	instanceQuota := fs.Int("instance-quota", fakeopenstack.DefaultInstanceQuota, "default Nova instances quota of every project (admins change it per project with os-quota-sets); negative: unlimited")
	seedPath := fs.String("seed", "", "JSON seed file that extends or overrides the built-in seed (same shape as --print-seed)")
	requestLog := fs.String("request-log", "", "append every request as a JSON line to this file (\"-\" for stdout)")
	printSeed := fs.Bool("print-seed", false, "print the effective seed as JSON and exit")
	bootNodes := fs.Bool("boot", false, "servers whose user data holds a kubeadm configuration boot into nodes of simulated workload clusters, whose API answers at the cluster's endpoint (an address this machine can bind, see --public-cidr)")
	publicCIDR := fs.String("public-cidr", "", "CIDR of the external network's subnet (default 172.24.4.0/24); floating IPs come from it, e.g. 127.24.4.0/24 so that a workload cluster's API can answer on its floating IP")
	keystoneURL := fs.String("keystone-url", "", "Keystone v3 URL that validates the tokens of the server-group routes, whose state is kept per project; empty: every token shares one project")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}

	seed := fakeopenstack.DefaultSeed()
	if *seedPath != "" {
		data, err := os.ReadFile(*seedPath)
		if err != nil {
			return err
		}
		if seed, err = fakeopenstack.LoadSeed(data); err != nil {
			return fmt.Errorf("%s: %w", *seedPath, err)
		}
	}
	if *publicCIDR != "" {
		if err := seed.SetPublicCIDR(*publicCIDR); err != nil {
			return fmt.Errorf("--public-cidr: %w", err)
		}
	}
	if *printSeed {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(seed)
	}

	logger := slog.New(slog.NewTextHandler(stderr, nil))
	var opts []fakeopenstack.Option
	switch *requestLog {
	case "":
	case "-":
		opts = append(opts, fakeopenstack.WithRequestLog(stdout))
	default:
		f, err := os.OpenFile(*requestLog, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		// The Cloud serialises its log writes, so one file serves all three listeners.
		opts = append(opts, fakeopenstack.WithRequestLog(f))
	}
	if *keystoneURL != "" {
		u, err := url.Parse(*keystoneURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--keystone-url %q is not an absolute http(s) URL", *keystoneURL)
		}
		opts = append(opts, fakeopenstack.WithCallers(fakeopenstack.KeystoneCallers(*keystoneURL, nil)))
	}
	opts = append(opts, fakeopenstack.WithInstanceQuota(*instanceQuota))
	if *bootNodes {
		workloads, err := boot.NewWorkloads(context.Background(), logr.FromSlogHandler(logger.Handler()))
		if err != nil {
			return err
		}
		defer workloads.Close()
		opts = append(opts, fakeopenstack.WithBoot(workloads, logger))
	}
	cloud, err := fakeopenstack.New(seed, opts...)
	if err != nil {
		return err
	}

	// Bind every port before serving any, so that a port already in use fails the start as a whole
	// instead of leaving a half-started fake behind.
	var servers []*http.Server
	var listeners []net.Listener
	for _, svc := range fakeopenstack.Services {
		addr := *listen[svc]
		if addr == "" {
			continue
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			for _, l := range listeners {
				l.Close()
			}
			return fmt.Errorf("%s API: %w", svc, err)
		}
		listeners = append(listeners, ln)
		servers = append(servers, &http.Server{
			Handler:           cloud.Handler(svc),
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		})
		logger.Info("serving", "service", svc, "address", ln.Addr().String())
	}
	if *inspectListen != "" {
		ln, err := net.Listen("tcp", *inspectListen)
		if err != nil {
			for _, l := range listeners {
				l.Close()
			}
			return fmt.Errorf("inspection API: %w", err)
		}
		listeners = append(listeners, ln)
		servers = append(servers, &http.Server{Handler: cloud.InspectHandler(), ReadHeaderTimeout: 10 * time.Second,
			ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)})
		logger.Info("serving", "service", "inspection", "address", ln.Addr().String())
	}
	if len(servers) == 0 {
		return errors.New("every listener is disabled")
	}
	logger.Info("seed", "images", len(seed.Images), "flavors", len(seed.Flavors),
		"networks", len(seed.Networks), "subnets", len(seed.Subnets), "keypairs", len(seed.Keypairs))
	if *keystoneURL != "" {
		logger.Info("server groups are kept per project of the token", "keystone", *keystoneURL)
	} else {
		logger.Info("server groups: no --keystone-url, every token shares one project")
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	errc := make(chan error, len(servers))
	for i, srv := range servers {
		go func() {
			if err := srv.Serve(listeners[i]); !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
	}
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case err = <-errc:
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, srv := range servers {
		_ = srv.Shutdown(shutdownCtx)
	}
	return err
}
