package ipvsproxy

import (
	"fmt"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// An endpoint in two slices (an EndpointSlice controller moving it) is
// used once, the ready copy, and reported; short lists are scanned and
// long ones indexed, with the same result.
func TestRepeatedEndpointsAreUsedOnce(t *testing.T) {
	for _, n := range []int{3, endpointIndexMin * 3} {
		svc := servicetest.Service("web", "10.96.0.10")
		var first, second []string
		for i := range n {
			first = append(first, fmt.Sprintf("10.244.%d.%d@node2/notready", i/200, i%200+1))
			if i%2 == 0 {
				second = append(second, fmt.Sprintf("10.244.%d.%d@node2", i/200, i%200+1))
			}
		}
		eps, problems := EndpointsByPort(compactEndpointSlices([]*discovery.EndpointSlice{servicetest.Slice(svc, "web-a", 8080, first...), servicetest.Slice(svc, "web-b", 8080, second...)}), v1.IPv4Protocol, endpointPolicy{})
		if len(eps) != 1 {
			t.Fatalf("%d endpoints: ports %v, want one", n, eps)
		}
		for _, list := range eps {
			ready := 0
			for _, e := range list {
				if e.Ready {
					ready++
				}
			}
			if len(list) != n || ready != len(second) {
				t.Errorf("%d endpoints: got %d, %d ready; want %d, %d ready", n, len(list), ready, n, len(second))
			}
		}
		if len(problems) != len(second) {
			t.Errorf("%d endpoints: %d problems, want one per repeat (%d)", n, len(problems), len(second))
		}
	}
}
