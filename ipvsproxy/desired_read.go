package ipvsproxy

import (
	"iter"
	"maps"
	"net/netip"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"k8s.io/apimachinery/pkg/types"
)

// What the writer reads of the desired state's claims and reference counts.
// None of these change them.

// VirtualServerKeys are the keys at least one Service claims.
func (d *DesiredState) VirtualServerKeys() iter.Seq[ipvs.VirtualServerKey] {
	return maps.Keys(d.claims)
}

// VirtualServerCount is how many keys are claimed.
func (d *DesiredState) VirtualServerCount() int { return len(d.claims) }

// ContestedKeys are the claimed keys a Service loses: claimed by more than
// one, or held by someone else's virtual server. Only these have a
// Conflicts problem; a full sync lists them without looking up every key.
func (d *DesiredState) ContestedKeys() iter.Seq[ipvs.VirtualServerKey] {
	return func(yield func(ipvs.VirtualServerKey) bool) {
		for k, c := range d.claims {
			if (len(c) > 1 || len(c) > 0 && d.foreign[k]) && !yield(k) {
				return
			}
		}
	}
}

// Lookup is Winner and Claimed in one look at k: a full read asks both of
// every virtual server.
func (d *DesiredState) Lookup(k ipvs.VirtualServerKey) (winner *VirtualServerState, claimed bool) {
	c := d.claims[k]
	if len(c) == 0 {
		return nil, false
	}
	if d.foreign[k] {
		return nil, true
	}
	return c[0].vs, true
}

// SharedLookup is Lookup for the one reader that runs beside the writer
// (the periodic re-check's read, while partial syncs write): safe while
// the model's set and setForeign change the claims.
func (d *DesiredState) SharedLookup(k ipvs.VirtualServerKey) (winner *VirtualServerState, claimed bool) {
	d.shared.RLock()
	defer d.shared.RUnlock()
	return d.Lookup(k)
}

// WinnerCount is how many keys a Service wins (claimed, and not held by
// someone else's virtual server).
func (d *DesiredState) WinnerCount() int {
	n := len(d.claims)
	for k := range d.foreign {
		if len(d.claims[k]) > 0 {
			n--
		}
	}
	return n
}

// Claimed says whether any Service claims k.
func (d *DesiredState) Claimed(k ipvs.VirtualServerKey) bool { return len(d.claims[k]) > 0 }

// ClaimedOnlyBy says whether name is the one Service that claims k.
func (d *DesiredState) ClaimedOnlyBy(k ipvs.VirtualServerKey, name types.NamespacedName) bool {
	c := d.claims[k]
	return len(c) == 1 && c[0].service() == name
}

// Addresses are the addresses to bind on kube-ipvs0.
func (d *DesiredState) Addresses() iter.Seq[netip.Addr] { return maps.Keys(d.addrRefs) }

// AddressCount is how many addresses are to be bound.
func (d *DesiredState) AddressCount() int { return len(d.addrRefs) }

// WantsAddress says whether a is to be bound.
func (d *DesiredState) WantsAddress(a netip.Addr) bool { return d.addrRefs[a] > 0 }

// SetEntries are the wanted set members, each with how many virtual servers
// want it.
func (d *DesiredState) SetEntries() iter.Seq2[SetEntryKey, int] {
	return func(yield func(SetEntryKey, int) bool) {
		for set, refs := range d.entryRefs {
			for e, n := range refs.All() {
				if !yield(SetEntryKey{Set: set, Entry: e}, n) {
					return
				}
			}
		}
	}
}

// EntrySets are the sets that have held wanted members.
func (d *DesiredState) EntrySets() iter.Seq[string] { return maps.Keys(d.entryRefs) }

// SetEntriesNotIn yields the wanted members of set that the map have
// returns lacks (have is asked again after each member yielded).
func (d *DesiredState) SetEntriesNotIn(set string, have func() *ipset.EntryMap[struct{}]) iter.Seq[ipset.Entry] {
	return ipset.EntriesNotIn(d.entryRefs[set], have)
}

// UnwantedEntries yields the members of have that set is not to hold.
func (d *DesiredState) UnwantedEntries(set string, have *ipset.EntryMap[struct{}]) iter.Seq[ipset.Entry] {
	return ipset.EntriesNotIn(have, func() *ipset.EntryMap[int] { return d.entryRefs[set] })
}

// SetEntryCount is how many set members are wanted.
func (d *DesiredState) SetEntryCount() int { return d.entryCount }

// SetMemberCount is how many members set is to hold.
func (d *DesiredState) SetMemberCount(set string) int { return d.entryRefs[set].Len() }

// SetEntryRefs is how many virtual servers want the member k.
func (d *DesiredState) SetEntryRefs(k SetEntryKey) int {
	n, _ := d.entryRefs[k.Set].Get(k.Entry)
	return n
}

// ForeignKeys are the keys the kernel holds someone else's virtual server at.
func (d *DesiredState) ForeignKeys() iter.Seq[ipvs.VirtualServerKey] { return maps.Keys(d.foreign) }

// UnroutedRanges are the Service CIDRs whose route is not in place.
func (d *DesiredState) UnroutedRanges() iter.Seq[netip.Prefix] { return maps.Keys(d.unrouted) }

// reserve sizes the empty maps a first sync is about to fill with about
// this many claimed virtual servers, bound addresses and members of each
// set: growing them one entry at a time was a fifth of a cold sync of
// 10,000 Services (rehashing). Maps that hold anything are left alone.
func (d *DesiredState) reserve(services, virtualServers, addresses int, entries map[string]int) {
	reserve(&d.Services, services)
	d.shared.Lock()
	reserve(&d.claims, virtualServers)
	d.shared.Unlock()
	reserve(&d.addrRefs, addresses)
	for set, n := range entries {
		if d.entryRefs[set].Len() == 0 && n > 0 {
			d.entryRefs[set] = ipset.NewEntryMap[int](n)
		}
	}
}

// Reserve sizes the empty maps of t, as DesiredState.reserve does; not
// those of a filtered t (Only), which records few.
func (t *Touched) Reserve(virtualServers, addresses, entries int) {
	if t.Only != nil {
		return
	}
	reserve(&t.VirtualServers, virtualServers)
	reserve(&t.Addresses, addresses)
	reserve(&t.Entries, entries)
}

// reserve replaces an empty map with one sized for n entries.
func reserve[K comparable, V any](m *map[K]V, n int) {
	if len(*m) == 0 && n > 0 {
		*m = make(map[K]V, n)
	}
}
