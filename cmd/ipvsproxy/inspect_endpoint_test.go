package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/benchmarks/ours"
	"github.com/ipvsproxy/ipvsproxy/benchmarks/shape"
	"github.com/ipvsproxy/ipvsproxy/internal/inspect"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/proxier"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v2"
)

func TestPlanStatusListeners(t *testing.T) {
	lo := netip.MustParseAddr("127.0.0.1")
	for _, c := range []struct {
		metrics, inspect string
		want             []statusListener
	}{
		{"127.0.0.1:10249", "127.0.0.1:10249", []statusListener{{addr: "127.0.0.1:10249", metrics: true, inspect: true}}},
		// The common Prometheus setting: one listener, inspect answered
		// only on connections to loopback.
		{"0.0.0.0:10249", "127.0.0.1:10249", []statusListener{{addr: "0.0.0.0:10249", metrics: true, inspect: true, inspectGate: lo}}},
		{":10249", "127.0.0.1:10249", []statusListener{{addr: ":10249", metrics: true, inspect: true, inspectGate: lo}}},
		{"[::]:10249", "127.0.0.1:10249", []statusListener{{addr: "[::]:10249", metrics: true, inspect: true, inspectGate: lo}}},
		// Inspect asked for network-wide, metrics kept on loopback.
		{"127.0.0.1:10249", "0.0.0.0:10249", []statusListener{{addr: "0.0.0.0:10249", metrics: true, inspect: true, metricsGate: lo}}},
		{"0.0.0.0:10249", "0.0.0.0:10249", []statusListener{{addr: "0.0.0.0:10249", metrics: true, inspect: true}}},
		// 0.0.0.0 does not cover IPv6: two listeners.
		{"0.0.0.0:10249", "[::1]:10249", []statusListener{{addr: "0.0.0.0:10249", metrics: true}, {addr: "[::1]:10249", inspect: true}}},
		{"192.0.2.10:10249", "127.0.0.1:10249", []statusListener{{addr: "192.0.2.10:10249", metrics: true}, {addr: "127.0.0.1:10249", inspect: true}}},
		{"0.0.0.0:10249", "127.0.0.1:10250", []statusListener{{addr: "0.0.0.0:10249", metrics: true}, {addr: "127.0.0.1:10250", inspect: true}}},
		{"", "127.0.0.1:10249", []statusListener{{addr: "127.0.0.1:10249", inspect: true}}},
		{"0.0.0.0:10249", "", []statusListener{{addr: "0.0.0.0:10249", metrics: true}}},
		{"", "", nil},
	} {
		got := planStatusListeners(c.metrics, c.inspect)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("metrics %q, inspect %q:\n got %+v\nwant %+v", c.metrics, c.inspect, got, c.want)
		}
	}
	for _, c := range []struct{ flag, metrics, want string }{
		{"", "127.0.0.1:10249", "127.0.0.1:10249"},
		{"", "0.0.0.0:10249", "127.0.0.1:10249"},
		{"", "0.0.0.0:9100", "127.0.0.1:9100"},
		{"", "", "127.0.0.1:10249"},
		{"0.0.0.0:10249", "127.0.0.1:10249", "0.0.0.0:10249"},
	} {
		if got := inspectBindAddress(c.flag, c.metrics); got != c.want {
			t.Errorf("inspectBindAddress(%q, %q) = %q, want %q", c.flag, c.metrics, got, c.want)
		}
	}
}

// syncedProxier is a proxier of n Services on the fakes, synced once.
func syncedProxier(t testing.TB, n int) *proxier.Proxier {
	t.Helper()
	s := shape.Shape{Services: n, Endpoints: 2}
	p, err := proxier.New(ours.Config(s), shape.NodeName, ours.FakeKernel(netif.NewFake(owned.DummyInterface)), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		p.Tracker().SetService(s.Service(i))
		for _, sl := range s.Slices(i, s.Endpoints, 0) {
			p.Tracker().SetEndpointSlice(sl)
		}
	}
	if res := p.Sync(); res.Err() != nil {
		t.Fatal(res.Err())
	}
	return p
}

// statusOf answers the status of GET url within 10 s, -1 when nothing
// answers.
func statusOf(url string) int {
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// The inspect endpoint (no credentials) is on loopback unless asked for
// elsewhere, whatever the metrics address: with --metrics-bind-address
// 0.0.0.0 a connection to another address of the node (here 127.0.0.2)
// gets /metrics but not /inspect/; --inspect-bind-address 0.0.0.0 asks for
// it there too.
func TestInspectEndpointIsOnLoopbackUnlessAskedFor(t *testing.T) {
	p := syncedProxier(t, 3)
	port := func() string {
		_, port, _ := net.SplitHostPort(freeLoopbackAddr(t))
		return port
	}
	for _, c := range []struct {
		name           string
		metrics        string
		inspectFlag    string
		inspectHere    []string // addresses (with the metrics port) where inspect answers
		inspectNotHere []string
		metricsHere    []string
	}{
		{"metrics on every address", "0.0.0.0", "", []string{"127.0.0.1"}, []string{"127.0.0.2"}, []string{"127.0.0.1", "127.0.0.2"}},
		{"metrics on loopback", "127.0.0.1", "", []string{"127.0.0.1"}, nil, []string{"127.0.0.1"}},
		{"inspect asked for on every address", "0.0.0.0", "0.0.0.0", []string{"127.0.0.1", "127.0.0.2"}, nil, []string{"127.0.0.1", "127.0.0.2"}},
		{"inspect on every address, metrics on loopback", "127.0.0.1", "0.0.0.0", []string{"127.0.0.1", "127.0.0.2"}, nil, []string{"127.0.0.1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			port := port()
			args := []string{}
			if c.inspectFlag != "" {
				args = append(args, "--inspect-bind-address="+net.JoinHostPort(c.inspectFlag, port))
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			startStatusServers(t, ctx, p, append(args, "--metrics-bind-address="+net.JoinHostPort(c.metrics, port))...)
			url := func(host, path string) string { return "http://" + net.JoinHostPort(host, port) + path }
			for _, h := range c.inspectHere {
				if got := statusOf(url(h, inspect.SnapshotPath)); got != http.StatusOK {
					t.Errorf("inspect on %s: %d, want 200", h, got)
				}
			}
			for _, h := range c.inspectNotHere {
				if got := statusOf(url(h, inspect.SnapshotPath)); got != http.StatusNotFound {
					t.Errorf("inspect on %s: %d, want 404 (not served there)", h, got)
				}
			}
			for _, h := range c.metricsHere {
				if got := statusOf(url(h, "/metrics")); got != http.StatusOK {
					t.Errorf("/metrics on %s: %d, want 200", h, got)
				}
			}
			if len(c.metricsHere) == 1 {
				if got := statusOf(url("127.0.0.2", "/metrics")); got == http.StatusOK {
					t.Errorf("/metrics on 127.0.0.2: %d, want it not served there", got)
				}
			}
		})
	}
}

// startStatusServers runs the daemon's metrics and inspect servers with
// args until ctx ends, and waits until each answers.
func startStatusServers(t *testing.T, ctx context.Context, p *proxier.Proxier, args ...string) {
	t.Helper()
	var status []statusServer
	runAs(t, func(c *cli.Context) error {
		var err error
		status, err = statusAndInspectServers(c, prometheus.NewRegistry(), p, nil)
		return err
	}, args...)
	for _, s := range status {
		done := make(chan error, 1)
		go func() { done <- s.serve(ctx) }()
		t.Cleanup(func() {
			if err := <-done; err != nil {
				t.Errorf("%s server: %v", s.what, err)
			}
		})
		if s.addr == "" {
			continue
		}
		host, port, _ := net.SplitHostPort(s.addr)
		if a, err := netip.ParseAddr(host); host == "" || err == nil && a.IsUnspecified() {
			host = "127.0.0.1"
		}
		deadline := time.Now().Add(10 * time.Second)
		for statusOf(fmt.Sprintf("http://%s/", net.JoinHostPort(host, port))) < 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s server on %s never answered", s.what, s.addr)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
