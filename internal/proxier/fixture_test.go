package proxier

import (
	"net/netip"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"github.com/ipvsproxy/ipvsproxy/internal/adapters"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/ipvsproxy/ipvsproxy/iptables"
	"github.com/ipvsproxy/ipvsproxy/ipvs"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	"github.com/ipvsproxy/ipvsproxy/listeners"
	"github.com/ipvsproxy/ipvsproxy/netif"
	"github.com/ipvsproxy/ipvsproxy/sysctl"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
)

// fakeKernel holds the fakes of one node.
type fakeKernel struct {
	ipvs      *ipvs.Fake
	netif     *netif.Fake
	ipset     *ipset.Fake
	ipt4      *iptables.Fake
	ipt6      *iptables.Fake
	conntrack *conntrack.Fake
	sysctl    *sysctl.Fake
	listeners *listeners.Fake
}

func newFakeKernel() *fakeKernel {
	fk := &fakeKernel{
		ipvs:      ipvs.NewFake(),
		netif:     netif.NewFake(owned.DummyInterface),
		ipset:     ipset.NewFake(),
		ipt4:      iptables.NewFake(iptables.IPv4),
		ipt6:      iptables.NewFake(iptables.IPv6),
		conntrack: conntrack.NewFake(),
		listeners: listeners.NewFake(),
		sysctl: sysctl.NewFake(map[string]string{
			"net.ipv4.vs.conntrack": "0", "net.ipv4.vs.expire_nodest_conn": "0",
			"net.ipv4.vs.expire_quiescent_template": "0", "net.ipv4.ip_forward": "0",
			"net.ipv4.vs.conn_reuse_mode": "1", "net.ipv4.conf.all.arp_ignore": "0",
			"net.ipv4.conf.all.arp_announce": "0", "net.ipv6.conf.all.forwarding": "0",
		}),
	}
	fk.netif.SetHostAddresses(netip.MustParseAddr("127.0.0.1"), servicetest.Node1IP, servicetest.Node1IP6, netip.MustParseAddr("fe80::1"))
	return fk
}

func (fk *fakeKernel) kernel() adapters.Kernel {
	return adapters.Kernel{
		IPVS: fk.ipvs, Netif: fk.netif, IPSet: fk.ipset,
		IPTables:  map[v1.IPFamily]iptables.Interface{v1.IPv4Protocol: fk.ipt4, v1.IPv6Protocol: fk.ipt6},
		Conntrack: fk.conntrack, Sysctl: fk.sysctl, Listeners: fk.listeners,
	}
}

func (fk *fakeKernel) writes() int {
	return fk.ipvs.Writes() + fk.netif.Writes() + fk.ipset.Writes() + fk.ipt4.Writes + fk.ipt6.Writes
}

// testConfig is the configuration of the tests: the defaults with the
// address plan's pod network. The model's tests keep the same function:
// they cannot import a package that imports the model.
func testConfig() ipvsproxy.Config {
	cfg := ipvsproxy.DefaultConfig()
	cfg.ClusterCIDRs = []netip.Prefix{servicetest.PodCIDR}
	return cfg
}

// newTestProxier returns a proxier on fk with a recorder that keeps events.
func newTestProxier(t *testing.T, fk *fakeKernel, cfg ipvsproxy.Config) (*Proxier, *record.FakeRecorder) {
	t.Helper()
	rec := record.NewFakeRecorder(100)
	p, err := New(cfg, servicetest.ThisNode, fk.kernel(), rec)
	if err != nil {
		t.Fatal(err)
	}
	p.Tracker().SetService(apiServerService())
	return p, rec
}

// apiServerService stands for default/kubernetes, present in every live
// cluster: without it the proxier deletes nothing (emptyworld.go). Headless
// here, so that it adds nothing to the kernel the tests look at.
// proxierAt is a proxier on k with testConfig, its clock *now, the API
// server's Service in its tracker.
func proxierAt(t *testing.T, k adapters.Kernel, now *time.Time) *Proxier {
	t.Helper()
	p, err := New(testConfig(), servicetest.ThisNode, k, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.now = func() time.Time { return *now }
	p.Tracker().SetService(apiServerService())
	return p
}

func apiServerService() *v1.Service {
	return servicetest.Service(APIServerService.Name, v1.ClusterIPNone)
}

func mustSync(t *testing.T, p *Proxier) SyncResult {
	t.Helper()
	res := p.Sync()
	if err := res.Err(); err != nil {
		t.Fatalf("sync failed: %v", err)
	}
	return res
}
