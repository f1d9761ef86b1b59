package proxier

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/ipvsproxy/ipvsproxy/ipvs"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// setCapacity keeps the desired state within the owned sets' maxelem. The
// kernel refuses the entry after the last that fits (IPSET_ERR_HASH_FULL),
// and which entry that is depends on write order: one Service with 1,000
// ports and 100 external IPs needed 100,000 KUBE-IPVS-SERVICES entries, so
// other Services' entries failed and the filter rejected their VIPs. A Service whose entries would overflow a set is refused whole, with a
// ServiceTooLarge Event, before anything is written; every other Service
// keeps its entries.
//
// Which Service is refused must not depend on the order changes arrived in
// (it would differ per node and per restart, and could be kube-dns): the
// Services of a sync are admitted in admission order (kube-system first, then
// oldest, then by name), and while any Service is refused every sync that
// changes something admits all of them again in that order (readmit), so a
// Service is only ever refused because of Services before it.
type setCapacity struct {
	maxElem int
	// counts is the number of distinct entries of each set in the desired
	// state, the ownership record's included, kept up to date by admit (so
	// a partial sync costs the Services it rebuilds, not the cluster).
	counts map[string]int
	// refused are the Services refused for want of room.
	refused map[types.NamespacedName]bool
}

func newSetCapacity(maxElem uint32) setCapacity {
	return setCapacity{maxElem: int(maxElem), counts: map[string]int{}, refused: map[types.NamespacedName]bool{}}
}

// underPressure is true while some Service is refused: then the admission
// of every Service is redone in order at each sync that changes something.
func (c *setCapacity) underPressure() bool { return len(c.refused) > 0 }

// admissionOrder sorts the Services of one sync: removals first (they free
// room), then kube-system's (the cluster's DNS must not be refused because of
// a tenant), then the oldest, then by name.
func admissionOrder(a, b builtService) int {
	if (a.state == nil) != (b.state == nil) {
		if a.state == nil {
			return -1
		}
		return 1
	}
	if a.state != nil {
		if sa, sb := a.name.Namespace == metav1.NamespaceSystem, b.name.Namespace == metav1.NamespaceSystem; sa != sb {
			if sa {
				return -1
			}
			return 1
		}
		if c := a.state.Created.Compare(b.state.Created); c != 0 {
			return c
		}
	}
	return cmp.Compare(a.name.String(), b.name.String())
}

// admit returns what replaces name's share of d: st itself, or, if st would
// take a set beyond maxelem, a state that programs nothing and carries the
// problem. st nil (the Service is gone) is returned as is. Call it right
// before d.set with what it returns.
func (c *setCapacity) admit(d *ipvsproxy.DesiredState, name types.NamespacedName, st *ipvsproxy.ServiceState) *ipvsproxy.ServiceState {
	if c.counts == nil {
		c.counts = map[string]int{}
	}
	if c.refused == nil {
		c.refused = map[types.NamespacedName]bool{}
	}
	old := d.Services[name]
	delta := entryDelta(d, old, st)
	if st != nil {
		// In name order, so the Event names the same set every time.
		for _, set := range slices.Sorted(maps.Keys(delta)) {
			n := delta[set]
			if owned.SetType(set) == ipset.BitmapPort {
				continue // holds every port; cannot overflow
			}
			if have := c.counts[set]; n > 0 && have+n > c.maxElem {
				st = refused(st, fmt.Sprintf("needs %d more entries in ipset %s, which holds %d of at most %d (--ipset-max-elements); the Service is not programmed",
					n, set, have, c.maxElem))
				delta = entryDelta(d, old, st)
				break
			}
		}
	}
	for set, n := range delta {
		if c.counts[set] += n; c.counts[set] <= 0 {
			delete(c.counts, set)
		}
	}
	if st != nil && slices.ContainsFunc(st.Problems, func(p ipvsproxy.Problem) bool { return p.Reason == ipvsproxy.ReasonServiceTooLarge }) {
		c.refused[name] = true
	} else {
		delete(c.refused, name)
	}
	return st
}

// refused is st with nothing to program and one more problem.
func refused(st *ipvsproxy.ServiceState, message string) *ipvsproxy.ServiceState {
	out := &ipvsproxy.ServiceState{Name: st.Name, Created: st.Created, Problems: append([]ipvsproxy.Problem(nil), st.Problems...)}
	out.Problems = append(out.Problems, ipvsproxy.Problem{Object: st.ServiceRef(), Reason: ipvsproxy.ReasonServiceTooLarge, Message: message})
	return out
}

// entryDelta is, per set, how many distinct entries the desired state gains
// (or, negative, loses) when old is replaced by new.
func entryDelta(d *ipvsproxy.DesiredState, old, new *ipvsproxy.ServiceState) map[string]int {
	delta := map[string]int{}
	wanted := map[ipvsproxy.SetEntryKey]bool{}
	if new != nil {
		for k := range new.SetEntryKeys() {
			wanted[k] = true
			if d.SetEntryRefs(k) == 0 {
				delta[k.Set]++
			}
		}
	}
	if old != nil {
		for k := range old.SetEntryKeys() {
			// Only old refers to it (it yields each entry once).
			if !wanted[k] && d.SetEntryRefs(k) == 1 {
				delta[k.Set]--
			}
		}
	}
	// The ownership record holds one member per virtual server claimed.
	claimed := map[ipvs.VirtualServerKey]bool{}
	if new != nil {
		for i := range new.VirtualServers {
			k := new.VirtualServers[i].VirtualServerKey
			if claimed[k] {
				continue
			}
			claimed[k] = true
			if !d.Claimed(k) {
				delta[recordEntry(k).Set]++
			}
		}
	}
	if old != nil {
		for i := range old.VirtualServers {
			k := old.VirtualServers[i].VirtualServerKey
			if !claimed[k] && d.ClaimedOnlyBy(k, old.Name) {
				delta[recordEntry(k).Set]--
				claimed[k] = true // once, even if old lists it twice
			}
		}
	}
	return delta
}

// readmit admits every Service again in admission order, while some are
// refused: a Service admitted earlier that ranks after a refused one gives
// its room up, and a refused one gets the room others freed. Refused
// Services are rebuilt (their desired state is empty); the others keep the
// state they have. It returns the Services whose admission changed, to be
// reported.
func (p *Proxier) readmit(node ipvsproxy.NodeInfo, t ipvsproxy.Touched, stale *staleFiltersCollector) []types.NamespacedName {
	c := &p.capacity
	all := make([]builtService, 0, len(p.desired.Services))
	rebuild := map[types.NamespacedName]bool{}
	before := map[types.NamespacedName]*ipvsproxy.ServiceState{}
	for name, st := range p.desired.Services {
		before[name] = st
		if c.refused[name] {
			rebuild[name] = true
		} else {
			all = append(all, builtService{name: name, state: st})
		}
	}
	all = append(all, p.buildServices(rebuild, node)...)
	slices.SortFunc(all, admissionOrder)
	for i := len(all) - 1; i >= 0; i-- {
		c.admit(p.desired, all[i].name, nil)
		p.desired.Set(all[i].name, nil, t)
	}
	var changed []types.NamespacedName
	for _, b := range all {
		st := c.admit(p.desired, b.name, b.state)
		p.desired.Set(b.name, st, t)
		if st != before[b.name] {
			if p.started {
				stale.add(ipvsproxy.StaleUDPFlows(before[b.name], st))
			}
			if rebuild[b.name] != c.refused[b.name] || c.refused[b.name] {
				changed = append(changed, b.name)
			}
		}
	}
	return changed
}
