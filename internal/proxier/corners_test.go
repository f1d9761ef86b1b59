package proxier

import (
	"github.com/ipvsproxy/ipvsproxy/internal/cleanup"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/iptables"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The traffic corners where a proxy most easily goes wrong, as verdicts of the packet tracer over the
// fakes after a sync. Addresses: this node 198.51.100.1, pods of this node
// 10.244.1.0/24, of node2 10.244.2.0/24, an outside client 198.51.100.79.
var (
	outsider = netip.MustParseAddr("198.51.100.79")
	podHere  = netip.MustParseAddr("10.244.1.20")
	lbIP     = netip.MustParseAddr("203.0.113.140")
)

func externalIPs(ips ...string) servicetest.Option {
	return func(s *v1.Service) { s.Spec.ExternalIPs = ips }
}

func sourceRanges(r ...string) servicetest.Option {
	return func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = r }
}

func tcpTo(src, dst netip.Addr, port uint16) packet {
	return packet{src: src, dst: dst, proto: "tcp", dport: port, inIface: "eth0", new: true}
}

func fromNode(dst netip.Addr, port uint16) packet {
	// A process on the node talking to a local address: the kernel picks
	// the destination itself as the source.
	p := tcpTo(dst, dst, port)
	p.fromNode, p.inIface = true, ""
	return p
}

func wantTrace(t *testing.T, tr *tracer, what string, p packet, want string) {
	t.Helper()
	if got := tr.trace(p).String(); got != want {
		t.Errorf("%s: got %q\n\twant %q", what, got, want)
	}
}

// externalTrafficPolicy Local on a node without local endpoints.
func TestLocalPolicyWithoutLocalEndpointServesInClusterSourcesAndDropsOthers(t *testing.T) {
	fk := newFakeKernel()
	p, _ := newTestProxier(t, fk, testConfig())
	svc := servicetest.Service("lb", "10.96.0.20", servicetest.LoadBalancer(30090, "203.0.113.140"), servicetest.ExternalLocal(32122), externalIPs("203.0.113.150"))
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "lb-a", 8080, "10.244.2.7@node2"))
	mustSync(t, p)
	tr := newTracer(t, fk)
	for _, dst := range []struct {
		addr netip.Addr
		port uint16
		vs   string
	}{{lbIP, 80, "TCP 203.0.113.140:80"}, {netip.MustParseAddr("203.0.113.150"), 80, "TCP 203.0.113.150:80"}, {servicetest.Node1IP, 30090, "TCP 198.51.100.1:30090"}} {
		wantTrace(t, tr, "outside client to "+dst.vs, tcpTo(outsider, dst.addr, dst.port), "DROP in filter KUBE-IPVS-FILTER")
		wantTrace(t, tr, "pod of this node to "+dst.vs, tcpTo(podHere, dst.addr, dst.port), "ACCEPT -> virtual server "+dst.vs+" with 1 real servers, masqueraded")
		wantTrace(t, tr, "the node to "+dst.vs, fromNode(dst.addr, dst.port), "ACCEPT -> virtual server "+dst.vs+" with 1 real servers, masqueraded")
	}
	if res := p.Sync(); res.NoLocalEndpoints[ipvsproxy.NoLocalKey{Family: v1.IPv4Protocol, Policy: "external"}] != 1 {
		t.Errorf("no-local-endpoints count %v, want external 1 (the metric still counts it)", res.NoLocalEndpoints)
	}

	// An endpoint lands here: Local policy as usual, client address kept.
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "lb-a", 8080, "10.244.2.7@node2", "10.244.1.5@node1"))
	mustSync(t, p)
	tr = newTracer(t, fk)
	wantTrace(t, tr, "outside client once a local endpoint exists", tcpTo(outsider, lbIP, 80), "ACCEPT -> virtual server TCP 203.0.113.140:80 with 1 real servers")
	if got := realServers(t, fk, ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: lbIP, Port: 80}); len(got) != 1 || got[ep1] != 1 {
		t.Errorf("LB real servers %v, want only the local endpoint", got)
	}
}

// A Service address the node already has.
func TestNodeAddressAsServiceAddressIsServedButNeverBoundNorRejected(t *testing.T) {
	fk := newFakeKernel()
	// Someone else's virtual server on the node address: never touched.
	foreign := ipvs.VirtualServer{VirtualServerKey: ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: servicetest.Node1IP, Port: 8443}, Scheduler: "rr"}
	if err := fk.ipvs.AddVirtualServer(foreign); err != nil {
		t.Fatal(err)
	}
	p, _ := newTestProxier(t, fk, testConfig())
	// k3s ServiceLB writes the node's address as the LB ingress IP.
	svc := servicetest.Service("k3s-lb", "10.96.0.30", servicetest.LoadBalancer(30091, "198.51.100.1"))
	svc.Spec.Ports[0].Port = 443
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "k3s-lb-a", 8443, "10.244.1.5@node1"))
	mustSync(t, p)

	bound, _ := fk.netif.DummyAddresses()
	if slices.Contains(bound, servicetest.Node1IP) {
		t.Errorf("node address bound on %s: %v", owned.DummyInterface, bound)
	}
	if ips, _ := fk.ipset.Entries("KUBE-IPVS-IPS"); slices.Contains(ips, ipset.Entry{IP: servicetest.Node1IP}) {
		t.Errorf("node address in KUBE-IPVS-IPS: %v", ips)
	}
	tr := newTracer(t, fk)
	wantTrace(t, tr, "ssh to the node", tcpTo(outsider, servicetest.Node1IP, 22), "ACCEPT")
	wantTrace(t, tr, "the Service on the node address", tcpTo(outsider, servicetest.Node1IP, 443), "ACCEPT -> virtual server TCP 198.51.100.1:443 with 1 real servers, masqueraded")

	// A restart adopts it and writes nothing; the periodic full sync too.
	before := fk.writes()
	p2, _ := newTestProxier(t, fk, testConfig())
	p2.Tracker().SetService(svc)
	p2.Tracker().SetEndpointSlice(servicetest.Slice(svc, "k3s-lb-a", 8443, "10.244.1.5@node1"))
	mustSync(t, p2)
	p2.needFull = true
	mustSync(t, p2)
	if w := fk.writes() - before; w != 0 {
		t.Errorf("restart and full sync wrote %d times, want 0:\n%s", w, fk.ipvs.Dump())
	}
	// Cleanup removes the Service's virtual server on the node address,
	// and only that.
	if err := cleanup.Installed(fk.kernel(), testConfig().Families); err != nil {
		t.Fatal(err)
	}
	left, _ := fk.ipvs.VirtualServers()
	if len(left) != 1 || left[0].VirtualServerKey != foreign.VirtualServerKey || left[0].Scheduler != "rr" {
		t.Errorf("after cleanup: %v, want only the foreign %s", left, foreign.VirtualServerKey)
	}
}

// loadBalancerSourceRanges 0.0.0.0/0 is everyone; a bad range fails closed.
func TestSourceRangesAllowAllAndFailClosed(t *testing.T) {
	for _, c := range []struct {
		name   string
		ranges []string
		want   string
		event  bool
	}{
		{"0.0.0.0/0", []string{"0.0.0.0/0"}, "ACCEPT -> virtual server TCP 203.0.113.140:80 with 1 real servers, masqueraded", false},
		{"0.0.0.0/0 among others", []string{"192.0.2.0/24", " 0.0.0.0/0"}, "ACCEPT -> virtual server TCP 203.0.113.140:80 with 1 real servers, masqueraded", false},
		{"::/0 only: IPv4 still firewalled by nothing of its family", []string{"::/0"}, "ACCEPT -> virtual server TCP 203.0.113.140:80 with 1 real servers, masqueraded", false},
		{"unparsable", []string{"198.51.100.0/33"}, "DROP in filter KUBE-IPVS-FILTER", true},
		{"unparsable beside a range that misses", []string{"bogus", "192.0.2.0/24"}, "DROP in filter KUBE-IPVS-FILTER", true},
		{"unparsable beside a range that holds the client", []string{"bogus", "198.51.100.0/24"}, "ACCEPT -> virtual server TCP 203.0.113.140:80 with 1 real servers, masqueraded", true},
		{"0.0.0.0/0 before an unparsable one: everyone, and the Event", []string{"0.0.0.0/0", "bogus"}, "ACCEPT -> virtual server TCP 203.0.113.140:80 with 1 real servers, masqueraded", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			fk := newFakeKernel()
			p, rec := newTestProxier(t, fk, testConfig())
			svc := servicetest.Service("lb", "10.96.0.20", servicetest.LoadBalancer(30090, "203.0.113.140"), sourceRanges(c.ranges...))
			p.Tracker().SetService(svc)
			p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "lb-a", 8080, "10.244.2.7@node2"))
			mustSync(t, p) // a /0 in hash:ip,port,net made every sync fail
			wantTrace(t, newTracer(t, fk), "outside client", tcpTo(outsider, lbIP, 80), c.want)
			if events := drainEvents(rec); strings.Contains(events, "loadBalancerSourceRange") != c.event {
				t.Errorf("events %q, want one about the range: %v", events, c.event)
			}
		})
	}
}

// Health-check node ports through the LB IP and under INPUT DROP.
func TestHealthCheckNodePortReachableOnLBIPAndUnderInputDrop(t *testing.T) {
	fk := newFakeKernel()
	// A host whose INPUT policy is DROP.
	if err := fk.ipt4.Restore([]byte("*filter\n:INPUT DROP [0:0]\nCOMMIT\n")); err != nil {
		t.Fatal(err)
	}
	p, _ := newTestProxier(t, fk, testConfig())
	svc := servicetest.Service("lb", "10.96.0.20", servicetest.LoadBalancer(30090, "203.0.113.140"), servicetest.ExternalLocal(32122))
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "lb-a", 8080, "10.244.1.5@node1"))
	mustSync(t, p)
	tr := newTracer(t, fk)
	wantTrace(t, tr, "probe to LB-IP:healthCheckNodePort", tcpTo(outsider, lbIP, 32122), "ACCEPT")
	wantTrace(t, tr, "probe to node:healthCheckNodePort", tcpTo(outsider, servicetest.Node1IP, 32122), "ACCEPT")
	wantTrace(t, tr, "another port of the LB IP", tcpTo(outsider, lbIP, 22), "REJECT in filter KUBE-IPVS-FILTER")
	wantTrace(t, tr, "another port of the node under INPUT DROP", tcpTo(outsider, servicetest.Node1IP, 22), "DROP in filter INPUT policy")
}

// Source ranges hold for the node's own traffic (kubernetes#119656).
func TestSourceRangesApplyToTrafficFromTheNode(t *testing.T) {
	for _, c := range []struct {
		ranges []string
		want   string
	}{
		{[]string{"203.0.113.0/24"}, "DROP in mangle KUBE-IPVS-OUT-FILTER"},
		{[]string{"203.0.113.0/24", "198.51.100.0/24"}, "ACCEPT -> virtual server TCP 203.0.113.140:80 with 1 real servers, masqueraded"},
	} {
		t.Run(strings.Join(c.ranges, ","), func(t *testing.T) {
			fk := newFakeKernel()
			p, _ := newTestProxier(t, fk, testConfig())
			svc := servicetest.Service("lb", "10.96.0.20", servicetest.LoadBalancer(30090, "203.0.113.140"), sourceRanges(c.ranges...))
			p.Tracker().SetService(svc)
			p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "lb-a", 8080, "10.244.2.7@node2"))
			mustSync(t, p)
			tr := newTracer(t, fk)
			wantTrace(t, tr, "the node to the LB IP", fromNode(lbIP, 80), c.want)
			wantTrace(t, tr, "an allowed client", tcpTo(netip.MustParseAddr("203.0.113.9"), lbIP, 80), "ACCEPT -> virtual server TCP 203.0.113.140:80 with 1 real servers, masqueraded")
		})
	}
}

// The jumps go first, before a host firewall's rules: DOCKER's and CNI
// portmap's DNAT of every local address never take service traffic from
// IPVS. What the host's INPUT rules then say about it is theirs to decide,
// as under kube-proxy (a trailing REJECT rejects it), unless
// --accept-service-traffic accepts it ahead of them.
func TestJumpsGoBeforeHostFirewallRules(t *testing.T) {
	hostFirewall := `*filter
-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A INPUT -j REJECT --reject-with icmp-host-prohibited
-A FORWARD -j REJECT --reject-with icmp-host-prohibited
COMMIT
*nat
:DOCKER - [0:0]
:CNI-HOSTPORT-DNAT - [0:0]
-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER
-A PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT
-A OUTPUT ! -d 127.0.0.0/8 -m addrtype --dst-type LOCAL -j DOCKER
-A OUTPUT -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT
-A DOCKER -p tcp -m tcp --dport 80 -j DNAT --to-destination 192.0.2.10:80
-A CNI-HOSTPORT-DNAT -p tcp -m tcp --dport 30080 -j DNAT --to-destination 192.0.2.11:80
COMMIT
`
	for _, c := range []struct {
		name   string
		accept bool
		// hostDecides is the verdict of traffic to a virtual server from
		// elsewhere.
		hostDecides string
	}{
		{"the host's INPUT rules decide", false, "REJECT in filter INPUT"},
		{"--accept-service-traffic", true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			fk := behindHostFirewall(t, hostFirewall, c.accept,
				servicetest.Service("web", "10.96.0.10", servicetest.NodePort(30080)),
				servicetest.Service("lb", "10.96.0.20", servicetest.LoadBalancer(30090, "203.0.113.140")))
			for _, j := range owned.JumpRules() {
				save, _ := fk.ipt4.Save(j.Table)
				if first := iptables.SavedRules(save)[j.Chain][0]; !strings.HasSuffix(first, "-j "+j.Rule[len(j.Rule)-1]) {
					t.Errorf("%s %s starts with %q, want the jump to %s", j.Table, j.Chain, first, j.Rule[len(j.Rule)-1])
				}
			}
			tr := newTracer(t, fk)
			clusterIP := netip.MustParseAddr("10.96.0.10")
			or := func(want string) string {
				if c.hostDecides != "" {
					return c.hostDecides
				}
				return want
			}
			wantTrace(t, tr, "pod to cluster IP:80 (DOCKER DNATs port 80)", tcpTo(podHere, clusterIP, 80), or("ACCEPT -> virtual server TCP 10.96.0.10:80 with 1 real servers"))
			// The node's own traffic is IPVS's at LOCAL_OUT: INPUT never sees it.
			wantTrace(t, tr, "node to cluster IP:80", fromNode(clusterIP, 80), "ACCEPT -> virtual server TCP 10.96.0.10:80 with 1 real servers, masqueraded")
			wantTrace(t, tr, "outside client to the LB IP:80", tcpTo(outsider, lbIP, 80), or("ACCEPT -> virtual server TCP 203.0.113.140:80 with 1 real servers, masqueraded"))
			wantTrace(t, tr, "outside client to node port 30080 (a hostPort DNAT)", tcpTo(outsider, servicetest.Node1IP, 30080), or("ACCEPT -> virtual server TCP 198.51.100.1:30080 with 1 real servers, masqueraded"))
			wantTrace(t, tr, "outside client to port 22 still meets the host's REJECT", tcpTo(outsider, servicetest.Node1IP, 22), "REJECT in filter INPUT")
		})
	}
}

// A host firewall restricts who reaches a tenant's node port, as under
// kube-proxy: its INPUT rules see Service traffic after KUBE-IPVS-FILTER.
// Only --accept-service-traffic takes that from it.
func TestHostFirewallRestrictsNodePorts(t *testing.T) {
	hostFirewall := `*filter
-A INPUT -s 203.0.113.0/24 -p tcp -m tcp --dport 30000:32767 -j ACCEPT
-A INPUT -p tcp -m tcp --dport 30000:32767 -j DROP
COMMIT
`
	allowed := netip.MustParseAddr("203.0.113.9")
	for _, c := range []struct {
		name            string
		accept          bool
		outsiderVerdict string
	}{
		{"default", false, "DROP in filter INPUT"},
		{"--accept-service-traffic", true, "ACCEPT -> virtual server TCP 198.51.100.1:30080 with 1 real servers, masqueraded"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fk := behindHostFirewall(t, hostFirewall, c.accept, servicetest.Service("web", "10.96.0.10", servicetest.NodePort(30080)))
			tr := newTracer(t, fk)
			wantTrace(t, tr, "a client the firewall admits", tcpTo(allowed, servicetest.Node1IP, 30080), "ACCEPT -> virtual server TCP 198.51.100.1:30080 with 1 real servers, masqueraded")
			wantTrace(t, tr, "a client the firewall drops", tcpTo(outsider, servicetest.Node1IP, 30080), c.outsiderVerdict)
		})
	}
}

// behindHostFirewall is a node whose IPv4 iptables hold a host firewall's
// rules (iptables-restore text) before the proxier syncs svcs, each with
// one endpoint on node2, with or without --accept-service-traffic.
func behindHostFirewall(t *testing.T, firewall string, accept bool, svcs ...*v1.Service) *fakeKernel {
	t.Helper()
	fk := newFakeKernel()
	if err := fk.ipt4.Restore([]byte(firewall)); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.AcceptServiceTraffic = accept
	p, _ := newTestProxier(t, fk, cfg)
	for _, s := range svcs {
		p.Tracker().SetService(s)
		p.Tracker().SetEndpointSlice(servicetest.Slice(s, s.Name+"-a", 8080, "10.244.2.7@node2"))
	}
	mustSync(t, p)
	return fk
}

// Local-traffic detection and kube-proxy's fallback.
func TestLocalTrafficDetection(t *testing.T) {
	clusterIP := netip.MustParseAddr("10.96.0.10")
	podThere := netip.MustParseAddr("10.244.2.20")
	masq := "ACCEPT -> virtual server TCP 10.96.0.10:80 with 1 real servers, masqueraded"
	kept := "ACCEPT -> virtual server TCP 10.96.0.10:80 with 1 real servers"
	run := func(t *testing.T, cfg ipvsproxy.Config, node *v1.Node) (*Proxier, *fakeKernel) {
		fk := newFakeKernel()
		p, _ := newTestProxier(t, fk, cfg)
		if node != nil {
			p.Tracker().SetNode(node)
		}
		web := servicetest.Service("web", "10.96.0.10")
		p.Tracker().SetService(web)
		p.Tracker().SetEndpointSlice(servicetest.Slice(web, "web-a", 8080, "10.244.2.7@node2"))
		mustSync(t, p)
		return p, fk
	}
	// Traced as it leaves the node's IPVS: the real server follows.
	toClusterIP := func(src netip.Addr, in string) packet {
		pk := tcpTo(src, clusterIP, 80)
		pk.inIface = in
		return pk
	}
	t.Run("no cluster CIDR: the node's own traffic from the service address", func(t *testing.T) {
		cfg := testConfig()
		cfg.ClusterCIDRs = nil
		_, fk := run(t, cfg, nil)
		tr := newTracer(t, fk)
		wantTrace(t, tr, "node", fromNode(clusterIP, 80), "ACCEPT -> virtual server TCP 10.96.0.10:80 with 1 real servers, masqueraded")
		wantTrace(t, tr, "pod", toClusterIP(podHere, "eth0"), kept)
	})
	t.Run("NodeCIDR follows the Node's podCIDRs", func(t *testing.T) {
		cfg := testConfig()
		cfg.DetectLocalMode = ipvsproxy.DetectLocalNodeCIDR
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: servicetest.ThisNode}, Spec: v1.NodeSpec{PodCIDRs: []string{"10.244.1.0/24"}}}
		p, fk := run(t, cfg, node)
		tr := newTracer(t, fk)
		wantTrace(t, tr, "pod of this node", toClusterIP(podHere, "eth0"), kept)
		wantTrace(t, tr, "pod of another node", toClusterIP(podThere, "eth0"), masq)
		wantTrace(t, tr, "node", fromNode(clusterIP, 80), masq)
		// The Node's pod CIDR changes: reprogrammed, no restart.
		moved := node.DeepCopy()
		moved.Spec.PodCIDRs = []string{"10.244.2.0/24"}
		p.Tracker().SetNode(moved)
		mustSync(t, p)
		tr = newTracer(t, fk)
		wantTrace(t, tr, "pod of the old range", toClusterIP(podHere, "eth0"), masq)
		wantTrace(t, tr, "pod of the new range", toClusterIP(podThere, "eth0"), kept)
	})
	t.Run("InterfaceNamePrefix", func(t *testing.T) {
		cfg := testConfig()
		cfg.DetectLocalMode, cfg.PodInterfaceNamePrefix = ipvsproxy.DetectLocalInterfaceNamePrefix, "cali"
		_, fk := run(t, cfg, nil)
		tr := newTracer(t, fk)
		wantTrace(t, tr, "from cali1234", toClusterIP(podHere, "cali1234"), kept)
		wantTrace(t, tr, "from eth0", toClusterIP(podHere, "eth0"), masq)
		wantTrace(t, tr, "node", fromNode(clusterIP, 80), masq)
	})
	t.Run("BridgeInterface", func(t *testing.T) {
		cfg := testConfig()
		cfg.DetectLocalMode, cfg.PodBridgeInterface = ipvsproxy.DetectLocalBridgeInterface, "cbr0"
		_, fk := run(t, cfg, nil)
		tr := newTracer(t, fk)
		wantTrace(t, tr, "from cbr0", toClusterIP(podHere, "cbr0"), kept)
		wantTrace(t, tr, "from cbr1", toClusterIP(podHere, "cbr1"), masq)
	})
}
