package proxier

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// realServersOf lists the real servers of TCP addr:port, "" joined.
func realServersOf(t *testing.T, fk *fakeKernel, addr string, port uint16) []string {
	t.Helper()
	rss, err := fk.ipvs.RealServers(ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: netip.MustParseAddr(addr), Port: port})
	if err != nil {
		t.Fatalf("virtual server %s:%d: %v\n%s", addr, port, err, fk.ipvs.Dump())
	}
	var out []string
	for _, rs := range rss {
		out = append(out, netip.AddrPortFrom(rs.Address, rs.Port).String())
	}
	slices.Sort(out)
	return out
}

// Endpoint addresses that may not be real servers (CVE-2021-25740's
// confused deputy). By default, what the API's validation refuses, again
// on the node (objects stored before it, or written around it, still
// arrive), and multicast: a node's address (a hostNetwork pod) is served,
// as by kube-proxy. --refuse-endpoint-cidrs adds ranges;
// --refuse-node-endpoints refuses every Node's address, the API server's
// and --protect-addresses, except for kube-system's Services and
// default/kubernetes. Each refusal is an EndpointRefused Event naming the
// address and the Service, on the slice; the other endpoints serve.
func TestEndpointAddressPolicy(t *testing.T) {
	const pod = "10.244.2.7:8080"
	node2, apiServer, protected, metadata := "198.51.100.2", "192.0.2.10", "203.0.113.250", "100.100.100.200"
	for _, c := range []struct {
		name      string
		strict    bool
		namespace string
		// served are the real servers beside the pod's; refused the
		// addresses with an Event.
		served, refused []string
	}{
		{"default", false, "tenant",
			[]string{"198.51.100.1:8080", node2 + ":8080", apiServer + ":8080", protected + ":8080", metadata + ":8080"},
			[]string{"127.0.0.1 is a loopback address", "169.254.169.254 is link-local", "0.0.0.0 is the unspecified address", "224.0.0.5 is a multicast address",
				"0.1.0.0 is in 0.0.0.0/8", "255.255.255.255 is the limited broadcast address"}},
		{"--refuse-endpoint-cidrs and --refuse-node-endpoints", true, "tenant", nil,
			[]string{"127.0.0.1 is a loopback address", metadata + " lies in --refuse-endpoint-cidrs 100.100.100.200/32",
				"198.51.100.1 is an address of this node, Node node1 (--refuse-node-endpoints",
				node2 + " is an address of Node node2 (--refuse-node-endpoints",
				apiServer + " is an address of the API server (--refuse-node-endpoints",
				protected + " lies in --protect-addresses 203.0.113.248/29 (--refuse-node-endpoints"}},
		{"--refuse-node-endpoints leaves kube-system's Services", true, "kube-system",
			[]string{"198.51.100.1:8080", node2 + ":8080", apiServer + ":8080", protected + ":8080"},
			[]string{metadata + " lies in --refuse-endpoint-cidrs"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			fk := newFakeKernel()
			cfg := testConfig()
			cfg.ProtectAddresses = []netip.Prefix{netip.MustParsePrefix("203.0.113.248/29")}
			if c.strict {
				cfg.RefuseEndpointCIDRs = []netip.Prefix{netip.MustParsePrefix("100.100.100.200/32")}
				cfg.RefuseNodeEndpoints = true
			}
			p, rec := newTestProxier(t, fk, cfg)
			p.ClusterNodes().Set(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node2"}, Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: node2}}}})
			api := servicetest.Service("kubernetes", "10.96.0.1", withPorts(443))
			p.Tracker().SetService(api)
			p.Tracker().SetEndpointSlice(servicetest.Slice(api, "kubernetes", 6443, apiServer+"@"))
			svc := servicetest.Service("web", "10.96.0.10")
			svc.Namespace = c.namespace
			p.Tracker().SetService(svc)
			p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.2.7@node2", "198.51.100.1@node1", node2+"@node2", apiServer+"@",
				protected+"@", metadata+"@", "127.0.0.1@", "169.254.169.254@", "0.0.0.0@", "224.0.0.5@", "0.1.0.0@", "255.255.255.255@"))
			mustSync(t, p)
			if got, want := realServersOf(t, fk, "10.96.0.10", 80), append([]string{pod}, c.served...); !slices.Equal(got, sorted(want)) {
				t.Errorf("real servers %v, want %v", got, sorted(want))
			}
			ev := drainEvents(rec)
			for _, r := range c.refused {
				if want := "Warning EndpointRefused endpoint address " + r; !strings.Contains(ev, want) {
					t.Errorf("events %q\nwant %q", ev, want)
				}
			}
			// One Event per refused address: the slice's twelve endpoints less
			// the pod's and those served.
			if n, want := strings.Count(ev, "EndpointRefused"), 11-len(c.served); n != want {
				t.Errorf("%d EndpointRefused Events, want %d: %q", n, want, ev)
			}
			// default/kubernetes always keeps the API server.
			if got := realServersOf(t, fk, "10.96.0.1", 443); !slices.Equal(got, []string{apiServer + ":6443"}) {
				t.Errorf("default/kubernetes's real servers %v, want the API server", got)
			}
		})
	}
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// With --refuse-node-endpoints an endpoint that names the API server's
// address is refused once default/kubernetes's endpoints name it, though
// its own slice did not change, and served again when they move away.
func TestEndpointRefusedWhenTheAPIServerMovesToIt(t *testing.T) {
	fk := newFakeKernel()
	cfg := testConfig()
	cfg.RefuseNodeEndpoints = true
	p, rec := newTestProxier(t, fk, cfg)
	api := servicetest.Service("kubernetes", "10.96.0.1", withPorts(443))
	p.Tracker().SetService(api)
	p.Tracker().SetEndpointSlice(servicetest.Slice(api, "kubernetes", 6443, "192.0.2.10@"))
	svc := servicetest.Service("web", "10.96.0.10")
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.2.7@node2", "192.0.2.11@"))
	mustSync(t, p)
	both := []string{"10.244.2.7:8080", "192.0.2.11:8080"}
	if got := realServersOf(t, fk, "10.96.0.10", 80); !slices.Equal(got, both) {
		t.Fatalf("real servers %v, want %v", got, both)
	}
	drainEvents(rec)
	p.Tracker().SetEndpointSlice(servicetest.Slice(api, "kubernetes", 6443, "192.0.2.11@"))
	mustSync(t, p)
	if got := realServersOf(t, fk, "10.96.0.10", 80); !slices.Equal(got, []string{"10.244.2.7:8080"}) {
		t.Errorf("real servers %v once the API server is at 192.0.2.11, want the pod's alone", got)
	}
	if ev, want := drainEvents(rec), "Warning EndpointRefused endpoint address 192.0.2.11 is an address of the API server (--refuse-node-endpoints"; !strings.Contains(ev, want) {
		t.Errorf("events %q\nwant %q", ev, want)
	}
	p.Tracker().SetEndpointSlice(servicetest.Slice(api, "kubernetes", 6443, "192.0.2.10@"))
	mustSync(t, p)
	if got := realServersOf(t, fk, "10.96.0.10", 80); !slices.Equal(got, both) {
		t.Errorf("real servers %v once the API server moved away, want %v", got, both)
	}
}
