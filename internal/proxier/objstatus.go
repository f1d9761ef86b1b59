package proxier

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The reconciler keeps a status per kernel object it writes, as Cilium's
// statedb reconciler does: an object whose write failed is in error, with
// the error, since when, and when it is retried. Retries back off per
// object (retryMin doubling up to retryMax), so one object that keeps
// failing costs one write per backoff, never a full sync of everything, and
// never delays any other object. Objects that are done are not kept: the
// table holds the pending and failing ones only, so it costs nothing while
// all is well.

const (
	retryMin = time.Second
	retryMax = time.Minute
)

// objectID names one kernel object. It is one of the types below, a closed
// sum (objectKind is unexported): each kind carries its own key, so no key
// can be read for the wrong kind, and each is comparable, a map key.
type objectID interface {
	objectKind() snapshot.ObjectKind
	String() string
}

type (
	// vsObject is a virtual server, its real servers and its ownership
	// record.
	vsObject ipvs.VirtualServerKey
	// addrObject is one address on kube-ipvs0.
	addrObject netip.Addr
	// routeObject is a Service CIDR's local route on kube-ipvs0.
	routeObject netip.Prefix
	// entryObject is one member of an owned set.
	entryObject ipvsproxy.SetEntryKey
	// namedObject is an object named by text: kube-ipvs0 itself, a whole
	// set, a rules table or jump, the stale flows, the kernel read.
	namedObject struct {
		kind snapshot.ObjectKind
		name string
	}
)

func vsID(k ipvs.VirtualServerKey) objectID    { return vsObject(k) }
func addrID(a netip.Addr) objectID             { return addrObject(a) }
func entryID(k ipvsproxy.SetEntryKey) objectID { return entryObject(k) }
func routeID(p netip.Prefix) objectID          { return routeObject(p) }
func namedID(kind snapshot.ObjectKind, name string) objectID {
	return namedObject{kind: kind, name: name}
}

func (vsObject) objectKind() snapshot.ObjectKind    { return snapshot.ObjectVirtualServer }
func (addrObject) objectKind() snapshot.ObjectKind  { return snapshot.ObjectAddress }
func (routeObject) objectKind() snapshot.ObjectKind { return snapshot.ObjectRoute }
func (entryObject) objectKind() snapshot.ObjectKind { return snapshot.ObjectSetEntry }
func (n namedObject) objectKind() snapshot.ObjectKind {
	return n.kind
}

func (o vsObject) String() string {
	return "virtual server " + ipvs.VirtualServerKey(o).String()
}
func (o addrObject) String() string {
	return "address " + netip.Addr(o).String() + " on " + owned.DummyInterface
}
func (o routeObject) String() string {
	return "local route " + netip.Prefix(o).String() + " on " + owned.DummyInterface
}
func (o entryObject) String() string {
	return "ipset " + o.Set + " member " + o.Entry.String(owned.SetType(o.Set))
}
func (n namedObject) String() string {
	if n.kind == snapshot.ObjectSetEntry {
		return "ipset " + n.name
	}
	return string(n.kind) + " " + n.name
}

// objectStatus is the status of one object that is not done.
type objectStatus struct {
	state     snapshot.SyncState
	since     time.Time // entered this state
	lastError error
	attempts  int // failed writes in a row
	// lastAttempt is the start of the sync of the last failed write.
	lastAttempt time.Time
	nextRetry   time.Time
	// services are the Services the object is for, when it failed first.
	services []string
}

// statusTable holds the objects that are pending or failing.
type statusTable struct {
	objects map[objectID]*objectStatus
}

func newStatusTable() *statusTable { return &statusTable{objects: map[objectID]*objectStatus{}} }

// failed records a failed write and schedules the retry; it reports whether
// the object was not failing before (the moment to tell its Service).
func (s *statusTable) failed(id objectID, err error, now time.Time) bool {
	st := s.objects[id]
	first := st == nil || st.state != snapshot.StateError
	if st == nil {
		st = &objectStatus{}
		s.objects[id] = st
	}
	if first {
		st.state, st.since = snapshot.StateError, now
	}
	st.lastError = err
	st.attempts++
	st.lastAttempt = now
	st.nextRetry = now.Add(backoff(st.attempts))
	return first
}

// pending records an object that could not be written yet because
// something it needs is missing (the set, the record); it is retried as
// soon as that is there.
// What it waits for has its own retry; the pending object is looked at
// again on the same backoff, so nothing spins while the cause persists.
func (s *statusTable) pending(id objectID, why error, now time.Time) {
	st := s.objects[id]
	if st == nil {
		st = &objectStatus{state: snapshot.StatePending, since: now}
		s.objects[id] = st
	}
	st.lastError = why
	st.attempts++
	st.nextRetry = now.Add(backoff(st.attempts))
}

// done forgets an object: it is as wanted.
func (s *statusTable) done(id objectID) { delete(s.objects, id) }

// A full sync's build records only the objects with a status
// (ipvsproxy.Touched.Only): it compares every other one anyway.
func (s *statusTable) KeepVirtualServer(k ipvs.VirtualServerKey) bool { return s.has(vsObject(k)) }
func (s *statusTable) KeepAddress(a netip.Addr) bool                  { return s.has(addrObject(a)) }
func (s *statusTable) KeepEntry(k ipvsproxy.SetEntryKey) bool         { return s.has(entryObject(k)) }

func (s *statusTable) has(id objectID) bool {
	_, ok := s.objects[id]
	return ok
}

// empty reports whether no object is pending or failing.
func (s *statusTable) empty() bool { return len(s.objects) == 0 }

// retryQueue is the table's answer, taken once at the start of a sync, to
// "which objects are due for another write, and which still back off?".
// Every such question of the sync asks it, so it has one answer: writes of
// the sync itself (which settle objects, or schedule their next retry) do
// not change it.
type retryQueue struct {
	// due are the objects whose retry time has come, pending or in error.
	due []objectID
	// backingOff are the objects in error whose retry is not due.
	backingOff map[objectID]bool
}

// retryQueue reads the table at now.
func (s *statusTable) retryQueue(now time.Time) retryQueue {
	q := retryQueue{backingOff: map[objectID]bool{}}
	for id, st := range s.objects {
		switch {
		case !now.Before(st.nextRetry):
			q.due = append(q.due, id)
		case st.state == snapshot.StateError:
			q.backingOff[id] = true
		}
	}
	return q
}

// waits reports whether id failed and its retry is not due.
func (q retryQueue) waits(id objectID) bool { return q.backingOff[id] }

// kindDue reports whether some object of kind is due.
func (q retryQueue) kindDue(kind snapshot.ObjectKind) bool {
	return slices.ContainsFunc(q.due, func(id objectID) bool { return id.objectKind() == kind })
}

// rulesDue reports whether a rules object of family (a table or a jump) is
// due.
func (q retryQueue) rulesDue(family v1.IPFamily) bool {
	return slices.ContainsFunc(q.due, func(id objectID) bool {
		n, ok := id.(namedObject)
		return ok && n.kind == snapshot.ObjectRules && strings.HasPrefix(n.name, string(family)+" ")
	})
}

// waiting lists the objects that back off.
func (q retryQueue) waiting() []objectID {
	out := make([]objectID, 0, len(q.backingOff))
	for id := range q.backingOff {
		out = append(out, id)
	}
	return out
}

// nextRetry is the earliest retry time, if any object waits for one.
func (s *statusTable) nextRetry() (time.Time, bool) {
	var next time.Time
	for _, st := range s.objects {
		if next.IsZero() || st.nextRetry.Before(next) {
			next = st.nextRetry
		}
	}
	return next, !next.IsZero()
}

// failing counts the objects in error by kind.
func (s *statusTable) failing() map[snapshot.ObjectKind]int {
	out := map[snapshot.ObjectKind]int{}
	for id, st := range s.objects {
		if st.state == snapshot.StateError {
			out[id.objectKind()]++
		}
	}
	return out
}

func backoff(attempts int) time.Duration {
	d := retryMin
	for i := 1; i < attempts && d < retryMax; i++ {
		d *= 2
	}
	return min(d, retryMax)
}

// ReconcileStatus is a copy of the reconciler's status, safe to read from any
// goroutine (Proxier.ReconcileStatus). Every object not listed in Objects is done.
type ReconcileStatus struct {
	LastSync     time.Time `json:"lastSync"`
	LastFullSync time.Time `json:"lastFullSync"`
	// LastSyncFull tells whether the last sync was a full one.
	LastSyncFull bool `json:"lastSyncFull"`
	// Objects are the pending and failing objects, failing first, then
	// by kind and name.
	Objects []snapshot.ObjectStatus `json:"objects"`
}

// snapshot copies the table.
func (s *statusTable) snapshot() []snapshot.ObjectStatus {
	out := make([]snapshot.ObjectStatus, 0, len(s.objects))
	for id, st := range s.objects {
		o := snapshot.ObjectStatus{Kind: id.objectKind(), Object: id.String(), Services: slices.Clone(st.services), State: st.state, Since: st.since, Attempts: st.attempts}
		if st.lastError != nil {
			o.LastError = st.lastError.Error()
		}
		if st.state == snapshot.StateError {
			o.NextRetry, o.LastAttempt = st.nextRetry, st.lastAttempt
		}
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b snapshot.ObjectStatus) int {
		return cmp.Or(cmp.Compare(stateOrder(a.State), stateOrder(b.State)), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Object, b.Object))
	})
	return out
}

func stateOrder(s snapshot.SyncState) int {
	if s == snapshot.StateError {
		return 0
	}
	return 1
}

// ReconcileStatus returns a copy of the per-object status as the last sync
// left it, for inspect and tests. It does not wait for a sync in progress.
func (p *Proxier) ReconcileStatus() ReconcileStatus {
	p.statusMu.Lock()
	defer p.statusMu.Unlock()
	s := p.snapshot
	s.Objects = slices.Clone(s.Objects)
	for i := range s.Objects {
		s.Objects[i].Services = slices.Clone(s.Objects[i].Services)
	}
	return s
}

// publishStatus copies the status table for Status; called under p.mu.
func (p *Proxier) publishStatus(res *SyncResult) {
	objects := p.objects.snapshot()
	p.statusMu.Lock()
	defer p.statusMu.Unlock()
	p.snapshot.LastSync = res.Start
	p.snapshot.LastSyncFull = res.Full
	if res.Full && res.Completed {
		p.snapshot.LastFullSync = res.Start
	}
	p.snapshot.Objects = objects
}

// ReasonSyncFailed is the Event reason for a Service whose kernel objects
// could not be written.
const ReasonSyncFailed = "SyncFailed"

// reportFailures tells each Service about its objects that started failing
// in this sync: one Warning Event per Service, naming the first object and
// the count, so a full set does not flood the API server. Node-wide objects
// (rules, sets, conntrack) have no Service; the log and the metric say it.
func (p *Proxier) reportFailures(ids []objectID) {
	if len(ids) == 0 {
		return
	}
	byService := map[types.NamespacedName][]objectID{}
	addrs, entries := map[netip.Addr][]objectID{}, map[ipvsproxy.SetEntryKey][]objectID{}
	for _, id := range ids {
		switch o := id.(type) {
		case vsObject:
			if name, ok := p.desired.Owner(ipvs.VirtualServerKey(o)); ok {
				byService[name] = append(byService[name], id)
			}
		case addrObject:
			addrs[netip.Addr(o)] = append(addrs[netip.Addr(o)], id)
		case entryObject:
			entries[ipvsproxy.SetEntryKey(o)] = append(entries[ipvsproxy.SetEntryKey(o)], id)
		}
	}
	if len(addrs)+len(entries) > 0 {
		for name, st := range p.desired.Services {
			seen := map[objectID]bool{}
			for i := range st.VirtualServers {
				vs := &st.VirtualServers[i]
				if p.desired.Winner(vs.VirtualServerKey) != vs {
					continue
				}
				if vs.Bound {
					for _, id := range addrs[vs.Address] {
						if !seen[id] {
							seen[id] = true
							byService[name] = append(byService[name], id)
						}
					}
				}
				for e := range vs.SetEntries.All() {
					for _, id := range entries[e.Key()] {
						if !seen[id] {
							seen[id] = true
							byService[name] = append(byService[name], id)
						}
					}
				}
			}
		}
	}
	for name, list := range byService {
		for _, id := range list {
			if st := p.objects.objects[id]; st != nil {
				st.services = append(st.services, name.String())
			}
		}
		first := p.objects.objects[list[0]]
		ref := v1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: name.Namespace, Name: name.Name}
		if st := p.desired.Services[name]; st != nil {
			ref = st.ServiceRef()
		}
		msg := fmt.Sprintf("writing %s to the kernel failed: %v; retrying with backoff", list[0], first.lastError)
		if len(list) > 1 {
			msg = fmt.Sprintf("writing %d kernel objects failed, first %s: %v; retrying with backoff", len(list), list[0], first.lastError)
		}
		p.recorder.Eventf(&ref, v1.EventTypeWarning, ReasonSyncFailed, "%s", msg)
	}
}
