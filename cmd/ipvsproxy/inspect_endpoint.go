package main

import (
	"context"
	"fmt"
	"net/http"

	"github.com/ipvsproxy/ipvsproxy/healthcheck"
	"github.com/ipvsproxy/ipvsproxy/inspectserver"
	"github.com/ipvsproxy/ipvsproxy/ipvs"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	"github.com/ipvsproxy/ipvsproxy/metrics"
	"github.com/ipvsproxy/ipvsproxy/servicestats"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v2"
)

// statusAndInspectServer registers the per-Service collector once and returns
// what serves the metrics address: /metrics, /proxyMode and, unless
// --inspect-endpoint=false, the read-only /inspect/ endpoint. It may be
// called again after a failed bind.
func statusAndInspectServer(c *cli.Context, reg *prometheus.Registry, p *ipvsproxy.Proxier, h ipvs.Interface) (func(context.Context) error, error) {
	addr := c.String("metrics-bind-address")
	if c.Bool("metrics-per-service") {
		stats, ok := h.(ipvs.StatsReader)
		if !ok {
			return nil, fmt.Errorf("--metrics-per-service: the IPVS adapter cannot read counters")
		}
		if err := reg.Register(servicestats.New(p.VirtualServerNames, stats)); err != nil {
			return nil, fmt.Errorf("--metrics-per-service: %w", err)
		}
	}
	if !c.Bool("inspect-endpoint") {
		return func(ctx context.Context) error { return metrics.ServeStatus(ctx, addr, reg) }, nil
	}
	mux := http.NewServeMux()
	mux.Handle(inspectserver.Prefix, inspectserver.Handler(p.Snapshot))
	mux.Handle("/", metrics.StatusHandler(reg))
	return func(ctx context.Context) error { return healthcheck.ListenAndServe(ctx, addr, mux) }, nil
}
