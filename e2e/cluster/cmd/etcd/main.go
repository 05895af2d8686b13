// Command etcd runs a single-member etcd server for the local e2e control plane.
//
// It embeds go.etcd.io/etcd/server/v3 at the version that the pinned Kubernetes release
// requires, so the whole control plane comes from one Go module graph. It listens on
// loopback only and stops cleanly on SIGINT/SIGTERM.
package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	dataDir := flag.String("data-dir", "", "directory for etcd's data (required)")
	clientPort := flag.Int("client-port", 0, "loopback port for clients (required)")
	peerPort := flag.Int("peer-port", 0, "loopback port for peers (required)")
	flag.Parse()
	if *dataDir == "" || *clientPort == 0 || *peerPort == 0 {
		fmt.Fprintln(os.Stderr, "etcd: --data-dir, --client-port and --peer-port are required")
		os.Exit(2)
	}

	cfg := embed.NewConfig()
	cfg.Name = "vapcheck-e2e"
	cfg.Dir = *dataDir
	cfg.LogLevel = "warn"
	client := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", *clientPort)}
	peer := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", *peerPort)}
	cfg.ListenClientUrls = []url.URL{client}
	cfg.AdvertiseClientUrls = []url.URL{client}
	cfg.ListenPeerUrls = []url.URL{peer}
	cfg.AdvertisePeerUrls = []url.URL{peer}
	cfg.InitialCluster = fmt.Sprintf("%s=%s", cfg.Name, peer.String())
	// A test cluster is thrown away afterwards: skip fsync to keep the e2e runs fast.
	cfg.UnsafeNoFsync = true

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd: start: %v\n", err)
		os.Exit(1)
	}
	select {
	case <-e.Server.ReadyNotify():
		fmt.Fprintf(os.Stderr, "etcd: ready on %s\n", client.String())
	case <-time.After(60 * time.Second):
		e.Server.Stop()
		fmt.Fprintln(os.Stderr, "etcd: not ready within 60s")
		os.Exit(1)
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case s := <-sig:
		fmt.Fprintf(os.Stderr, "etcd: %v, stopping\n", s)
	case err := <-e.Err():
		fmt.Fprintf(os.Stderr, "etcd: %v\n", err)
	}
	e.Close()
}
