package ipvsproxy

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Admission keeps the desired state within the owned sets' maxelem and the
// node's real servers within Limits.MaxRealServers. The kernel refuses the
// set member after the last that fits (IPSET_ERR_HASH_FULL), and which one
// that is depends on write order: a Service with 1,000 ports and 100
// external IPs needed 100,000 KUBE-IPVS-SERVICES members, so other
// Services' members failed and the filter rejected their VIPs. A Service
// that would overflow a set, or the real servers, is refused whole, with a
// ServiceTooLarge Event, before anything is written; every other Service
// keeps its state.
//
// Which Service is refused must not depend on the order changes arrived in
// (it would differ per node and per restart, and could be kube-dns), nor
// let one namespace take a set from all others: the Services are admitted
// in admission order (Less), and while any Service is refused every sync
// that changes something admits all of them again in that order
// (Model.readmit, readmit.go, with Judge first), so a Service is only ever refused
// because of Services before it. Before it means: kube-system's first, then
// those within their namespace's share (Limits), then the others; within
// each, the oldest first, then by name. Once a set is full, a namespace
// beyond its share yields to the others.
type Admission struct {
	maxElem int
	limits  Limits
	// counts is the number of distinct members of each set in the desired
	// state, the ownership record's included, kept up to date by Admit (so
	// a partial sync costs the Services it rebuilds, not the cluster).
	counts map[string]int
	// realServers counts the real servers of the admitted Services.
	realServers int
	// refused are the Services refused for want of room.
	refused map[types.NamespacedName]bool
	// beyondShare are the Services beyond their namespace's share as of the
	// last Judge, with why.
	beyondShare map[types.NamespacedName]string
}

// Candidate is one Service to admit: its new desired state, nil when it is
// gone.
type Candidate struct {
	Name  types.NamespacedName
	State *ServiceState
}

// NewAdmission admits into sets of maxElem members within limits.
func NewAdmission(maxElem uint32, limits Limits) *Admission {
	return &Admission{maxElem: int(maxElem), limits: limits, counts: map[string]int{},
		refused: map[types.NamespacedName]bool{}, beyondShare: map[types.NamespacedName]string{}}
}

// UnderPressure is true while some Service is refused: then the admission of
// every Service is redone in order at each sync that changes something.
func (a *Admission) UnderPressure() bool { return len(a.refused) > 0 }

// Refused says whether name is refused for want of room.
func (a *Admission) Refused(name types.NamespacedName) bool { return a.refused[name] }

// RefusedServices are the Services refused for want of room, sorted.
func (a *Admission) RefusedServices() []types.NamespacedName {
	out := slices.Collect(maps.Keys(a.refused))
	slices.SortFunc(out, func(x, y types.NamespacedName) int { return cmp.Compare(x.String(), y.String()) })
	return out
}

// SetSizes are the members each set holds in the desired state (the writer
// sizes the sets it creates by them). The map is the Admission's own: read
// it only.
func (a *Admission) SetSizes() map[string]int { return a.counts }

// Judge decides which of all (every Service of the desired state) are
// beyond their namespace's share, then sorts all in admission order.
// Walking each namespace's Services oldest first, a Service is beyond the
// share when it brings the namespace's members of some set past
// SetEntriesPerNamespace or its real servers past RealServersPerNamespace;
// so are the namespace's younger ones. kube-system has no share.
func (a *Admission) Judge(all []Candidate) {
	a.beyondShare = map[types.NamespacedName]string{}
	byNamespace := map[string][]Candidate{}
	for _, c := range all {
		if c.State != nil && c.Name.Namespace != metav1.NamespaceSystem {
			byNamespace[c.Name.Namespace] = append(byNamespace[c.Name.Namespace], c)
		}
	}
	for ns, list := range byNamespace {
		slices.SortFunc(list, olderFirst)
		members := map[string]int{}
		realServers := 0
		why := ""
		for _, c := range list {
			if why == "" {
				// In name order, so the message names the same set every time.
				own := c.State.OwnSetEntries()
				for _, set := range slices.Sorted(maps.Keys(own)) {
					if members[set] += own[set]; members[set] > a.limits.SetEntriesPerNamespace && why == "" {
						why = fmt.Sprintf("namespace %s wants %d members of ipset %s, beyond its share of %d (--ipset-max-elements-per-namespace)", ns, members[set], set, a.limits.SetEntriesPerNamespace)
					}
				}
				if realServers += c.State.RealServerCount(); realServers > a.limits.RealServersPerNamespace && why == "" {
					why = fmt.Sprintf("namespace %s wants %d real servers, beyond its share of %d (--ipvs-max-real-servers-per-namespace)", ns, realServers, a.limits.RealServersPerNamespace)
				}
			}
			if why != "" {
				a.beyondShare[c.Name] = why
			}
		}
	}
	a.Sort(all)
}

// Sort puts cands in admission order: removals first (they free room),
// then kube-system's (the cluster's DNS must not be refused because of a
// tenant), then those within their namespace's share (as of the last
// Judge), then the oldest, then by name.
func (a *Admission) Sort(cands []Candidate) {
	slices.SortFunc(cands, func(x, y Candidate) int {
		if (x.State == nil) != (y.State == nil) {
			if x.State == nil {
				return -1
			}
			return 1
		}
		if x.State != nil {
			if sx, sy := x.Name.Namespace == metav1.NamespaceSystem, y.Name.Namespace == metav1.NamespaceSystem; sx != sy {
				if sx {
					return -1
				}
				return 1
			}
			if bx, by := a.beyondShare[x.Name] != "", a.beyondShare[y.Name] != ""; bx != by {
				if by {
					return -1
				}
				return 1
			}
		}
		return olderFirst(x, y)
	})
}

// olderFirst orders by creation, then by name.
func olderFirst(x, y Candidate) int {
	if x.State != nil && y.State != nil {
		if c := cmp.Compare(x.State.created, y.State.created); c != 0 {
			return c
		}
	}
	return cmp.Compare(x.Name.String(), y.Name.String())
}

// Admit returns what replaces name's share of d: st itself, or, if st would
// take a set beyond maxelem or the node's real servers beyond their cap, a
// state that programs nothing and carries the problem, naming the cap (and
// the namespace's share, when it is beyond it). st nil (the Service is
// gone) is returned as is. Call it right before d.Set with what it returns.
func (a *Admission) Admit(d *DesiredState, name types.NamespacedName, st *ServiceState) *ServiceState {
	old := d.Services[name]
	delta := entryDelta(d, old, st)
	refusedHere := false
	if st != nil {
		why := ""
		// In name order, so the Event names the same set every time.
		for _, set := range slices.Sorted(maps.Keys(delta)) {
			n := delta[set]
			if owned.SetType(set) == ipset.BitmapPort {
				continue // holds every port; cannot overflow
			}
			if have := a.counts[set]; n > 0 && have+n > a.maxElem {
				why = fmt.Sprintf("needs %d more entries in ipset %s, which holds %d of at most %d (--ipset-max-elements)", n, set, have, a.maxElem)
				break
			}
		}
		if n := st.RealServerCount() - old.RealServerCount(); why == "" && n > 0 && a.realServers+n > a.limits.MaxRealServers {
			why = fmt.Sprintf("needs %d more real servers; the node programs %d of at most %d (--ipvs-max-real-servers)", n, a.realServers, a.limits.MaxRealServers)
		}
		if why != "" {
			if share := a.beyondShare[name]; share != "" {
				why += "; " + share + ", so its Services yield to other namespaces'"
			}
			st = refusedState(st, why+"; the Service is not programmed")
			delta = entryDelta(d, old, st)
			refusedHere = true
		}
	}
	for set, n := range delta {
		if a.counts[set] += n; a.counts[set] <= 0 {
			delete(a.counts, set)
		}
	}
	a.realServers += st.RealServerCount() - old.RealServerCount()
	// Only a refusal for want of room may go when others leave; one by a
	// per-Service cap (BuildService) stays until the Service changes.
	if refusedHere {
		a.refused[name] = true
	} else {
		delete(a.refused, name)
	}
	return st
}

// refusedState is st with nothing to program and one more problem.
func refusedState(st *ServiceState, message string) *ServiceState {
	out := &ServiceState{Name: st.Name, created: st.created, Problems: append([]Problem(nil), st.Problems...)}
	out.Problems = append(out.Problems, Problem{Object: st.ServiceRef(), Reason: ReasonServiceTooLarge, Message: message})
	return out
}

// entryDelta is, per set, how many distinct entries the desired state gains
// (or, negative, loses) when old is replaced by new.
func entryDelta(d *DesiredState, old, new *ServiceState) map[string]int {
	delta := map[string]int{}
	wanted := map[SetEntryKey]bool{}
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
				set, _ := owned.Record(k)
				delta[set]++
			}
		}
	}
	if old != nil {
		for i := range old.VirtualServers {
			k := old.VirtualServers[i].VirtualServerKey
			if !claimed[k] && d.ClaimedOnlyBy(k, old.Name) {
				set, _ := owned.Record(k)
				delta[set]--
				claimed[k] = true // once, even if old lists it twice
			}
		}
	}
	return delta
}
