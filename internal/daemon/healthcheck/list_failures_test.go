package healthcheck

import (
	"net/http"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// A required list that fails is named in every body; it keeps the pod
// unready, and fails /healthz only while nothing was ever programmed.
func TestProxyHealthNamesFailingLists(t *testing.T) {
	clock := clocktesting.NewFakeClock(start)
	h := NewProxyHealth(syncPeriod, clock)
	base := startProxyHealth(t, h)
	forbidden := `services is forbidden: User "system:serviceaccount:kube-system:ipvsproxy" cannot list resource "services"`
	h.ListFailing("services", forbidden)

	checkProxyAnswer(t, base+"/readyz", http.StatusServiceUnavailable,
		`{"lastUpdated":"0001-01-01T00:00:00Z","currentTime":"2026-01-02T03:04:05Z","programmed":false,"healthy":true,"listFailures":{"services":"services is forbidden: User \"system:serviceaccount:kube-system:ipvsproxy\" cannot list resource \"services\""}}`)
	checkProxyAnswer(t, base+"/healthz", http.StatusServiceUnavailable,
		`{"lastUpdated":"0001-01-01T00:00:00Z","currentTime":"2026-01-02T03:04:05Z","nodeEligible":true,"healthy":true,"listFailures":{"services":"services is forbidden: User \"system:serviceaccount:kube-system:ipvsproxy\" cannot list resource \"services\""}}`)
	// Liveness is the loop keeping up: a restart cannot grant a permission.
	checkProxyAnswer(t, base+"/livez", http.StatusOK, "")

	// Once programmed, the kernel serves the last state: /healthz keeps 200
	// and says why the state may be old; /readyz stays 503.
	h.Updated()
	h.Programmed()
	clock.Step(time.Second)
	h.ListFailing("services", forbidden)
	if body := get(t, base+"/healthz"); body.code != http.StatusOK || !strings.Contains(body.body, `"listFailures":{"services":`) {
		t.Errorf("programmed node with a failing list: /healthz %d %s", body.code, body.body)
	}
	checkProxyAnswer(t, base+"/readyz", http.StatusServiceUnavailable, "")

	// A failure not repeated for listFailureStale is one the reflector got
	// past; ListRecovered clears at once.
	clock.Step(listFailureStale)
	checkProxyAnswer(t, base+"/readyz", http.StatusOK, "")
	h.ListFailing("nodes", "connection refused")
	checkProxyAnswer(t, base+"/readyz", http.StatusServiceUnavailable, "")
	h.ListRecovered("nodes")
	checkProxyAnswer(t, base+"/readyz", http.StatusOK,
		`{"lastUpdated":"2026-01-02T03:05:36Z","currentTime":"2026-01-02T03:05:36Z","programmed":true,"healthy":true,"status":{"IPv4":{"lastUpdated":"2026-01-02T03:04:05Z","healthy":true}}}`)
}
