package proxier

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/daemon/nodeaddresses"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/listeners"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func withPorts(ports ...int32) servicetest.Option {
	return func(s *v1.Service) {
		s.Spec.Ports = nil
		for _, p := range ports {
			s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "p" + strconv.Itoa(int(p)), Port: p, Protocol: v1.ProtocolTCP})
		}
	}
}

func externalIP(ips ...string) servicetest.Option {
	return func(s *v1.Service) { s.Spec.ExternalIPs = ips }
}

func hasVS(fk *fakeKernel, addr string, port uint16) bool {
	_, err := fk.ipvs.RealServers(ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: netip.MustParseAddr(addr), Port: port})
	return err == nil
}

// A tenant's external IP or load balancer ingress IP equal to this node's
// address takes no port a process of the node listens on (ssh on every
// address, the kubelet on the node's), while a port nothing listens on (80,
// the bare-metal use) is served; a listener that appears later is seen at
// the next full sync.
func TestServiceNeverTakesAPortTheNodeListensOn(t *testing.T) {
	for _, f := range []struct {
		name, reason, label string
		field               servicetest.Option
	}{
		{"spec.externalIPs", "ExternalIPRefused", "external IP", externalIP(servicetest.Node1IP.String())},
		{"status.loadBalancer.ingress", "LoadBalancerIPRefused", "load balancer ingress IP", func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeLoadBalancer
			s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: servicetest.Node1IP.String()}}
		}},
	} {
		t.Run(f.name, func(t *testing.T) {
			fk := newFakeKernel()
			fk.listeners.Set(
				listeners.Listener{Protocol: listeners.TCP, Addr: netip.MustParseAddr("0.0.0.0"), Port: 22},
				listeners.Listener{Protocol: listeners.TCP, Addr: servicetest.Node1IP, Port: 10250},
				listeners.Listener{Protocol: listeners.TCP, Addr: netip.MustParseAddr("127.0.0.1"), Port: 8080},
			)
			p, rec := newTestProxier(t, fk, testConfig())
			svc := servicetest.Service("grab", "10.96.0.50", withPorts(22, 80, 8080, 10250), f.field)
			p.Tracker().SetService(svc)
			p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "grab-a", 8080, "10.244.1.5@node1"))
			mustSync(t, p)
			for port, want := range map[uint16]bool{22: false, 10250: false, 80: true, 8080: true} {
				if got := hasVS(fk, servicetest.Node1IP.String(), port); got != want {
					t.Errorf("virtual server %s:%d present %v, want %v", servicetest.Node1IP, port, got, want)
				}
			}
			if _, bound := servedAt(t, fk, servicetest.Node1IP); bound {
				t.Errorf("this node's own address %s bound on kube-ipvs0", servicetest.Node1IP)
			}
			ev := drainEvents(rec)
			for _, want := range []string{
				"Warning " + f.reason + " " + f.label + " 198.51.100.1 is an address of this node, and a process of the node listens on TCP 0.0.0.0:22; not served",
				"Warning " + f.reason + " " + f.label + " 198.51.100.1 is an address of this node, and a process of the node listens on TCP 198.51.100.1:10250; not served",
			} {
				if !strings.Contains(ev, want) {
					t.Errorf("events %q\nwant %q", ev, want)
				}
			}
			// A process starts listening on 80: the next full sync takes the port back.
			fk.listeners.Set(listeners.Listener{Protocol: listeners.TCP, Addr: netip.MustParseAddr("::"), Port: 80})
			p.RequestFullSync()
			mustSync(t, p)
			if hasVS(fk, servicetest.Node1IP.String(), 80) {
				t.Error("port 80 still served after a process of the node started listening on it")
			}
		})
	}
}

// The same for UDP and SCTP: a connected UDP socket (a resolver's query,
// whose replies a virtual server on its address and port would take) and an
// SCTP listener keep their ports; another UDP port is served.
func TestServiceNeverTakesAUDPOrSCTPSocketOfTheNode(t *testing.T) {
	fk := newFakeKernel()
	fk.listeners.Set(
		listeners.Listener{Protocol: listeners.UDP, Addr: servicetest.Node1IP, Port: 40053},
		listeners.Listener{Protocol: listeners.SCTP, Addr: netip.MustParseAddr("0.0.0.0"), Port: 3868},
	)
	p, rec := newTestProxier(t, fk, testConfig())
	svc := servicetest.Service("grab", "10.96.0.50", externalIP(servicetest.Node1IP.String()), func(s *v1.Service) {
		s.Spec.Ports = []v1.ServicePort{
			{Name: "resolver", Port: 40053, Protocol: v1.ProtocolUDP},
			{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP},
			{Name: "diameter", Port: 3868, Protocol: v1.ProtocolSCTP},
		}
	})
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "grab-a", 8080, "10.244.1.5@node1"))
	mustSync(t, p)
	for _, c := range []struct {
		proto ipvs.Protocol
		port  uint16
		want  bool
	}{{ipvs.UDP, 40053, false}, {ipvs.SCTP, 3868, false}, {ipvs.UDP, 53, true}} {
		_, err := fk.ipvs.RealServers(ipvs.VirtualServerKey{Protocol: c.proto, Address: servicetest.Node1IP, Port: c.port})
		if got := err == nil; got != c.want {
			t.Errorf("virtual server %v %s:%d present %v, want %v", c.proto, servicetest.Node1IP, c.port, got, c.want)
		}
	}
	ev := drainEvents(rec)
	for _, want := range []string{
		"external IP 198.51.100.1 is an address of this node, and a process of the node listens on UDP 198.51.100.1:40053; not served",
		"external IP 198.51.100.1 is an address of this node, and a process of the node listens on SCTP 0.0.0.0:3868; not served",
	} {
		if !strings.Contains(ev, want) {
			t.Errorf("events %q\nwant %q", ev, want)
		}
	}
}

// servedAt says whether any virtual server has address a, and whether a is
// bound on kube-ipvs0.
func servedAt(t *testing.T, fk *fakeKernel, a netip.Addr) (served, bound bool) {
	t.Helper()
	vss, err := fk.ipvs.VirtualServers()
	if err != nil {
		t.Fatal(err)
	}
	served = slices.ContainsFunc(vss, func(vs ipvs.VirtualServer) bool { return vs.Address == a })
	dummy, _, err := fk.netif.Addresses()
	if err != nil {
		t.Fatal(err)
	}
	return served, slices.Contains(dummy, a)
}

// No address a Service names, whichever field it comes from (a cluster IP,
// an external IP, a load balancer ingress IP with ipMode VIP or unset), may
// be another Node's address (either family), the API server's (an
// endpoint of default/kubernetes, the host the daemon dials, the address
// the API server advertises) or one in --protect-addresses: each is
// refused with an Event naming the Service, the field and the address,
// never bound on kube-ipvs0 and never a virtual server, while the Service's
// other addresses and another Service are served. When the Node goes, its
// address may be used again.
func TestServiceNeverTakesAnotherNodeOrTheAPIServer(t *testing.T) {
	const grabCluster, grabExternal, grabIngress = "10.96.0.52", "203.0.113.52", "203.0.113.152"
	fields := []struct {
		name, reason, label string
		// grab names addr in the field; its other addresses are the
		// cluster IP grabCluster, or the node port 30052 when addr is the
		// cluster IP.
		grab func(addr string) *v1.Service
	}{
		{"spec.externalIPs", "ExternalIPRefused", "external IP", func(addr string) *v1.Service {
			return servicetest.Service("grab", grabCluster, externalIP(addr))
		}},
		{"status.loadBalancer.ingress ipMode VIP", "LoadBalancerIPRefused", "load balancer ingress IP", func(addr string) *v1.Service {
			return servicetest.Service("grab", grabCluster, servicetest.LoadBalancer(30052, addr), func(s *v1.Service) {
				s.Status.LoadBalancer.Ingress[0].IPMode = servicetest.Ptr(v1.LoadBalancerIPModeVIP)
			})
		}},
		{"status.loadBalancer.ingress ipMode unset", "LoadBalancerIPRefused", "load balancer ingress IP", func(addr string) *v1.Service {
			return servicetest.Service("grab", grabCluster, servicetest.LoadBalancer(30052, addr))
		}},
		{"spec.clusterIPs", "ClusterIPRefused", "cluster IP", func(addr string) *v1.Service {
			return servicetest.Service("grab", addr, servicetest.NodePort(30052))
		}},
	}
	targets := []struct {
		name, addr, why string
	}{
		{"another Node", "198.51.100.2", "is an address of Node node2, which alone may serve it"},
		{"another Node, IPv6", "2001:db8::2", "is an address of Node node2, which alone may serve it"},
		{"an endpoint of default/kubernetes", "192.0.2.10", "is an address of the API server (an endpoint of Service default/kubernetes)"},
		{"the API server the daemon dials", "192.0.2.253", "is an address of the API server (the host this daemon dials, https://192.0.2.253:6443)"},
		{"the API server's advertised address", "192.0.2.20", "is an address of the API server (its advertised address)"},
		{"--protect-addresses", "203.0.113.250", "lies in --protect-addresses 203.0.113.248/29"},
	}
	for _, f := range fields {
		for _, target := range targets {
			t.Run(f.name+"/"+target.name, func(t *testing.T) {
				fk := newFakeKernel()
				cfg := testConfig()
				cfg.Families = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
				cfg.ProtectAddresses = []netip.Prefix{netip.MustParsePrefix("203.0.113.248/29")}
				cfg.APIServers = []ipvsproxy.APIServerAddress{
					{Addr: netip.MustParseAddr("192.0.2.253"), Source: "the host this daemon dials, https://192.0.2.253:6443"},
					{Addr: netip.MustParseAddr("192.0.2.20"), Source: "its advertised address"},
				}
				p, rec := newTestProxier(t, fk, cfg)
				p.ClusterNodes().Set(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1"}, Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
					{Type: v1.NodeInternalIP, Address: servicetest.Node1IP.String()}, {Type: v1.NodeInternalIP, Address: servicetest.Node1IP6.String()}}}})
				p.ClusterNodes().Set(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node2"}, Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
					{Type: v1.NodeInternalIP, Address: "198.51.100.2"}, {Type: v1.NodeInternalIP, Address: "2001:db8::2"}, {Type: v1.NodeHostName, Address: "node2"}}}})
				api := servicetest.Service("kubernetes", "10.96.0.1", withPorts(443))
				p.Tracker().SetService(api)
				p.Tracker().SetEndpointSlice(servicetest.Slice(api, "kubernetes", 6443, "192.0.2.10@"))
				grab := f.grab(target.addr)
				if netip.MustParseAddr(target.addr).Is6() {
					grab.Spec.IPFamilyPolicy = servicetest.Ptr(v1.IPFamilyPolicyRequireDualStack)
					if f.name != "spec.clusterIPs" {
						grab.Spec.ClusterIPs = append(grab.Spec.ClusterIPs, "fd00:96::52")
					}
				}
				bystander := servicetest.Service("bystander", "10.96.0.60", servicetest.LoadBalancer(30060, "203.0.113.140"), externalIP("203.0.113.5"))
				for _, s := range []*v1.Service{grab, bystander} {
					p.Tracker().SetService(s)
					p.Tracker().SetEndpointSlice(servicetest.Slice(s, s.Name+"-a", 8080, "10.244.1.5@node1"))
				}
				mustSync(t, p)
				addr := netip.MustParseAddr(target.addr)
				if served, bound := servedAt(t, fk, addr); served || bound {
					t.Fatalf("%s %s: virtual server %v, bound %v, want neither:\n%s\n%s", f.label, addr, served, bound, fk.ipvs.Dump(), fk.netif.Dump())
				}
				want := "Warning " + f.reason + " " + f.label + " " + target.addr + " " + target.why + "; not served"
				if ev := drainEvents(rec); !strings.Contains(ev, want) {
					t.Errorf("events %q\nwant %q", ev, want)
				}
				// The Service's other addresses, and every address of another
				// Service, are served.
				other, otherPort := grabCluster, uint16(80)
				if f.name == "spec.clusterIPs" {
					other, otherPort = servicetest.Node1IP.String(), 30052
					if addr.Is6() {
						other = servicetest.Node1IP6.String()
					}
				}
				if !hasVS(fk, other, otherPort) {
					t.Errorf("the Service's own %s:%d is not served:\n%s", other, otherPort, fk.ipvs.Dump())
				}
				for _, a := range []string{"10.96.0.60", "203.0.113.140", "203.0.113.5"} {
					if !hasVS(fk, a, 80) {
						t.Errorf("another Service's %s:80 is not served:\n%s", a, fk.ipvs.Dump())
					}
				}
				if !hasVS(fk, "10.96.0.1", 443) {
					t.Error("default/kubernetes itself must still be served")
				}
				if !strings.HasPrefix(target.name, "another Node") {
					return
				}
				p.ClusterNodes().Delete("node2")
				mustSync(t, p)
				if served, _ := servedAt(t, fk, addr); !served {
					t.Errorf("the address %s of a deleted Node is still refused:\n%s", addr, fk.ipvs.Dump())
				}
			})
		}
	}
}

// A ServiceLB-shaped Service (k3s publishes every node's address, IPv4 and
// IPv6, as the ingress IPs): this node serves its own addresses without
// binding them, refuses node2's, and binds nothing of either. A Node seen
// only after the Service was served takes its address back at the next
// sync, partial as it is.
func TestLoadBalancerIngressOfNodeAddressesServesOnlyThisNodes(t *testing.T) {
	fk := newFakeKernel()
	cfg := testConfig()
	cfg.Families = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	p, rec := newTestProxier(t, fk, cfg)
	svc := servicetest.Service("servicelb", "10.96.0.70", servicetest.LoadBalancer(30070, servicetest.Node1IP.String(), "198.51.100.2", servicetest.Node1IP6.String(), "2001:db8::2"),
		withPorts(8080), func(s *v1.Service) {
			s.Spec.IPFamilyPolicy = servicetest.Ptr(v1.IPFamilyPolicyRequireDualStack)
			s.Spec.ClusterIPs = append(s.Spec.ClusterIPs, "fd00:96::70")
		})
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "servicelb-a", 8080, "10.244.1.5@node1"))
	mustSync(t, p)
	if served, _ := servedAt(t, fk, netip.MustParseAddr("198.51.100.2")); !served {
		t.Fatalf("198.51.100.2 is nobody's yet, want it served:\n%s", fk.ipvs.Dump())
	}
	p.ClusterNodes().Set(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node2"}, Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
		{Type: v1.NodeInternalIP, Address: "198.51.100.2"}, {Type: v1.NodeInternalIP, Address: "2001:db8::2"}}}})
	if res := mustSync(t, p); res.Full {
		t.Fatal("want a partial sync")
	}
	for _, a := range []netip.Addr{servicetest.Node1IP, servicetest.Node1IP6} {
		if served, bound := servedAt(t, fk, a); !served || bound {
			t.Errorf("this node's %s: served %v, bound %v; want served, not bound", a, served, bound)
		}
	}
	for _, a := range []netip.Addr{netip.MustParseAddr("198.51.100.2"), netip.MustParseAddr("2001:db8::2")} {
		if served, bound := servedAt(t, fk, a); served || bound {
			t.Errorf("node2's %s: served %v, bound %v; want neither", a, served, bound)
		}
	}
	ev := drainEvents(rec)
	for _, a := range []string{"198.51.100.2", "2001:db8::2"} {
		if want := "Warning LoadBalancerIPRefused load balancer ingress IP " + a + " is an address of Node node2, which alone may serve it; not served"; !strings.Contains(ev, want) {
			t.Errorf("events %q\nwant %q", ev, want)
		}
	}
}

// An in-cluster daemon dials default/kubernetes's cluster IP: found as the
// API server's address, it is still served, being a cluster IP.
func TestAPIServerDialledThroughItsClusterIPIsStillServed(t *testing.T) {
	fk := newFakeKernel()
	cfg := testConfig()
	cfg.APIServers = []ipvsproxy.APIServerAddress{{Addr: netip.MustParseAddr("10.96.0.1"), Source: "the host this daemon dials, https://10.96.0.1:443"}}
	p, rec := newTestProxier(t, fk, cfg)
	api := servicetest.Service("kubernetes", "10.96.0.1", withPorts(443))
	p.Tracker().SetService(api)
	p.Tracker().SetEndpointSlice(servicetest.Slice(api, "kubernetes", 6443, "192.0.2.10@"))
	mustSync(t, p)
	if !hasVS(fk, "10.96.0.1", 443) {
		t.Fatalf("default/kubernetes's cluster IP is not served:\n%s", fk.ipvs.Dump())
	}
	if ev := drainEvents(rec); strings.Contains(ev, "Refused") {
		t.Errorf("events %q, want no refusal", ev)
	}
}

// The guard's other Nodes come from the slices the Node address publisher
// writes (--node-addresses-from=endpointslices) as from the Node informer:
// an external IP that is another Node's published address is refused, and
// used again once it is no longer published; the same slices in another
// namespace (a tenant's) count for nothing.
func TestExternalIPNeverTakesAnotherNodesPublishedAddress(t *testing.T) {
	fk := newFakeKernel()
	p, rec := newTestProxier(t, fk, testConfig())
	handler := p.ClusterNodes().PublishedHandler("kube-system", nodeaddresses.ServiceName)
	publish := func(namespace string, nodes map[string][]netip.Addr) []*ipvsproxy.EndpointSlice {
		var out []*ipvsproxy.EndpointSlice
		for _, s := range nodeaddresses.Slices(namespace, nodes) {
			c := ipvsproxy.CompactEndpointSlice(s)
			handler.OnAdd(c, false)
			out = append(out, c)
		}
		return out
	}
	addr := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	publish("tenant", map[string][]netip.Addr{"fake": {addr("198.51.100.3")}})
	slices := publish("kube-system", map[string][]netip.Addr{"node1": {addr("198.51.100.1")}, "node2": {addr("198.51.100.2"), addr("2001:db8::2")}})
	other := servicetest.Service("other-node", "10.96.0.51", externalIP("198.51.100.2"))
	tenant := servicetest.Service("not-a-node", "10.96.0.53", externalIP("198.51.100.3"))
	for _, s := range []*v1.Service{other, tenant} {
		p.Tracker().SetService(s)
		p.Tracker().SetEndpointSlice(servicetest.Slice(s, s.Name+"-a", 8080, "10.244.1.5@node1"))
	}
	mustSync(t, p)
	if hasVS(fk, "198.51.100.2", 80) {
		t.Fatalf("an external IP took another Node's published address:\n%s", fk.ipvs.Dump())
	}
	if !hasVS(fk, "198.51.100.3", 80) {
		t.Error("an address published in another namespace was taken for a Node's")
	}
	if ev := drainEvents(rec); !strings.Contains(ev, "Warning ExternalIPRefused external IP 198.51.100.2 is an address of Node node2, which alone may serve it; not served") {
		t.Errorf("events %q", ev)
	}
	if names := p.ClusterNodes().Names(); len(names) != 2 {
		t.Errorf("Nodes known %v, want node1 and node2", names)
	}
	// node2 is re-addressed: its old address is free again.
	for _, s := range nodeaddresses.Slices("kube-system", map[string][]netip.Addr{"node1": {addr("198.51.100.1")}, "node2": {addr("198.51.100.22"), addr("2001:db8::2")}}) {
		c := ipvsproxy.CompactEndpointSlice(s)
		for _, old := range slices {
			if old.Name == c.Name {
				handler.OnUpdate(old, c)
			}
		}
	}
	mustSync(t, p)
	if !hasVS(fk, "198.51.100.2", 80) {
		t.Errorf("a former address of node2 is still refused; other Nodes: %v", p.ClusterNodes().Others(servicetest.ThisNode))
	}
}

// The address guard's other Nodes (NodeInfo.OtherNodes) come from the
// informer on every Node, or with --node-addresses-from=endpointslices from
// the slices the publisher writes: fed by either, each field the guard holds
// (an external IP, a load balancer ingress IP, a cluster IP) and, with
// --refuse-node-endpoints, an endpoint address is refused when it is
// another Node's, IPv4 and IPv6, whether the Node came before the Service or
// after it; once the source no longer has the Node, each is served at the
// next sync.
func TestGuardHoldsOtherNodesFromEitherSource(t *testing.T) {
	const published = "ipvsproxy-node-addresses"
	for _, src := range []struct {
		name        string
		join, leave func(*Proxier, *v1.Node)
	}{
		{"the Node informer",
			func(p *Proxier, n *v1.Node) { p.ClusterNodes().Handler().OnAdd(n, false) },
			func(p *Proxier, n *v1.Node) { p.ClusterNodes().Handler().OnDelete(n) }},
		{"the published slices",
			func(p *Proxier, n *v1.Node) {
				for _, s := range nodeaddresses.Slices(published, map[string][]netip.Addr{n.Name: nodeaddresses.Addresses(n)}) {
					p.ClusterNodes().PublishedHandler(published, nodeaddresses.ServiceName).OnAdd(ipvsproxy.CompactEndpointSlice(s), false)
				}
			},
			func(p *Proxier, n *v1.Node) {
				for _, s := range nodeaddresses.Slices(published, map[string][]netip.Addr{n.Name: nodeaddresses.Addresses(n)}) {
					p.ClusterNodes().PublishedHandler(published, nodeaddresses.ServiceName).OnDelete(ipvsproxy.CompactEndpointSlice(s))
				}
			}},
	} {
		for _, family := range []struct {
			name string
			// node2's addresses: one for each field.
			external, ingress, clusterIP, endpoint string
			pod, vip                               string
		}{
			{"IPv4", "198.51.100.2", "198.51.100.3", "198.51.100.4", "198.51.100.5", "10.244.1.5", "10.96.0.84"},
			{"IPv6", "2001:db8::2", "2001:db8::3", "2001:db8::4", "2001:db8::5", "fd00:244::5", "fd00:96::84"},
		} {
			for _, nodeFirst := range []bool{true, false} {
				order := "Node after the Services"
				if nodeFirst {
					order = "Node before the Services"
				}
				t.Run(src.name+"/"+family.name+"/"+order, func(t *testing.T) {
					node2 := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node2"}}
					for i, a := range []string{family.external, family.ingress, family.clusterIP, family.endpoint} {
						typ := v1.NodeInternalIP
						if i > 0 {
							typ = v1.NodeExternalIP
						}
						node2.Status.Addresses = append(node2.Status.Addresses, v1.NodeAddress{Type: typ, Address: a})
					}
					fk := newFakeKernel()
					cfg := testConfig()
					cfg.Families = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
					cfg.RefuseNodeEndpoints = true
					p, rec := newTestProxier(t, fk, cfg)
					if nodeFirst {
						src.join(p, node2)
					}
					dual := func(clusterIP6 string) servicetest.Option {
						return func(s *v1.Service) {
							if family.name == "IPv6" {
								s.Spec.IPFamilyPolicy = servicetest.Ptr(v1.IPFamilyPolicyRequireDualStack)
								s.Spec.ClusterIPs = append(s.Spec.ClusterIPs, clusterIP6)
							}
						}
					}
					external := servicetest.Service("external", "10.96.0.81", externalIP(family.external), dual("fd00:96::81"))
					ingress := servicetest.Service("ingress", "10.96.0.82", servicetest.LoadBalancer(30082, family.ingress), dual("fd00:96::82"), func(s *v1.Service) {
						s.Status.LoadBalancer.Ingress[0].IPMode = servicetest.Ptr(v1.LoadBalancerIPModeVIP)
					})
					clusterIP := servicetest.Service("cluster-ip", family.clusterIP, servicetest.NodePort(30083))
					endpoint := servicetest.Service("endpoint", family.vip)
					for _, s := range []*v1.Service{external, ingress, clusterIP} {
						p.Tracker().SetService(s)
						p.Tracker().SetEndpointSlice(servicetest.Slice(s, s.Name+"-a", 8080, family.pod+"@node1"))
					}
					p.Tracker().SetService(endpoint)
					p.Tracker().SetEndpointSlice(servicetest.Slice(endpoint, "endpoint-a", 8080, family.pod+"@node1", family.endpoint+"@node2"))
					mustSync(t, p)
					if !nodeFirst {
						src.join(p, node2)
						if res := mustSync(t, p); res.Full {
							t.Fatal("want a partial sync")
						}
					}

					for _, a := range []string{family.external, family.ingress, family.clusterIP} {
						if served, bound := servedAt(t, fk, netip.MustParseAddr(a)); served || bound {
							t.Errorf("node2's %s: virtual server %v, bound %v, want neither:\n%s", a, served, bound, fk.ipvs.Dump())
						}
					}
					podRS := netip.AddrPortFrom(netip.MustParseAddr(family.pod), 8080).String()
					node2RS := netip.AddrPortFrom(netip.MustParseAddr(family.endpoint), 8080).String()
					if got := realServersOf(t, fk, family.vip, 80); !slices.Equal(got, []string{podRS}) {
						t.Errorf("real servers of %s %v, want the pod's alone", family.vip, got)
					}
					ev := drainEvents(rec)
					for _, want := range []string{
						"Warning ExternalIPRefused external IP " + family.external + " is an address of Node node2, which alone may serve it; not served",
						"Warning LoadBalancerIPRefused load balancer ingress IP " + family.ingress + " is an address of Node node2, which alone may serve it; not served",
						"Warning ClusterIPRefused cluster IP " + family.clusterIP + " is an address of Node node2, which alone may serve it; not served",
						"Warning EndpointRefused endpoint address " + family.endpoint + " is an address of Node node2 (--refuse-node-endpoints",
					} {
						if !strings.Contains(ev, want) {
							t.Errorf("events %q\nwant %q", ev, want)
						}
					}

					src.leave(p, node2)
					if names := p.ClusterNodes().Names(); len(names) != 0 {
						t.Fatalf("Nodes known after node2 left: %v", names)
					}
					mustSync(t, p)
					for _, vs := range []struct {
						addr string
						port uint16
					}{{family.external, 80}, {family.ingress, 80}, {family.clusterIP, 80}} {
						if !hasVS(fk, vs.addr, vs.port) {
							t.Errorf("%s:%d is not served once node2 left:\n%s", vs.addr, vs.port, fk.ipvs.Dump())
						}
					}
					if got, want := realServersOf(t, fk, family.vip, 80), sorted([]string{podRS, node2RS}); !slices.Equal(got, want) {
						t.Errorf("real servers of %s %v once node2 left, want %v", family.vip, got, want)
					}
				})
			}
		}
	}
}
