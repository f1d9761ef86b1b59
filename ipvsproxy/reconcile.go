package ipvsproxy

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/ipvsproxy/ipvsproxy/ipvs"
	"github.com/ipvsproxy/ipvsproxy/netif"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// writeError is one failed kernel write, kept for metrics and the log.
type writeError struct {
	object string // an ObjectKind
	err    error
	// family is set for writes of one family's rules (iptables).
	family v1.IPFamily
}

// reconciler is the only writer of kernel objects. It writes the
// difference between the desired state and the kernel view for the touched
// objects, keeps the view in step with what it wrote, and keeps a status per
// object (status.go). It never stops at a failure: every other object is
// still written, and the failed one is retried on its own backoff.
type reconciler struct {
	k   Kernel
	cfg Config
	// nodePodCIDRs are this Node's spec.podCIDRs: the rules depend on them
	// under --detect-local-mode NodeCIDR.
	nodePodCIDRs []netip.Prefix
	desired      *desiredState
	view         *kernelView
	draining     map[ipvs.VirtualServerKey]map[ipvs.RealServerKey]time.Time
	status       *statusTable
	// retries says which objects are due and which back off (objstatus.go).
	retries retryQueue
	now     time.Time
	// full is set on a full sync: the view was just read.
	full   bool
	writes int
	errs   []writeError
	// newlyFailed are the objects that entered the error state in this
	// sync: their Services get an Event.
	newlyFailed []objectID
	// staleFlows selects the UDP flows of the real servers this sync
	// deleted: their replies would come from an endpoint that is gone.
	staleFlows []conntrack.Filter
	// dummyEnsured: kube-ipvs0 was ensured in this sync already.
	dummyEnsured bool
	// setSizes are how many members each owned set is to hold (from the
	// admission count); a set created by this sync is sized for them.
	setSizes map[string]int
	// hold, while on, keeps what no Service wants (emptyworld.go).
	hold *deletionHold
}

// rulesText is the iptables-restore input of family as this sync wants it.
func (r *reconciler) rulesText(family v1.IPFamily) string {
	return iptablesRules(r.cfg, family, newLocalDetector(r.cfg, family, r.nodePodCIDRs))
}

// fail records a failed write. The adapters' errors already name the
// operation and the object.
func (r *reconciler) fail(id objectID, err error) { r.failIn("", id, err) }

// failIn is fail for a write of one family's objects (its rules), counted
// under that family.
func (r *reconciler) failIn(family v1.IPFamily, id objectID, err error) {
	klog.ErrorS(err, "Kernel write failed; retrying with backoff", "object", id.String())
	r.errs = append(r.errs, writeError{object: string(id.kind), err: err, family: family})
	if r.status.failed(id, err, r.now) {
		r.newlyFailed = append(r.newlyFailed, id)
	}
}

// settle records the outcome of an object's writes.
func (r *reconciler) settle(id objectID, err error) {
	if err != nil {
		r.fail(id, err)
		return
	}
	r.status.done(id)
}

// apply writes in an order that never leaves traffic without a path: the
// sets and the link first, then addresses, Service CIDR routes and set
// members that new virtual servers need, then the virtual servers, removals
// last.
func (r *reconciler) apply(t touched) {
	r.ensureSets()
	r.ensureDummy()
	for a := range t.addresses {
		if r.desired.addrRefs[a] > 0 {
			r.addAddress(a)
		}
	}
	// A set at its maxelem takes a new member only once the members this
	// sync removes are gone (the admission keeps the total within it): such
	// an add waits for the deletions below, and virtual servers that go are
	// removed first, with their ownership records.
	var waitForRoom []setEntryKey
	for k := range t.entries {
		if r.desired.entryRefs[k] > 0 && !r.addEntry(k, true) {
			waitForRoom = append(waitForRoom, k)
		}
	}
	for k := range t.virtualServers {
		if r.desired.virtualServer(k) == nil {
			r.reconcileVirtualServer(k)
		}
	}
	var foreign []ipvs.VirtualServerKey
	for k := range t.virtualServers {
		if r.desired.virtualServer(k) != nil && r.reconcileVirtualServer(k) {
			foreign = append(foreign, k)
		}
	}
	// A virtual server someone else made in the way wins its key: the
	// Service that wanted it loses it, and the members and addresses it
	// counted for are removed below with the others nobody wants.
	for _, k := range foreign {
		r.desired.setForeign(k, true, t)
	}
	for k := range t.entries {
		if r.desired.entryRefs[k] == 0 {
			r.deleteEntry(k)
		}
	}
	for _, k := range waitForRoom {
		r.addEntry(k, false)
	}
	for a := range t.addresses {
		if r.desired.addrRefs[a] == 0 {
			// Nothing in --ipvs-exclude-cidrs is removed, wanted or not.
			if !r.view.addresses[a] || r.cfg.excluded(a) {
				r.status.done(addrID(a))
				continue
			}
			if r.holds(addrID(a)) {
				continue
			}
			r.writes++
			err := r.k.Netif.DeleteDummyAddress(a)
			if err == nil || errors.Is(err, netif.ErrNotFound) {
				delete(r.view.addresses, a)
				err = nil
			}
			r.settle(addrID(a), err)
		}
	}
	// A Service CIDR stops being local once its cluster IPs are bound.
	r.removeServiceRoutes()
}

// addAddress binds a on kube-ipvs0 unless the view has it.
func (r *reconciler) addAddress(a netip.Addr) {
	if r.view.addresses[a] {
		r.status.done(addrID(a))
		return
	}
	r.writes++
	err := r.k.Netif.AddDummyAddress(a)
	if err == nil || errors.Is(err, netif.ErrExists) {
		r.view.addresses[a] = true
		err = nil
	}
	r.settle(addrID(a), err)
}

// ensureDummy creates kube-ipvs0 when the view was just read (creating an
// existing link is no write).
func (r *reconciler) ensureDummy() {
	if r.dummyEnsured || !r.full && !r.retries.kindDue(ObjectAddress) {
		return
	}
	r.dummyEnsured = true
	id := namedID(ObjectAddress, DummyInterface)
	if err := r.k.Netif.EnsureDummy(); err != nil {
		r.fail(id, fmt.Errorf("ensure %s: %w", DummyInterface, err))
		return
	}
	r.status.done(id)
}

// addEntry adds k unless the view has it. With waitIfFull, a set found full
// is not an error yet: it returns false, and the caller adds k again once
// this sync's deletions made room.
func (r *reconciler) addEntry(k setEntryKey, waitIfFull bool) bool {
	id := entryID(k)
	members, ok := r.view.sets[k.set]
	if !ok {
		r.status.pending(id, fmt.Errorf("ipset %s is not present", k.set), r.now)
		return true
	}
	if members[k.entry] {
		r.status.done(id)
		return true
	}
	r.writes++
	err := r.k.IPSet.AddEntry(k.set, k.entry)
	switch {
	case err == nil || errors.Is(err, ipset.ErrExists):
		members[k.entry] = true
		err = nil
	case errors.Is(err, ipset.ErrNotFound):
		r.setVanished(k.set)
	case errors.Is(err, ipset.ErrFull) && waitIfFull:
		return false
	}
	r.settle(id, err)
	return true
}

func (r *reconciler) deleteEntry(k setEntryKey) {
	id := entryID(k)
	if !r.view.sets[k.set][k.entry] {
		r.status.done(id)
		return
	}
	if r.holds(id) {
		return
	}
	r.writes++
	err := r.k.IPSet.DeleteEntry(k.set, k.entry)
	if err == nil || errors.Is(err, ipset.ErrNotFound) {
		delete(r.view.sets[k.set], k.entry)
		err = nil
	}
	r.settle(id, err)
}

// setVanished: someone destroyed an owned set; it is re-created at the next
// sync and its members re-added.
func (r *reconciler) setVanished(name string) {
	delete(r.view.sets, name)
	r.status.pending(namedID(ObjectSetEntry, name), fmt.Errorf("ipset %s vanished", name), r.now)
}

// record writes the ownership record of k, before its virtual server is
// created (ownership.go).
func (r *reconciler) record(k ipvs.VirtualServerKey) error {
	e := recordEntry(k)
	members, ok := r.view.sets[e.Set]
	if !ok {
		return fmt.Errorf("record %s as ours: ipset %s is not present", k, e.Set)
	}
	if members[e.Entry] {
		return nil
	}
	r.writes++
	if err := r.k.IPSet.AddEntry(e.Set, e.Entry); err != nil && !errors.Is(err, ipset.ErrExists) {
		if errors.Is(err, ipset.ErrNotFound) {
			r.setVanished(e.Set)
		}
		return fmt.Errorf("record %s as ours: %w", k, err)
	}
	members[e.Entry] = true
	return nil
}

// unrecord removes the ownership record of k, after its virtual server is
// gone.
func (r *reconciler) unrecord(k ipvs.VirtualServerKey) error {
	e := recordEntry(k)
	if !r.view.sets[e.Set][e.Entry] {
		return nil
	}
	r.writes++
	if err := r.k.IPSet.DeleteEntry(e.Set, e.Entry); err != nil && !errors.Is(err, ipset.ErrNotFound) {
		return fmt.Errorf("remove the record of %s: %w", k, err)
	}
	delete(r.view.sets[e.Set], e.Entry)
	return nil
}

// reconcileVirtualServer makes the kernel's virtual server k match the
// desired one (or removes it), with its ownership record. It reports
// whether it found someone else's virtual server at k instead (foreignFound);
// the desired state is the caller's to change.
func (r *reconciler) reconcileVirtualServer(k ipvs.VirtualServerKey) (foreign bool) {
	id := vsID(k)
	if r.view.foreign[k] {
		// Someone else's: never adopted, rewritten or emptied. Its
		// Service has a PortConflict problem instead.
		r.status.done(id)
		return
	}
	want := r.desired.virtualServer(k)
	have := r.view.virtualServers[k]
	var errs []error
	switch {
	case want == nil && have == nil:
		// A record without a virtual server: a crash between the two
		// steps, or a virtual server someone deleted.
		r.settle(id, r.unrecord(k))
		return
	case want == nil && r.cfg.excluded(k.Address):
		// --ipvs-exclude-cidrs: never cleaned up, whoever made it. Nothing
		// is wanted of it any more, so a failure of an earlier write to it
		// is over too.
		r.status.done(id)
		return
	case want == nil && r.holds(id):
		// Kept, with its real servers and its record, until the Service
		// list is believed again.
		return
	case want == nil && r.drainsVirtualServer(have, &errs):
		// The Service (port) is gone but TCP connections are open: they
		// finish at weight 0 instead of being cut (kube-proxy cuts them,
		// kubernetes#71894); drain deletes it once they end or time is up.
		r.settle(id, errors.Join(errs...))
		return
	case want == nil:
		// The Service (port) is gone and nothing is left to drain.
		r.writes++
		if err := r.k.IPVS.DeleteVirtualServer(k); err != nil && !errors.Is(err, ipvs.ErrNotFound) {
			r.fail(id, err)
			return
		}
		delete(r.view.virtualServers, k)
		delete(r.draining, k)
		r.settle(id, r.unrecord(k))
		return
	case have == nil:
		// Between a full read and now someone may have created it: look
		// before recording, so a foreign one is never recorded as ours.
		// One that is recorded is ours (our create went through, or the
		// view lost it): take it back into the view.
		recorded := r.view.isRecorded(k)
		if !r.full || recorded {
			if rss, err := r.k.IPVS.RealServers(k); err == nil {
				if !recorded {
					r.foreignFound(k)
					return true
				}
				have = &kernelVirtualServer{vs: ipvs.VirtualServer{VirtualServerKey: k}, realServers: newRealServerList(rss)}
				r.view.virtualServers[k] = have
				break
			}
		}
		if err := r.record(k); err != nil {
			r.fail(id, err)
			return
		}
		r.writes++
		if err := r.k.IPVS.AddVirtualServer(want.VirtualServer); err != nil {
			if errors.Is(err, ipvs.ErrExists) {
				if uerr := r.unrecord(k); uerr != nil {
					r.fail(id, uerr)
				}
				r.foreignFound(k)
				return true
			}
			r.fail(id, err)
			return
		}
		have = &kernelVirtualServer{vs: want.VirtualServer, realServers: make(realServerList, 0, len(want.RealServers))}
		r.view.virtualServers[k] = have
	}
	if !r.view.isRecorded(k) {
		// Adopted from an older version (ownership.go: legacy).
		if err := r.record(k); err != nil {
			errs = append(errs, err)
		}
	}
	if len(VirtualServerChanges(have.vs, want.VirtualServer)) != 0 {
		r.writes++
		if err := r.k.IPVS.UpdateVirtualServer(want.VirtualServer); err != nil {
			r.fail(id, err)
			return
		}
		have.vs = want.VirtualServer
	}
	// want.RealServers has no repeats: when have holds only wanted ones,
	// nothing is to be removed and no set of them is needed (a full sync
	// compares every virtual server).
	if sameRealServers(have.realServers, want.RealServers) {
		// The common case of a full sync: nothing to write.
		if d := r.draining[k]; d != nil {
			for _, rs := range want.RealServers {
				delete(d, rs.RealServerKey)
			}
		}
		r.settle(id, errors.Join(errs...))
		return
	}
	present := 0
	for _, rs := range want.RealServers {
		cur, ok := have.realServers.get(rs.RealServerKey)
		switch {
		case !ok:
			r.writes++
			if err := r.k.IPVS.AddRealServer(k, rs); err != nil && !errors.Is(err, ipvs.ErrExists) {
				errs = append(errs, err)
				continue
			}
		case cur.Weight != rs.Weight:
			// Also revives an endpoint that was draining and came back.
			r.writes++
			if err := r.k.IPVS.UpdateRealServer(k, rs); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		present++ // now in have
		have.realServers.put(rs)
		if d := r.draining[k]; d != nil {
			delete(d, rs.RealServerKey)
		}
	}
	if present != len(have.realServers) {
		var gone []ipvs.RealServerKey
		for _, rs := range have.realServers {
			if !wants(want.RealServers, rs.RealServerKey) {
				gone = append(gone, rs.RealServerKey)
			}
		}
		errs = append(errs, r.removeRealServers(have, gone, false)...)
	}
	r.settle(id, errors.Join(errs...))
	return false
}

// foreignFound: the kernel holds someone else's virtual server at k. The
// view says so; the caller makes the Service that wanted it lose it.
func (r *reconciler) foreignFound(k ipvs.VirtualServerKey) {
	klog.InfoS("A virtual server ipvsproxy did not create is in the way; leaving it as it is", "virtualServer", k)
	r.view.foreign[k] = true
	r.status.done(vsID(k))
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
				if _, ok := have.realServers.get(rs.RealServerKey); ok {
					have.realServers.put(rs)
				}
			}
		}
	}
	for _, key := range gone {
		rs, _ := have.realServers.get(key)
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
				have.realServers.put(rs)
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
	gone := make([]ipvs.RealServerKey, 0, len(have.realServers))
	for _, rs := range have.realServers {
		gone = append(gone, rs.RealServerKey)
	}
	*errs = append(*errs, r.removeRealServers(have, gone, true)...)
	return len(r.draining[k]) > 0
}

// liveConnections counts what keeps a draining real server: its active and
// inactive connections, as kube-proxy, or the active ones only.
func liveConnections(rs ipvs.RealServer, activeOnly bool) int {
	if activeOnly {
		return rs.ActiveConnections
	}
	return rs.ActiveConnections + rs.InactiveConnections
}

func (r *reconciler) deleteRealServer(have *kernelVirtualServer, key ipvs.RealServerKey) error {
	k := have.vs.VirtualServerKey
	r.writes++
	if err := r.k.IPVS.DeleteRealServer(k, key); err != nil && !errors.Is(err, ipvs.ErrNotFound) {
		return err
	}
	have.realServers.remove(key)
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
		serviceGone := r.desired.virtualServer(k) == nil
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
			r.reconcileVirtualServer(k)
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
	id := namedID(ObjectConntrack, "stale UDP flows")
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
		slices.SortFunc(retry, compareFilters)
		return slices.Compact(retry)
	}
	r.status.done(id)
	return nil
}

// reconcileConntrack deletes the UDP flows to a virtual server whose reply
// source is none of its real servers (conntrack_reconcile.go).
func (r *reconciler) reconcileConntrack(c *conntrackReconciler, res *SyncResult) {
	if r.k.Conntrack == nil {
		return
	}
	id := namedID(ObjectConntrack, "UDP flow reconcile")
	passes, err := c.run(r.k.Conntrack, r.desired, r.cfg.Families)
	for family, pass := range passes {
		res.addConntrack(family, pass)
	}
	if err != nil {
		r.fail(id, err)
		return
	}
	r.status.done(id)
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
func adoptDraining(view *kernelView, desired *desiredState, draining map[ipvs.VirtualServerKey]map[ipvs.RealServerKey]time.Time, deadline time.Time) {
	for k, kvs := range view.virtualServers {
		want := desired.virtualServer(k)
		if want == nil || k.Protocol != ipvs.TCP || !hasWeightZero(kvs.realServers) {
			continue
		}
		for _, rs := range kvs.realServers {
			key := rs.RealServerKey
			if rs.Weight == 0 && !wants(want.RealServers, key) {
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
