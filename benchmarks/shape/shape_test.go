package shape

import (
	"net/netip"
	"testing"
)

func TestAddressesAreDistinctAndInTheirRanges(t *testing.T) {
	s := Shape{Services: 3000, Endpoints: 10, Mix: true}
	seen := map[string]bool{}
	for i := 0; i < s.Services; i++ {
		svc := s.Service(i)
		for _, ip := range svc.Spec.ClusterIPs {
			a := netip.MustParseAddr(ip)
			if !ServiceCIDR.Contains(a) && !ServiceCIDR6.Contains(a) || seen[ip] {
				t.Fatalf("service %d: cluster IP %s outside the ranges or repeated", i, ip)
			}
			seen[ip] = true
		}
		for gen := 0; gen < 2; gen++ {
			for _, sl := range s.Slices(i, s.Endpoints, gen) {
				for _, e := range sl.Endpoints {
					a := netip.MustParseAddr(e.Addresses[0])
					if !ClusterCIDR.Contains(a) && !ClusterCIDR6.Contains(a) {
						t.Fatalf("endpoint %s outside the pod ranges", a)
					}
					key := sl.Name + e.Addresses[0]
					if gen == 0 && seen[e.Addresses[0]] {
						t.Fatalf("endpoint %s repeated (%s)", a, key)
					}
					if gen == 0 {
						seen[e.Addresses[0]] = true
					}
				}
			}
		}
	}
	if got := nth(ServiceCIDR, 256); got != netip.MustParseAddr("10.96.1.0") {
		t.Fatalf("nth(10.96.0.0/12, 256) = %s", got)
	}
}
