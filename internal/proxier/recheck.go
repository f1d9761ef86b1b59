package proxier

import (
	"maps"
	"net/netip"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/adapters"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	"k8s.io/klog/v2"
)

// The periodic re-check reads the kernel beside the sync loop. Its read is
// most of a full sync (at 50,000 Services under emulation, tens of
// seconds: the virtual-server list, a real-server dump each past the
// table's bound, every owned set), and a change that met it waited for its
// end. Run starts the read on a goroutine of its own, through adapters of
// its own (Proxier.ReadBeside), into a new view; partial syncs keep
// writing meanwhile against the view they had. The read asks the desired
// state one key at a time beside the writer (desiredBeside). When it ends, the re-check's sync takes
// the lock and completes the new view with what the partial syncs did
// since it began (takeInto): every object they compared is taken from the
// view they kept up to date, as the read may have seen it before or after
// their write, and is compared again. Anything changed behind the
// proxier's back is repaired by that sync as by any full one, except on
// an object a partial sync compared during the read, which the next
// re-check sees.

// recheckRead is a re-check's read running beside the sync loop.
type recheckRead struct {
	started time.Time
	done    chan struct{}
	// view and err are the read's outcome, set before done is closed.
	view *kernelView
	err  error

	// What partial syncs did while the read ran, under the proxier's
	// lock: the objects they compared, and whether they did what the new
	// view cannot take over object by object (an owned set created or
	// replaced, a route added or removed). Then the read is dropped, and
	// the next sync is a full one that reads in the loop.
	compared ipvsproxy.Touched
	redo     bool
	// sets and routes are the live view's set maps and routes when the
	// read began: a partial sync that changed one is what redo catches.
	sets   map[string]*ipset.EntryMap[struct{}]
	routes map[netip.Prefix]bool
	// abandoned: a full sync read the kernel in the loop meanwhile (its
	// view is newer); the outcome is dropped.
	abandoned bool
}

// ReadBeside makes the periodic re-check read through k, beside the sync
// loop (the daemon opens a second netlink socket per adapter for it, so
// that the read's long dumps hold none of the writer's). Without it the
// re-check reads through the proxier's own adapters, still beside the
// loop. Call before Run.
func (p *Proxier) ReadBeside(k adapters.Kernel) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reader = &k
}

// desiredBeside is what a re-check's read asks of the desired state while
// partial syncs change it: each key's winner as it stands
// (DesiredState.SharedLookup, a lock of the claims alone: the read never
// takes the proxier's lock, which a partial sync holding it while it waits
// for an adapter the read holds would deadlock), and the sizes of the
// view's maps as they were when it began. A key whose winner a partial
// sync changed after the read compared it is among the objects that sync
// compared, which takeInto takes from the live view and the re-check's sync
// compares again; the states themselves are never changed once built, so a
// list the read shares stays what it was.
type desiredBeside struct {
	desired        *ipvsproxy.DesiredState
	setMembers     map[string]int
	virtualServers int
}

func (d desiredBeside) Lookup(k ipvs.VirtualServerKey) (*ipvsproxy.VirtualServerState, bool) {
	return d.desired.SharedLookup(k)
}

func (d desiredBeside) SetMemberCount(set string) int { return d.setMembers[set] }
func (d desiredBeside) VirtualServerCount() int       { return d.virtualServers }

// startRecheck is what each --ipvs-sync-period tick does in Run: with
// --ipvs-resync-shares, a share's turn is left to the next Sync as
// PeriodElapsed leaves it; a full re-check starts its read beside the loop
// and reports true. A node that has no view yet, or whose next sync is
// full for another reason, reads in the loop (false: Run syncs now).
func (p *Proxier) startRecheck() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.periodElapsed() {
		return false
	}
	if p.view == nil || p.recheck != nil {
		return false
	}
	// Only the period asks for it (periodElapsed set needFull): taken
	// back, else the next partial sync would read in the loop.
	p.needFull = false
	r := &recheckRead{started: p.now(), done: make(chan struct{}), compared: ipvsproxy.NewTouched(),
		sets: maps.Clone(p.view.sets), routes: maps.Clone(p.view.routes)}
	// Whether a virtual server without a record was ours is asked of the
	// live view (rarely: every one of ours has its record), under the lock,
	// outside any adapter call: a copy of every key cost 2 MB at 50,000
	// Services for the read's length.
	wasOurs := func(key ipvs.VirtualServerKey) bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.view != nil && p.view.virtualServers[key] != nil
	}
	k := p.kernel
	if p.reader != nil {
		k = *p.reader
	}
	desired := desiredBeside{desired: p.desired, setMembers: map[string]int{}, virtualServers: p.desired.VirtualServerCount()}
	for _, set := range owned.Sets(p.cfg.Families, p.cfg.IPSetMaxElements) {
		desired.setMembers[set.Name] = p.desired.SetMemberCount(set.Name)
	}
	p.recheck = r
	go func() {
		defer close(r.done)
		evidence := func() serviceEvidence { return evidenceOf(p.tracker.CurrentServices()) }
		r.view, r.err = readKernel(k, p.cfg, desired, evidence, wasOurs, recycledView{})
	}()
	klog.V(2).InfoS("Re-check reading the kernel beside the sync loop")
	return true
}

// recheckDone is closed when the re-check's read in progress ends (nil
// when none runs).
func (p *Proxier) recheckDone() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.recheck == nil {
		return nil
	}
	return p.recheck.done
}

// finishRecheck is the re-check's sync, once its read has ended: a full
// sync on the view read. ok is false when there was nothing to sync (the
// read was abandoned for a newer one).
func (p *Proxier) finishRecheck() (res SyncResult, ok bool) {
	done := p.recheckDone()
	if done == nil {
		return SyncResult{}, false
	}
	<-done
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.recheck
	p.recheck = nil
	if r.abandoned {
		return SyncResult{}, false
	}
	return p.sync(r), true
}

// notePartialSync records what a partial sync did while a re-check reads.
func (r *recheckRead) notePartialSync(w *reconciler, drained []ipvs.VirtualServerKey) {
	// The keys an earlier sync carried were compared too, after this
	// sync's own (reconciler.yield).
	addKeys(r.compared, w.touched)
	addKeys(r.compared, w.carried)
	for _, k := range drained {
		r.compared.VirtualServers[k] = true
	}
	if len(w.view.sets) != len(r.sets) || !maps.Equal(w.view.routes, r.routes) {
		r.redo = true
		return
	}
	for name, members := range w.view.sets {
		if r.sets[name] != members {
			r.redo = true
			return
		}
	}
}

// takeInto completes the view read (into) with what the partial syncs did
// since the read began, taken from the live view they kept: for every
// object they compared, whether the kernel holds it and as what, with the
// ownership record of each virtual server. Those objects are compared
// again by the re-check's sync (t). It reports false when the read must be
// redone (notePartialSync).
func (r *recheckRead) takeInto(into, live *kernelView, t ipvsproxy.Touched) bool {
	if r.redo {
		return false
	}
	for k := range r.compared.VirtualServers {
		if have := live.virtualServers[k]; have != nil {
			taken := *have
			into.virtualServers[k] = &taken
		} else {
			delete(into.virtualServers, k)
		}
		if live.foreign[k] {
			into.foreign[k] = true
		} else {
			delete(into.foreign, k)
		}
		takeEntry(into, live, recordEntry(k).Set, recordEntry(k).Entry)
		t.VirtualServers[k] = true
	}
	for a := range r.compared.Addresses {
		if live.addresses[a] {
			into.addresses[a] = true
		} else {
			delete(into.addresses, a)
		}
		t.Addresses[a] = true
	}
	for e := range r.compared.Entries {
		takeEntry(into, live, e.Set, e.Entry)
		t.Entries[e] = true
	}
	return true
}

// takeEntry makes set's member e in into what it is in live.
func takeEntry(into, live *kernelView, set string, e ipset.Entry) {
	have, want := into.sets[set], live.sets[set]
	if have == nil || want == nil {
		return // a set the read did not find, or the live view lost: the sync compares it
	}
	if want.Has(e) {
		have.Put(e, struct{}{})
	} else {
		have.Delete(e)
	}
}

// takeRead makes the re-check's read the view, as readKernel does with a
// read of its own: the outcome of the read, completed with what partial
// syncs did since it began. False when it failed (the next sync reads
// again, in the loop) or must be redone.
func (p *Proxier) takeRead(r *recheckRead, t ipvsproxy.Touched, res *SyncResult) bool {
	if r.err != nil {
		klog.ErrorS(r.err, "Reading the kernel state failed; retrying at the next sync")
		res.WriteErrors[string(snapshot.ObjectRead)]++
		p.needFull = true
		p.objects.failed(namedID(snapshot.ObjectRead, "kernel state"), r.err, res.Start)
		return false
	}
	if !r.takeInto(r.view, p.view, t) {
		klog.V(2).InfoS("A partial sync changed an owned set or a route during the re-check's read; reading again")
		p.needFull = true
		return false
	}
	r.view.completeAgainst(p.desired)
	p.objects.done(namedID(snapshot.ObjectRead, "kernel state"))
	p.ownedBeforeFailedRead = nil
	p.view = r.view
	res.RealServerReads = r.view.realServerReads
	return true
}
