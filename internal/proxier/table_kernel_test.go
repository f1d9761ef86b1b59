package proxier

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/adapters/adapterstest"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	v1 "k8s.io/api/core/v1"
)

// countingTable is the kernel's IPVS adapter with its table read and its
// batches passed through, counting the dumps of one virtual server's real
// servers.
type countingTable struct {
	ipvs.Interface
	perVirtualServer int
}

func (c *countingTable) ListedRealServers(k ipvs.VirtualServerKey, into []ipvs.RealServer) ([]ipvs.RealServer, error) {
	c.perVirtualServer++
	return c.Interface.ListedRealServers(k, into)
}

func (c *countingTable) RealServers(k ipvs.VirtualServerKey) ([]ipvs.RealServer, error) {
	c.perVirtualServer++
	return c.Interface.RealServers(k)
}

func (c *countingTable) EachRealServerList(fn func(ipvs.VirtualServerKey, []ipvs.RealServer) error) error {
	return c.Interface.(ipvs.RealServerTable).EachRealServerList(fn)
}

func (c *countingTable) WriteRealServers(ws []ipvs.RealServerWrite) []error {
	return ipvs.WriteRealServers(c.Interface, ws)
}

func (c *countingTable) AddVirtualServers(vss []ipvs.VirtualServer) []error {
	return ipvs.AddVirtualServers(c.Interface, vss)
}

// TestFullReadOnRealKernelTakesTheTable: the adapters as the daemon opens
// them, in a namespace, on a dual-stack node, read every real server of a
// full re-check from /proc/net/ip_vs of that namespace (no dump a virtual
// server, IPv4 and IPv6 alike, as the sync's result says) and find a real
// server of each family deleted behind the proxier's back, which the
// re-check alone writes back.
func TestFullReadOnRealKernelTakesTheTable(t *testing.T) {
	k := adapterstest.Real(t, v1.IPv4Protocol, v1.IPv6Protocol)
	counting := &countingTable{Interface: k.IPVS}
	k.IPVS = counting
	cfg := testConfig()
	cfg.Families = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	cfg.ClusterCIDRs = append(cfg.ClusterCIDRs, netip.MustParsePrefix("2001:db8:244::/64"))
	p, _ := newRealProxier(t, k, cfg)
	svcs := manyServices(p, 200)
	for i := range 50 {
		svc := servicetest.Service(fmt.Sprintf("v6-%d", i), fmt.Sprintf("2001:db8:96::%x", 10+i))
		p.Tracker().SetService(svc)
		p.Tracker().SetEndpointSlice(servicetest.Slice(svc, svc.Name+"-a", 8080, "2001:db8:244::5@node1", "2001:db8:244::6@node1"))
		svcs = append(svcs, svc)
	}
	mustSync(t, p)
	gone := map[ipvs.VirtualServerKey]ipvs.RealServerKey{
		{Protocol: ipvs.TCP, Address: netip.MustParseAddr(svcs[7].Spec.ClusterIP), Port: 80}:   {Address: netip.MustParseAddr("10.244.1.5"), Port: 8080},
		{Protocol: ipvs.TCP, Address: netip.MustParseAddr(svcs[207].Spec.ClusterIP), Port: 80}: {Address: netip.MustParseAddr("2001:db8:244::6"), Port: 8080},
	}
	for key, rs := range gone {
		if err := counting.Interface.DeleteRealServer(key, rs); err != nil {
			t.Fatal(err)
		}
	}
	all, err := counting.Interface.VirtualServers()
	if err != nil {
		t.Fatal(err)
	}
	counting.perVirtualServer = 0
	p.RequestFullSync()
	res := mustSync(t, p)
	if !res.Full || res.Writes != 2 {
		t.Fatalf("the re-check: full=%v writes=%d, want a full one writing the two real servers back", res.Full, res.Writes)
	}
	if counting.perVirtualServer != 0 {
		t.Fatalf("the re-check dumped %d virtual servers' real servers one at a time, want none (the table)", counting.perVirtualServer)
	}
	if r := res.RealServerReads; r.FromTable != len(all) || r.Dumped != 0 || r.TableError != "" {
		t.Fatalf("the sync says %+v, want all %d virtual servers from the table", r, len(all))
	}
	for key, rs := range gone {
		rss, err := counting.Interface.RealServers(key)
		if err != nil || !slices.ContainsFunc(rss, func(r ipvs.RealServer) bool { return r.RealServerKey == rs }) {
			t.Fatalf("%s holds %v (%v), want %s back", key, rss, err, rs)
		}
	}
}
