package proxier

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/ipvsproxy/ipvsproxy/internal/adapters"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
)

// Ownership of virtual servers is recorded, not inferred: an address on
// kube-ipvs0 or a node address says nothing about who created a virtual
// server there, and Service authors choose external IPs.
// The reconciler adds a virtual server's key to KUBE-IPVS-OWNED (one set per
// family) before it creates the virtual server and removes it after the
// delete, so the record survives a restart and a crash between the two
// steps leaves at worst a record without a virtual server, never ours
// unrecorded (a full sync records a group of at most recordGroup together
// before creating them, and a sync removes the records of a group it
// deleted together after them: at most that many such records). This file
// is the one place that decides ownership: readKernel serves and adopts by
// readOwnership. `ipvsproxy cleanup` (internal/cleanup) deletes by the record
// alone, and leaves the names ipvsproxy shares with kube-proxy's IPVS mode
// to kube-proxy when no set only ipvsproxy makes is on the node.

// recordEntry is the KUBE-IPVS-OWNED member of a virtual server.
func recordEntry(k ipvs.VirtualServerKey) ipvsproxy.SetEntry {
	set, entry := owned.Record(k)
	return ipvsproxy.SetEntry{Set: set, Entry: entry}
}

// ownership is what decides which virtual servers are the proxier's.
type ownership struct {
	// records are the members of KUBE-IPVS-OWNED, by set name (one set
	// per family), looked up as they are: at 10,000 Services a map of every
	// recorded key, built on every full read, cost more than the lookups.
	records map[string]*ipset.EntryMap[struct{}]
	// replaced are the members of a record set being replaced (a larger
	// --ipset-max-elements): until then they still say what is ours.
	replaced map[string]*ipset.EntryMap[struct{}]
	// legacy is set when no record set exists but sets of the names
	// ipvsproxy shares with kube-proxy's IPVS mode do: kube-proxy's IPVS
	// mode ran here (or a record set was destroyed by hand), and the
	// virtual servers on kube-ipvs0 addresses or on node addresses with a
	// port in the NodePort range are adopted by a running proxier, which
	// records them at once: the migration of
	// docs/migrate-from-kube-proxy.md. A node that never ran either has no
	// KUBE- set, so nothing there is adopted. Only readOwnership sets it:
	// a clean-up has nobody to hand a virtual server to, and deletes by
	// the record alone (internal/cleanup).
	legacy      bool
	bound, host map[netip.Addr]bool
	// routes are our Service CIDR routes, services what the current
	// Services name, previous what was ours at the last read: with bound,
	// the evidence that keeps a virtual server ours when its record is
	// gone (recovered).
	routes   []netip.Prefix
	services serviceEvidence
	previous func(ipvs.VirtualServerKey) bool
	// readEvidence, when set, reads services and bound on the first
	// virtual server without a record that needs them: with every one
	// recorded, the usual full sync, the 10,000 Services' cluster IPs
	// and the bound addresses are never gathered.
	readEvidence func()
}

// serviceEvidence is what the current Services name that only the API
// server hands out: their cluster IPs.
type serviceEvidence struct {
	clusterIPs map[netip.Addr]bool
}

// evidenceOf reads the cluster IPs of svcs; what does not parse names
// nothing.
func evidenceOf(svcs []*ipvsproxy.Service) serviceEvidence {
	e := serviceEvidence{clusterIPs: map[netip.Addr]bool{}}
	for _, svc := range svcs {
		for _, ip := range ipvsproxy.AddressesOf(svc).ClusterIPs {
			e.clusterIPs[ip] = true
		}
	}
	return e
}

// recovered reports whether k is ours by evidence that stands without its
// record: it was ours at the last read (the record was flushed or replaced
// under a running proxier), or it sits on a current Service's cluster IP
// that our Service CIDR route or our kube-ipvs0 makes local (an address
// the API server allocated, whose traffic reaches nobody else). The record
// is then written again. Losing the record (the set replaced to raise
// --ipset-max-elements, flushed by hand, a crash mid-replace) once made
// every cluster IP foreign: its Service lost it, and pods, DNS included,
// hit the REJECT of KUBE-SERVICE-CIDRS. External IPs and node ports have no
// such evidence (a Service author chooses them, and someone else's virtual
// server may be there first): after a restart without the record they are
// foreign, each with a PortConflict Event.
func (o *ownership) recovered(k ipvs.VirtualServerKey, cfg ipvsproxy.Config) bool {
	if o.previous != nil && o.previous(k) {
		return true
	}
	if o.readEvidence != nil {
		o.readEvidence()
		o.readEvidence = nil
	}
	a := k.Address
	if cfg.Excluded(a) || !o.services.clusterIPs[a] {
		return false
	}
	return o.bound[a] || slices.ContainsFunc(o.routes, func(p netip.Prefix) bool { return p.Contains(a) })
}

// isRecorded reports whether a record set, as read, holds k's record (the
// writer's kernelView.isRecorded, at the read).
func (o *ownership) isRecorded(k ipvs.VirtualServerKey) bool {
	set, e := owned.Record(k)
	return o.records[set].Has(e)
}

// owns reports whether the proxier created the virtual server k. One it
// recorded stays its own inside --ipvs-exclude-cidrs too (a Service there
// is still served; the ranges only forbid deleting what nobody wants, as in
// kube-proxy); the legacy address rule never claims anything in them.
func (o *ownership) owns(k ipvs.VirtualServerKey, cfg ipvsproxy.Config) bool {
	return o.isRecorded(k) || o.ownsUnrecorded(k, cfg)
}

// ownsUnrecorded is owns for a virtual server without a record in the
// record sets as read.
func (o *ownership) ownsUnrecorded(k ipvs.VirtualServerKey, cfg ipvsproxy.Config) bool {
	if set, e := owned.Record(k); o.replaced[set].Has(e) || o.recovered(k, cfg) {
		return true
	}
	return o.legacy && !cfg.Excluded(k.Address) &&
		(o.bound[k.Address] || o.host[k.Address] && k.Port >= cfg.NodePortMin && k.Port <= cfg.NodePortMax)
}

// kernelAddresses is one read of the addresses bound on kube-ipvs0 and of the
// node's other interfaces.
type kernelAddresses struct {
	bound, host []netip.Addr
}

func readAddresses(k adapters.Kernel) (kernelAddresses, error) {
	bound, host, err := k.Netif.Addresses()
	if err != nil {
		return kernelAddresses{}, fmt.Errorf("list the addresses of %s and of the node: %w", owned.DummyInterface, err)
	}
	return kernelAddresses{bound: bound, host: host}, nil
}

// readOwnership builds the ownership from the members of the record sets
// (in sets, as read) and, for the legacy rule, the addresses. present is
// the kernel's list of sets; services gives the current Services'
// evidence, asked for only if a virtual server without a record needs it
// (nil: none). It reads nothing itself: the caller's one read of the
// addresses serves the view and the ownership alike.
func readOwnership(cfg ipvsproxy.Config, present []ipset.Set, sets map[string]*ipset.EntryMap[struct{}], routes []netip.Prefix, addrs kernelAddresses, services func() serviceEvidence, previous func(ipvs.VirtualServerKey) bool) *ownership {
	ours := map[string]bool{}
	for _, s := range owned.Sets(cfg.Families, cfg.IPSetMaxElements) {
		ours[s.Name] = true
	}
	o := &ownership{records: map[string]*ipset.EntryMap[struct{}]{}, bound: map[netip.Addr]bool{}, host: map[netip.Addr]bool{}, routes: routes, previous: previous}
	anyRecord, anyOurs := false, false
	for _, s := range present {
		if !ours[s.Name] {
			continue
		}
		anyOurs = true
		members, ok := sets[s.Name]
		if owned.BaseName(s.Name) != owned.SetOwned || !ok {
			// A record set of another type holds no record we can
			// read: as with none, the old rule adopts, and the
			// reconciler records again once the set is replaced.
			continue
		}
		anyRecord = true
		o.records[s.Name] = members
	}
	o.legacy = anyOurs && !anyRecord
	readAddressEvidence := func() {
		for _, a := range addrs.bound {
			o.bound[a.Unmap()] = true
		}
		for _, a := range addrs.host {
			o.host[a.Unmap()] = true
		}
	}
	if o.legacy {
		readAddressEvidence()
	}
	if services != nil {
		o.readEvidence = func() {
			o.services = services()
			if !o.legacy && len(o.services.clusterIPs) > 0 {
				readAddressEvidence()
			}
		}
	}
	return o
}

// isRecorded reports whether the view holds k's ownership record.
func (v *kernelView) isRecorded(k ipvs.VirtualServerKey) bool {
	e := recordEntry(k)
	return v.sets[e.Set].Has(e.Entry)
}

// OwnerOf decides ownership, with the same rule as readKernel, from kernel
// state someone else read (inspect): the members of the owned sets present,
// keyed by set name, and the addresses on kube-ipvs0 and of the node.
func OwnerOf(cfg ipvsproxy.Config, sets map[string][]ipset.Entry, dummy, host []netip.Addr) func(ipvs.VirtualServerKey) bool {
	o := &ownership{records: map[string]*ipset.EntryMap[struct{}]{}, bound: map[netip.Addr]bool{}, host: map[netip.Addr]bool{}}
	anyRecord, anyOurs := false, false
	for _, s := range owned.Sets(cfg.Families, 0) {
		members, ok := sets[s.Name]
		if !ok {
			continue
		}
		anyOurs = true
		if owned.BaseName(s.Name) != owned.SetOwned {
			continue
		}
		anyRecord = true
		o.records[s.Name] = entryMapOf(members)
	}
	o.legacy = anyOurs && !anyRecord
	for _, a := range dummy {
		o.bound[a.Unmap()] = true
	}
	for _, a := range host {
		o.host[a.Unmap()] = true
	}
	return func(k ipvs.VirtualServerKey) bool { return o.owns(k, cfg) }
}

// ownRoutes lists the Service CIDR routes that are ours (routes.go). Like
// KUBE-IPVS-OWNED for virtual servers, the record is kept by the kernel: a
// route is ours when it carries netif.RouteProtocol ("proto 233") on
// kube-ipvs0 in table local, which survives a restart; anyone else's route,
// even to the same range, is never listed, changed or deleted. The members
// of KUBE-SERVICE-CIDRS and the ranges' anchor addresses are in owned sets
// and on our link, so they need no record of their own. No link: no route.
func ownRoutes(k adapters.Kernel) ([]netip.Prefix, error) { return k.ServiceRoutes() }

// entryMapOf is a set's members, listed, as a map.
func entryMapOf(entries []ipset.Entry) *ipset.EntryMap[struct{}] {
	m := ipset.NewEntryMap[struct{}](len(entries))
	for _, e := range entries {
		m.Put(e, struct{}{})
	}
	return m
}
