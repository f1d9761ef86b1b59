package proxier

import (
	"errors"
	"fmt"
	"iter"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/rules"
	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"

	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"github.com/ipvsproxy/ipvsproxy/internal/adapters"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// writeError is one failed kernel write, kept for metrics and the log.
type writeError struct {
	object string // a snapshot.ObjectKind
	err    error
	// family is set for writes of one family's rules (iptables).
	family v1.IPFamily
}

// reconciler is the only writer of kernel objects. Its loop (run) writes
// the difference between the desired state and the kernel view for the
// touched objects through each kind's operations (operations.go), which
// keep the view in step with what they wrote; every outcome goes through
// settle, the one writer of the per-object status (objstatus.go). It never
// stops at a failure: every other object is still written, and the failed
// one is retried on its own backoff.
type reconciler struct {
	k   adapters.Kernel
	cfg ipvsproxy.Config
	// nodePodCIDRs are this Node's spec.podCIDRs: the rules depend on them
	// under --detect-local-mode NodeCIDR.
	nodePodCIDRs []netip.Prefix
	desired      *ipvsproxy.DesiredState
	view         *kernelView
	draining     map[ipvs.VirtualServerKey]map[ipvs.RealServerKey]time.Time
	status       *statusTable
	// retries says which objects are due and which back off (objstatus.go).
	retries retryQueue
	now     time.Time
	// full is set on a full sync: the view was just read.
	full bool
	// touched are the objects this sync compares; run owns the set. On a
	// full sync scope adds every other object to them (fullscope.go).
	touched ipvsproxy.Touched
	scope   *fullScope
	writes  int
	errs    []writeError
	// newlyFailed are the objects that entered the error state in this
	// sync: their Services get an Event.
	newlyFailed []objectID
	// staleFlows selects the UDP flows of the real servers this sync
	// deleted: their replies would come from an endpoint that is gone.
	staleFlows []conntrack.Filter
	// realServerWrites is room for one virtual server's real-server
	// writes, lent to each in turn.
	realServerWrites []ipvs.RealServerWrite
	// recordedAhead are the virtual servers of the group being created
	// whose ownership records were just added together (recordAhead).
	recordedAhead map[ipvs.VirtualServerKey]bool
	// dummyEnsured: kube-ipvs0 was ensured in this sync already.
	dummyEnsured bool
	// setSizes are how many members each owned set is to hold (from the
	// admission count); a set created by this sync is sized for them.
	setSizes map[string]int
	// hold, while on, keeps what no Service wants (emptyworld.go).
	hold *deletionHold
	// appliedRules remembers, per family, the rules text last written whole
	// (reconcile_rules.go).
	appliedRules map[v1.IPFamily]string
	// found is what the writes found that the model decides with, until
	// handed over (takeFound).
	found ipvsproxy.Observed
	// yield, when set (partial syncs), is asked between writes whether
	// this sync has written for writeSlice while newer changes wait. Once
	// it says so the writes stop (interrupted) and the rest is carried to
	// the next sync, which writes the newer changes first: no Service's
	// writes, however many, hold another's for longer than a slice.
	yield       func() bool
	interrupted bool
	sinceAsked  int
	// carried are the keys an interrupted sync left, compared once this
	// sync's own are written.
	carried ipvsproxy.Touched
	// newerWait, set on every sync but writeTakenIn's, is yield's question
	// for the real servers of one virtual server: a Service of 100,000
	// endpoints is one key whose writes take minutes under emulation (the
	// kernel looks each new real server up in its virtual server's list).
	// Once it says so between two chunks, the rest of that virtual
	// server's real servers is deferred to the next sync, a full sync's
	// too; deferred are those virtual servers.
	newerWait func() bool
	deferred  []ipvs.VirtualServerKey
}

// writeSlice is how long a partial sync writes before newer changes,
// if any wait, are taken in first. A sync that starts the node (full)
// writes through.
const writeSlice = time.Second

// askYieldEvery is how many keys the writer looks at between two
// questions to yield; yieldingBatch how many it hands a batched write at
// most when it may yield (writeBatch otherwise), so that a question comes
// between batches.
const (
	askYieldEvery = 16
	yieldingBatch = 64
)

// realServerChunk is how many real servers of one virtual server are
// written between two questions to newerWait.
const realServerChunk = 64

// addKeys adds the keys from compares to those into compares.
func addKeys(into, from ipvsproxy.Touched) {
	maps.Copy(into.VirtualServers, from.VirtualServers)
	maps.Copy(into.Addresses, from.Addresses)
	maps.Copy(into.Entries, from.Entries)
}

// noKeys reports whether t holds no key to compare.
func noKeys(t ipvsproxy.Touched) bool {
	return len(t.VirtualServers) == 0 && len(t.Addresses) == 0 && len(t.Entries) == 0
}

// batchSize is how many keys a batched write takes.
func (r *reconciler) batchSize() int {
	if r.yield != nil {
		return yieldingBatch
	}
	return writeBatch
}

// yielding reports whether the writes stop here for newer changes.
func (r *reconciler) yielding() bool {
	if r.interrupted || r.yield == nil {
		return r.interrupted
	}
	if r.sinceAsked++; r.sinceAsked < askYieldEvery {
		return false
	}
	r.sinceAsked = 0
	r.interrupted = r.yield()
	return r.interrupted
}

// rulesText is the iptables-restore input of family as this sync wants it.
func (r *reconciler) rulesText(family v1.IPFamily) string {
	return rules.IPTables(r.cfg, family, ipvsproxy.NewLocalDetector(r.cfg, family, r.nodePodCIDRs))
}

// fail records a failed write. The adapters' errors already name the
// operation and the object.
func (r *reconciler) fail(id objectID, err error) { r.failIn("", id, err) }

// failIn is fail for a write of one family's objects (its rules), counted
// under that family.
func (r *reconciler) failIn(family v1.IPFamily, id objectID, err error) {
	klog.ErrorS(err, "Kernel write failed; retrying with backoff", "object", id.String())
	r.errs = append(r.errs, writeError{object: string(id.objectKind()), err: err, family: family})
	if r.status.failed(id, err, r.now) {
		r.newlyFailed = append(r.newlyFailed, id)
	}
}

// settle records the outcome of an object's operation: done (nil),
// pending (it waits for something it needs), or failed.
func (r *reconciler) settle(id objectID, err error) {
	if err == nil {
		// The common case, without the allocation errors.As costs.
		r.status.done(id)
		return
	}
	var waiting pendingError
	if errors.As(err, &waiting) {
		r.status.pending(id, waiting.why, r.now)
		return
	}
	r.fail(id, err)
}

// run is one sync's writer loop. The touched set starts as what the build
// changed; the loop adds what is its own to decide. On a full sync (the
// view was just read) that is every object, except those still backing off
// that no change touched (a failing object costs one write per backoff).
// On a partial sync it is the objects whose retry is due and, every period
// with --ipvs-resync-shares, the share due for its re-check, their virtual
// servers read back first (refresh, resync.go). Then it applies, restores
// the rules and drains. It returns how many virtual servers the re-check
// read back, and what the writes found that the model decides with
// (someone else's virtual server in the way, the routes in place).
func (r *reconciler) run(t ipvsproxy.Touched, share int) (resynced int, found ipvsproxy.Observed) {
	if r.full {
		r.scope = newFullScope(r.view, r.desired, t, r.retries.waiting(), r.status)
		adoptDraining(r.view, r.desired, r.draining, r.now.Add(r.cfg.DrainTimeout))
	} else {
		resynced = r.refresh(t, share)
	}
	r.touched = t
	r.apply(t)
	r.syncRules()
	r.drain()
	return resynced, r.takeFound()
}

// writeTakenIn writes what the model changed on taking in what this sync's
// writes found (t holds those objects alone), as apply writes any object,
// and returns what these writes found in turn. The objects count as
// compared by this sync (comparedContested, the re-check's notePartialSync).
func (r *reconciler) writeTakenIn(t ipvsproxy.Touched) ipvsproxy.Observed {
	scope, carried, yield, interrupted, newerWait := r.scope, r.carried, r.yield, r.interrupted, r.newerWait
	// These keys only, on a full sync too, and all of them.
	r.scope, r.carried, r.yield, r.interrupted, r.newerWait = nil, ipvsproxy.Touched{}, nil, false, nil
	r.writeObjects(t)
	r.scope, r.carried, r.yield, r.interrupted, r.newerWait = scope, carried, yield, interrupted, newerWait
	addKeys(r.touched, t)
	return r.takeFound()
}

// takeFound hands over what the writes found since the last call.
func (r *reconciler) takeFound() ipvsproxy.Observed {
	found := r.found
	r.found = ipvsproxy.Observed{}
	return found
}

// apply is the writer loop of a sync: it runs each object kind's
// operations (operations.go) over the touched objects and settles every
// object's status. The order never leaves traffic without a path: the sets
// and the link first, on a full sync the Service CIDR routes (routes.go),
// then addresses and set members that new virtual servers need, then the
// virtual servers (those that go first), removals last, the routes after
// the addresses they stop needing. It changes the kernel, the view and the
// status, never the desired state: what it found that the model decides
// with (a route not in place, someone else's virtual server in the way)
// it notes in r.found, for the model to take in.
func (r *reconciler) apply(t ipvsproxy.Touched) {
	routes := r.routeOps()
	if r.full || r.retries.kindDue(snapshot.ObjectSetEntry) {
		defs, order := r.ownedSets()
		sets := r.setOps(defs)
		// A set of the wrong type is replaced once the missing ones are
		// there: replacing restores rules that reference all of them.
		for _, w := range updateAll(r, sets, slices.Values(order)) {
			var wrong wrongTypeError
			errors.As(w.err, &wrong)
			r.settle(sets.id(w.key), r.replaceSet(wrong))
		}
	}
	r.ensureDummy()
	if r.full {
		r.addAnchors()
		updateAll(r, routes, slices.Values(r.desired.Routes))
		r.noteRoutes()
	}
	r.writeObjects(t)
	if !r.interrupted && !noKeys(r.carried) {
		// What a sync that yielded left, after this sync's own changes
		// have all been written: every pass of those first.
		r.writeObjects(r.carried)
	}
	if r.interrupted {
		return
	}
	// A Service CIDR stops being local once its cluster IPs are bound.
	deleteAll(r, routes, r.routesDue())
}

// writeObjects writes the touched addresses, set members and virtual
// servers, in apply's order.
func (r *reconciler) writeObjects(t ipvsproxy.Touched) {
	addresses, entries, virtualServers := r.addressOps(), r.entryOps(), r.virtualServerOps()
	// Each pass runs only once those before it ran through: an interrupted
	// sync never writes a virtual server before the members and addresses
	// it needs.
	if updateAll(r, addresses, passKeys(r, t.Addresses, (*fullScope).addressesToAdd)); r.interrupted {
		return
	}
	// A set at its maxelem takes a new member only once the members this
	// sync removes are gone (the admission keeps the total within it): such
	// an add waits for the deletions below, and virtual servers that go are
	// removed first, with their ownership records.
	waitForRoom := updateAll(r, entries, passKeys(r, t.Entries, (*fullScope).entriesToAdd))
	if r.interrupted {
		return
	}
	if deleteAll(r, virtualServers, passKeys(r, t.VirtualServers, (*fullScope).virtualServersToRemove)); r.interrupted {
		return
	}
	foreign := updateAll(r, virtualServers, passKeys(r, t.VirtualServers, (*fullScope).virtualServersToUpdate))
	// A virtual server someone else made in the way wins its key: the
	// model makes the Service that wanted it lose it, and the members and
	// addresses it counted for are removed, in this sync.
	for _, found := range foreign {
		var f foreignError
		errors.As(found.err, &f)
		if f.undo != nil {
			r.fail(vsID(found.key), f.undo)
		}
		r.settle(vsID(found.key), nil) // someone else's: nothing of ours to retry
		r.found.FoundForeign = append(r.found.FoundForeign, found.key)
	}
	if r.interrupted {
		return
	}
	if deleteAll(r, entries, passKeys(r, t.Entries, (*fullScope).entriesToRemove)); r.interrupted {
		return
	}
	for _, k := range waitForRoom {
		r.settle(entries.id(k.key), entries.update(k.key))
	}
	deleteAll(r, addresses, passKeys(r, t.Addresses, (*fullScope).addressesToRemove))
}

// ensureDummy creates kube-ipvs0 when the view was just read or an address
// is due for a retry (creating an existing link is no write).
func (r *reconciler) ensureDummy() {
	if r.dummyEnsured || !r.full && !r.retries.kindDue(snapshot.ObjectAddress) {
		return
	}
	r.dummyEnsured = true
	var err error
	if e := r.k.Netif.EnsureDummy(); e != nil {
		err = fmt.Errorf("ensure %s: %w", owned.DummyInterface, e)
	}
	r.settle(namedID(snapshot.ObjectAddress, owned.DummyInterface), err)
}

// removeRealServers deletes real servers that no endpoint backs any more.
// A TCP one with connections is set to weight 0 instead and deleted by
// drain once they end: established connections finish, new ones go
// elsewhere. UDP and SCTP ones go at once, as in kube-proxy. With
// activeOnly (a deleted Service) only established connections count: the
// closing ones (FIN_WAIT, TIME_WAIT, CLOSE) would keep it for minutes with
// nothing left to carry.
func (r *reconciler) removeRealServers(have *kernelVirtualServer, gone []ipvs.RealServerKey, activeOnly bool) []error {
	k := have.vs.VirtualServerKey
	var errs []error
	if k.Protocol == ipvs.TCP {
		// Fresh connection counts: the view's may be a sync old.
		if current, err := r.k.IPVS.RealServers(k); err == nil {
			for _, rs := range current {
				if _, ok := have.realServer(rs.RealServerKey); ok {
					have.putRealServer(rs)
				}
			}
		}
	}
	for _, key := range gone {
		rs, _ := have.realServer(key)
		if k.Protocol == ipvs.TCP && liveConnections(rs, activeOnly) > 0 {
			if r.draining[k] == nil {
				r.draining[k] = map[ipvs.RealServerKey]time.Time{}
			}
			if _, ok := r.draining[k][key]; !ok {
				r.draining[k][key] = r.now.Add(r.cfg.DrainTimeout)
			}
			if rs.Weight != 0 {
				r.writes++
				rs.Weight = 0
				if err := r.k.IPVS.UpdateRealServer(k, rs); err != nil {
					errs = append(errs, err)
					continue
				}
				have.putRealServer(rs)
			}
			continue
		}
		if err := r.deleteRealServer(have, key); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// drainsVirtualServer sets every real server of an unwanted TCP virtual
// server that still has connections to weight 0 (removeRealServers) and
// reports whether any is left draining; those without connections go.
// Failed writes are added to errs.
func (r *reconciler) drainsVirtualServer(have *kernelVirtualServer, errs *[]error) bool {
	if have == nil || have.vs.Protocol != ipvs.TCP || r.cfg.DrainTimeout <= 0 {
		return false
	}
	k := have.vs.VirtualServerKey
	gone := make([]ipvs.RealServerKey, 0, have.realServerCount())
	for rs := range have.eachRealServer() {
		gone = append(gone, rs.RealServerKey)
	}
	*errs = append(*errs, r.removeRealServers(have, gone, true)...)
	return len(r.draining[k]) > 0
}

// liveConnections counts what keeps a draining real server: its active and
// inactive connections, as kube-proxy, or the active ones only.
func liveConnections(rs ipvs.RealServer, activeOnly bool) int {
	if activeOnly {
		return int(rs.ActiveConnections)
	}
	return int(rs.ActiveConnections) + int(rs.InactiveConnections)
}

func (r *reconciler) deleteRealServer(have *kernelVirtualServer, key ipvs.RealServerKey) error {
	k := have.vs.VirtualServerKey
	r.writes++
	if err := r.k.IPVS.DeleteRealServer(k, key); err != nil && !errors.Is(err, ipvs.ErrNotFound) {
		return err
	}
	have.removeRealServer(key)
	if k.Protocol == ipvs.UDP {
		r.staleFlows = append(r.staleFlows, conntrack.Filter{Protocol: conntrack.UDP, OrigDst: k.Address, OrigDstPort: k.Port, ReplySrc: key.Address, ReplySrcPort: key.Port})
	}
	if d := r.draining[k]; d != nil {
		delete(d, key)
		if len(d) == 0 {
			delete(r.draining, k)
		}
	}
	return nil
}

// drain deletes draining real servers whose connections have ended or
// whose time is up. It reads only the virtual servers that have some.
func (r *reconciler) drain() {
	for k, rss := range r.draining {
		have := r.view.virtualServers[k]
		if have == nil {
			delete(r.draining, k)
			continue
		}
		current, err := r.k.IPVS.RealServers(k)
		if err != nil {
			r.fail(vsID(k), fmt.Errorf("list real servers of %s to drain: %w", k, err))
			continue
		}
		serviceGone := r.desired.VirtualServer(k) == nil
		conns := map[ipvs.RealServerKey]int{}
		for _, rs := range current {
			conns[rs.RealServerKey] = liveConnections(rs, serviceGone)
		}
		for key, deadline := range rss {
			if n, ok := conns[key]; !ok || n == 0 || !r.now.Before(deadline) {
				if err := r.deleteRealServer(have, key); err != nil {
					r.fail(vsID(k), err)
				}
			}
		}
		if r.draining[k] == nil && serviceGone {
			// The last connection of a deleted Service's virtual server
			// ended (or its time is up): the virtual server goes too.
			r.settle(vsID(k), r.deleteVirtualServer(k))
		}
	}
}

// flushConntrack deletes the stale UDP flows the filters select, one pass
// per family so that deletions, time and failures are each counted under
// their own family (kube-proxy's conntrack reconciler metrics); on failure
// they are returned to be retried.
func (r *reconciler) flushConntrack(filters []conntrack.Filter, res *SyncResult) (retry []conntrack.Filter) {
	if len(filters) == 0 || r.k.Conntrack == nil {
		return nil
	}
	id := namedID(snapshot.ObjectConntrack, "stale UDP flows")
	var errs []error
	for _, family := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
		fs := filtersOf(filters, family)
		if len(fs) == 0 {
			continue
		}
		start := time.Now()
		n, err := r.k.Conntrack.DeleteFlows(fs...)
		res.addConntrack(family, ConntrackPass{Deleted: n, Duration: time.Since(start), Failed: err != nil})
		if err != nil {
			errs = append(errs, fmt.Errorf("delete stale %s UDP conntrack flows: %w", family, err))
			retry = append(retry, fs...)
		}
	}
	if len(errs) > 0 {
		r.fail(id, errors.Join(errs...))
		slices.SortFunc(retry, ipvsproxy.CompareFilters)
		return slices.Compact(retry)
	}
	r.settle(id, nil)
	return nil
}

// reconcileConntrack deletes the UDP flows to a virtual server whose reply
// source is none of its real servers (conntrack_reconcile.go).
func (r *reconciler) reconcileConntrack(c *conntrackReconciler, res *SyncResult) {
	if r.k.Conntrack == nil {
		return
	}
	id := namedID(snapshot.ObjectConntrack, "UDP flow reconcile")
	passes, err := c.run(r.k.Conntrack, r.desired, r.cfg.Families)
	for family, pass := range passes {
		res.addConntrack(family, pass)
	}
	if err != nil {
		r.fail(id, err)
		return
	}
	r.settle(id, nil)
}

// drainingCount is the number of real servers at weight 0 waiting.
func drainingCount(d map[ipvs.VirtualServerKey]map[ipvs.RealServerKey]time.Time) int {
	n := 0
	for _, rss := range d {
		n += len(rss)
	}
	return n
}

// adoptDraining treats owned real servers that the kernel holds at weight 0
// and nobody wants as draining: after a restart they finish as they would
// have.
func adoptDraining(view *kernelView, desired *ipvsproxy.DesiredState, draining map[ipvs.VirtualServerKey]map[ipvs.RealServerKey]time.Time, deadline time.Time) {
	for k, kvs := range view.virtualServers {
		// A list the read found in step (shared) holds only wanted real
		// servers. The scan of the others first: it is cheaper than the
		// lookup of the desired state, and almost never finds one.
		if kvs.shared() || k.Protocol != ipvs.TCP || !hasWeightZero(*kvs.realServers) {
			continue
		}
		want := desired.VirtualServer(k)
		if want == nil {
			continue
		}
		for _, rs := range *kvs.realServers {
			key := rs.RealServerKey
			if rs.Weight == 0 && !want.RealServers.Contains(key) {
				if draining[k] == nil {
					draining[k] = map[ipvs.RealServerKey]time.Time{}
				}
				if _, ok := draining[k][key]; !ok {
					draining[k][key] = deadline
				}
			}
		}
	}
}

func hasWeightZero(rss realServerList) bool {
	for _, rs := range rss {
		if rs.Weight == 0 {
			return true
		}
	}
	return false
}

// passKeys are the keys a pass of apply looks at: on a partial sync the
// touched ones, on a full sync every object's, as the scope yields them
// (fullScope).
func passKeys[K comparable](r *reconciler, touched map[K]bool, full func(*fullScope) iter.Seq[K]) iter.Seq[K] {
	if r.scope == nil {
		return maps.Keys(touched)
	}
	return full(r.scope)
}

// comparedContested are the virtual servers this sync compared that a
// Service may have lost (Conflicts).
func (r *reconciler) comparedContested() iter.Seq[ipvs.VirtualServerKey] {
	return passKeys(r, r.touched.VirtualServers, (*fullScope).contestedVirtualServers)
}
