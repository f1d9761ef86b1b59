package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/daemon/metrics"
	"github.com/urfave/cli/v2"
	"k8s.io/client-go/rest"
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

// clientConnection from kubeadm's default file: kube-proxy's defaults
// (protobuf, JSON acceptable, 5 qps, burst 10); from the customised one, its
// values.
func TestClientConnection(t *testing.T) {
	for _, c := range []struct {
		file, contentType, accept string
		qps                       float32
		burst                     int
	}{
		{"testdata/kubeadm-config.conf", "application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf,application/json", 5, 10},
		{"testdata/custom-config.conf", "application/json", "", 20, 40},
	} {
		var rc rest.Config
		app := newApp()
		app.Writer, app.ErrWriter = &bytes.Buffer{}, &bytes.Buffer{}
		for _, cmd := range app.Commands {
			if cmd.Name == "run" {
				cmd.Action = func(ctx *cli.Context) error {
					if _, _, err := loadConfig(ctx); err != nil {
						return err
					}
					clientConnection(ctx)(&rc)
					return nil
				}
			}
		}
		if err := app.Run([]string{"ipvsproxy", "run", "--config", c.file}); err != nil {
			t.Fatal(err)
		}
		if rc.ContentType != c.contentType || rc.AcceptContentTypes != c.accept || rc.QPS != c.qps || rc.Burst != c.burst {
			t.Errorf("%s: content type %q accept %q qps %v burst %d", c.file, rc.ContentType, rc.AcceptContentTypes, rc.QPS, rc.Burst)
		}
	}
}

func TestGCPercentDefaultsUnlessGOGCIsSet(t *testing.T) {
	previous := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(previous) })

	applyGCPercent(func(string) (string, bool) { return "", false })
	if got := debug.SetGCPercent(100); got != defaultGCPercent {
		t.Errorf("without GOGC the daemon's GC percent is %d, want %d", got, defaultGCPercent)
	}
	debug.SetGCPercent(200) // as GOGC=200 would have at start
	applyGCPercent(func(name string) (string, bool) { return "200", name == "GOGC" })
	if got := debug.SetGCPercent(100); got != 200 {
		t.Errorf("with GOGC=200 in the environment the GC percent became %d, want it left at 200", got)
	}
}

func TestHeapSamplingOnlyWithProfiling(t *testing.T) {
	previous := runtime.MemProfileRate
	t.Cleanup(func() { runtime.MemProfileRate = previous })
	runtime.MemProfileRate = 512 * 1024
	applyMemProfileRate(true)
	if runtime.MemProfileRate != 512*1024 {
		t.Errorf("with --profiling the heap sampling rate became %d, want Go's default kept", runtime.MemProfileRate)
	}
	applyMemProfileRate(false)
	if runtime.MemProfileRate != 0 {
		t.Errorf("without --profiling the heap sampling rate is %d, want 0 (off)", runtime.MemProfileRate)
	}
}
