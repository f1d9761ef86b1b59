package metrics

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/ipvsproxy/ipvsproxy/internal/daemon/healthcheck"
)

// startStatus runs serveStatus on a fresh loopback port until the test ends.
func startStatus(t *testing.T, m *Metrics, opts ...healthcheck.Option) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveStatus(ctx, addr, m.Registry, opts...) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serveStatus returned %v after cancel, want nil", err)
		}
	})
	for i := 0; i < 300; i++ {
		if conn, err := net.Dial("tcp", addr); err == nil {
			conn.Close()
			return "http://" + addr
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("status server on %s never listened", addr)
	return ""
}

// get sends one GET; the client timeout only keeps a broken test from hanging.
func get(t *testing.T, url string) (int, http.Header, string) {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(body)
}

func TestStatusProxyMode(t *testing.T) {
	base := startStatus(t, New())
	code, header, body := get(t, base+"/proxyMode")
	if code != http.StatusOK || body != "ipvs" {
		t.Errorf("/proxyMode = %d %q, want 200 %q (no newline, as kube-proxy)", code, body, "ipvs")
	}
	if got := header.Get("Content-Type"); got != "text/plain; charset=utf-8" {
		t.Errorf("/proxyMode Content-Type = %q", got)
	}
	if got := header.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("/proxyMode X-Content-Type-Options = %q", got)
	}

	if code, _, body := get(t, base+"/healthz"); code != http.StatusOK || body != "ok" {
		t.Errorf("/healthz = %d %q, want 200 ok", code, body)
	}
	if code, _, _ := get(t, base+"/nothing-here"); code != http.StatusNotFound {
		t.Errorf("/nothing-here = %d, want 404", code)
	}
}

func TestStatusMetricsText(t *testing.T) {
	m := New()
	base := startStatus(t, m)
	m.SyncProxyRulesLatency.WithLabelValues(string(v1.IPv4Protocol)).Observe(0.0015)
	m.SyncFullTotal.Inc()
	m.RealServersDraining.Set(2)

	code, header, body := get(t, base+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics = %d", code)
	}
	if ct := header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("/metrics Content-Type = %q, want the Prometheus text format", ct)
	}
	for _, want := range []string{
		"# HELP kubeproxy_sync_proxy_rules_duration_seconds [ALPHA] SyncProxyRules latency in seconds\n",
		"# TYPE kubeproxy_sync_proxy_rules_duration_seconds histogram\n",
		`kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="0.001"} 0` + "\n",
		`kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="0.002"} 1` + "\n",
		"kubeproxy_sync_proxy_rules_endpoint_changes_pending 0\n",
		"ipvsproxy_sync_full_total 1\n",
		"ipvsproxy_real_servers_draining 2\n",
		`ipvsproxy_kernel_write_failures_total{object="ipvs"} 0` + "\n",
		"go_goroutines ",
		"process_start_time_seconds ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestStatusClosesSilentClient(t *testing.T) {
	limits := healthcheck.DefaultServerLimits
	limits.ReadHeaderTimeout = 200 * time.Millisecond
	limits.MaxConnections = 1
	base := startStatus(t, New(), healthcheck.WithServerLimits(limits))

	silent, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	// With one connection allowed, this is served only once the server has
	// hung up on the silent client.
	if code, _, body := get(t, base+"/proxyMode"); code != http.StatusOK || body != "ipvs" {
		t.Errorf("/proxyMode behind a silent client = %d %q", code, body)
	}
	silent.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := silent.Read(make([]byte, 1)); err == nil {
		t.Error("silent client got data, want the connection closed")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Error("server never closed the silent connection")
	}
}

func TestServeStatusReportsBusyAddress(t *testing.T) {
	squatter, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer squatter.Close()
	err = serveStatus(context.Background(), squatter.Addr().String(), New().Registry)
	if err == nil || !strings.Contains(err.Error(), squatter.Addr().String()) {
		t.Errorf("serveStatus on a busy address = %v, want an error naming it", err)
	}
}
