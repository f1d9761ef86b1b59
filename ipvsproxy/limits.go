package ipvsproxy

import (
	"fmt"
	"maps"
	"slices"

	"github.com/ipvsproxy/ipvsproxy/ipset"
	"k8s.io/apimachinery/pkg/types"
)

// setCapacity keeps the desired state within the owned sets' maxelem. The
// kernel refuses the entry after the last that fits (IPSET_ERR_HASH_FULL),
// and which entry that is depends on write order: one Service with 1,000
// ports and 100 external IPs needed 100,000 KUBE-IPVS-SERVICES entries, so
// other Services' entries failed and the filter rejected their VIPs (issue
// 8). A Service whose entries would overflow a set is refused whole, with a
// ServiceTooLarge Event, before anything is written; every other Service
// keeps its entries.
type setCapacity struct {
	maxElem int
	// counts is the number of distinct entries of each set in the desired
	// state, kept up to date by admit (so a partial sync costs the Services
	// it rebuilds, not the cluster).
	counts map[string]int
}

func newSetCapacity(maxElem uint32) setCapacity {
	return setCapacity{maxElem: int(maxElem), counts: map[string]int{}}
}

// admit returns what replaces name's share of d: st itself, or, if st would
// take a set beyond maxelem, a state that programs nothing and carries the
// problem. st nil (the Service is gone) is returned as is. Call it right
// before d.set with what it returns.
func (c *setCapacity) admit(d *desiredState, name types.NamespacedName, st *ServiceState) *ServiceState {
	if c.counts == nil {
		c.counts = map[string]int{}
	}
	old := d.services[name]
	delta := entryDelta(d, old, st)
	if st != nil {
		// In name order, so the Event names the same set every time.
		for _, set := range slices.Sorted(maps.Keys(delta)) {
			n := delta[set]
			if setTypeOf(set) == ipset.BitmapPort {
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
	return st
}

// refused is st with nothing to program and one more problem.
func refused(st *ServiceState, message string) *ServiceState {
	out := &ServiceState{Name: st.Name, Created: st.Created, Problems: append([]Problem(nil), st.Problems...)}
	out.Problems = append(out.Problems, Problem{Object: st.serviceRef(), Reason: ReasonServiceTooLarge, Message: message})
	return out
}

// entryDelta is, per set, how many distinct entries the desired state gains
// (or, negative, loses) when old is replaced by new.
func entryDelta(d *desiredState, old, new *ServiceState) map[string]int {
	delta := map[string]int{}
	wanted := map[setEntryKey]bool{}
	if new != nil {
		for _, e := range new.SetEntries {
			k := e.key()
			if wanted[k] {
				continue
			}
			wanted[k] = true
			if d.entryRefs[k] == 0 {
				delta[k.set]++
			}
		}
	}
	if old != nil {
		for _, e := range old.SetEntries {
			// Only old refers to it (it holds each entry once).
			if k := e.key(); !wanted[k] && d.entryRefs[k] == 1 {
				delta[k.set]--
			}
		}
	}
	return delta
}
