package proxier

import (
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/ipvs"
	v1 "k8s.io/api/core/v1"
)

// A node whose IPVS module is gone (unloaded, or a kernel without it) still
// gets its sets, chains and kube-ipvs0 removed: `ipvsproxy cleanup` passes
// ipvs.Unavailable, and Cleanup goes on past it without an error.
func TestCleanupWithoutIPVS(t *testing.T) {
	fk := newFakeKernel()
	cfg := testConfig()
	cfg.Families = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	p, _ := newTestProxier(t, fk, cfg)
	svc := servicetest.Service("web", "10.96.0.10", servicetest.NodePort(30080))
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1"))
	mustSync(t, p)

	k := fk.kernel()
	k.IPVS = ipvs.Unavailable{}
	if err := Cleanup(k, cfg); err != nil {
		t.Fatalf("cleanup without IPVS: %v", err)
	}
	if d := fk.ipset.Dump(); strings.Contains(d, "KUBE-") {
		t.Errorf("ipsets left:\n%s", d)
	}
	for _, ipt := range []string{fk.ipt4.Dump(), fk.ipt6.Dump()} {
		if strings.Contains(ipt, "KUBE-") {
			t.Errorf("iptables left:\n%s", ipt)
		}
	}
	if _, err := fk.netif.DummyAddresses(); err == nil {
		t.Error("kube-ipvs0 left")
	}
}
