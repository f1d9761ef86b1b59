// Package adapters defines and assembles the Kernel, the adapters a proxier
// reads and writes the kernel through: the real ones (`run`, `cleanup`, the
// kernel benchmark) or every adapter's in-memory Fake (`inspect
// --kubeconfig`'s desired state, the benchmarks on fakes). It is the one
// constructor, so an adapter added to the Kernel reaches every caller.
package adapters

import (
	"errors"
	"fmt"

	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/iptables"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/listeners"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/sysctl"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// Options says which Kernel to assemble.
type Options struct {
	// Fake assembles every adapter's in-memory Fake: nothing is opened,
	// read or written on the host.
	Fake bool
	// Families get an iptables adapter each.
	Families []v1.IPFamily
	// Links is the netif adapter to use (a Fake with the node's addresses
	// set, or the real one on another link); nil opens kube-ipvs0's, or
	// makes a new Fake.
	Links netif.Interface
	// SysctlRoot is where the real sysctl adapter finds /proc/sys.
	SysctlRoot string
	// IPVSIfPresent (cleanup) takes a kernel without IPVS as one with an
	// empty IPVS table (ipvs.Unavailable) instead of failing.
	IPVSIfPresent bool
}

// BothFamilies is what the Fakes are usually assembled with.
var BothFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}

// Open assembles the Kernel o describes; close releases what it opened.
// On an error nothing stays open.
func Open(o Options) (k Kernel, close func(), err error) {
	var closers []func()
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	fail := func(err error) (Kernel, func(), error) {
		closeAll()
		return Kernel{}, func() {}, err
	}
	k.Netif = o.Links
	k.IPTables = map[v1.IPFamily]iptables.Interface{}
	if o.Fake {
		k.IPVS, k.IPSet, k.Conntrack, k.Sysctl = ipvs.NewFake(), ipset.NewFake(), conntrack.NewFake(), sysctl.NewFake(freshNodeSysctls())
		if k.Netif == nil {
			k.Netif = netif.NewFake(owned.DummyInterface)
		}
		for _, f := range o.Families {
			k.IPTables[f] = iptables.NewFake(iptablesFamily(f))
		}
		return k, func() {}, nil
	}

	h, err := ipvs.New()
	if errors.Is(err, ipvs.ErrUnsupported) && o.IPVSIfPresent {
		klog.InfoS("No IPVS in this kernel; cleaning everything else", "err", err)
		h, err = ipvs.Unavailable{}, nil
	}
	if errors.Is(err, ipvs.ErrUnsupported) {
		return fail(fmt.Errorf("the kernel has no IPVS (module ip_vs, CONFIG_IP_VS), which ipvsproxy programs every Service into (docs/compatibility.md): %w", err))
	}
	if err != nil {
		return fail(fmt.Errorf("open IPVS: %w", err))
	}
	k.IPVS = h
	closers = append(closers, func() { h.Close() })
	if k.Netif == nil {
		if k.Netif, err = netif.New(owned.DummyInterface); err != nil {
			return fail(fmt.Errorf("open rtnetlink: %w", err))
		}
	}
	sets, err := ipset.New()
	if err != nil {
		return fail(fmt.Errorf("open ipset: %w", err))
	}
	k.IPSet = sets
	ct, err := conntrack.New()
	if err != nil {
		return fail(fmt.Errorf("open conntrack: %w", err))
	}
	k.Conntrack = ct
	closers = append(closers, func() { ct.Close() })
	k.Sysctl = sysctl.NewAt(o.SysctlRoot)
	k.Listeners = listeners.New()
	// One detection for both families, so they cannot pick different back
	// ends.
	backend, err := iptables.Detect()
	if err != nil {
		return fail(fmt.Errorf("detect iptables back end: %w", err))
	}
	klog.InfoS("Using iptables back end", "backend", backend)
	for _, f := range o.Families {
		ipt, err := iptables.New(iptablesFamily(f), iptables.WithBackend(backend))
		if err != nil {
			return fail(fmt.Errorf("open %s iptables: %w", f, err))
		}
		k.IPTables[f] = ipt
	}
	return k, closeAll, nil
}

// freshNodeSysctls are the kernel's defaults of the settings the daemon
// reads and sets at start (internal/hostsetup), with IPVS loaded: the
// Fakes' node is a fresh one, so that a daemon built on them (cmd/ipvsproxy,
// -tags fakekernel) starts as on a node.
func freshNodeSysctls() map[string]string {
	return map[string]string{
		"net.ipv4.vs.conntrack": "0", "net.ipv4.vs.expire_nodest_conn": "0", "net.ipv4.vs.expire_quiescent_template": "0",
		"net.ipv4.vs.conn_reuse_mode": "1", "net.ipv4.ip_forward": "0", "net.ipv6.conf.all.forwarding": "0",
		"net.ipv4.conf.all.arp_ignore": "0", "net.ipv4.conf.all.arp_announce": "0",
		"net.netfilter.nf_conntrack_max": "262144", "net.netfilter.nf_conntrack_buckets": "65536",
		"net.netfilter.nf_conntrack_tcp_timeout_established": "432000", "net.netfilter.nf_conntrack_tcp_timeout_close_wait": "60",
	}
}

func iptablesFamily(f v1.IPFamily) iptables.Family {
	if f == v1.IPv6Protocol {
		return iptables.IPv6
	}
	return iptables.IPv4
}

// OpenReader opens a second set of the handles a full read of the kernel
// goes through (IPVS, ipset, the links, the listening sockets) for the
// periodic re-check, which reads beside the writer: its dumps, seconds
// long at tens of thousands of Services, then hold none of the sockets the
// writer's requests wait for. The other adapters are k's (a read writes
// nothing). With the Fakes, which serve concurrent callers, it is k.
func OpenReader(k Kernel, o Options) (Kernel, func(), error) {
	if o.Fake {
		return k, func() {}, nil
	}
	r := k
	h, err := ipvs.New()
	if err != nil {
		return Kernel{}, func() {}, fmt.Errorf("open IPVS for reading: %w", err)
	}
	r.IPVS = h
	closers := []func(){func() { h.Close() }}
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	sets, err := ipset.New()
	if err != nil {
		closeAll()
		return Kernel{}, func() {}, fmt.Errorf("open ipset for reading: %w", err)
	}
	r.IPSet = sets
	closers = append(closers, func() { sets.Close() })
	if o.Links == nil {
		links, err := netif.New(owned.DummyInterface)
		if err != nil {
			closeAll()
			return Kernel{}, func() {}, fmt.Errorf("open rtnetlink for reading: %w", err)
		}
		r.Netif = links
		if c, ok := links.(interface{ Close() error }); ok {
			closers = append(closers, func() { c.Close() })
		}
	}
	r.Listeners = listeners.New()
	return r, closeAll, nil
}
