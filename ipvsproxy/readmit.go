package ipvsproxy

import (
	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"k8s.io/apimachinery/pkg/types"
)

// readmit admits every Service again in admission order (Admission decides
// it: admission.go), while some are refused: a Service admitted earlier
// that ranks after a refused one gives its room up, and a refused one gets
// the room others freed. Refused Services are rebuilt (their desired state
// is empty); the others keep the state they have. It adds the stale UDP
// flows of what changed to stale and returns the Services whose admission
// changed, to be reported.
func (m *Model) readmit(node NodeInfo, t Touched, stale *[]conntrack.Filter) []types.NamespacedName {
	a, d := m.admission, m.desired
	all := make([]Candidate, 0, len(d.Services))
	rebuild := map[types.NamespacedName]bool{}
	before := map[types.NamespacedName]*ServiceState{}
	for name, st := range d.Services {
		before[name] = st
		if a.Refused(name) {
			rebuild[name] = true
		} else {
			all = append(all, Candidate{Name: name, State: st})
		}
	}
	all = append(all, m.buildServices(rebuild, node)...)
	a.Judge(all)
	for i := len(all) - 1; i >= 0; i-- {
		a.Admit(d, all[i].Name, nil)
		d.set(all[i].Name, nil, t)
	}
	var changed []types.NamespacedName
	for _, b := range all {
		st := a.Admit(d, b.Name, b.State)
		d.set(b.Name, st, t)
		if st != before[b.Name] {
			if m.started {
				*stale = append(*stale, StaleUDPFlows(before[b.Name], st)...)
			}
			if rebuild[b.Name] != a.Refused(b.Name) || a.Refused(b.Name) {
				changed = append(changed, b.Name)
			}
		}
	}
	return changed
}
