package proxier

import (
	"net/netip"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"github.com/ipvsproxy/ipvsproxy/internal/adapters"
	"github.com/ipvsproxy/ipvsproxy/internal/adapters/adapterstest"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/iptables"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/listeners"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/sysctl"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
)

// fakeKernel holds the fakes of one node (node), by the short names the
// tests use.
type fakeKernel struct {
	node      *adapterstest.Fakes
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
	f := adapterstest.NewFakes()
	return &fakeKernel{node: f, ipvs: f.IPVS, netif: f.Netif, ipset: f.IPSet, ipt4: f.IPT4, ipt6: f.IPT6, conntrack: f.Conntrack, sysctl: f.Sysctl, listeners: f.Listeners}
}

// kernel is the node's Kernel: its ipset adapter refuses to destroy a set an
// iptables rule names, as the kernel does.
func (fk *fakeKernel) kernel() adapters.Kernel { return fk.node.Kernel() }

func (fk *fakeKernel) writes() int { return fk.node.Writes() }

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
