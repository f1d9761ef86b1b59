package ipvsproxy

import (
	"errors"
	"fmt"
	"net/netip"

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
	// routes are the Service CIDR routes on kube-ipvs0 that netif marks ours.
	routes map[netip.Prefix]bool
	// sets maps each owned set present in the kernel to its members.
	sets map[string]map[ipset.Entry]bool
	// hostAddresses are the node's addresses outside kube-ipvs0.
	hostAddresses []netip.Addr
}

type kernelVirtualServer struct {
	vs          ipvs.VirtualServer
	realServers map[ipvs.RealServerKey]ipvs.RealServer
}

// readKernel reads every object the proxier owns. A virtual server is owned
// when its address is bound on kube-ipvs0 or lies in one of our Service CIDR
// routes there, or is a node address and its port lies in the NodePort
// range; nothing inside --ipvs-exclude-cidrs is owned.
func readKernel(k Kernel, cfg Config) (*kernelView, error) {
	view := &kernelView{
		virtualServers: map[ipvs.VirtualServerKey]*kernelVirtualServer{},
		addresses:      map[netip.Addr]bool{},
		routes:         map[netip.Prefix]bool{},
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
	routes, err := k.Netif.ServiceRoutes()
	if err != nil {
		return nil, fmt.Errorf("list service routes on %s: %w", DummyInterface, err)
	}
	var routed []netip.Prefix
	for _, r := range routes {
		view.routes[r] = true
		routed = append(routed, r)
	}
	host, err := k.Netif.HostAddresses()
	if err != nil {
		return nil, fmt.Errorf("list node addresses: %w", err)
	}
	view.hostAddresses = host
	isHost := map[netip.Addr]bool{}
	for _, a := range host {
		isHost[a.Unmap()] = true
	}
	all, err := k.IPVS.VirtualServers()
	if err != nil {
		return nil, fmt.Errorf("list virtual servers: %w", err)
	}
	for _, vs := range all {
		a := vs.Address
		owned := view.addresses[a] || inPrefixes(routed, a) || isHost[a] && vs.Port >= cfg.NodePortMin && vs.Port <= cfg.NodePortMax
		if !owned || cfg.excluded(a) {
			continue
		}
		rss, err := k.IPVS.RealServers(vs.VirtualServerKey)
		if errors.Is(err, ipvs.ErrNotFound) {
			continue // deleted meanwhile by someone else
		}
		if err != nil {
			return nil, fmt.Errorf("list real servers of %s: %w", vs.VirtualServerKey, err)
		}
		kvs := &kernelVirtualServer{vs: vs, realServers: make(map[ipvs.RealServerKey]ipvs.RealServer, len(rss))}
		for _, rs := range rss {
			kvs.realServers[rs.RealServerKey] = rs
		}
		view.virtualServers[vs.VirtualServerKey] = kvs
	}
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
