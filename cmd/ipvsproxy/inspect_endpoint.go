package main

import (
	"context"
	"fmt"
	"net/http"

	"github.com/ipvsproxy/ipvsproxy/healthcheck"
	"github.com/ipvsproxy/ipvsproxy/inspectserver"
	"github.com/ipvsproxy/ipvsproxy/internal/proxier"
	"github.com/ipvsproxy/ipvsproxy/ipvs"
	"github.com/ipvsproxy/ipvsproxy/servicestats"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v2"
	"k8s.io/klog/v2"
)

// statusAndInspectServer registers the per-Service collector once and returns
// what serves the metrics address: /metrics, /proxyMode, with --profiling
// Go's pprof under /debug/pprof/ (kube-proxy's enableProfiling) and, unless
// --inspect-endpoint=false, the read-only /inspect/ endpoint. An empty
// address (an explicit --metrics-bind-address=, kube-proxy's
// metricsBindAddress: "") serves nothing. The returned function may be
// called again after a failed bind.
func statusAndInspectServer(c *cli.Context, reg *prometheus.Registry, p *proxier.Proxier, h ipvs.Interface) (func(context.Context) error, error) {
	addr := c.String("metrics-bind-address")
	if addr == "" {
		return func(ctx context.Context) error {
			klog.InfoS("Metrics are disabled (--metrics-bind-address is empty)")
			<-ctx.Done()
			return nil
		}, nil
	}
	if c.Bool("metrics-per-service") {
		stats, ok := h.(ipvs.StatsReader)
		if !ok {
			return nil, fmt.Errorf("--metrics-per-service: the IPVS adapter cannot read counters")
		}
		if err := reg.Register(servicestats.New(p.VirtualServerNames, stats)); err != nil {
			return nil, fmt.Errorf("--metrics-per-service: %w", err)
		}
	}
	profiling := c.Bool("profiling")
	handler := metricsHandler(reg, profiling)
	if c.Bool("inspect-endpoint") {
		mux := http.NewServeMux()
		mux.Handle(inspectserver.Prefix, inspectserver.Handler(p.Snapshot))
		mux.Handle("/", handler)
		handler = mux
	}
	opts := metricsServerOptions(profiling)
	return func(ctx context.Context) error {
		if err := healthcheck.ListenAndServe(ctx, addr, handler, opts...); err != nil {
			return fmt.Errorf("metrics server on %s: %w", addr, err)
		}
		return nil
	}, nil
}
