package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"

	"github.com/ipvsproxy/ipvsproxy/internal/daemon/healthcheck"
	"github.com/ipvsproxy/ipvsproxy/internal/daemon/metrics"
	"github.com/ipvsproxy/ipvsproxy/internal/inspect"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/proxier"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v2"
	"k8s.io/klog/v2"
)

// defaultMetricsPort is kube-proxy's metrics port, where the inspect
// endpoint is when --metrics-bind-address is empty.
const defaultMetricsPort = "10249"

// statusServer is one listener of the metrics and inspect addresses.
type statusServer struct {
	what, addr string
	serve      func(context.Context) error
}

// statusAndInspectServers registers the per-Service collector once and
// returns what serves the metrics address (/metrics, /proxyMode, with
// --profiling Go's pprof under /debug/pprof/, kube-proxy's enableProfiling)
// and, unless --inspect-endpoint=false, the read-only /inspect/ endpoint on
// --inspect-bind-address. An empty --metrics-bind-address (kube-proxy's
// metricsBindAddress: "") serves no metrics. The inspect endpoint is on
// loopback unless asked for elsewhere: with metricsBindAddress 0.0.0.0,
// common for Prometheus, it shares the listener but answers only
// connections made to 127.0.0.1. Each serve function may be called again
// after a failed bind.
func statusAndInspectServers(c *cli.Context, reg *prometheus.Registry, p *proxier.Proxier, h ipvs.Interface) ([]statusServer, error) {
	metricsAddr := c.String("metrics-bind-address")
	if metricsAddr != "" && c.Bool("metrics-per-service") {
		stats, ok := h.(ipvs.StatsReader)
		if !ok {
			return nil, fmt.Errorf("--metrics-per-service: the IPVS adapter cannot read counters")
		}
		if err := reg.Register(metrics.NewServiceStats(p.VirtualServerNames, stats)); err != nil {
			return nil, fmt.Errorf("--metrics-per-service: %w", err)
		}
	}
	profiling := c.Bool("profiling")
	var metricsHTTP, inspectHTTP http.Handler
	if metricsAddr != "" {
		metricsHTTP = metricsHandler(reg, profiling)
	}
	inspectAddr := ""
	if c.Bool("inspect-endpoint") {
		inspectAddr = inspectBindAddress(c.String("inspect-bind-address"), metricsAddr)
		inspectHTTP = inspect.Handler(inspect.Source{Generation: p.SnapshotGeneration, Snapshot: p.Snapshot}, inspect.DefaultLimits)
	}
	opts := metricsServerOptions(profiling)
	var servers []statusServer
	for _, l := range planStatusListeners(metricsAddr, inspectAddr) {
		mux := http.NewServeMux()
		if l.inspect {
			mux.Handle(inspect.Prefix, onlyDialledAt(l.inspectGate, inspectHTTP))
		}
		if l.metrics {
			mux.Handle("/", onlyDialledAt(l.metricsGate, metricsHTTP))
		}
		addr, what := l.addr, l.what()
		servers = append(servers, statusServer{what: what, addr: addr, serve: func(ctx context.Context) error {
			if err := healthcheck.ListenAndServe(ctx, addr, mux, opts...); err != nil {
				return fmt.Errorf("%s server on %s: %w", what, addr, err)
			}
			return nil
		}})
	}
	if metricsAddr == "" {
		servers = append(servers, statusServer{what: "metrics", serve: func(ctx context.Context) error {
			klog.InfoS("Metrics are disabled (--metrics-bind-address is empty)")
			<-ctx.Done()
			return nil
		}})
	}
	return servers, nil
}

// inspectBindAddress is --inspect-bind-address, or when empty the loopback
// address on the metrics port (kube-proxy's 10249 when metrics are off).
func inspectBindAddress(flag, metricsAddr string) string {
	if flag != "" {
		return flag
	}
	port := defaultMetricsPort
	if _, p, err := net.SplitHostPort(metricsAddr); err == nil && p != "" && p != "0" {
		port = p
	}
	return net.JoinHostPort("127.0.0.1", port)
}

// statusListener is one address to listen on and what it serves there; a
// valid gate serves that handler only on connections made to that address
// (the listener is a wildcard that covers it).
type statusListener struct {
	addr                     string
	metrics, inspect         bool
	metricsGate, inspectGate netip.Addr
}

func (l statusListener) what() string {
	switch {
	case l.metrics && l.inspect:
		return "metrics and inspect"
	case l.inspect:
		return "inspect"
	}
	return "metrics"
}

// planStatusListeners decides the listeners of the two addresses (either
// may be empty: not served). Two listeners on one port where one address
// covers the other (0.0.0.0 covers 127.0.0.1) cannot both be bound on
// Linux: they become one listener on the wider address, and the narrower
// handler is gated to its own address.
func planStatusListeners(metricsAddr, inspectAddr string) []statusListener {
	switch {
	case metricsAddr == "" && inspectAddr == "":
		return nil
	case inspectAddr == "":
		return []statusListener{{addr: metricsAddr, metrics: true}}
	case metricsAddr == "":
		return []statusListener{{addr: inspectAddr, inspect: true}}
	}
	mHost, mPort, mErr := splitBindAddress(metricsAddr)
	iHost, iPort, iErr := splitBindAddress(inspectAddr)
	if mErr != nil || iErr != nil || mPort != iPort || mPort == 0 {
		// Different ports (or names, or a port chosen by the kernel):
		// two listeners that never clash.
		return []statusListener{{addr: metricsAddr, metrics: true}, {addr: inspectAddr, inspect: true}}
	}
	switch {
	case mHost == iHost:
		return []statusListener{{addr: metricsAddr, metrics: true, inspect: true}}
	case covers(mHost, iHost):
		return []statusListener{{addr: metricsAddr, metrics: true, inspect: true, inspectGate: iHost}}
	case covers(iHost, mHost):
		return []statusListener{{addr: inspectAddr, metrics: true, inspect: true, metricsGate: mHost}}
	}
	return []statusListener{{addr: metricsAddr, metrics: true}, {addr: inspectAddr, inspect: true}}
}

// splitBindAddress reads host:port with an IP address or an empty host
// (every address, as "::").
func splitBindAddress(addr string) (netip.Addr, uint16, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return netip.Addr{}, 0, err
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return netip.Addr{}, 0, err
	}
	if host == "" {
		return netip.IPv6Unspecified(), uint16(n), nil
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, 0, err
	}
	return a.Unmap(), uint16(n), nil
}

// covers: a listener on wide also takes connections to narrow. Go listens on
// "::" for both families, on 0.0.0.0 for IPv4 alone.
func covers(wide, narrow netip.Addr) bool {
	switch {
	case wide == netip.IPv6Unspecified():
		return true
	case wide == netip.IPv4Unspecified():
		return narrow.Is4()
	}
	return false
}

// onlyDialledAt serves h on connections made to addr and answers 404 to the
// others, as if h were not there; an invalid addr serves every connection.
func onlyDialledAt(addr netip.Addr, h http.Handler) http.Handler {
	if !addr.IsValid() {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
			if ap, err := netip.ParseAddrPort(local.String()); err == nil && ap.Addr().Unmap() == addr {
				h.ServeHTTP(w, r)
				return
			}
		}
		http.NotFound(w, r)
	})
}
