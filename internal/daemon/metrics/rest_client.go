package metrics

import (
	"context"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientmetrics "k8s.io/client-go/tools/metrics"
)

// client-go's request metrics, as component-base registers them for
// kube-proxy (rest_client_requests_total, rest_client_request_duration_seconds),
// so API-server load from the proxies shows on the same dashboards.
var (
	restClientRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rest_client_requests_total",
		Help: alpha("Number of HTTP requests, partitioned by status code, method, and host."),
	}, []string{"code", "method", "host"})
	restClientLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rest_client_request_duration_seconds",
		Help:    alpha("Request latency in seconds. Broken down by verb, and host."),
		Buckets: []float64{0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0},
	}, []string{"verb", "host"})
	registerClientGo sync.Once
)

type restResult struct{}

func (restResult) Increment(_ context.Context, code, method, host string) {
	restClientRequests.WithLabelValues(code, method, host).Inc()
}

type restLatency struct{}

func (restLatency) Observe(_ context.Context, verb string, u url.URL, latency time.Duration) {
	restClientLatency.WithLabelValues(verb, u.Host).Observe(latency.Seconds())
}

// RegisterRESTClient hooks client-go's request metrics into m.Registry.
// client-go accepts one hook per process; a second Metrics shares it.
func (m *Metrics) RegisterRESTClient() {
	registerClientGo.Do(func() {
		clientmetrics.Register(clientmetrics.RegisterOpts{RequestLatency: restLatency{}, RequestResult: restResult{}})
	})
	for _, c := range []prometheus.Collector{restClientRequests, restClientLatency} {
		if err := m.Registry.Register(c); err != nil {
			if _, dup := err.(prometheus.AlreadyRegisteredError); !dup {
				panic(err)
			}
		}
	}
}
