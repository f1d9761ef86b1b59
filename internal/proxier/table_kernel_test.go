package proxier

import (
	"net/netip"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/ipvs"
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
// them, in a namespace, read every real server of a full re-check from
// /proc/net/ip_vs of that namespace (no dump a virtual server) and find a
// real server deleted behind the proxier's back, which the re-check alone
// writes back.
func TestFullReadOnRealKernelTakesTheTable(t *testing.T) {
	k := realKernelInNamespace(t)
	counting := &countingTable{Interface: k.IPVS}
	k.IPVS = counting
	p, _ := newRealProxier(t, k, testConfig())
	svcs := manyServices(p, 200)
	mustSync(t, p)
	key := ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: netip.MustParseAddr(svcs[7].Spec.ClusterIP), Port: 80}
	gone := ipvs.RealServerKey{Address: netip.MustParseAddr("10.244.1.5"), Port: 8080}
	if err := counting.Interface.DeleteRealServer(key, gone); err != nil {
		t.Fatal(err)
	}
	counting.perVirtualServer = 0
	p.RequestFullSync()
	res := mustSync(t, p)
	if !res.Full || res.Writes != 1 {
		t.Fatalf("the re-check: full=%v writes=%d, want a full one writing the real server back", res.Full, res.Writes)
	}
	if counting.perVirtualServer != 0 {
		t.Fatalf("the re-check dumped %d virtual servers' real servers one at a time, want none (the table)", counting.perVirtualServer)
	}
	rss, err := counting.Interface.RealServers(key)
	if err != nil || len(rss) != 1 || rss[0].RealServerKey != gone {
		t.Fatalf("%s holds %v (%v), want %s back", key, rss, err, gone)
	}
}
