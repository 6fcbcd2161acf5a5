// Command etcd-embed is a single-member etcd for the local management cluster. It accepts the
// subset of etcd's flags that kube-apiserver test harnesses (and our own scripts) pass, and runs
// go.etcd.io/etcd/server/v3/embed, which avoids packaging etcd separately.
package main

import (
	"fmt"
	"log"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/pflag"
	"go.etcd.io/etcd/server/v3/embed"
)

func urls(list string) []url.URL {
	var out []url.URL
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		u, err := url.Parse(s)
		if err != nil {
			log.Fatalf("bad URL %q: %v", s, err)
		}
		out = append(out, *u)
	}
	return out
}

func main() {
	fs := pflag.NewFlagSet("etcd", pflag.ContinueOnError)
	name := fs.String("name", "local", "member name")
	dataDir := fs.String("data-dir", "default.etcd", "data directory")
	listenClient := fs.String("listen-client-urls", "http://127.0.0.1:2379", "client URLs to listen on")
	advertiseClient := fs.String("advertise-client-urls", "", "client URLs to advertise")
	listenPeer := fs.String("listen-peer-urls", "http://127.0.0.1:2380", "peer URLs to listen on")
	advertisePeer := fs.String("initial-advertise-peer-urls", "", "peer URLs to advertise")
	initialCluster := fs.String("initial-cluster", "", "initial cluster configuration")
	noFsync := fs.Bool("unsafe-no-fsync", false, "disable fsync (test clusters only)")
	quota := fs.Int64("quota-backend-bytes", 4<<30, "backend quota")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == pflag.ErrHelp {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}

	cfg := embed.NewConfig()
	cfg.Name = *name
	cfg.Dir = *dataDir
	cfg.ListenClientUrls = urls(*listenClient)
	cfg.AdvertiseClientUrls = cfg.ListenClientUrls
	if *advertiseClient != "" {
		cfg.AdvertiseClientUrls = urls(*advertiseClient)
	}
	cfg.ListenPeerUrls = urls(*listenPeer)
	cfg.AdvertisePeerUrls = cfg.ListenPeerUrls
	if *advertisePeer != "" {
		cfg.AdvertisePeerUrls = urls(*advertisePeer)
	}
	if *initialCluster != "" {
		cfg.InitialCluster = *initialCluster
	} else {
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	}
	cfg.UnsafeNoFsync = *noFsync
	cfg.QuotaBackendBytes = *quota
	cfg.LogLevel = "warn"
	// Zero would log every request as slow.
	cfg.WarningUnaryRequestDuration = embed.DefaultWarningUnaryRequestDuration

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		log.Fatalf("start etcd: %v", err)
	}
	defer e.Close()
	<-e.Server.ReadyNotify()
	log.Printf("etcd ready on %s", *listenClient)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case s := <-sig:
		log.Printf("etcd stopping on %v", s)
	case err := <-e.Err():
		log.Fatalf("etcd: %v", err)
	}
}
