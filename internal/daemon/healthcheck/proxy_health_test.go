package healthcheck

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

const syncPeriod = 30 * time.Second

var start = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// startProxyHealth serves h through ServeProxyHealth on a fresh loopback port.
func startProxyHealth(t *testing.T, h *ProxyHealth) string {
	t.Helper()
	addr := hostPort("127.0.0.1", freePort(t))
	serveInBackground(t, func(ctx context.Context) error { return ServeProxyHealth(ctx, addr, h) })
	base := "http://" + addr
	waitServing(t, base+"/livez")
	return base
}

func TestProxyHealthBodies(t *testing.T) {
	clock := clocktesting.NewFakeClock(start)
	h := NewProxyHealth(syncPeriod, clock)
	base := startProxyHealth(t, h)

	// Before the first sync: healthy, no per-family status yet.
	checkProxyAnswer(t, base+"/healthz", http.StatusOK,
		`{"lastUpdated":"2026-01-02T03:04:05Z","currentTime":"2026-01-02T03:04:05Z","nodeEligible":true,"healthy":true}`)
	checkProxyAnswer(t, base+"/livez", http.StatusOK,
		`{"lastUpdated":"2026-01-02T03:04:05Z","currentTime":"2026-01-02T03:04:05Z","healthy":true}`)

	h.Updated()
	clock.Step(10 * time.Second)
	// Healthy answers report lastUpdated as now; the family keeps its real time.
	checkProxyAnswer(t, base+"/healthz", http.StatusOK,
		`{"lastUpdated":"2026-01-02T03:04:15Z","currentTime":"2026-01-02T03:04:15Z","nodeEligible":true,"healthy":true,"status":{"IPv4":{"lastUpdated":"2026-01-02T03:04:05Z","healthy":true}}}`)

	// A change queued for just under twice the sync period is not late yet.
	h.QueuedUpdate()
	clock.Step(2*syncPeriod - time.Nanosecond)
	checkProxyAnswer(t, base+"/healthz", http.StatusOK, "")
	// At twice the sync period it is; a second QueuedUpdate does not move the
	// deadline.
	h.QueuedUpdate()
	clock.Step(time.Nanosecond)
	checkProxyAnswer(t, base+"/healthz", http.StatusServiceUnavailable,
		`{"lastUpdated":"2026-01-02T03:04:05Z","currentTime":"2026-01-02T03:05:15Z","nodeEligible":true,"healthy":false,"status":{"IPv4":{"lastUpdated":"2026-01-02T03:04:05Z","healthy":false}}}`)
	checkProxyAnswer(t, base+"/livez", http.StatusServiceUnavailable,
		`{"lastUpdated":"2026-01-02T03:04:05Z","currentTime":"2026-01-02T03:05:15Z","healthy":false,"status":{"IPv4":{"lastUpdated":"2026-01-02T03:04:05Z","healthy":false}}}`)
	if h.Healthy() {
		t.Error("Healthy() = true with a change queued for 2*syncPeriod")
	}

	h.Updated()
	checkProxyAnswer(t, base+"/healthz", http.StatusOK, "")
	if !h.Healthy() {
		t.Error("Healthy() = false right after a sync")
	}

	// Paths other than /healthz and /livez are not served.
	if got := get(t, base+"/metrics").code; got != http.StatusNotFound {
		t.Errorf("GET /metrics = %d, want 404", got)
	}
}

func TestProxyHealthBeforeFirstSync(t *testing.T) {
	// kube-proxy (v1.36, v1.37) judges only IP families that synced at least once, so
	// a change queued long ago does not fail the probe before the first sync.
	clock := clocktesting.NewFakeClock(start)
	h := NewProxyHealth(syncPeriod, clock)
	h.QueuedUpdate()
	clock.Step(10 * syncPeriod)
	if !h.Healthy() {
		t.Error("Healthy() = false before the first sync")
	}
	// From the first sync on, the rule applies.
	h.Updated()
	h.QueuedUpdate()
	clock.Step(2 * syncPeriod)
	if h.Healthy() {
		t.Error("Healthy() = true with a change queued for 2*syncPeriod after a sync")
	}
}

func TestProxyHealthNodeEligibility(t *testing.T) {
	clock := clocktesting.NewFakeClock(start)
	h := NewProxyHealth(syncPeriod, clock)
	h.Updated()
	base := startProxyHealth(t, h)

	deleted := metav1.NewTime(start)
	tests := []struct {
		name     string
		node     *v1.Node
		eligible bool
	}{
		{"plain node", &v1.Node{}, true},
		{"other taint", &v1.Node{Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: "example.com/other", Effect: v1.TaintEffectNoSchedule}}}}, true},
		{"autoscaler taint", &v1.Node{Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: toBeDeletedTaint, Effect: v1.TaintEffectNoSchedule}}}}, false},
		{"back to plain", &v1.Node{}, true},
		{"being deleted", &v1.Node{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &deleted}}, false},
		{"node object gone", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.SyncNode(tt.node)
			healthz := get(t, base+"/healthz")
			wantCode := http.StatusServiceUnavailable
			if tt.eligible {
				wantCode = http.StatusOK
			}
			if healthz.code != wantCode {
				t.Errorf("/healthz = %d, want %d", healthz.code, wantCode)
			}
			var body struct {
				NodeEligible *bool `json:"nodeEligible"`
				Healthy      bool  `json:"healthy"`
			}
			if err := json.Unmarshal([]byte(healthz.body), &body); err != nil {
				t.Fatalf("/healthz body %q: %v", healthz.body, err)
			}
			if body.NodeEligible == nil || *body.NodeEligible != tt.eligible {
				t.Errorf("/healthz nodeEligible = %v, want %v (body %s)", body.NodeEligible, tt.eligible, healthz.body)
			}
			if !body.Healthy {
				t.Errorf("/healthz healthy = false; the proxier itself is healthy (body %s)", healthz.body)
			}
			// /livez ignores the node.
			if livez := get(t, base+"/livez"); livez.code != http.StatusOK {
				t.Errorf("/livez = %d, want 200 whatever the node", livez.code)
			}
		})
	}
}

func TestProxyHealthDualStackStatus(t *testing.T) {
	clock := clocktesting.NewFakeClock(start)
	h := NewProxyHealth(syncPeriod, clock)
	h.SetIPFamilies(v1.IPv4Protocol, v1.IPv6Protocol)
	h.Updated()
	base := startProxyHealth(t, h)
	checkProxyAnswer(t, base+"/livez", http.StatusOK,
		`{"lastUpdated":"2026-01-02T03:04:05Z","currentTime":"2026-01-02T03:04:05Z","healthy":true,"status":{"IPv4":{"lastUpdated":"2026-01-02T03:04:05Z","healthy":true},"IPv6":{"lastUpdated":"2026-01-02T03:04:05Z","healthy":true}}}`)
}

func TestProxyHealthCountsResponses(t *testing.T) {
	clock := clocktesting.NewFakeClock(start)
	h := NewProxyHealth(syncPeriod, clock)
	healthz := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "healthz_total"}, []string{"code"})
	livez := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "livez_total"}, []string{"code"})
	h.CountResponses(healthz, livez)
	base := startProxyHealth(t, h) // its readiness poll GETs /livez until it answers

	livezBefore := counterValue(t, livez.WithLabelValues("200"))
	get(t, base+"/healthz")
	h.SyncNode(nil)
	get(t, base+"/healthz")
	get(t, base+"/healthz")
	get(t, base+"/livez")

	if got := counterValue(t, healthz.WithLabelValues("200")); got != 1 {
		t.Errorf("healthz 200 count = %v, want 1", got)
	}
	if got := counterValue(t, healthz.WithLabelValues("503")); got != 2 {
		t.Errorf("healthz 503 count = %v, want 2", got)
	}
	if got := counterValue(t, livez.WithLabelValues("200")) - livezBefore; got != 1 {
		t.Errorf("livez 200 count grew by %v, want 1", got)
	}
}

func checkProxyAnswer(t *testing.T, url string, wantCode int, wantBody string) {
	t.Helper()
	resp := get(t, url)
	if resp.code != wantCode {
		t.Errorf("GET %s = %d, want %d (body %s)", url, resp.code, wantCode, resp.body)
	}
	if got := resp.header.Get("Content-Type"); got != "application/json" {
		t.Errorf("GET %s Content-Type = %q, want application/json", url, got)
	}
	if got := resp.header.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("GET %s X-Content-Type-Options = %q, want nosniff", url, got)
	}
	if wantBody != "" && resp.body != wantBody {
		t.Errorf("GET %s body:\n got %s\nwant %s", url, resp.body, wantBody)
	}
}

// counterValue reads a counter without prometheus/testutil, whose diff
// dependency is not in go.sum.
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func TestProxyHealthReadyOnlyOnceProgrammed(t *testing.T) {
	clock := clocktesting.NewFakeClock(start)
	h := NewProxyHealth(syncPeriod, clock)
	base := startProxyHealth(t, h)

	// Never synced (API server unreachable, kernel unreadable): /healthz stays
	// kube-proxy's 200 for load balancers, /readyz keeps the pod unready.
	checkProxyAnswer(t, base+"/healthz", http.StatusOK, "")
	checkProxyAnswer(t, base+"/readyz", http.StatusServiceUnavailable,
		`{"lastUpdated":"0001-01-01T00:00:00Z","currentTime":"2026-01-02T03:04:05Z","programmed":false,"healthy":true}`)
	// A sync that was not a complete full one does not make it ready.
	h.Updated()
	checkProxyAnswer(t, base+"/readyz", http.StatusServiceUnavailable, "")

	h.Programmed()
	checkProxyAnswer(t, base+"/readyz", http.StatusOK,
		`{"lastUpdated":"2026-01-02T03:04:05Z","currentTime":"2026-01-02T03:04:05Z","programmed":true,"healthy":true,"status":{"IPv4":{"lastUpdated":"2026-01-02T03:04:05Z","healthy":true}}}`)
	// Falling behind makes it unready again, as /livez fails.
	h.QueuedUpdate()
	clock.Step(2 * syncPeriod)
	checkProxyAnswer(t, base+"/readyz", http.StatusServiceUnavailable, "")
	checkProxyAnswer(t, base+"/livez", http.StatusServiceUnavailable, "")
}
