package proxier

import (
	"runtime"
	"sync"

	"github.com/ipvsproxy/ipvsproxy/ipvs"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	"k8s.io/apimachinery/pkg/types"
)

// builtService is one Service's new desired state; nil when it is gone.
type builtService = ipvsproxy.Candidate

// parallelBuildMin is how many Services a sync must build before the work
// is spread over the cores: below it the goroutines cost more than they save.
const parallelBuildMin = 256

// buildServices builds the named Services. BuildService is pure, so a cold
// or node-changed sync's thousands are built on every core (a cold
// sync of 10,000 spent a quarter of its time building, one Service at a
// time); what it returns is applied to the desired state in one goroutine.
func (p *Proxier) buildServices(names map[types.NamespacedName]bool, node ipvsproxy.NodeInfo) []builtService {
	out := make([]builtService, 0, len(names))
	for name := range names {
		out = append(out, builtService{Name: name})
	}
	build := func(b *builtService) {
		if svc, endpointSlices := p.tracker.Input(b.Name); svc != nil {
			b.State = ipvsproxy.BuildService(svc, endpointSlices, node, p.cfg)
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(out)/parallelBuildMin+1)
	if workers <= 1 {
		for i := range out {
			build(&out[i])
		}
		return out
	}
	var wg sync.WaitGroup
	chunk := (len(out) + workers - 1) / workers
	for start := 0; start < len(out); start += chunk {
		part := out[start:min(start+chunk, len(out))]
		wg.Go(func() {
			for i := range part {
				build(&part[i])
			}
		})
	}
	wg.Wait()
	return out
}

// reserveFor sizes the empty maps a first sync fills from built: growing
// them one entry at a time was a fifth of a cold sync of 10,000 Services
// (rehashing). Maps that hold anything are left alone. The sets'
// members in the view are sized when the reconciler creates the sets.
func reserveFor(built []builtService, d *ipvsproxy.DesiredState, t *ipvsproxy.Touched, view *kernelView) {
	var virtualServers, addresses, entries int
	perSet := map[string]int{}
	for _, b := range built {
		if b.State == nil {
			continue
		}
		virtualServers += len(b.State.VirtualServers)
		for i := range b.State.VirtualServers {
			vs := &b.State.VirtualServers[i]
			if vs.Bound {
				addresses++
			}
			entries += vs.SetEntries.Len()
			for e := range vs.SetEntries.All() {
				perSet[e.Set]++
			}
		}
	}
	d.Reserve(len(built), virtualServers, addresses, perSet)
	t.Reserve(virtualServers, addresses, entries)
	if view != nil && len(view.virtualServers) == 0 && virtualServers > 0 {
		view.virtualServers = make(map[ipvs.VirtualServerKey]*kernelVirtualServer, virtualServers)
	}
}
