package proxier

import (
	"net/netip"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	"k8s.io/klog/v2"
)

// The periodic re-check. With K = Config.ResyncShares, every K-th period is
// a full sync (every object read back and compared); each other period
// lists the virtual servers, recreates the owned ones that are gone, and
// re-reads one K-th of them with their real servers, chosen by a hash of
// the key. Drift inside a virtual server is then repaired within K periods,
// a deleted virtual server within one, and a period costs about 1/K of a
// full re-read (at 10,000 Services a full one costs 0.15 of kube-proxy's
// sync on the VM's kernel). Sets, addresses, routes and rules are read back, and
// the conntrack table swept, by the full sync only; Cilium's reconciler
// refreshes on a rate limit for the same reason.
type resyncRotation struct {
	periods int
	// due is the share the next sync re-reads, 0 for none (share 0 is
	// re-read by the full sync).
	due int
}

// RequestFullSync makes the next Sync a full one, as a restart does: the
// benchmarks' periodic full resync.
func (p *Proxier) RequestFullSync() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.needFull = true
}

// PeriodElapsed is what each --ipvs-sync-period tick does: it makes the next
// Sync a full one or a share's re-check, by the rotation, and says whether
// it is full. The benchmarks call it as the daemon's timer does.
func (p *Proxier) PeriodElapsed() (full bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.periodElapsed()
}

func (p *Proxier) periodElapsed() (full bool) {
	shares := max(p.cfg.ResyncShares, 1)
	p.resync.periods++
	share := p.resync.periods % shares
	if share == 0 {
		p.needFull = true
		return true
	}
	p.resync.due = share
	return false
}

// refresh reads back, on a partial sync, what the writer loop compares
// beyond what the build changed, and marks it touched: the objects whose
// retry is due, their virtual servers read back first (the reason a write
// failed, someone deleting or creating it, is often a view gone stale), and
// the share due for its periodic re-check (0: none). One listing of the
// virtual servers serves both. It returns how many virtual servers the
// re-check read.
func (r *reconciler) refresh(t ipvsproxy.Touched, share int) (resynced int) {
	var due []ipvs.VirtualServerKey
	for _, id := range r.retries.due {
		switch o := id.(type) {
		case vsObject:
			t.VirtualServers[ipvs.VirtualServerKey(o)] = true
			due = append(due, ipvs.VirtualServerKey(o))
		case addrObject:
			t.Addresses[netip.Addr(o)] = true
		case entryObject:
			t.Entries[ipvsproxy.SetEntryKey(o)] = true
		}
	}
	if share == 0 && len(due) == 0 {
		return 0
	}
	all, err := r.k.IPVS.VirtualServers()
	if err != nil {
		// The next full sync reads everything again.
		klog.ErrorS(err, "Listing virtual servers to re-check them or to retry failed writes failed")
		return 0
	}
	// Each listed virtual server by its place in all: at 10,000 Services a
	// map of the virtual servers themselves took 1.5 MB every period.
	present := make(map[ipvs.VirtualServerKey]int, len(all))
	for i, vs := range all {
		present[vs.VirtualServerKey] = i
	}
	if share > 0 {
		resynced = r.resyncShare(share, all, present, t)
	}
	for _, k := range due {
		i, ok := present[k]
		switch {
		case !ok:
			delete(r.view.virtualServers, k)
			delete(r.view.foreign, k)
		case r.view.isRecorded(k):
			read, err := readVirtualServer(r.k, all[i], r.desired.Winner(k), nil)
			if err != nil {
				continue
			}
			r.view.put(k, read)
		}
	}
	return resynced
}

// resyncShare reads the virtual servers back into the view: every owned one
// the kernel (present) no longer lists, and those of the due share with
// their real servers. It marks them touched so the sync compares them,
// except those still backing off. It returns how many it re-read.
func (r *reconciler) resyncShare(share int, all []ipvs.VirtualServer, present map[ipvs.VirtualServerKey]int, t ipvsproxy.Touched) int {
	shares := max(r.cfg.ResyncShares, 1)
	touch := func(k ipvs.VirtualServerKey) {
		if !r.retries.waits(vsID(k)) {
			t.VirtualServers[k] = true
		}
	}
	for k := range r.view.virtualServers {
		if _, ok := present[k]; !ok {
			delete(r.view.virtualServers, k)
			touch(k)
		}
	}
	read := 0
	var room []ipvs.RealServer
	for k := range r.desired.VirtualServerKeys() {
		if shareOf(k, shares) != share {
			continue
		}
		i, ok := present[k]
		switch {
		case r.view.foreign[k]:
			// Someone else's: whether it went is the full sync's to say.
		case !ok:
			touch(k) // created again
		case !r.view.isRecorded(k):
			// Not ours, new since the full sync, which decides.
		default:
			kv, err := readVirtualServer(r.k, all[i], r.desired.Winner(k), &room)
			if err != nil {
				continue // gone meanwhile: the next list finds it missing
			}
			r.view.put(k, kv)
			read++
			touch(k)
		}
	}
	return read
}

// shareOf places a virtual server in one of shares by FNV-1a of its key:
// the same share every period, whatever else exists.
func shareOf(k ipvs.VirtualServerKey, shares int) int {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for _, b := range k.Address.As16() {
		h = (h ^ uint64(b)) * prime
	}
	h = (h ^ uint64(k.Port)) * prime
	h = (h ^ uint64(k.Protocol)) * prime
	return int(h % uint64(shares))
}
