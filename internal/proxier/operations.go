package proxier

import (
	"errors"
	"fmt"
	"iter"
	"net/netip"

	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	"k8s.io/klog/v2"
)

// operations are the writes of one kind of kernel object, in the shape of
// Cilium statedb's reconciler.Operations: update makes the kernel hold the
// desired object, delete removes one nobody wants. Both are idempotent (an
// object already as wanted, or already gone, is no write and no error),
// keep the kernel view in step with what they wrote, and return the outcome:
// nil (done), a pendingError (waiting for something it needs), or the
// failure. They never touch the status table, the touched set or the
// desired state: the loop (reconciler.apply) does, from the outcome.
type operations[K comparable] struct {
	id func(K) objectID
	// wanted: the desired state holds the object (update it, else delete).
	wanted func(K) bool
	update func(K) error
	delete func(K) error
	// later, when set, picks the outcomes of update that the loop acts on
	// after the pass instead of settling them (a full set, a foreign
	// virtual server).
	later func(error) bool
	// updateMany and deleteMany, when set, do what update and delete do
	// for several keys at once (fewer kernel messages) and return each
	// one's outcome; the loop settles them as update's and delete's.
	updateMany func([]K) []error
	deleteMany func([]K) []error
}

// writeBatch is how many keys updateAll and deleteAll hand updateMany and
// deleteMany at a time.
const writeBatch = 1024

// outcome is an object's key with what its operation returned.
type outcome[K comparable] struct {
	key K
	err error
}

// updateAll runs update on the wanted keys, in the order keys gives them,
// and settles each; it returns the outcomes ops.later picked, unsettled.
func updateAll[K comparable](r *reconciler, ops operations[K], keys iter.Seq[K]) (later []outcome[K]) {
	settle := func(k K, err error) {
		if err != nil && ops.later != nil && ops.later(err) {
			later = append(later, outcome[K]{k, err})
			return
		}
		settleKey(r, ops, k, err)
	}
	var batch []K
	flush := func() {
		for i, err := range ops.updateMany(batch) {
			settle(batch[i], err)
		}
		batch = batch[:0]
	}
	for k := range keys {
		if r.yielding() {
			break
		}
		if !ops.wanted(k) {
			continue
		}
		if ops.updateMany == nil {
			settle(k, ops.update(k))
			continue
		}
		if batch = append(batch, k); len(batch) == r.batchSize() {
			flush()
		}
	}
	if len(batch) > 0 {
		flush()
	}
	return later
}

// settleKey settles k's object. Its objectID (an interface value, boxed on
// the heap) is made only when the table has something to look at: a write
// that succeeds while no object is pending or failing, the usual full sync,
// has nothing to clear.
func settleKey[K comparable](r *reconciler, ops operations[K], k K, err error) {
	if err == nil && r.status.empty() {
		return
	}
	r.settle(ops.id(k), err)
}

// deleteAll runs delete on the keys nobody wants and settles each.
func deleteAll[K comparable](r *reconciler, ops operations[K], keys iter.Seq[K]) {
	var batch []K
	flush := func() {
		for i, err := range ops.deleteMany(batch) {
			settleKey(r, ops, batch[i], err)
		}
		batch = batch[:0]
	}
	for k := range keys {
		if r.yielding() {
			break
		}
		if ops.wanted(k) {
			continue
		}
		if ops.deleteMany == nil {
			settleKey(r, ops, k, ops.delete(k))
			continue
		}
		if batch = append(batch, k); len(batch) == r.batchSize() {
			flush()
		}
	}
	if len(batch) > 0 {
		flush()
	}
}

// pendingError is the outcome of an object that cannot be written yet: its
// set is missing, or its deletion is held (emptyworld.go). It is looked at
// again on the backoff.
type pendingError struct{ why error }

func (e pendingError) Error() string { return e.why.Error() }

// foreignError is the outcome of a virtual server found to be someone
// else's while creating it; undo is the failure to take back the ownership
// record written for it, if any.
type foreignError struct{ undo error }

func (e foreignError) Error() string {
	return "a virtual server ipvsproxy did not create holds the key"
}

// addressOps bind and unbind addresses on kube-ipvs0.
func (r *reconciler) addressOps() operations[netip.Addr] {
	return operations[netip.Addr]{
		id:         addrID,
		wanted:     func(a netip.Addr) bool { return r.desired.WantsAddress(a) },
		update:     r.addAddress,
		updateMany: r.addAddresses,
		delete:     r.deleteAddress,
		deleteMany: r.deleteAddresses,
	}
}

// addAddresses binds the addresses the view lacks together
// (netif.AddDummyAddresses: one link lookup, many per send), and returns
// each one's outcome as addAddress would.
func (r *reconciler) addAddresses(addrs []netip.Addr) []error {
	out := make([]error, len(addrs))
	var todo []netip.Addr
	var at []int
	for i, a := range addrs {
		if !r.view.addresses[a] {
			todo, at = append(todo, a), append(at, i)
		}
	}
	r.writes += len(todo)
	for j, err := range netif.AddDummyAddresses(r.k.Netif, todo) {
		if err == nil || errors.Is(err, netif.ErrExists) {
			r.view.addresses[todo[j]] = true
			continue
		}
		out[at[j]] = err
	}
	return out
}

// deleteAddresses unbinds the addresses the view has together, but those
// in --ipvs-exclude-cidrs, and returns each one's outcome as deleteAddress
// would.
func (r *reconciler) deleteAddresses(addrs []netip.Addr) []error {
	out := make([]error, len(addrs))
	var todo []netip.Addr
	var at []int
	for i, a := range addrs {
		switch {
		case !r.view.addresses[a] || r.cfg.Excluded(a):
		case r.deletionsHeld():
			out[i] = errHeld
		default:
			todo, at = append(todo, a), append(at, i)
		}
	}
	r.writes += len(todo)
	for j, err := range netif.DeleteDummyAddresses(r.k.Netif, todo) {
		if err == nil || errors.Is(err, netif.ErrNotFound) {
			delete(r.view.addresses, todo[j])
			continue
		}
		out[at[j]] = err
	}
	return out
}

// addAddress binds a on kube-ipvs0 unless the view has it.
func (r *reconciler) addAddress(a netip.Addr) error {
	if r.view.addresses[a] {
		return nil
	}
	r.writes++
	err := r.k.Netif.AddDummyAddress(a)
	if err == nil || errors.Is(err, netif.ErrExists) {
		r.view.addresses[a] = true
		return nil
	}
	return err
}

// deleteAddress unbinds a. Nothing in --ipvs-exclude-cidrs is removed,
// wanted or not.
func (r *reconciler) deleteAddress(a netip.Addr) error {
	if !r.view.addresses[a] || r.cfg.Excluded(a) {
		return nil
	}
	if r.deletionsHeld() {
		return errHeld
	}
	r.writes++
	err := r.k.Netif.DeleteDummyAddress(a)
	if err == nil || errors.Is(err, netif.ErrNotFound) {
		delete(r.view.addresses, a)
		return nil
	}
	return err
}

// entryOps add and delete members of the owned sets. A set found full is
// picked for later: its add is tried again once this sync's deletions made
// room.
func (r *reconciler) entryOps() operations[ipvsproxy.SetEntryKey] {
	return operations[ipvsproxy.SetEntryKey]{
		id:         entryID,
		wanted:     func(k ipvsproxy.SetEntryKey) bool { return r.desired.SetEntryRefs(k) > 0 },
		update:     r.addEntry,
		updateMany: r.addEntries,
		delete:     r.deleteEntry,
		deleteMany: r.deleteEntries,
		later:      func(err error) bool { return errors.Is(err, ipset.ErrFull) },
	}
}

// addEntries adds the keys the view lacks, those of one set together
// (ipset.AddEntries: many per kernel message), and returns each key's
// outcome as addEntry would.
func (r *reconciler) addEntries(keys []ipvsproxy.SetEntryKey) []error {
	out := make([]error, len(keys))
	for set, in := range bySet(keys) {
		members, ok := r.view.sets[set]
		var es []ipset.Entry
		var at []int
		for _, i := range in {
			switch {
			case !ok:
				out[i] = pendingError{fmt.Errorf("ipset %s is not present", set)}
			case !members.Has(keys[i].Entry):
				es, at = append(es, keys[i].Entry), append(at, i)
			}
		}
		r.writes += len(es)
		vanished := false
		for j, err := range ipset.AddEntries(r.k.IPSet, set, es) {
			switch {
			case err == nil:
				members.Put(es[j], struct{}{})
			case errors.Is(err, ipset.ErrNotFound):
				vanished = true
				fallthrough
			default:
				out[at[j]] = err
			}
		}
		if vanished {
			r.setVanished(set)
		}
	}
	return out
}

// addEntry adds k unless the view has it.
func (r *reconciler) addEntry(k ipvsproxy.SetEntryKey) error {
	members, ok := r.view.sets[k.Set]
	if !ok {
		return pendingError{fmt.Errorf("ipset %s is not present", k.Set)}
	}
	if members.Has(k.Entry) {
		return nil
	}
	r.writes++
	err := r.k.IPSet.AddEntry(k.Set, k.Entry)
	switch {
	case err == nil || errors.Is(err, ipset.ErrExists):
		members.Put(k.Entry, struct{}{})
		return nil
	case errors.Is(err, ipset.ErrNotFound):
		r.setVanished(k.Set)
	}
	return err
}

// bySet yields each set that keys name, in the order they first name it,
// with the indexes in keys of its members.
func bySet(keys []ipvsproxy.SetEntryKey) iter.Seq2[string, []int] {
	at := map[string][]int{}
	var order []string
	for i, k := range keys {
		if _, ok := at[k.Set]; !ok {
			order = append(order, k.Set)
		}
		at[k.Set] = append(at[k.Set], i)
	}
	return func(yield func(string, []int) bool) {
		for _, set := range order {
			if !yield(set, at[set]) {
				return
			}
		}
	}
}

// deleteEntries deletes the keys the view has, those of one set together
// (ipset.DeleteEntries), and returns each key's outcome as deleteEntry
// would.
func (r *reconciler) deleteEntries(keys []ipvsproxy.SetEntryKey) []error {
	out := make([]error, len(keys))
	for set, in := range bySet(keys) {
		members := r.view.sets[set]
		var es []ipset.Entry
		var at []int
		for _, i := range in {
			switch {
			case !members.Has(keys[i].Entry):
			case r.deletionsHeld():
				out[i] = errHeld
			default:
				es, at = append(es, keys[i].Entry), append(at, i)
			}
		}
		for j, err := range r.deleteMembers(set, es) {
			out[at[j]] = err
		}
	}
	return out
}

// deleteMembers deletes es from set together (ipset.DeleteEntries) and
// drops those deleted from the view; it returns each one's outcome.
func (r *reconciler) deleteMembers(set string, es []ipset.Entry) []error {
	r.writes += len(es)
	errs := ipset.DeleteEntries(r.k.IPSet, set, es)
	for j, err := range errs {
		if err == nil {
			r.view.sets[set].Delete(es[j])
		}
	}
	return errs
}

func (r *reconciler) deleteEntry(k ipvsproxy.SetEntryKey) error {
	if !r.view.sets[k.Set].Has(k.Entry) {
		return nil
	}
	if r.deletionsHeld() {
		return errHeld
	}
	r.writes++
	err := r.k.IPSet.DeleteEntry(k.Set, k.Entry)
	if err == nil || errors.Is(err, ipset.ErrNotFound) {
		r.view.sets[k.Set].Delete(k.Entry)
		return nil
	}
	return err
}

// setVanished: someone destroyed an owned set; it is re-created at the next
// sync and its members re-added.
func (r *reconciler) setVanished(name string) {
	delete(r.view.sets, name)
	r.settle(namedID(snapshot.ObjectSetEntry, name), pendingError{fmt.Errorf("ipset %s vanished", name)})
}

// record writes the ownership record of k, before its virtual server is
// created (ownership.go).
func (r *reconciler) record(k ipvs.VirtualServerKey) error {
	e := recordEntry(k)
	members, ok := r.view.sets[e.Set]
	if !ok {
		return fmt.Errorf("record %s as ours: ipset %s is not present", k, e.Set)
	}
	if members.Has(e.Entry) {
		return nil
	}
	r.writes++
	if err := r.k.IPSet.AddEntry(e.Set, e.Entry); err != nil && !errors.Is(err, ipset.ErrExists) {
		if errors.Is(err, ipset.ErrNotFound) {
			r.setVanished(e.Set)
		}
		return fmt.Errorf("record %s as ours: %w", k, err)
	}
	members.Put(e.Entry, struct{}{})
	return nil
}

// unrecordAll removes the ownership records of keys, whose virtual servers
// are gone, those of one set together (ipset.DeleteEntries), and returns
// each one's outcome as unrecord would.
func (r *reconciler) unrecordAll(keys []ipvs.VirtualServerKey) []error {
	out := make([]error, len(keys))
	records := make([]ipvsproxy.SetEntryKey, len(keys))
	for i, k := range keys {
		records[i] = ipvsproxy.SetEntryKey(recordEntry(k))
	}
	for set, in := range bySet(records) {
		members := r.view.sets[set]
		var es []ipset.Entry
		var at []int
		for _, i := range in {
			if members.Has(records[i].Entry) {
				es, at = append(es, records[i].Entry), append(at, i)
			}
		}
		for j, err := range r.deleteMembers(set, es) {
			if err != nil {
				out[at[j]] = fmt.Errorf("remove the record of %s: %w", keys[at[j]], err)
			}
		}
	}
	return out
}

// unrecord removes the ownership record of k, after its virtual server is
// gone.
func (r *reconciler) unrecord(k ipvs.VirtualServerKey) error {
	e := recordEntry(k)
	if !r.view.sets[e.Set].Has(e.Entry) {
		return nil
	}
	r.writes++
	if err := r.k.IPSet.DeleteEntry(e.Set, e.Entry); err != nil && !errors.Is(err, ipset.ErrNotFound) {
		return fmt.Errorf("remove the record of %s: %w", k, err)
	}
	r.view.sets[e.Set].Delete(e.Entry)
	return nil
}

// virtualServerOps create, update and delete virtual servers with their
// real servers and ownership records. One found to be someone else's is
// picked for later: the loop makes its Service lose the key.
func (r *reconciler) virtualServerOps() operations[ipvs.VirtualServerKey] {
	return operations[ipvs.VirtualServerKey]{
		id:         vsID,
		wanted:     func(k ipvs.VirtualServerKey) bool { return r.desired.VirtualServer(k) != nil },
		update:     r.updateVirtualServer,
		updateMany: r.updateVirtualServers,
		delete:     r.deleteVirtualServer,
		deleteMany: r.deleteVirtualServers,
		later:      func(err error) bool { return errors.As(err, new(foreignError)) },
	}
}

// recordGroup is how many virtual servers' ownership records a full sync
// adds together before creating them, and any sync removes together after
// deleting them. A crash in between leaves at most this many records
// without a virtual server (ownership.go).
const recordGroup = 64

// updateVirtualServers is updateVirtualServer for each key, on a full sync
// in groups whose missing ownership records are added together first.
func (r *reconciler) updateVirtualServers(keys []ipvs.VirtualServerKey) []error {
	out := make([]error, len(keys))
	for start := 0; start < len(keys); start += recordGroup {
		group := keys[start:min(start+recordGroup, len(keys))]
		if r.full {
			r.recordAhead(group)
			r.createAhead(group)
		}
		for i, k := range group {
			out[start+i] = r.updateVirtualServer(k)
		}
		clear(r.recordedAhead)
	}
	return out
}

// recordAhead adds the ownership records of the virtual servers of keys
// that a full sync is about to create, together (ipset.AddEntries). The
// view was just read: one it lacks was not in the kernel then, so the
// record is written, as one at a time, before the virtual server exists.
// A record that fails here is written (and fails) again in
// updateVirtualServer.
func (r *reconciler) recordAhead(keys []ipvs.VirtualServerKey) {
	bySet := map[string][]ipvs.VirtualServerKey{}
	for _, k := range keys {
		if r.view.foreign[k] || r.view.virtualServers[k] != nil || r.view.isRecorded(k) || r.desired.VirtualServer(k) == nil {
			continue
		}
		set := recordEntry(k).Set
		bySet[set] = append(bySet[set], k)
	}
	if r.recordedAhead == nil && len(bySet) > 0 {
		r.recordedAhead = map[ipvs.VirtualServerKey]bool{}
	}
	for set, ks := range bySet {
		members, ok := r.view.sets[set]
		if !ok {
			continue
		}
		es := make([]ipset.Entry, len(ks))
		for i, k := range ks {
			es[i] = recordEntry(k).Entry
		}
		r.writes += len(es)
		for i, err := range ipset.AddEntries(r.k.IPSet, set, es) {
			if err == nil {
				members.Put(es[i], struct{}{})
				r.recordedAhead[ks[i]] = true
			}
		}
	}
}

// createAhead creates together (ipvs.AddVirtualServers) the virtual
// servers of keys whose records recordAhead just added: each is missing
// from the view that was just read, and its record is in. One created
// joins the view, empty, for updateVirtualServer to fill; one that fails
// is left to updateVirtualServer, whose own create fails or succeeds again
// and is handled there (someone else's found, an error reported).
func (r *reconciler) createAhead(keys []ipvs.VirtualServerKey) {
	var vss []ipvs.VirtualServer
	for _, k := range keys {
		if r.recordedAhead[k] {
			vss = append(vss, r.desired.VirtualServer(k).VirtualServer)
		}
	}
	if len(vss) == 0 {
		return
	}
	r.writes += len(vss)
	for i, err := range ipvs.AddVirtualServers(r.k.IPVS, vss) {
		if err == nil {
			want := r.desired.VirtualServer(vss[i].VirtualServerKey)
			r.view.virtualServers[vss[i].VirtualServerKey] = newKernelVirtualServer(want.VirtualServer, make(realServerList, 0, len(want.RealServers)))
		}
	}
}

// deleteVirtualServer removes k, which no Service wins, with its real
// servers and its ownership record, unless it is not ours to remove.
func (r *reconciler) deleteVirtualServer(k ipvs.VirtualServerKey) error {
	if gone, err := r.removeVirtualServer(k); !gone {
		return err
	}
	return r.unrecord(k)
}

// deleteVirtualServers is deleteVirtualServer for each key, in groups
// whose ownership records are removed together once the group's virtual
// servers are gone. A crash in between leaves at most recordGroup records
// without a virtual server (ownership.go).
func (r *reconciler) deleteVirtualServers(keys []ipvs.VirtualServerKey) []error {
	out := make([]error, len(keys))
	for start := 0; start < len(keys); start += recordGroup {
		group := keys[start:min(start+recordGroup, len(keys))]
		var gone []ipvs.VirtualServerKey
		var at []int
		for i, k := range group {
			if ok, err := r.removeVirtualServer(k); ok {
				gone, at = append(gone, k), append(at, start+i)
			} else {
				out[start+i] = err
			}
		}
		for j, err := range r.unrecordAll(gone) {
			out[at[j]] = err
		}
	}
	return out
}

// removeVirtualServer removes k with its real servers, unless it is not
// ours to remove, and says whether its ownership record is to go: k is
// no longer in the kernel.
func (r *reconciler) removeVirtualServer(k ipvs.VirtualServerKey) (gone bool, err error) {
	if r.view.foreign[k] {
		// Someone else's: never adopted, rewritten or emptied.
		return false, nil
	}
	have := r.view.virtualServers[k]
	var errs []error
	switch {
	case have == nil:
		// A record without a virtual server: a crash between the two
		// steps, or a virtual server someone deleted.
		return true, nil
	case r.cfg.Excluded(k.Address):
		// --ipvs-exclude-cidrs: never cleaned up, whoever made it. Nothing
		// is wanted of it any more, so a failure of an earlier write to it
		// is over too.
		return false, nil
	case r.deletionsHeld():
		// Kept, with its real servers and its record, until the Service
		// list is believed again.
		return false, errHeld
	case r.drainsVirtualServer(have, &errs):
		// The Service (port) is gone but TCP connections are open: they
		// finish at weight 0 instead of being cut (kube-proxy cuts them,
		// kubernetes#71894); drain deletes it once they end or time is up.
		return false, errors.Join(errs...)
	}
	// The Service (port) is gone and nothing is left to drain.
	r.writes++
	if err := r.k.IPVS.DeleteVirtualServer(k); err != nil && !errors.Is(err, ipvs.ErrNotFound) {
		return false, err
	}
	delete(r.view.virtualServers, k)
	delete(r.draining, k)
	return true, nil
}

// updateVirtualServer makes the kernel's virtual server k match the one
// its Service wins, creating it (after its ownership record) when missing.
// Finding someone else's at k returns a foreignError.
func (r *reconciler) updateVirtualServer(k ipvs.VirtualServerKey) error {
	if r.view.foreign[k] {
		// Someone else's: never adopted, rewritten or emptied. Its
		// Service has a PortConflict problem instead.
		return nil
	}
	want := r.desired.VirtualServer(k)
	have := r.view.virtualServers[k]
	var errs []error
	if have == nil {
		// Between a full read and now someone may have created it: look
		// before recording, so a foreign one is never recorded as ours.
		// One that is recorded is ours (our create went through, or the
		// view lost it): take it back into the view. One recorded ahead
		// of its creation a moment ago is not there yet.
		recorded := r.view.isRecorded(k) && !r.recordedAhead[k]
		if !r.full || recorded {
			if rss, err := r.k.IPVS.RealServers(k); err == nil {
				if !recorded {
					return r.foreignFound(k, nil)
				}
				have = newKernelVirtualServer(ipvs.VirtualServer{VirtualServerKey: k}, newRealServerList(rss))
				r.view.virtualServers[k] = have
			}
		}
	}
	if have == nil {
		if err := r.record(k); err != nil {
			return err
		}
		r.writes++
		if err := r.k.IPVS.AddVirtualServer(want.VirtualServer); err != nil {
			if errors.Is(err, ipvs.ErrExists) {
				return r.foreignFound(k, r.unrecord(k))
			}
			return err
		}
		have = newKernelVirtualServer(want.VirtualServer, make(realServerList, 0, len(want.RealServers)))
		r.view.virtualServers[k] = have
	}
	if !r.view.isRecorded(k) {
		// Adopted from kube-proxy's IPVS mode (ownership.go: legacy).
		if err := r.record(k); err != nil {
			errs = append(errs, err)
		}
	}
	if len(ipvsproxy.VirtualServerChanges(have.vs, want.VirtualServer)) != 0 {
		r.writes++
		if err := r.k.IPVS.UpdateVirtualServer(want.VirtualServer); err != nil {
			return err
		}
		have.vs = want.VirtualServer
	}
	// want.RealServers has no repeats: when have holds only wanted ones,
	// nothing is to be removed and no set of them is needed (a full sync
	// compares every virtual server).
	if have.holds(want.RealServers) {
		// The common case of a full sync: nothing to write, and the view
		// keeps the desired list instead of what it read.
		have.shareRealServers(want.RealServers)
		if d := r.draining[k]; d != nil {
			for _, rs := range want.RealServers.All() {
				delete(d, rs.RealServerKey)
			}
		}
		return errors.Join(errs...)
	}
	// The adds and weight changes go to the kernel together (several per
	// send, ipvs.WriteRealServers): a cold sync writes ten or more real
	// servers per virtual server.
	present := 0
	ws := r.realServerWrites[:0]
	for _, rs := range want.RealServers.All() {
		cur, ok := have.realServer(rs.RealServerKey)
		switch {
		case !ok:
			ws = append(ws, ipvs.RealServerWrite{Op: ipvs.AddReal, VirtualServer: k, RealServer: rs})
		case cur.Weight != rs.Weight:
			// Also revives an endpoint that was draining and came back.
			ws = append(ws, ipvs.RealServerWrite{Op: ipvs.UpdateReal, VirtualServer: k, RealServer: rs})
		default:
			present++
			r.keepRealServer(have, rs)
		}
	}
	r.realServerWrites = ws
	for start := 0; start < len(ws); start += realServerChunk {
		if start > 0 && r.newerWait != nil && r.newerWait() {
			// The view holds what was written; the next sync compares
			// this virtual server again and writes the rest, removals
			// included, after the newer changes.
			r.deferred = append(r.deferred, k)
			return errors.Join(errs...)
		}
		chunk := ws[start:min(start+realServerChunk, len(ws))]
		r.writes += len(chunk)
		for i, err := range ipvs.WriteRealServers(r.k.IPVS, chunk) {
			if err != nil && !(chunk[i].Op == ipvs.AddReal && errors.Is(err, ipvs.ErrExists)) {
				errs = append(errs, err)
				continue
			}
			present++
			r.keepRealServer(have, chunk[i].RealServer)
		}
	}
	if present != have.realServerCount() {
		var gone []ipvs.RealServerKey
		for rs := range have.eachRealServer() {
			if !want.RealServers.Contains(rs.RealServerKey) {
				gone = append(gone, rs.RealServerKey)
			}
		}
		errs = append(errs, r.removeRealServers(have, gone, false)...)
	}
	if len(errs) == 0 && have.holds(want.RealServers) {
		have.shareRealServers(want.RealServers)
	}
	return errors.Join(errs...)
}

// keepRealServer: rs is in the kernel as wanted; the view holds it, and it
// no longer drains.
func (r *reconciler) keepRealServer(have *kernelVirtualServer, rs ipvs.RealServer) {
	have.putRealServer(rs)
	if d := r.draining[have.vs.VirtualServerKey]; d != nil {
		delete(d, rs.RealServerKey)
	}
}

// foreignFound: the kernel holds someone else's virtual server at k. The
// view says so, and the outcome tells the loop, which makes the Service
// that wanted it lose it; undo is a failure to take back our record.
func (r *reconciler) foreignFound(k ipvs.VirtualServerKey, undo error) error {
	klog.InfoS("A virtual server ipvsproxy did not create is in the way; leaving it as it is", "virtualServer", k)
	r.view.foreign[k] = true
	return foreignError{undo: undo}
}
