package ipvsproxy

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
)

// Changes drained during a full sync's read merge into those drained at
// its start: every Service named once, the counts summed, each family's
// trigger times kept under that family.
func TestMergeKeepsBothDrainsByFamily(t *testing.T) {
	tr := NewChangeTracker(servicetest.ThisNode, func() {})
	triggered := func(s *discovery.EndpointSlice) *discovery.EndpointSlice {
		s.Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: time.Now().Add(time.Millisecond).UTC().Format(time.RFC3339Nano)}
		return s
	}
	web := servicetest.Service("web", "10.96.0.10")
	dns := servicetest.Service("dns", "10.96.0.20")
	tr.SetService(web)
	tr.SetEndpointSlice(triggered(servicetest.Slice(web, "web-v4", 8080, "10.244.1.5@node1")))
	first := tr.Drain()
	tr.SetService(dns)
	tr.SetEndpointSlice(triggered(servicetest.Slice(web, "web-v6", 8080, "2001:db8:244:1::5@node1")))
	tr.SetEndpointSlice(triggered(servicetest.Slice(dns, "dns-v4", 53, "10.244.1.6@node1")))
	first.Merge(tr.Drain())
	for _, name := range []string{"web", "dns"} {
		if !first.Services[types.NamespacedName{Namespace: "default", Name: name}] {
			t.Errorf("%s not among the merged changes: %v", name, first.Services)
		}
	}
	if first.ServiceChanges != 2 || first.EndpointChanges != 3 {
		t.Errorf("merged %d Service and %d endpoint changes, want 2 and 3", first.ServiceChanges, first.EndpointChanges)
	}
	if n4, n6 := len(first.TriggerTimes[v1.IPv4Protocol]), len(first.TriggerTimes[v1.IPv6Protocol]); n4 != 2 || n6 != 1 {
		t.Errorf("trigger times IPv4 %d, IPv6 %d, want 2 and 1", n4, n6)
	}
	if first.oldest.IsZero() {
		t.Error("the merge lost when the oldest change arrived")
	}
}
