package ipvsproxy

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	v1 "k8s.io/api/core/v1"
)

// loadBalancerFirewall is what a built load balancer's source ranges give
// one family: whether its LB IP is in KUBE-LOAD-BALANCER-FW (firewalled),
// and the ranges KUBE-LOAD-BALANCER-SRC-CIDR admits for it.
type loadBalancerFirewall struct {
	firewalled bool
	admits     []string
}

// firewallOf reads the family's firewall from a built Service's set entries.
func firewallOf(st *ServiceState, family v1.IPFamily) loadBalancerFirewall {
	prefix := "KUBE-"
	if family == v1.IPv6Protocol {
		prefix = "KUBE-6-"
	}
	var fw loadBalancerFirewall
	for _, line := range strings.Split(dumpService(st), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		switch f[0] {
		case prefix + "LOAD-BALANCER-FW":
			fw.firewalled = true
		case prefix + "LOAD-BALANCER-SRC-CIDR":
			fw.admits = append(fw.admits, f[1][strings.LastIndexByte(f[1], ',')+1:])
		}
	}
	slices.Sort(fw.admits)
	return fw
}

// Every odd loadBalancerSourceRanges value is read as kube-proxy reads it
// (pkg/proxy/util MapCIDRsByIPFamily: net.ParseCIDR, host bits dropped, an
// IPv4-mapped IPv6 range of 96 bits or more is the IPv4 range, a /0 lets
// everyone in), or, where kube-proxy would drop the value and open the load
// balancer, refused with an InvalidService problem and the load balancer
// closed for both families. An IPv4-mapped range was once taken for IPv6,
// and an IPv4 load balancer with only such ranges had no firewall at all.
func TestLoadBalancerSourceRangesOddValues(t *testing.T) {
	open := loadBalancerFirewall{}
	closed := loadBalancerFirewall{firewalled: true}
	only := func(ranges ...string) loadBalancerFirewall { return loadBalancerFirewall{true, ranges} }
	cases := []struct {
		name     string
		ranges   []string
		v4, v6   loadBalancerFirewall
		problems []string // each a problem's quoted value
	}{
		{"IPv4-mapped", []string{"::ffff:192.0.2.0/120"}, only("192.0.2.0/24"), open, nil},
		{"IPv4-mapped host", []string{"::ffff:198.51.100.79/128"}, only("198.51.100.79/32"), open, nil},
		{"IPv4-mapped beside IPv4", []string{"::ffff:192.0.2.0/120", "198.51.100.0/24"}, only("192.0.2.0/24", "198.51.100.0/24"), open, nil},
		{"IPv4-mapped /96 is 0.0.0.0/0", []string{"::ffff:0.0.0.0/96", "192.0.2.0/24"}, open, open, nil},
		{"IPv4-mapped host bits set", []string{"::ffff:192.0.2.77/120"}, only("192.0.2.0/24"), open, nil},
		{"IPv6 range shorter than the mapped prefix", []string{"::ffff:0:0/95"}, open, only("::fffe:0:0/95"), nil},
		{"IPv4 /0", []string{"0.0.0.0/0", "2001:db8:9::/48"}, open, only("2001:db8:9::/48"), nil},
		{"IPv6 /0", []string{"::/0", "192.0.2.0/24"}, only("192.0.2.0/24"), open, nil},
		{"both /0", []string{"0.0.0.0/0", "::/0"}, open, open, nil},
		{"host bits set", []string{"192.0.2.77/24", "2001:db8:9::1/48"}, only("192.0.2.0/24"), only("2001:db8:9::/48"), nil},
		{"duplicates", []string{"192.0.2.0/24", "192.0.2.0/24", "192.0.2.9/24", "::ffff:192.0.2.0/120", " 192.0.2.0/24 "}, only("192.0.2.0/24"), open, nil},
		{"mixed families", []string{"192.0.2.0/24", "2001:db8:9::/48", "198.51.100.0/25"}, only("192.0.2.0/24", "198.51.100.0/25"), only("2001:db8:9::/48"), nil},
		{"zone id", []string{"fe80::%eth0/64", "192.0.2.0/24"}, only("192.0.2.0/24"), closed, []string{`"fe80::%eth0/64"`}},
		{"garbage", []string{"not-a-cidr", "192.0.2.0/33", "192.0.2.7", "10.0.0.0/8/8", "", "::ffff:192.0.2.0/129"}, closed, closed,
			[]string{`"not-a-cidr"`, `"192.0.2.0/33"`, `"192.0.2.7"`, `"10.0.0.0/8/8"`, `""`, `"::ffff:192.0.2.0/129"`}},
		// kube-proxy reads leading zeros as decimal (ParseCIDRSloppy);
		// the API server refuses them today, and where one was stored
		// before, it is refused and closes rather than guess.
		{"leading zeros", []string{"010.0.0.0/8"}, closed, closed, []string{`"010.0.0.0/8"`}},
		{"garbage beside a /0", []string{"0.0.0.0/0", "bogus"}, open, closed, []string{`"bogus"`}},
	}
	dual := testConfig()
	dual.Families = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	node := NodeInfo{Name: servicetest.ThisNode, Addresses: []netip.Addr{servicetest.Node1IP, servicetest.Node1IP6}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			svc := servicetest.Service("lb", "10.96.0.20", servicetest.LoadBalancer(30090, "203.0.113.140", "2001:db8:1::140"), func(s *v1.Service) {
				s.Spec.ClusterIPs = []string{"10.96.0.20", "fd00:96::20"}
				s.Spec.LoadBalancerSourceRanges = c.ranges
			})
			st := BuildService(svc, nil, node, dual)
			for _, f := range []struct {
				family v1.IPFamily
				want   loadBalancerFirewall
			}{{v1.IPv4Protocol, c.v4}, {v1.IPv6Protocol, c.v6}} {
				if got := firewallOf(st, f.family); got.firewalled != f.want.firewalled || !slices.Equal(got.admits, f.want.admits) {
					t.Errorf("%s: firewalled %v admitting %v, want firewalled %v admitting %v\n%s", f.family, got.firewalled, got.admits, f.want.firewalled, f.want.admits, dumpService(st))
				}
			}
			var problems []string
			for _, p := range st.Problems {
				problems = append(problems, p.String())
			}
			if len(problems) != len(c.problems) {
				t.Errorf("problems %q, want one naming each of %v", problems, c.problems)
			}
			for i, want := range c.problems {
				if i < len(problems) && (!strings.Contains(problems[i], want) || !strings.Contains(problems[i], ReasonInvalidService) || !strings.Contains(problems[i], "default/lb")) {
					t.Errorf("problem %q, want an InvalidService of default/lb naming %s", problems[i], want)
				}
			}
		})
	}
}
