package cleanup

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/adapters/adapterstest"
	"github.com/ipvsproxy/ipvsproxy/internal/proxier"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
)

// The clean-ups are tested on what the proxier really installs: a proxier
// with its defaults syncs Services onto a node's Fakes, then a clean-up
// runs on the same Fakes.

// config is the proxier's defaults for families; with routed, the Service
// CIDRs are routed local on kube-ipvs0 (10.96.0.0/16, and fd00:96::/112 for
// IPv6).
func config(routed bool, families ...v1.IPFamily) ipvsproxy.Config {
	cfg := ipvsproxy.DefaultConfig()
	cfg.Families = families
	if routed {
		cfg.ServiceCIDRs = []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16"), netip.MustParsePrefix("fd00:96::/112")}[:len(families)]
	}
	return cfg
}

// serving is a proxier on node that has synced svcs, each with one
// endpoint on this node (10.244.1.5, .6, ... port 8080), beside the API
// server's Service every live cluster has (headless: it adds nothing to the
// kernel; without it the proxier deletes nothing).
func serving(t *testing.T, node *adapterstest.Fakes, cfg ipvsproxy.Config, svcs ...*v1.Service) *proxier.Proxier {
	t.Helper()
	p, err := proxier.New(cfg, servicetest.ThisNode, node.Kernel(), record.NewFakeRecorder(100))
	if err != nil {
		t.Fatal(err)
	}
	p.Tracker().SetService(servicetest.Service(proxier.APIServerService.Name, v1.ClusterIPNone))
	for i, svc := range svcs {
		p.Tracker().SetService(svc)
		p.Tracker().SetEndpointSlice(servicetest.Slice(svc, svc.Name+"-a", 8080, fmt.Sprintf("10.244.1.%d@node1", 5+i)))
	}
	mustSync(t, p)
	return p
}

func mustSync(t *testing.T, p *proxier.Proxier) proxier.SyncResult {
	t.Helper()
	res := p.Sync()
	if err := res.Err(); err != nil {
		t.Fatalf("sync failed: %v", err)
	}
	return res
}
