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

// serveStatusAndInspect serves the metrics address: kube-proxy's status
// endpoints, and with --inspect-endpoint (the default) the read-only
// snapshot `ipvsproxy inspect` names the kernel with. It is as exposed as
// /metrics: on 127.0.0.1 by default. With --metrics-per-service it also
// registers the per-Service traffic counters.
func serveStatusAndInspect(ctx context.Context, c *cli.Context, reg *prometheus.Registry, p *ipvsproxy.Proxier, h ipvs.Interface) error {
	addr := c.String("metrics-bind-address")
	if c.Bool("metrics-per-service") {
		stats, ok := h.(ipvs.StatsReader)
		if !ok {
			return fmt.Errorf("--metrics-per-service: the IPVS adapter cannot read counters")
		}
		if err := reg.Register(servicestats.New(p.VirtualServerNames, stats)); err != nil {
			return fmt.Errorf("--metrics-per-service: %w", err)
		}
	}
	if !c.Bool("inspect-endpoint") {
		return metrics.ServeStatus(ctx, addr, reg)
	}
	mux := http.NewServeMux()
	mux.Handle(inspectserver.Prefix, inspectserver.Handler(p.Snapshot))
	mux.Handle("/", metrics.StatusHandler(reg))
	return healthcheck.ListenAndServe(ctx, addr, mux)
}
