package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v2"
)

// The one metrics server: an explicit empty --metrics-bind-address (kube-proxy's
// metricsBindAddress: "" on its command line) serves nothing and waits for
// the end; --profiling adds pprof beside /metrics on the same address.
func TestMetricsServer(t *testing.T) {
	free := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}
	serveWith := func(args ...string) (func(context.Context) error, error) {
		var status []statusServer
		var serr error
		app := newApp()
		app.Writer, app.ErrWriter = &bytes.Buffer{}, &bytes.Buffer{}
		for _, cmd := range app.Commands {
			if cmd.Name == "run" {
				cmd.Action = func(c *cli.Context) error {
					status, serr = statusAndInspectServers(c, prometheus.NewRegistry(), nil, nil)
					return nil
				}
			}
		}
		if err := app.Run(append([]string{"ipvsproxy", "run", "--inspect-endpoint=false"}, args...)); err != nil {
			t.Fatal(err)
		}
		if serr != nil {
			return nil, serr
		}
		if len(status) != 1 {
			t.Fatalf("%d servers for %q, want 1", len(status), args)
		}
		return status[0].serve, nil
	}

	serve, err := serveWith("--metrics-bind-address=")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx) }()
	select {
	case err := <-done:
		t.Fatalf("a disabled metrics server returned before the end: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("disabled metrics server: %v", err)
	}

	for _, profiling := range []bool{false, true} {
		addr := free()
		serve, err := serveWith("--metrics-bind-address="+addr, fmt.Sprintf("--profiling=%v", profiling))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- serve(ctx) }()
		get := func(path string) int {
			for i := 0; i < 50; i++ {
				resp, err := http.Get("http://" + addr + path)
				if err == nil {
					resp.Body.Close()
					return resp.StatusCode
				}
				time.Sleep(20 * time.Millisecond)
			}
			t.Fatalf("nothing answers on %s", addr)
			return 0
		}
		want := http.StatusNotFound
		if profiling {
			want = http.StatusOK
		}
		if got := get("/metrics"); got != http.StatusOK {
			t.Errorf("profiling=%v: /metrics %d", profiling, got)
		}
		if got := get("/debug/pprof/"); got != want {
			t.Errorf("profiling=%v: /debug/pprof/ %d, want %d", profiling, got, want)
		}
		cancel()
		<-done
	}
}
