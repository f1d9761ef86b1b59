package metrics

import (
	"context"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ipvsproxy/ipvsproxy/internal/daemon/healthcheck"
)

// proxyMode is what /proxyMode answers: kube-proxy's name for this data plane.
const proxyMode = "ipvs"

// StatusHandler serves kube-proxy's status endpoints:
//
//   - /proxyMode: "ipvs" as text/plain, without a trailing newline (kube-proxy
//     writes the mode with "%s");
//   - /metrics: reg in the Prometheus text format;
//   - /healthz: "ok", as the generic healthz handler kube-proxy installs on
//     this server (the proxier's real health is on the healthz port).
func StatusHandler(reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/proxyMode", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		fmt.Fprint(w, proxyMode)
	})
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		// One failing collector must not hide the others.
		ErrorHandling: promhttp.ContinueOnError,
		// Scrapers queue behind each other instead of piling up goroutines.
		MaxRequestsInFlight: 4,
	}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		fmt.Fprint(w, "ok")
	})
	return mux
}

// serveStatus serves StatusHandler(reg) on addr (--metrics-bind-address,
// 127.0.0.1:10249 by default) with the hardened limits of package
// healthcheck, until ctx is done.
func serveStatus(ctx context.Context, addr string, reg *prometheus.Registry, opts ...healthcheck.Option) error {
	return healthcheck.ListenAndServe(ctx, addr, StatusHandler(reg), opts...)
}
