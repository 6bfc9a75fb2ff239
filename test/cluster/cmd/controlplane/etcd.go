package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// runEtcd runs a single-member etcd (go.etcd.io/etcd/server/v3/embed, the version kube-apiserver's
// own module graph pins) on loopback ports the kernel picks, writes its client URL to --url-file
// once it serves, and stops on SIGTERM or SIGINT.
func runEtcd(args []string) int {
	fs := flag.NewFlagSet("etcd", flag.ContinueOnError)
	dataDir := fs.String("data-dir", "", "data directory (required)")
	urlFile := fs.String("url-file", "", "file that receives the client URL once etcd serves (required)")
	quotaBytes := fs.Int64("quota-backend-bytes", 2<<30, "backend quota in bytes")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dataDir == "" || *urlFile == "" {
		fmt.Fprintln(os.Stderr, "etcd: --data-dir and --url-file are required")
		return 2
	}
	// A restarted etcd keeps its data but gets new ports; its member record holds the peer URL
	// it was first started with, so keep the peer port in the data directory across restarts.
	peer, err := peerURL(filepath.Join(*dataDir, "peer-url"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcd:", err)
		return 1
	}
	cfg := embed.NewConfig()
	cfg.Name = "draguard-cluster"
	cfg.Dir = filepath.Join(*dataDir, "member-data")
	cfg.LogLevel = "warn"
	cfg.QuotaBackendBytes = *quotaBytes
	client, _ := url.Parse("http://127.0.0.1:0")
	cfg.ListenClientUrls = []url.URL{*client}
	cfg.AdvertiseClientUrls = []url.URL{*client}
	cfg.ListenPeerUrls = []url.URL{*peer}
	cfg.AdvertisePeerUrls = []url.URL{*peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcd: start:", err)
		return 1
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		fmt.Fprintln(os.Stderr, "etcd: not ready after 60 s")
		return 1
	}
	clientURL := "http://" + e.Clients[0].Addr().String()
	tmp := *urlFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(clientURL+"\n"), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "etcd:", err)
		return 1
	}
	if err := os.Rename(tmp, *urlFile); err != nil {
		fmt.Fprintln(os.Stderr, "etcd:", err)
		return 1
	}
	fmt.Fprintln(os.Stderr, "etcd: serving", clientURL)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	select {
	case <-ctx.Done():
		return 0
	case err := <-e.Err():
		fmt.Fprintln(os.Stderr, "etcd:", err)
		return 1
	}
}

// peerURL returns the peer URL kept in path, or picks a free loopback port and keeps it there.
func peerURL(path string) (*url.URL, error) {
	if b, err := os.ReadFile(path); err == nil {
		return url.Parse(string(b))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	addr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	s := "http://" + addr.String()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		return nil, err
	}
	return url.Parse(s)
}
