// Package adapterstest gives the tests of what drives the kernel adapters
// (the proxier, the clean-ups, inspect) a node to drive: every real adapter
// inside a fresh network namespace (Real), or every adapter's Fake (Fakes).
// Only tests import it.
package adapterstest

import (
	"errors"
	"os"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"github.com/ipvsproxy/ipvsproxy/internal/adapters"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/iptables"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/sysctl"
	"github.com/ipvsproxy/ipvsproxy/internal/kerneltest"
	"github.com/ipvsproxy/ipvsproxy/internal/netnstest"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/ipset"
)

// Real opens every real adapter inside a fresh named network namespace,
// removed when the test ends, with the iptables rules of each of families
// (a dual-stack node: both); the sysctls are a Fake's. The namespace's own
// address (servicetest.Node1IP on lo, so that no packet can leave) stands
// for the node's. It skips (under CI: fails, unless accepted) where the
// kernel lacks IPVS or the dummy driver, as this development host does; the
// VM has both.
func Real(t testing.TB, families ...v1.IPFamily) adapters.Kernel {
	t.Helper()
	if os.Geteuid() != 0 {
		kerneltest.Skip(t, kerneltest.NotRoot, "real-kernel adapters need root")
	}
	ns, path := netnstest.NewNamed(t, "ipvsproxy-k-")
	netnstest.LoopbackUp(t, ns, servicetest.Node1IP)

	var err error
	k := adapters.Kernel{IPTables: map[v1.IPFamily]iptables.Interface{}}
	if k.IPVS, err = ipvs.NewInNamespace(ns); err != nil {
		if errors.Is(err, ipvs.ErrUnsupported) {
			kerneltest.Skip(t, kerneltest.NoIPVS, "%v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { k.IPVS.Close() })
	if k.Netif, err = netif.NewInNamespace(owned.DummyInterface, ns); err != nil {
		t.Fatal(err)
	}
	if err := k.Netif.EnsureDummy(); errors.Is(err, netif.ErrUnsupported) {
		kerneltest.Skip(t, kerneltest.NoDummy, "%v", err)
	}
	if k.IPSet, err = ipset.NewInNamespace(ns); err != nil {
		t.Fatal(err)
	}
	ct, err := conntrack.NewInNamespace(int(ns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ct.Close() })
	k.Conntrack = ct
	for _, family := range families {
		f := iptables.IPv4
		if family == v1.IPv6Protocol {
			f = iptables.IPv6
		}
		k.IPTables[family], err = iptables.New(f, iptables.InNetNS(path))
		if errors.Is(err, iptables.ErrUnsupported) {
			kerneltest.Skip(t, kerneltest.NoTool, "no iptables for %s: %v", family, err)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	k.Sysctl = sysctl.NewFake(map[string]string{})
	return k
}
