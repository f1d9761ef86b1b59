package proxier

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"

	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"github.com/ipvsproxy/ipvsproxy/internal/adapters"
	"github.com/ipvsproxy/ipvsproxy/internal/events"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// SyncResult tells observers (metrics, health) what one sync did.
type SyncResult struct {
	Full bool
	// ResyncedVirtualServers counts the virtual servers a partial sync
	// re-read with their real servers for the periodic re-check (resync.go).
	ResyncedVirtualServers int
	// RealServerReads, on a full sync, says how its read took the real
	// servers: from the kernel's table or one virtual server at a time.
	RealServerReads snapshot.FullRead
	// ReadBeside, on a periodic re-check, is how long its read ran beside
	// the sync loop (recheck.go); the rest of Duration the sync held the
	// loop.
	ReadBeside time.Duration
	Start      time.Time
	Duration   time.Duration
	// Services is how many Services were rebuilt.
	Services                        int
	ServiceChanges, EndpointChanges int
	// Writes counts kernel writes; WriteErrors lists the failed ones by
	// object kind (ipvs, address, ipset, iptables, conntrack).
	Writes      int
	WriteErrors map[string]int
	// ConntrackDeleted counts stale flows removed; Conntrack has each
	// family's pass (only families that had flows to delete).
	ConntrackDeleted int
	Conntrack        map[v1.IPFamily]ConntrackPass
	// IPTablesFailures counts failed iptables writes by family.
	IPTablesFailures map[v1.IPFamily]int
	Draining         int
	// TriggerTimes are the EndpointSlice change times this sync programmed,
	// by the slices' family.
	TriggerTimes map[v1.IPFamily][]time.Time
	// HealthCheckNodePorts and LocalReadyEndpoints describe every Service
	// with a health check node port (externalTrafficPolicy Local).
	HealthCheckNodePorts map[types.NamespacedName]uint16
	LocalReadyEndpoints  map[types.NamespacedName]int
	// NoLocalEndpoints counts Local-policy Services with no local endpoint,
	// by family and policy ("internal", "external").
	NoLocalEndpoints map[ipvsproxy.NoLocalKey]int
	// Completed is true when the sync ran through (the kernel could be
	// read), whatever single objects failed: the loop is alive. Health
	// follows it, not Err.
	Completed bool
	// FailingObjects counts the objects in error after this sync, by kind
	// (a snapshot.ObjectKind); NextRetry is the earliest retry, zero when none.
	FailingObjects map[string]int
	NextRetry      time.Time
	// DeletionsHeld is true while the Service default/kubernetes is
	// absent: nothing is deleted (emptyworld.go). HeldDeletions counts the
	// kernel objects whose deletion waits.
	DeletionsHeld bool
	HeldDeletions int
	// Yielded is true when this partial sync stopped writing after
	// writeSlice for newer changes; Deferred counts the virtual servers
	// (of any sync) whose remaining real servers it left for the same
	// reason; Carried counts the keys it hands to the next sync, which
	// writes the newer changes first.
	Yielded  bool
	Deferred int
	Carried  int
}

// ConntrackPass is one family's deletion of stale conntrack flows.
type ConntrackPass struct {
	Deleted  int
	Duration time.Duration
	Failed   bool
}

// Err is non-nil when some kernel write failed.
func (r SyncResult) Err() error {
	if len(r.WriteErrors) == 0 {
		return nil
	}
	return fmt.Errorf("%d kernel writes failed: %v", sumValues(r.WriteErrors), r.WriteErrors)
}

// Proxier keeps the kernel in step with the Services and EndpointSlices the
// ChangeTracker has seen.
type Proxier struct {
	cfg      ipvsproxy.Config
	nodeName string
	kernel   adapters.Kernel
	recorder events.Recorder
	tracker  *ipvsproxy.ChangeTracker
	// OnSync, when set, is called after every sync.
	OnSync func(SyncResult)
	// OnQueued, when set, is called whenever a change is queued.
	OnQueued func()

	mu sync.Mutex // one sync at a time; guards what follows
	// model computes what the kernel should hold; desired is its desired
	// state, which the writer only reads.
	model   *ipvsproxy.Model
	desired *ipvsproxy.DesiredState
	view    *kernelView
	// ownedBeforeFailedRead are the virtual servers the last read view held
	// (and the syncs after it added), kept when a full read fails: the view
	// itself is let go before each read (readKernel).
	ownedBeforeFailedRead map[ipvs.VirtualServerKey]bool
	draining              map[ipvs.VirtualServerKey]map[ipvs.RealServerKey]time.Time
	needFull              bool
	resync                resyncRotation
	reported              map[types.NamespacedName]map[string]bool // problems last reported per Service (report.go)
	appliedRules          map[v1.IPFamily]string
	lastSync              time.Time
	now                   func() time.Time
	// conntrack reconciles UDP flows against the desired state.
	conntrack conntrackReconciler
	// clusterNodes are every Node's addresses (nodeguard.go).
	clusterNodes *ipvsproxy.ClusterNodes
	// status is what Status reports (status.go).
	status syncStatus
	// objects is the reconciler's per-object status (objstatus.go).
	objects *statusTable
	// pendingFlows are conntrack filters whose delete failed, retried.
	pendingFlows []conntrack.Filter
	// hold keeps deletions while default/kubernetes is absent.
	hold deletionHold
	// carried are the keys a partial sync that yielded to newer changes
	// left for the next (reconciler.yield).
	carried ipvsproxy.Touched
	// recheck is the periodic re-check's read while it runs beside the
	// sync loop (recheck.go); reader, when set, the adapters it reads
	// through.
	recheck *recheckRead
	reader  *adapters.Kernel

	trigger chan struct{}

	// snapshotMu lets one Snapshot be made at a time; syncs counts the
	// syncs, read without mu (SnapshotGeneration).
	snapshotMu sync.Mutex
	syncs      atomic.Uint64

	statusMu sync.Mutex // guards snapshot, so Status never waits for a sync
	snapshot ReconcileStatus
}

// New returns a proxier; nothing touches the kernel before the first Sync.
func New(cfg ipvsproxy.Config, nodeName string, k adapters.Kernel, recorder events.Recorder) (*Proxier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid configuration: %w", err)
	}
	for _, f := range cfg.Families {
		if k.IPTables[f] == nil {
			return nil, fmt.Errorf("no iptables for family %s", f)
		}
	}
	if recorder == nil {
		recorder = events.Discard{}
	}
	p := &Proxier{
		cfg: cfg, nodeName: nodeName, kernel: k, recorder: recorder,
		draining:     map[ipvs.VirtualServerKey]map[ipvs.RealServerKey]time.Time{},
		needFull:     true,
		reported:     map[types.NamespacedName]map[string]bool{},
		appliedRules: map[v1.IPFamily]string{},
		now:          time.Now,
		trigger:      make(chan struct{}, 1),
		objects:      newStatusTable(),
	}
	p.tracker = ipvsproxy.NewChangeTracker(nodeName, p.requestSync)
	p.clusterNodes = ipvsproxy.NewClusterNodes(p.requestSync)
	p.model = ipvsproxy.NewModel(cfg, nodeName, p.tracker, p.clusterNodes, runtime.GOMAXPROCS(0))
	p.desired = p.model.Desired()
	return p, nil
}

// ClusterNodes is where an informer on all Nodes sends its events (the node
// guard: no external IP may take another Node's address).
func (p *Proxier) ClusterNodes() *ipvsproxy.ClusterNodes { return p.clusterNodes }

// Tracker is where informer events go.
func (p *Proxier) Tracker() *ipvsproxy.ChangeTracker { return p.tracker }

// Config returns the configuration in force (after a scheduler fallback).
func (p *Proxier) Config() ipvsproxy.Config { return p.cfg }

func (p *Proxier) requestSync() {
	if p.OnQueued != nil {
		p.OnQueued()
	}
	select {
	case p.trigger <- struct{}{}:
	default:
	}
}

// Run syncs whenever something changed, at most once per MinSyncPeriod, and
// re-checks the kernel SyncPeriod after the last re-check ended (fully, or
// one share: resync.go), until ctx ends. Call it once the informers have
// synced, so the first sync sees every Service.
//
// The period counts from the end of a re-check, as kube-proxy's runner
// counts its sync period from the end of its last sync: counted from the
// start, a re-check longer than the period (32-45 s at 20,000 Services on
// an emulated CPU, for 30 s) started the next one as soon as it ended, the
// writer did nothing but re-check, and every change waited behind one. A
// full re-check reads the kernel beside the loop (recheck.go): changes
// are synced while it reads.
func (p *Proxier) Run(ctx context.Context) {
	period := time.NewTimer(p.cfg.SyncPeriod)
	defer period.Stop()
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	// A read still running when ctx ends is waited for: it uses the
	// adapters, which the caller closes after Run.
	defer func() {
		if done := p.recheckDone(); done != nil {
			<-done
		}
	}()
	res := p.Sync()
	period.Reset(p.cfg.SyncPeriod)
	for {
		// A failed object is retried when its backoff ends, not only at
		// the next change or period.
		retry.Stop()
		if !res.NextRetry.IsZero() {
			retry.Reset(max(time.Until(res.NextRetry), 0))
		}
		recheck := false
		select {
		case <-ctx.Done():
			return
		case <-period.C:
			if p.startRecheck() {
				continue // the period starts again once the read is synced
			}
			recheck = true
		case <-p.trigger:
		case <-retry.C:
		case <-p.recheckDone():
			if r, ok := p.finishRecheck(); ok {
				res = r
			}
			period.Reset(p.cfg.SyncPeriod)
			continue
		}
		// Changes that arrive while we wait are batched into this sync.
		if wait := p.cfg.MinSyncPeriod - time.Since(p.lastSync); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		res = p.Sync()
		if recheck {
			period.Reset(p.cfg.SyncPeriod)
		}
	}
}

// Sync runs one sync now, in four steps: read the kernel (a full sync
// only), build the Services that changed (all of them when what they are
// built against changed), apply the difference (the writer loop:
// reconciler.run, then conntrack), and report.
func (p *Proxier) Sync() SyncResult {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sync(nil)
}

// sync is Sync under the lock. With read, the re-check's read that ran
// beside the loop (recheck.go) is this full sync's read.
func (p *Proxier) sync(read *recheckRead) SyncResult {
	now := p.now()
	res := SyncResult{Start: now, WriteErrors: map[string]int{}, IPTablesFailures: map[v1.IPFamily]int{}, Conntrack: map[v1.IPFamily]ConntrackPass{}}
	changes := p.tracker.Drain()
	res.ServiceChanges, res.EndpointChanges, res.TriggerTimes = changes.ServiceChanges, changes.EndpointChanges, changes.TriggerTimes
	retries := p.objects.retryQueue(now)
	full := p.fullSyncDue(changes, retries, now) || read != nil
	t := ipvsproxy.NewTouched()

	// Read.
	switch {
	case read != nil:
		// The re-check's duration is its read's and this sync's.
		res.Start, res.ReadBeside = read.started, now.Sub(read.started)
		if !p.takeRead(read, t, &res) {
			p.finish(&res)
			return res
		}
	case full:
		if p.recheck != nil {
			p.recheck.abandoned = true // this read is newer
		}
		if !p.readKernel(&res) {
			p.finish(&res)
			return res
		}
	}
	res.Full = full
	if full {
		// The read takes seconds at 10,000 Services or more: what changed
		// meanwhile is built in this sync rather than waiting behind it.
		// The hold is decided again with it (an empty relist during the
		// read must hold deletions here as at the next sync's start).
		changes.Merge(p.tracker.Drain())
		res.ServiceChanges, res.EndpointChanges, res.TriggerTimes = changes.ServiceChanges, changes.EndpointChanges, changes.TriggerTimes
		p.hold.update(p.tracker, now)
	}

	// Build.
	if full {
		t.Only = p.objects
		if p.desired.VirtualServerCount() > 0 {
			// The read compared the winners of a built state: the build
			// says which it changes. (A first build changes them all:
			// every key is compared, without recording one.)
			t.Rewon = map[ipvs.VirtualServerKey]bool{}
		}
	}
	built := p.build(changes, full, &t)
	res.Services = len(built.Services)

	// Apply.
	w := &reconciler{k: p.kernel, cfg: p.cfg, nodePodCIDRs: ipvsproxy.PodCIDRsOf(p.tracker.Node()), desired: p.desired, view: p.view, draining: p.draining, status: p.objects, retries: retries, now: now, full: full, setSizes: p.model.SetSizes(), hold: &p.hold, appliedRules: p.appliedRules}
	w.newerWait = func() bool {
		if p.now().Sub(now) < writeSlice {
			return false
		}
		services, endpoints, _ := p.tracker.Pending()
		return services+endpoints > 0
	}
	if !full {
		w.carried = p.carried
		w.yield = w.newerWait
	}
	share := p.resync.due
	p.resync.due = 0
	var drained []ipvs.VirtualServerKey
	if p.recheck != nil && !full {
		drained = slices.Collect(maps.Keys(p.draining))
	}
	res.ResyncedVirtualServers = p.apply(w, t, share)
	if p.recheck != nil && !full {
		p.recheck.notePartialSync(w, drained)
	}
	p.carry(w, t, &res)
	p.cleanConntrack(w, full, built.StaleFlows, &res)

	// Report.
	p.reportSync(w, built.Services, &res)
	p.finish(&res)
	return res
}

// apply runs the writer loop. What its writes found that changes what the
// kernel should hold (someone else's virtual server in the way, a Service
// CIDR route not in place) the model takes in, and the loop writes what
// that changed, in the same sync. It returns how many virtual servers the
// periodic re-check read back.
func (p *Proxier) apply(w *reconciler, t ipvsproxy.Touched, share int) int {
	resynced, found := w.run(t, share)
	for {
		more := ipvsproxy.NewTouched()
		if !p.model.TakeIn(found, more) {
			return resynced
		}
		found = w.writeTakenIn(more)
	}
}

// carry keeps, when w yielded to newer changes, every key it was to compare
// (those it wrote compare equal next time, without a write), and the
// virtual servers whose real servers it deferred, for the next sync, and
// asks for it. A sync that ran through compared them all.
func (p *Proxier) carry(w *reconciler, t ipvsproxy.Touched, res *SyncResult) {
	if !w.interrupted && len(w.deferred) == 0 {
		p.carried = ipvsproxy.Touched{}
		return
	}
	next := ipvsproxy.NewTouched()
	if w.interrupted {
		addKeys(next, t)
		addKeys(next, p.carried)
	}
	// A virtual server whose real servers were deferred (a full sync's
	// too) is compared again by the next sync.
	for _, k := range w.deferred {
		next.VirtualServers[k] = true
	}
	p.carried = next
	res.Yielded, res.Deferred = w.interrupted, len(w.deferred)
	res.Carried = len(next.VirtualServers) + len(next.Addresses) + len(next.Entries)
	klog.V(2).InfoS("Newer changes wait: they are written first, then the rest of this sync's", "carried", res.Carried)
	p.requestSync()
}

// fullSyncDue decides whether this sync reads the whole kernel and compares
// everything: at start-up, every --ipvs-sync-period (or every N-th with
// --ipvs-resync-shares), after a failed read, when what the Services are
// built against changed, when the Service list is believed again
// (emptyworld.go), and when a Service CIDR route's retry is due (whether
// the range's cluster IPs are bound depends on it; routes.go).
func (p *Proxier) fullSyncDue(changes ipvsproxy.PendingChanges, retries retryQueue, now time.Time) bool {
	released := p.hold.update(p.tracker, now)
	return released || p.needFull || changes.NodeChanged || changes.ServiceCIDRsChanged || p.view == nil || retries.kindDue(snapshot.ObjectRoute)
}

// readKernel reads the whole kernel view. A failed read is the one failure
// that keeps syncs full: nothing can be compared until it succeeds.
func (p *Proxier) readKernel(res *SyncResult) bool {
	wasOurs := p.ownedBeforeFailedRead
	var recycled recycledView
	if previous := p.view; previous != nil {
		if wasOurs == nil {
			wasOurs = make(map[ipvs.VirtualServerKey]bool, len(previous.virtualServers))
			for key := range previous.virtualServers {
				wasOurs[key] = true
			}
		}
		// The previous view goes before the read: at 10,000 Services it
		// holds every real server, and the new one is built beside it,
		// in its emptied maps. What the node's description reads
		// (nodeInfo, the inspect snapshot) stays until the read
		// succeeds; a failed read makes the next sync full, which reads
		// first.
		recycled = previous.recycle()
		p.view = &kernelView{hostAddresses: previous.hostAddresses, listening: previous.listening}
	}
	currentEvidence := func() serviceEvidence { return evidenceOf(p.tracker.CurrentServices()) }
	var previous func(ipvs.VirtualServerKey) bool
	if wasOurs != nil {
		previous = func(k ipvs.VirtualServerKey) bool { return wasOurs[k] }
	}
	view, err := readKernel(p.kernel, p.cfg, p.desired, currentEvidence, previous, recycled)
	if err != nil {
		p.ownedBeforeFailedRead = wasOurs
		klog.ErrorS(err, "Reading the kernel state failed; retrying at the next sync")
		res.WriteErrors[string(snapshot.ObjectRead)]++
		p.needFull = true
		p.objects.failed(namedID(snapshot.ObjectRead, "kernel state"), err, res.Start)
		return false
	}
	view.completeAgainst(p.desired)
	p.objects.done(namedID(snapshot.ObjectRead, "kernel state"))
	p.ownedBeforeFailedRead = nil
	p.view = view
	p.needFull = false
	res.RealServerReads = view.realServerReads
	return true
}

// build is the model's Update: it puts the changes, and on a full sync what
// the read found, into the desired state, recording in t what may have
// changed (ipvsproxy.Model.Update says which Services it rebuilds). It
// returns the Services rebuilt and the stale UDP flows of their changes.
func (p *Proxier) build(changes ipvsproxy.PendingChanges, full bool, t *ipvsproxy.Touched) ipvsproxy.Result {
	res := p.model.Update(ipvsproxy.Input{Changes: changes, Full: full, Observed: p.observed(full)}, t)
	if res.VirtualServers > 0 && p.view != nil && len(p.view.virtualServers) == 0 {
		// A first build: the view is filled as the writer creates them.
		p.view.virtualServers = make(map[ipvs.VirtualServerKey]*kernelVirtualServer, res.VirtualServers)
	}
	return res
}

// observed is what the last read found that the model builds with: the
// node's addresses and listening sockets, and on a full sync (the view was
// just read) the keys someone else's virtual servers hold.
func (p *Proxier) observed(full bool) ipvsproxy.Observed {
	var o ipvsproxy.Observed
	if p.view != nil {
		o.HostAddresses, o.Listening = p.view.hostAddresses, p.view.listening
		if full {
			o.Foreign = p.view.foreign
		}
	}
	return o
}

// cleanConntrack deletes the stale UDP flows of this sync's changes (and of
// earlier deletes that failed), once the new real servers are in place;
// periodically and after any failure, also the flows that point at no
// serving endpoint (kubernetes#112604), through the same writer.
func (p *Proxier) cleanConntrack(w *reconciler, full bool, stale []conntrack.Filter, res *SyncResult) {
	stale = append(stale, w.staleFlows...)
	filters := append(p.pendingFlows, stale...)
	if len(stale) > 0 || !w.retries.waits(namedID(snapshot.ObjectConntrack, "stale UDP flows")) {
		p.pendingFlows = w.flushConntrack(filters, res)
	}
	if p.conntrack.due(full, len(w.errs) > 0) {
		w.reconcileConntrack(&p.conntrack, res)
	}
}

// reportSync tells every Service rebuilt, and every one that lost a virtual
// server, its problems (Events), and the Services of objects that started
// failing; it fills in what the writer did.
func (p *Proxier) reportSync(w *reconciler, names map[types.NamespacedName]bool, res *SyncResult) {
	conflicts := p.desired.Conflicts(w.comparedContested())
	for name := range names {
		p.reportProblems(name, conflicts[name])
	}
	for name, problems := range conflicts {
		if !names[name] {
			p.reportProblems(name, problems)
		}
	}
	res.Writes = w.writes
	for _, e := range w.errs {
		res.WriteErrors[e.object]++
		if e.object == string(snapshot.ObjectRules) && e.family != "" {
			res.IPTablesFailures[e.family]++
		}
	}
	p.reportFailures(w.newlyFailed)
	res.Draining = drainingCount(p.draining)
	res.DeletionsHeld, res.HeldDeletions = p.hold.held, p.objects.heldDeletions()
	res.Completed = true
}

// finish records the outcome and tells the observer.
func (p *Proxier) finish(res *SyncResult) {
	p.syncs.Add(1)
	res.Duration = p.now().Sub(res.Start)
	p.lastSync = p.now()
	p.status.recordSync(*res)
	res.HealthCheckNodePorts, res.LocalReadyEndpoints, res.NoLocalEndpoints = p.desired.Summary.Report()
	res.FailingObjects = map[string]int{}
	for kind, n := range p.objects.failing() {
		res.FailingObjects[string(kind)] = n
	}
	res.NextRetry, _ = p.objects.nextRetry()
	p.publishStatus(res)
	if err := res.Err(); err != nil {
		klog.ErrorS(err, "Sync finished with failures", "full", res.Full)
	} else {
		klog.V(2).InfoS("Sync finished", "full", res.Full, "services", res.Services, "writes", res.Writes, "duration", res.Duration, "readBeside", res.ReadBeside)
	}
	if p.OnSync != nil {
		p.OnSync(*res)
	}
}

// nodeInfo describes this node as the model builds for it.
func (p *Proxier) nodeInfo() ipvsproxy.NodeInfo {
	o := p.observed(false)
	return p.model.NodeInfo(o.HostAddresses, o.Listening)
}

// filtersOf returns the filters of family, told by the address each selects
// by.
func filtersOf(filters []conntrack.Filter, family v1.IPFamily) []conntrack.Filter {
	var out []conntrack.Filter
	for _, f := range filters {
		a := f.OrigDst
		if !a.IsValid() {
			a = f.ReplySrc
		}
		if a.IsValid() && ipvsproxy.FamilyOf(a.Unmap()) == family {
			out = append(out, f)
		}
	}
	return out
}

// addConntrack adds one family's conntrack pass to the result.
func (r *SyncResult) addConntrack(family v1.IPFamily, pass ConntrackPass) {
	if r.Conntrack == nil {
		r.Conntrack = map[v1.IPFamily]ConntrackPass{}
	}
	sum := r.Conntrack[family]
	sum.Deleted += pass.Deleted
	sum.Duration += pass.Duration
	sum.Failed = sum.Failed || pass.Failed
	r.Conntrack[family] = sum
	r.ConntrackDeleted += pass.Deleted
}

func sumValues(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
