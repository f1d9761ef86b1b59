package adapterstest

import (
	"fmt"
	"net/netip"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"github.com/ipvsproxy/ipvsproxy/internal/adapters"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/iptables"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/listeners"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/sysctl"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/ipset"
)

// Fakes is one node's kernel in memory: every adapter's Fake, the node
// holding the address plan's addresses (servicetest.Node1IP, Node1IP6,
// loopback, a link-local one) and IPVS's sysctls as a fresh kernel has them.
type Fakes struct {
	IPVS      *ipvs.Fake
	Netif     *netif.Fake
	IPSet     *ipset.Fake
	IPT4      *iptables.Fake
	IPT6      *iptables.Fake
	Conntrack *conntrack.Fake
	Sysctl    *sysctl.Fake
	Listeners *listeners.Fake
}

// NewFakes returns a node with nothing of the proxier's on it.
func NewFakes() *Fakes {
	f := &Fakes{
		IPVS:      ipvs.NewFake(),
		Netif:     netif.NewFake(owned.DummyInterface),
		IPSet:     ipset.NewFake(),
		IPT4:      iptables.NewFake(iptables.IPv4),
		IPT6:      iptables.NewFake(iptables.IPv6),
		Conntrack: conntrack.NewFake(),
		Listeners: listeners.NewFake(),
		Sysctl: sysctl.NewFake(map[string]string{
			"net.ipv4.vs.conntrack": "0", "net.ipv4.vs.expire_nodest_conn": "0",
			"net.ipv4.vs.expire_quiescent_template": "0", "net.ipv4.ip_forward": "0",
			"net.ipv4.vs.conn_reuse_mode": "1", "net.ipv4.conf.all.arp_ignore": "0",
			"net.ipv4.conf.all.arp_announce": "0", "net.ipv6.conf.all.forwarding": "0",
		}),
	}
	f.Netif.SetHostAddresses(netip.MustParseAddr("127.0.0.1"), servicetest.Node1IP, servicetest.Node1IP6, netip.MustParseAddr("fe80::1"))
	return f
}

// Kernel is the node as the adapters' Kernel. Its ipset adapter refuses, as
// the kernel does ("Set cannot be destroyed: it is in use by a kernel
// component"), to destroy a set that a rule of either family's iptables
// names: what removes sets must remove the rules naming them first.
func (f *Fakes) Kernel() adapters.Kernel {
	return adapters.Kernel{
		IPVS: f.IPVS, Netif: f.Netif, IPSet: setsInUse{f.IPSet, []*iptables.Fake{f.IPT4, f.IPT6}},
		IPTables:  map[v1.IPFamily]iptables.Interface{v1.IPv4Protocol: f.IPT4, v1.IPv6Protocol: f.IPT6},
		Conntrack: f.Conntrack, Sysctl: f.Sysctl, Listeners: f.Listeners,
	}
}

// Writes counts the writes to the IPVS, link, ipset and iptables Fakes.
func (f *Fakes) Writes() int {
	return f.IPVS.Writes() + f.Netif.Writes() + f.IPSet.Writes() + f.IPT4.Writes + f.IPT6.Writes
}

// Dump is the IPVS, link, ipset and iptables Fakes' state at once, to
// compare a node before and after a step that must change nothing.
func (f *Fakes) Dump() string {
	return f.IPVS.Dump() + f.Netif.Dump() + f.IPSet.Dump() + f.IPT4.Dump() + f.IPT6.Dump()
}

// setsInUse is an ipset Fake whose sets are busy while an iptables rule
// names them (-m set --match-set NAME).
type setsInUse struct {
	*ipset.Fake
	rules []*iptables.Fake
}

func (s setsInUse) DestroySet(name string) error {
	for _, r := range s.rules {
		if strings.Contains(r.Dump(), " "+name+" ") {
			return fmt.Errorf("destroy ip set %s: %w", name, ipset.ErrBusy)
		}
	}
	return s.Fake.DestroySet(name)
}
