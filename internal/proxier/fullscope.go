package proxier

import (
	"iter"
	"maps"
	"net/netip"
	"slices"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
)

// fullScope is what a full sync compares: every object the view or the
// desired state holds, the ownership records' virtual servers among them,
// and every object touched (by the build, or by the writer loop as it
// goes), except those still backing off that nothing touched (a failing
// object costs one write per backoff). Each pass of the writer loop asks
// it for its keys, which it yields each once from those maps as they
// stand, instead of gathering every key in one set per kind first: at
// 10,000 Services that was 10,000 virtual servers and 20,000 to 30,000 set
// members inserted into fresh maps every full sync, a tenth of its time.
// Of the set members it yields only those where the view and the desired
// state differ, and those with a status: comparing any other is no write
// and settles nothing (entriesToAdd).
type fullScope struct {
	view    *kernelView
	desired *ipvsproxy.DesiredState
	// touched are the objects this sync touched before the loop (the
	// build, a re-check's take).
	touched ipvsproxy.Touched
	// backingOff are the objects still backing off, by kind.
	backingOff ipvsproxy.Touched
	// entriesWithStatus are the set members pending or failing as the
	// sync starts: a compare of one in step settles it (done).
	entriesWithStatus map[ipvsproxy.SetEntryKey]bool
	// virtualServersWithStatus are the virtual servers pending or failing
	// as the sync starts.
	virtualServersWithStatus []ipvs.VirtualServerKey
	// members are the owned sets' members, as read: taken before any
	// write, so that a set found vanished meanwhile (setVanished) still has
	// its members compared. The ownership records are compared with their
	// virtual servers.
	members map[string]*ipset.EntryMap[struct{}]
}

func newFullScope(view *kernelView, desired *ipvsproxy.DesiredState, touched ipvsproxy.Touched, waiting []objectID, status *statusTable) *fullScope {
	s := &fullScope{view: view, desired: desired, touched: touched, backingOff: ipvsproxy.NewTouched(), members: map[string]*ipset.EntryMap[struct{}]{}}
	for id := range status.objects {
		switch o := id.(type) {
		case entryObject:
			if s.entriesWithStatus == nil {
				s.entriesWithStatus = map[ipvsproxy.SetEntryKey]bool{}
			}
			s.entriesWithStatus[ipvsproxy.SetEntryKey(o)] = true
		case vsObject:
			s.virtualServersWithStatus = append(s.virtualServersWithStatus, ipvs.VirtualServerKey(o))
		}
	}
	for _, id := range waiting {
		switch o := id.(type) {
		case vsObject:
			s.backingOff.VirtualServers[ipvs.VirtualServerKey(o)] = true
		case addrObject:
			s.backingOff.Addresses[netip.Addr(o)] = true
		case entryObject:
			s.backingOff.Entries[ipvsproxy.SetEntryKey(o)] = true
		}
	}
	for name, members := range view.sets {
		if owned.BaseName(name) != owned.SetOwned {
			s.members[name] = members
		}
	}
	return s
}

// touchedThen yields the keys of touched, then those of more (which yields
// each key once) that touched lacks and backingOff does not list. Each is
// read as it stands when the pass reaches it.
func touchedThen[K comparable](touched, backingOff map[K]bool, more iter.Seq[K]) iter.Seq[K] {
	return func(yield func(K) bool) {
		for k := range touched {
			if !yield(k) {
				return
			}
		}
		for k := range more {
			if touched[k] || backingOff[k] {
				continue
			}
			if !yield(k) {
				return
			}
		}
	}
}

// addressesToAdd: the wanted addresses are all in the desired state.
func (s *fullScope) addressesToAdd() iter.Seq[netip.Addr] {
	return touchedThen(s.touched.Addresses, s.backingOff.Addresses, s.desired.Addresses())
}

// addressesToRemove: the unwanted addresses are in the view, or touched.
func (s *fullScope) addressesToRemove() iter.Seq[netip.Addr] {
	return touchedThen(s.touched.Addresses, s.backingOff.Addresses, maps.Keys(s.view.addresses))
}

// entriesToAdd: the wanted members the view lacks, and those with a
// status. A member in step with none needs no write and has nothing to
// settle: at 10,000 Services, 20,000 to 30,000 members are not unpacked,
// looked up by set name and packed again every full sync.
func (s *fullScope) entriesToAdd() iter.Seq[ipvsproxy.SetEntryKey] {
	keys := func(yield func(ipvsproxy.SetEntryKey) bool) {
		// First those in step (the others are yielded below), before
		// the pass adds to the view.
		for k := range s.entriesWithStatus {
			if s.desired.SetEntryRefs(k) > 0 && s.view.sets[k.Set].Has(k.Entry) && !yield(k) {
				return
			}
		}
		for set := range s.desired.EntrySets() {
			// The view's set is asked for again after each add, which
			// may find the set vanished (setVanished).
			have := func() *ipset.EntryMap[struct{}] { return s.view.sets[set] }
			for e := range s.desired.SetEntriesNotIn(set, have) {
				if !yield(ipvsproxy.SetEntryKey{Set: set, Entry: e}) {
					return
				}
			}
		}
	}
	return touchedThen(s.touched.Entries, s.backingOff.Entries, keys)
}

// entriesToRemove: the members of the view that are not wanted (a wanted
// one is never removed, and has nothing to settle here).
func (s *fullScope) entriesToRemove() iter.Seq[ipvsproxy.SetEntryKey] {
	keys := func(yield func(ipvsproxy.SetEntryKey) bool) {
		for set, members := range s.members {
			for e := range s.desired.UnwantedEntries(set, members) {
				if !yield(ipvsproxy.SetEntryKey{Set: set, Entry: e}) {
					return
				}
			}
		}
	}
	return touchedThen(s.touched.Entries, s.backingOff.Entries, keys)
}

// virtualServersToUpdate: the wanted virtual servers are all claimed. When
// the build recorded the keys whose winner changed (Touched.Rewon), the
// read compared every other winner: only those it did not find in step
// (kernelView.outOfStepAtRead), those rewon since, and those with a status
// (to settle, or to retry) are compared again. At 10,000 Services in step
// that is none instead of 10,000, each looked up in the desired state, the
// view and its record set.
func (s *fullScope) virtualServersToUpdate() iter.Seq[ipvs.VirtualServerKey] {
	if s.touched.Rewon == nil {
		return touchedThen(s.touched.VirtualServers, s.backingOff.VirtualServers, s.desired.VirtualServerKeys())
	}
	keys := func(yield func(ipvs.VirtualServerKey) bool) {
		seen := map[ipvs.VirtualServerKey]bool{}
		for _, keys := range []iter.Seq[ipvs.VirtualServerKey]{slices.Values(s.view.outOfStepAtRead), maps.Keys(s.touched.Rewon), slices.Values(s.virtualServersWithStatus)} {
			for k := range keys {
				if seen[k] {
					continue
				}
				seen[k] = true
				if !yield(k) {
					return
				}
			}
		}
	}
	return touchedThen(s.touched.VirtualServers, s.backingOff.VirtualServers, keys)
}

// contestedVirtualServers are the keys of virtualServersToUpdate that a
// Service may have lost (Conflicts): the touched ones and the contested.
func (s *fullScope) contestedVirtualServers() iter.Seq[ipvs.VirtualServerKey] {
	return touchedThen(s.touched.VirtualServers, s.backingOff.VirtualServers, s.desired.ContestedKeys())
}

// virtualServersToRemove: the claimed keys that no Service wins (someone
// else's), then the virtual servers and records that no Service claimed
// when the view was read (kernelView.unclaimedAtRead), and the keys whose
// last claim the build dropped since. Only these can be unclaimed now: the
// view and the records are not looked at key by key. A key released that
// was unclaimed at the read too (claimed and dropped again) is yielded
// once.
func (s *fullScope) virtualServersToRemove() iter.Seq[ipvs.VirtualServerKey] {
	keys := func(yield func(ipvs.VirtualServerKey) bool) {
		for k := range s.desired.ForeignKeys() {
			if s.desired.Claimed(k) && !yield(k) {
				return
			}
		}
		for _, k := range s.view.unclaimedAtRead {
			if !s.touched.Released[k] && !yield(k) {
				return
			}
		}
		for k := range s.touched.Released {
			if !yield(k) {
				return
			}
		}
	}
	return touchedThen(s.touched.VirtualServers, s.backingOff.VirtualServers, keys)
}
