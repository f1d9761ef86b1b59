// Package metrics owns the proxier's Prometheus metrics and the status server
// on --metrics-bind-address (127.0.0.1:10249 by default), which answers
// /proxyMode, /metrics and /healthz as kube-proxy's does.
//
// The kube-proxy metrics keep kube-proxy v1.36's and v1.37's names, types, buckets and
// labels (pkg/proxy/metrics/metrics.go, the set its IPVS mode registers), so
// existing dashboards and alerts work unchanged. Metrics of our own carry the
// ipvsproxy_ prefix.
//
// Everything lives in one Metrics value with its own prometheus.Registry, not
// in package globals or the client library's default registry: the daemon
// creates one with New and hands it to the proxier, and each test gets a
// fresh one.
//
// It never writes to the kernel. It counts what the proxier reports, and
// the per-Service collector (ServiceStats, off by default) reads the IPVS
// counters at each scrape.
package metrics
