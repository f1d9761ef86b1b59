package proxier

import (
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	"k8s.io/apimachinery/pkg/types"
)

// readmit admits every Service again in admission order (the model's
// Admission decides it: ipvsproxy/admission.go), while some are refused: a
// Service admitted earlier that ranks after a refused one gives its room
// up, and a refused one gets the room others freed. Refused
// Services are rebuilt (their desired state is empty); the others keep the
// state they have. It returns the Services whose admission changed, to be
// reported.
func (p *Proxier) readmit(node ipvsproxy.NodeInfo, t ipvsproxy.Touched, stale *staleFiltersCollector) []types.NamespacedName {
	a := p.admission
	all := make([]builtService, 0, len(p.desired.Services))
	rebuild := map[types.NamespacedName]bool{}
	before := map[types.NamespacedName]*ipvsproxy.ServiceState{}
	for name, st := range p.desired.Services {
		before[name] = st
		if a.Refused(name) {
			rebuild[name] = true
		} else {
			all = append(all, builtService{Name: name, State: st})
		}
	}
	all = append(all, p.buildServices(rebuild, node)...)
	a.Judge(all)
	for i := len(all) - 1; i >= 0; i-- {
		a.Admit(p.desired, all[i].Name, nil)
		p.desired.Set(all[i].Name, nil, t)
	}
	var changed []types.NamespacedName
	for _, b := range all {
		st := a.Admit(p.desired, b.Name, b.State)
		p.desired.Set(b.Name, st, t)
		if st != before[b.Name] {
			if p.started {
				stale.add(ipvsproxy.StaleUDPFlows(before[b.Name], st))
			}
			if rebuild[b.Name] != a.Refused(b.Name) || a.Refused(b.Name) {
				changed = append(changed, b.Name)
			}
		}
	}
	return changed
}
