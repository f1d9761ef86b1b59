package cleanup

import (
	"errors"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/adapters/adapterstest"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	v1 "k8s.io/api/core/v1"
)

// Installed removes every virtual server, set, chain and jump of ipvsproxy's,
// kube-ipvs0 with its Service CIDR routes, on both families; a second run
// on the clean node is fine. A node whose IPVS module is gone (unloaded, or
// a kernel without it) still gets the rest removed: `ipvsproxy cleanup`
// passes ipvs.Unavailable, and Installed goes on past it without an error.
func TestCleanupRemovesEverythingInstalled(t *testing.T) {
	for _, c := range []struct {
		name   string
		noIPVS bool
		routed bool
	}{{"with IPVS", false, false}, {"Service CIDRs routed", false, true}, {"without IPVS", true, false}} {
		t.Run(c.name, func(t *testing.T) {
			node := adapterstest.NewFakes()
			cfg := config(c.routed, v1.IPv4Protocol, v1.IPv6Protocol)
			svc := servicetest.Service("web", "10.96.0.10", servicetest.NodePort(30080))
			svc.Spec.ClusterIPs = []string{"10.96.0.10", "fd00:96::10"}
			serving(t, node, cfg, svc)
			if routes, _ := node.Netif.ServiceRoutes(); c.routed && len(routes) != 2 {
				t.Fatalf("want both families' Service CIDR routes installed, got %v", routes)
			}
			k := node.Kernel()
			if c.noIPVS {
				k.IPVS = ipvs.Unavailable{}
			}
			for run := 1; run <= 2; run++ {
				if err := Installed(k, cfg.Families); err != nil {
					t.Fatalf("run %d: %v", run, err)
				}
				if d := node.IPVS.Dump(); d != "" && !c.noIPVS {
					t.Fatalf("ipvs left:\n%s", d)
				}
				if d := node.IPSet.Dump(); strings.Contains(d, "KUBE-") {
					t.Fatalf("ipsets left:\n%s", d)
				}
				for _, ipt := range []string{node.IPT4.Dump(), node.IPT6.Dump()} {
					if strings.Contains(ipt, "KUBE-") {
						t.Fatalf("iptables left:\n%s", ipt)
					}
				}
				if d := node.Netif.Dump(); !strings.HasPrefix(d, "dummy kube-ipvs0 absent") {
					t.Fatalf("kube-ipvs0 left:\n%s", d)
				}
			}
		})
	}
}

// A clean-up that fails part-way keeps the ownership record, so the run
// that follows still finds ipvsproxy's state (installedHere) and removes the
// rest, kube-ipvs0 included, instead of taking it for kube-proxy's.
func TestCleanupFailedPartWayKeepsTheRecordForTheNextRun(t *testing.T) {
	node := adapterstest.NewFakes()
	cfg := config(false, v1.IPv4Protocol)
	serving(t, node, cfg, servicetest.Service("web", "10.96.0.10", servicetest.NodePort(30080)))
	node.IPSet.MarkBusy(owned.SetClusterIP, true) // someone's rule still names it
	if err := Installed(node.Kernel(), cfg.Families); !errors.Is(err, ipset.ErrBusy) {
		t.Fatalf("want the refused destroy, got %v", err)
	}
	if d := node.IPSet.Dump(); !strings.Contains(d, "set "+owned.SetOwned+" ") {
		t.Fatalf("the record went with a step failed:\n%s", d)
	}
	node.IPSet.MarkBusy(owned.SetClusterIP, false)
	if err := Installed(node.Kernel(), cfg.Families); err != nil {
		t.Fatal(err)
	}
	if d := node.IPSet.Dump(); strings.Contains(d, "KUBE-") {
		t.Fatalf("ipsets left after the second run:\n%s", d)
	}
	if _, err := node.Netif.DummyAddresses(); err == nil {
		t.Fatal("kube-ipvs0 left after the second run")
	}
}
