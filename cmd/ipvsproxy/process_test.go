package main

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/metrics"
)

// enableProfiling adds pprof to the metrics server and nothing else changes.
func TestMetricsHandlerProfiling(t *testing.T) {
	reg := metrics.New().Registry
	for _, c := range []struct {
		profiling bool
		path      string
		want      int
	}{
		{false, "/debug/pprof/", http.StatusNotFound},
		{true, "/debug/pprof/", http.StatusOK},
		{true, "/debug/pprof/cmdline", http.StatusOK},
		{true, "/metrics", http.StatusOK},
		{true, "/proxyMode", http.StatusOK},
		{false, "/metrics", http.StatusOK},
	} {
		rec := httptest.NewRecorder()
		metricsHandler(reg, c.profiling).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, c.path, nil))
		if rec.Code != c.want {
			t.Errorf("profiling=%t GET %s: %d, want %d", c.profiling, c.path, rec.Code, c.want)
		}
	}
}
