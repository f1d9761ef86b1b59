package ipvsproxy

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/ipvsproxy/ipvsproxy/iptables"
	"github.com/ipvsproxy/ipvsproxy/ipvs"
	"github.com/ipvsproxy/ipvsproxy/netif"
	"github.com/ipvsproxy/ipvsproxy/sysctl"
	v1 "k8s.io/api/core/v1"
)

// Kernel bundles the adapters the proxier writes through. Tests pass the
// packages' Fakes; the daemon passes the real ones.
type Kernel struct {
	IPVS      ipvs.Interface
	Netif     netif.Interface
	IPSet     ipset.Interface
	IPTables  map[v1.IPFamily]iptables.Interface
	Conntrack conntrack.Interface
	Sysctl    sysctl.Interface
}

// kernelView is what the kernel holds of the objects the proxier owns, as
// last read (full sync) and kept up to date by every successful write.
type kernelView struct {
	virtualServers map[ipvs.VirtualServerKey]*kernelVirtualServer
	addresses      map[netip.Addr]bool
	// sets maps each owned set present in the kernel to its members.
	sets map[string]map[ipset.Entry]bool
	// hostAddresses are the node's addresses outside kube-ipvs0.
	hostAddresses []netip.Addr
}

type kernelVirtualServer struct {
	vs          ipvs.VirtualServer
	realServers map[ipvs.RealServerKey]ipvs.RealServer
}

// ownership decides which virtual servers are the proxier's; readKernel and
// Cleanup both ask it.
type ownership struct {
	cfg      Config
	onDummy  map[netip.Addr]bool
	isHost   map[netip.Addr]bool
	services map[ipset.Entry]bool // members of KUBE-IPVS-SERVICES, both families
}

func newOwnership(cfg Config, onDummy map[netip.Addr]bool, host []netip.Addr, sets map[string]map[ipset.Entry]bool) ownership {
	o := ownership{cfg: cfg, onDummy: onDummy, isHost: map[netip.Addr]bool{}, services: map[ipset.Entry]bool{}}
	for _, a := range host {
		o.isHost[a.Unmap()] = true
	}
	for _, f := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
		for e := range sets[setName(setIPVSServices, f)] {
			o.services[e] = true
		}
	}
	return o
}

// owns: a virtual server is the proxier's when its address is bound on
// kube-ipvs0; or is a node address and its port lies in the NodePort range;
// or is a node address that a Service uses as external or LB IP (never
// bound, so the member of KUBE-IPVS-SERVICES the proxier wrote for it is
// the record). Nothing inside --ipvs-exclude-cidrs is owned.
func (o ownership) owns(k ipvs.VirtualServerKey) bool {
	a := k.Address.Unmap()
	switch {
	case o.cfg.excluded(a):
		return false
	case o.onDummy[a]:
		return true
	case !o.isHost[a]:
		return false
	case k.Port >= o.cfg.NodePortMin && k.Port <= o.cfg.NodePortMax:
		return true
	}
	return o.services[ipset.Entry{IP: a, Protocol: strings.ToLower(k.Protocol.String()), Port: k.Port}]
}

// readKernel reads every object the proxier owns (see ownership.owns).
func readKernel(k Kernel, cfg Config) (*kernelView, error) {
	view := &kernelView{
		virtualServers: map[ipvs.VirtualServerKey]*kernelVirtualServer{},
		addresses:      map[netip.Addr]bool{},
		sets:           map[string]map[ipset.Entry]bool{},
	}
	if err := k.Netif.EnsureDummy(); err != nil {
		return nil, fmt.Errorf("ensure %s: %w", DummyInterface, err)
	}
	bound, err := k.Netif.DummyAddresses()
	if err != nil {
		return nil, fmt.Errorf("list addresses of %s: %w", DummyInterface, err)
	}
	for _, a := range bound {
		if !cfg.excluded(a) {
			view.addresses[a.Unmap()] = true
		}
	}
	host, err := k.Netif.HostAddresses()
	if err != nil {
		return nil, fmt.Errorf("list node addresses: %w", err)
	}
	view.hostAddresses = host
	present, err := k.IPSet.Sets()
	if err != nil {
		return nil, fmt.Errorf("list ipsets: %w", err)
	}
	exists := map[string]ipset.Set{}
	for _, s := range present {
		exists[s.Name] = s
	}
	for _, want := range ownedSets(cfg.Families) {
		have, ok := exists[want.Name]
		if ok && (have.Type != want.Type || want.Type != ipset.BitmapPort && have.Family != want.Family) {
			// An older layout under our name: recreate it with the right type.
			if err := k.IPSet.DestroySet(want.Name); err != nil {
				return nil, fmt.Errorf("destroy ipset %s of type %s (want %s): %w", want.Name, have.Type, want.Type, err)
			}
			ok = false
		}
		if !ok {
			if err := k.IPSet.CreateSet(want); err != nil {
				return nil, fmt.Errorf("create ipset %s: %w", want.Name, err)
			}
			view.sets[want.Name] = map[ipset.Entry]bool{}
			continue
		}
		entries, err := k.IPSet.Entries(want.Name)
		if err != nil {
			return nil, fmt.Errorf("list ipset %s: %w", want.Name, err)
		}
		members := make(map[ipset.Entry]bool, len(entries))
		for _, e := range entries {
			members[e] = true
		}
		view.sets[want.Name] = members
	}
	all, err := k.IPVS.VirtualServers()
	if err != nil {
		return nil, fmt.Errorf("list virtual servers: %w", err)
	}
	owner := newOwnership(cfg, view.addresses, host, view.sets)
	for _, vs := range all {
		if !owner.owns(vs.VirtualServerKey) {
			continue
		}
		rss, err := k.IPVS.RealServers(vs.VirtualServerKey)
		if errors.Is(err, ipvs.ErrNotFound) {
			continue // deleted meanwhile by someone else
		}
		if err != nil {
			return nil, fmt.Errorf("list real servers of %s: %w", vs.VirtualServerKey, err)
		}
		kvs := &kernelVirtualServer{vs: vs, realServers: map[ipvs.RealServerKey]ipvs.RealServer{}}
		for _, rs := range rss {
			kvs.realServers[rs.RealServerKey] = rs
		}
		view.virtualServers[vs.VirtualServerKey] = kvs
	}
	return view, nil
}

// touchAll marks every object of the view and of the desired state, so a
// full sync compares everything.
func (v *kernelView) touchAll(d *desiredState, t touched) {
	for k := range v.virtualServers {
		t.virtualServers[k] = true
	}
	for k := range d.claims {
		t.virtualServers[k] = true
	}
	for a := range v.addresses {
		t.addresses[a] = true
	}
	for a := range d.addrRefs {
		t.addresses[a] = true
	}
	for set, members := range v.sets {
		for e := range members {
			t.entries[setEntryKey{set: set, entry: e}] = true
		}
	}
	for k := range d.entryRefs {
		t.entries[k] = true
	}
}
