package proxier

import (
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// Network programming latency: a slice changed before the tracker started
// (every slice, on the first list after a restart) is not latency; one
// changed since is, once, under its own family.
func TestTriggerTimesSinceStartByFamily(t *testing.T) {
	fk := newFakeKernel()
	cfg := testConfig()
	cfg.Families = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	p, _ := newTestProxier(t, fk, cfg)
	svc := servicetest.Service("web", "10.96.0.10")
	p.Tracker().SetService(svc)
	withTrigger := func(s *discovery.EndpointSlice, at time.Time) *discovery.EndpointSlice {
		s.Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: at.UTC().Format(time.RFC3339Nano)}
		return s
	}
	old := withTrigger(servicetest.Slice(svc, "web-old", 8080, "10.244.1.5@node1"), time.Now().Add(-time.Hour))
	p.Tracker().SetEndpointSlice(old)
	res := p.Sync()
	if n := len(res.TriggerTimes[v1.IPv4Protocol]) + len(res.TriggerTimes[v1.IPv6Protocol]); n != 0 {
		t.Fatalf("a slice changed an hour before the start counted as latency: %v", res.TriggerTimes)
	}
	changed := time.Now().Add(time.Millisecond)
	p.Tracker().SetEndpointSlice(withTrigger(servicetest.Slice(svc, "web-v4", 8080, "10.244.1.6@node1"), changed))
	p.Tracker().SetEndpointSlice(withTrigger(servicetest.Slice(svc, "web-v6", 8080, "fd00:10:244:1::6@node1"), changed))
	res = p.Sync()
	if len(res.TriggerTimes[v1.IPv4Protocol]) != 1 || len(res.TriggerTimes[v1.IPv6Protocol]) != 1 {
		t.Fatalf("trigger times by family: %v, want one each", res.TriggerTimes)
	}
}
