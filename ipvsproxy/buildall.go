package ipvsproxy

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// ParallelBuildMin is how many Services an Update must build before the
// work is spread over the cores: below it the goroutines cost more than
// they save.
const ParallelBuildMin = 256

// buildServices builds the named Services. BuildService is pure, so a cold
// or node-changed sync's thousands are built on every core (a cold
// sync of 10,000 spent a quarter of its time building, one Service at a
// time); what it returns is put into the desired state in one goroutine.
func (m *Model) buildServices(names map[types.NamespacedName]bool, node NodeInfo) []Candidate {
	out := make([]Candidate, 0, len(names))
	for name := range names {
		out = append(out, Candidate{Name: name})
	}
	build := func(b *Candidate) {
		if svc, endpointSlices := m.tracker.Input(b.Name); svc != nil {
			b.State = BuildService(svc, endpointSlices, node, m.cfg)
		}
	}
	workers := min(m.workers, len(out)/ParallelBuildMin+1)
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

// reserveFor sizes the empty maps a first build fills from built: growing
// them one entry at a time was a fifth of a cold sync of 10,000 Services
// (rehashing). Maps that hold anything are left alone. It returns how many
// virtual servers built claims, for the writer to size its view; the sets'
// members in the view are sized when the writer creates the sets.
func reserveFor(built []Candidate, d *DesiredState, t *Touched) (virtualServers int) {
	var addresses, entries int
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
	d.reserve(len(built), virtualServers, addresses, perSet)
	t.Reserve(virtualServers, addresses, entries)
	return virtualServers
}
