package ipvsproxy

import (
	"github.com/ipvsproxy/ipvsproxy/ipvs"
	"k8s.io/klog/v2"
)

// MaxResyncShares bounds --ipvs-resync-shares: beyond it a full re-check
// would come too rarely to repair anything (hours at the default period).
const MaxResyncShares = 100

// The periodic re-check. With K = Config.ResyncShares, every K-th period is
// a full sync (every object read back and compared); each other period
// lists the virtual servers, recreates the owned ones that are gone, and
// re-reads one K-th of them with their real servers, chosen by a hash of
// the key. Drift inside a virtual server is then repaired within K periods,
// a deleted virtual server within one, and a period costs about 1/K of a
// full re-read (at 10,000 Services a full one is half of
// kube-proxy's sync). Sets, addresses, routes and rules are read back, and
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

// resyncShare reads the virtual servers back into the view: every owned one
// the kernel no longer lists, and those of the due share with their real
// servers. It marks them touched so the sync compares them, except those
// still backing off. It returns how many it re-read.
func (p *Proxier) resyncShare(share int, t touched, retries retryQueue) int {
	shares := max(p.cfg.ResyncShares, 1)
	all, err := p.kernel.IPVS.VirtualServers()
	if err != nil {
		// The next full sync reads everything again.
		klog.ErrorS(err, "Listing virtual servers for the periodic re-check failed")
		return 0
	}
	present := make(map[ipvs.VirtualServerKey]ipvs.VirtualServer, len(all))
	for _, vs := range all {
		present[vs.VirtualServerKey] = vs
	}
	touch := func(k ipvs.VirtualServerKey) {
		if !retries.waits(vsID(k)) {
			t.virtualServers[k] = true
		}
	}
	for k := range p.view.virtualServers {
		if _, ok := present[k]; !ok {
			delete(p.view.virtualServers, k)
			touch(k)
		}
	}
	read := 0
	for k := range p.desired.claims {
		if shareOf(k, shares) != share {
			continue
		}
		vs, ok := present[k]
		switch {
		case p.view.foreign[k]:
			// Someone else's: whether it went is the full sync's to say.
		case !ok:
			touch(k) // created again
		case !p.view.isRecorded(k):
			// Not ours, new since the full sync, which decides.
		default:
			rss, err := listedRealServers(p.kernel, k)
			if err != nil {
				continue // gone meanwhile: the next list finds it missing
			}
			p.view.virtualServers[k] = &kernelVirtualServer{vs: vs, realServers: newRealServerList(rss)}
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
