package proxier

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/nodeaddresses"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/ipvs"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	"github.com/ipvsproxy/ipvsproxy/listeners"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func withPorts(ports ...int32) servicetest.Option {
	return func(s *v1.Service) {
		s.Spec.Ports = nil
		for _, p := range ports {
			s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "p" + itoa(int(p)), Port: p, Protocol: v1.ProtocolTCP})
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

// A tenant's external IP equal to this node's address takes no port a
// process of the node listens on (ssh on every address, the kubelet on the
// node's), while a port nothing listens on (80, the bare-metal use) is
// served; a listener that appears later is seen at the next full sync.
func TestExternalIPNeverTakesAPortTheNodeListensOn(t *testing.T) {
	fk := newFakeKernel()
	fk.listeners.Set(
		listeners.Listener{Protocol: listeners.TCP, Addr: netip.MustParseAddr("0.0.0.0"), Port: 22},
		listeners.Listener{Protocol: listeners.TCP, Addr: servicetest.Node1IP, Port: 10250},
		listeners.Listener{Protocol: listeners.TCP, Addr: netip.MustParseAddr("127.0.0.1"), Port: 8080},
	)
	p, rec := newTestProxier(t, fk, testConfig())
	svc := servicetest.Service("grab", "10.96.0.50", withPorts(22, 80, 8080, 10250), externalIP(servicetest.Node1IP.String()))
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "grab-a", 8080, "10.244.1.5@node1"))
	mustSync(t, p)
	for port, want := range map[uint16]bool{22: false, 10250: false, 80: true, 8080: true} {
		if got := hasVS(fk, servicetest.Node1IP.String(), port); got != want {
			t.Errorf("virtual server %s:%d present %v, want %v", servicetest.Node1IP, port, got, want)
		}
	}
	ev := drainEvents(rec)
	for _, want := range []string{
		"Warning ExternalIPRefused external IP 198.51.100.1 is an address of this node, and a process of the node listens on TCP 0.0.0.0:22; not served",
		"Warning ExternalIPRefused external IP 198.51.100.1 is an address of this node, and a process of the node listens on TCP 198.51.100.1:10250; not served",
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
}

// No external IP may be another Node's address or the API server's; when
// the Node goes, its address may be used again.
func TestExternalIPNeverTakesAnotherNodeOrTheAPIServer(t *testing.T) {
	fk := newFakeKernel()
	p, rec := newTestProxier(t, fk, testConfig())
	p.ClusterNodes().Set(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1"}, Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "198.51.100.1"}}}})
	p.ClusterNodes().Set(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node2"}, Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
		{Type: v1.NodeInternalIP, Address: "198.51.100.2"}, {Type: v1.NodeHostName, Address: "node2"}}}})
	api := servicetest.Service("kubernetes", "10.96.0.1", withPorts(443))
	p.Tracker().SetService(api)
	p.Tracker().SetEndpointSlice(servicetest.Slice(api, "kubernetes", 6443, "192.0.2.10@"))
	other := servicetest.Service("other-node", "10.96.0.51", externalIP("198.51.100.2"))
	apiGrab := servicetest.Service("api-grab", "10.96.0.52", withPorts(443), externalIP("192.0.2.10"))
	for _, s := range []*v1.Service{other, apiGrab} {
		p.Tracker().SetService(s)
		p.Tracker().SetEndpointSlice(servicetest.Slice(s, s.Name+"-a", 8080, "10.244.1.5@node1"))
	}
	mustSync(t, p)
	if hasVS(fk, "198.51.100.2", 80) || hasVS(fk, "192.0.2.10", 443) {
		t.Fatalf("an external IP took another Node's or the API server's address:\n%s", fk.ipvs.Dump())
	}
	ev := drainEvents(rec)
	for _, want := range []string{
		"Warning ExternalIPRefused external IP 198.51.100.2 is an address of Node node2, which alone may serve it; not served",
		"Warning ExternalIPRefused external IP 192.0.2.10 is an address of the API server (an endpoint of Service default/kubernetes); not served",
	} {
		if !strings.Contains(ev, want) {
			t.Errorf("events %q\nwant %q", ev, want)
		}
	}
	if !hasVS(fk, "10.96.0.1", 443) {
		t.Error("default/kubernetes itself must still be served")
	}
	p.ClusterNodes().Delete("node2")
	mustSync(t, p)
	if !hasVS(fk, "198.51.100.2", 80) {
		t.Error("the address of a deleted Node is still refused")
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
