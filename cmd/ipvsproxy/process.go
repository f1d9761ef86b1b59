package main

import (
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/daemon/healthcheck"
	"github.com/ipvsproxy/ipvsproxy/internal/daemon/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v2"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// The process-level knobs of kube-proxy that are not the proxier's:
// oomScoreAdj, clientConnection, metricsBindAddress and enableProfiling.

// applyOOMScoreAdj sets this process's oom_score_adj (kube-proxy: -999, so
// the OOM killer takes the proxy of every Service on the node last). As in
// kube-proxy a failure is logged, not fatal: lowering it needs
// CAP_SYS_RESOURCE, which a container may lack.
func applyOOMScoreAdj(adj int) {
	if err := os.WriteFile("/proc/self/oom_score_adj", []byte(strconv.Itoa(adj)), 0); err != nil {
		klog.InfoS("Could not set oom_score_adj", "value", adj, "err", err)
	}
}

// defaultGCPercent is the daemon's GOGC unless the environment sets one.
// Go's 100 lets the heap grow to twice what is live before collecting; the
// daemon's live heap is mostly long-lived caches and the desired state, and
// its peak RSS is the heap goal its cold sync sets. 50 (growth to 1.5
// times) lowered that peak at 10,000 Services by about a quarter; 25 by 8
// to 13 MiB more in three boots, for CPU between 5% less and 13% more
// over the run and no slower sync measured (docs/performance.md).
const defaultGCPercent = 25

// applyGCPercent sets defaultGCPercent unless GOGC is in the environment
// (which Go has applied already, "off" included).
func applyGCPercent(lookupEnv func(string) (string, bool)) {
	if _, set := lookupEnv("GOGC"); set {
		return
	}
	debug.SetGCPercent(defaultGCPercent)
}

// applyMemProfileRate turns the heap profile's sampling off unless the
// metrics address serves pprof: by default Go samples an allocation per 512
// KiB and keeps a record per distinct stack in a hash table of 1.4 MB,
// whose pages the samples make resident; nothing else reads them. Set
// before the informers start, where the daemon allocates most.
func applyMemProfileRate(profiling bool) {
	if !profiling {
		runtime.MemProfileRate = 0
	}
}

// clientConnection applies --kube-api-* (clientConnection.*) to the API
// client. kube-proxy defaults to protobuf; JSON stays acceptable so that
// any object type still decodes.
func clientConnection(c *cli.Context) func(*rest.Config) {
	return func(rc *rest.Config) {
		rc.QPS = float32(c.Float64("kube-api-qps"))
		rc.Burst = c.Int("kube-api-burst")
		rc.ContentType = c.String("kube-api-content-type")
		rc.AcceptContentTypes = c.String("kube-api-accept-content-types")
		if rc.AcceptContentTypes == "" && rc.ContentType != "" && rc.ContentType != "application/json" {
			rc.AcceptContentTypes = rc.ContentType + ",application/json"
		}
	}
}

// metricsServerOptions are the metrics server's limits: with profiling,
// /debug/pprof/profile samples for 30 s by default, longer than the hardened
// write timeout allows.
func metricsServerOptions(profiling bool) []healthcheck.Option {
	if !profiling {
		return nil
	}
	limits := healthcheck.DefaultServerLimits
	limits.WriteTimeout = 2 * time.Minute
	return []healthcheck.Option{healthcheck.WithServerLimits(limits)}
}

// metricsHandler is the metrics server's handler; with profiling, Go's
// pprof is added under /debug/pprof/.
func metricsHandler(reg *prometheus.Registry, profiling bool) http.Handler {
	if !profiling {
		return metrics.StatusHandler(reg)
	}
	mux := http.NewServeMux()
	mux.Handle("/", metrics.StatusHandler(reg))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
