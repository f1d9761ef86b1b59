package proxier

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/rules"

	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	v1 "k8s.io/api/core/v1"
)

// traceFixture is one node (node1, 198.51.100.1) with a Service of each
// kind, synced on the fakes; the trace runs on the proxier's Snapshot.
func traceFixture(t *testing.T) snapshot.Snapshot {
	t.Helper()
	return traceFixtureWith(t, testConfig())
}

func traceFixtureWith(t *testing.T, cfg ipvsproxy.Config) snapshot.Snapshot {
	t.Helper()
	fk := newFakeKernel()
	p, _ := newTestProxier(t, fk, cfg)
	tr := p.Tracker()
	web := servicetest.Service("web", "10.96.0.10")
	tr.SetService(web)
	tr.SetEndpointSlice(servicetest.Slice(web, "web-a", 8080, "10.244.1.5@node1", "10.244.2.7@node2"))
	// NodePort, Local, its only endpoint on node2.
	local := servicetest.Service("local", "10.96.0.11", servicetest.NodePort(30080), func(s *v1.Service) {
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	})
	tr.SetService(local)
	tr.SetEndpointSlice(servicetest.Slice(local, "local-a", 8080, "10.244.2.7@node2"))
	cluster := servicetest.Service("cluster", "10.96.0.12", servicetest.NodePort(30081))
	tr.SetService(cluster)
	tr.SetEndpointSlice(servicetest.Slice(cluster, "cluster-a", 8080, "10.244.2.7@node2"))
	lb := servicetest.Service("ranged", "10.96.0.13", servicetest.LoadBalancer(30090, "203.0.113.140"), func(s *v1.Service) {
		s.Spec.LoadBalancerSourceRanges = []string{"198.51.100.64/26"}
	})
	tr.SetService(lb)
	tr.SetEndpointSlice(servicetest.Slice(lb, "ranged-a", 8080, "10.244.1.5@node1"))
	mustSync(t, p)
	return p.Snapshot()
}

func trace(s snapshot.Snapshot, src, dst string, proto ipvs.Protocol) rules.Trace {
	return rules.TracePacket(s, rules.Packet{Source: netip.MustParseAddr(src), Destination: netip.MustParseAddrPort(dst), Protocol: proto})
}

func tracedRealServers(t rules.Trace) string {
	var out []string
	for _, rs := range t.RealServers {
		m := "not masqueraded"
		if rs.Masquerade {
			m = "masqueraded"
		}
		out = append(out, rs.RealServerKey.String()+" "+m)
	}
	return strings.Join(out, ", ")
}

type traceCase struct {
	name, src, dst string
	proto          ipvs.Protocol
	verdict        string
	realServers    string // "addr:port masqueraded|not masqueraded", ...
	reason         string // a substring of the reason or of a real server's masquerade reason
}

// With the Service CIDR routed local by one route (routes.go) instead of
// its cluster IPs bound, every verdict stays the same, and an unused
// address of the range is rejected instead of routed on.
func TestTraceVerdictsWithTheServiceCIDRRouted(t *testing.T) {
	s := traceFixtureWith(t, routedConfig())
	if slices.Contains(s.Addresses, netip.MustParseAddr("10.96.0.10")) {
		t.Fatalf("the cluster IP is bound: %v", s.Addresses)
	}
	checkTraces(t, s, append(traceCases(),
		traceCase{"an unused address of the routed range is rejected", "10.244.1.20", "10.96.0.99:80", ipvs.TCP, rules.VerdictRejected,
			"", "lies in a routed Service CIDR"},
		traceCase{"from the node too", "198.51.100.1", "10.96.0.99:22", ipvs.TCP, rules.VerdictRejected,
			"", "kubernetes#72236"}))
}

func TestTraceVerdicts(t *testing.T) {
	checkTraces(t, traceFixture(t), append(traceCases(),
		traceCase{"an unused cluster IP without the range routed is no local address", "10.244.1.20", "10.96.0.99:80", ipvs.TCP, rules.VerdictNotLocal,
			"", "routed on"}))
}

func traceCases() []traceCase {
	return []traceCase{
		{"ClusterIP from a pod keeps the pod's address", "10.244.1.20", "10.96.0.10:80", ipvs.TCP, rules.VerdictLoadBalanced,
			"10.244.1.5:8080 not masqueraded, 10.244.2.7:8080 not masqueraded", "from pod traffic"},
		{"ClusterIP from the node is masqueraded", "198.51.100.1", "10.96.0.10:80", ipvs.TCP, rules.VerdictLoadBalanced,
			"10.244.1.5:8080 masqueraded, 10.244.2.7:8080 masqueraded", "not pod traffic"},
		{"an endpoint reaching itself is masqueraded (hairpin)", "10.244.1.5", "10.96.0.10:80", ipvs.TCP, rules.VerdictLoadBalanced,
			"10.244.1.5:8080 masqueraded, 10.244.2.7:8080 not masqueraded", "hairpin"},
		{"Local NodePort from outside on the node without endpoints is dropped silently", "198.51.100.79", "198.51.100.1:30080", ipvs.TCP, rules.VerdictDropped,
			"", "dropped silently"},
		{"Cluster NodePort from outside is masqueraded", "198.51.100.79", "198.51.100.1:30081", ipvs.TCP, rules.VerdictLoadBalanced,
			"10.244.2.7:8080 masqueraded", "node port of a Service with externalTrafficPolicy Cluster"},
		{"source-ranged LB from the node itself, outside the ranges: dropped in mangle OUTPUT before IPVS's LOCAL_OUT", "198.51.100.1", "203.0.113.140:80", ipvs.TCP, rules.VerdictDropped,
			"", "kubernetes#119656"},
		{"source-ranged LB from a client outside the ranges", "192.0.2.7", "203.0.113.140:80", ipvs.TCP, rules.VerdictDropped,
			"", "outside them"},
		{"source-ranged LB from an allowed client", "198.51.100.79", "203.0.113.140:80", ipvs.TCP, rules.VerdictLoadBalanced,
			"10.244.1.5:8080 masqueraded", "load balancer IP"},
		{"a service IP on a port with no virtual server is rejected", "10.244.1.20", "10.96.0.10:22", ipvs.TCP, rules.VerdictRejected,
			"", "kubernetes#72236"},
		{"UDP to a TCP-only cluster IP port is rejected", "10.244.1.20", "10.96.0.10:80", ipvs.UDP, rules.VerdictRejected,
			"", "UDP port 80 is no virtual server"},
		{"a node address on a port without a virtual server is the host's", "198.51.100.79", "198.51.100.1:22", ipvs.TCP, rules.VerdictHost,
			"", "own sockets"},
		{"an address that is neither the node's nor a service's", "10.244.1.20", "192.0.2.50:80", ipvs.TCP, rules.VerdictNotLocal,
			"", "routed on"},
	}
}

func checkTraces(t *testing.T, s snapshot.Snapshot, cases []traceCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := trace(s, c.src, c.dst, c.proto)
			text := tr.Reason
			for _, rs := range tr.RealServers {
				text += " | " + rs.MasqueradeReason
			}
			if tr.Verdict != c.verdict || tracedRealServers(tr) != c.realServers || !strings.Contains(text, c.reason) {
				t.Errorf("trace %s -> %s %s:\n  verdict %s, real servers [%s]\n  %s\nwant verdict %s, real servers [%s], mentioning %q\nsteps: %+v",
					c.src, c.dst, c.proto, tr.Verdict, tracedRealServers(tr), text, c.verdict, c.realServers, c.reason, tr.Steps)
			}
		})
	}
}
