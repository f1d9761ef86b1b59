package ipvsproxy

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"github.com/ipvsproxy/ipvsproxy/iptables"
	"github.com/ipvsproxy/ipvsproxy/ipvs"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// SyncResult tells observers (metrics, health) what one sync did.
type SyncResult struct {
	Full     bool
	Start    time.Time
	Duration time.Duration
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
	// by policy ("internal", "external").
	NoLocalEndpoints map[string]int
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
	cfg      Config
	nodeName string
	kernel   Kernel
	recorder record.EventRecorder
	tracker  *ChangeTracker
	// OnSync, when set, is called after every sync.
	OnSync func(SyncResult)
	// OnQueued, when set, is called whenever a change is queued.
	OnQueued func()

	mu           sync.Mutex // one sync at a time; guards what follows
	desired      *desiredState
	view         *kernelView
	draining     map[ipvs.VirtualServerKey]map[ipvs.RealServerKey]time.Time
	needFull     bool
	reported     map[types.NamespacedName]string // problems last reported per Service
	appliedRules map[v1.IPFamily]string
	lastSync     time.Time
	now          func() time.Time
	// started is set by the first successful sync. Before it the desired
	// state is empty, so every Service would look new: its UDP flows must
	// not be flushed as if it had just gained endpoints (a restart drops
	// no flow).
	started bool

	trigger chan struct{}
}

// New returns a proxier; nothing touches the kernel before the first Sync.
func New(cfg Config, nodeName string, k Kernel, recorder record.EventRecorder) (*Proxier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid configuration: %w", err)
	}
	for _, f := range cfg.Families {
		if k.IPTables[f] == nil {
			return nil, fmt.Errorf("no iptables for family %s", f)
		}
	}
	if recorder == nil {
		recorder = &record.FakeRecorder{}
	}
	p := &Proxier{
		cfg: cfg, nodeName: nodeName, kernel: k, recorder: recorder,
		desired:      newDesiredState(),
		draining:     map[ipvs.VirtualServerKey]map[ipvs.RealServerKey]time.Time{},
		needFull:     true,
		reported:     map[types.NamespacedName]string{},
		appliedRules: map[v1.IPFamily]string{},
		now:          time.Now,
		trigger:      make(chan struct{}, 1),
	}
	p.tracker = NewChangeTracker(nodeName, p.requestSync)
	return p, nil
}

// Tracker is where informer events go.
func (p *Proxier) Tracker() *ChangeTracker { return p.tracker }

// Config returns the configuration in force (after a scheduler fallback).
func (p *Proxier) Config() Config { return p.cfg }

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
// fully every SyncPeriod, until ctx ends. Call it once the informers have
// synced, so the first sync sees every Service.
func (p *Proxier) Run(ctx context.Context) {
	ticker := time.NewTicker(p.cfg.SyncPeriod)
	defer ticker.Stop()
	p.Sync()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			p.mu.Lock()
			p.needFull = true
			p.mu.Unlock()
		case <-p.trigger:
		}
		// Changes that arrive while we wait are batched into this sync.
		if wait := p.cfg.MinSyncPeriod - time.Since(p.lastSync); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		p.Sync()
	}
}

// Sync runs one sync now: drain the changes, build the Services that
// changed (all of them on a full sync), write the difference to the kernel,
// then clean up stale conntrack flows and drained real servers.
func (p *Proxier) Sync() SyncResult {
	p.mu.Lock()
	defer p.mu.Unlock()
	res := SyncResult{Start: p.now(), WriteErrors: map[string]int{}, IPTablesFailures: map[v1.IPFamily]int{}, Conntrack: map[v1.IPFamily]ConntrackPass{}}
	changes := p.tracker.drain()
	res.ServiceChanges, res.EndpointChanges, res.TriggerTimes = changes.serviceChanges, changes.endpointChanges, changes.triggerTimes

	full := p.needFull || changes.nodeChanged
	if full {
		view, err := readKernel(p.kernel, p.cfg)
		if err != nil {
			klog.ErrorS(err, "Reading the kernel state failed; retrying at the next sync")
			res.WriteErrors["read"]++
			p.finish(&res)
			return res
		}
		p.view = view
	}
	res.Full = full
	node := p.nodeInfo()

	// Build: every Service on a full sync, else only the changed ones.
	names := changes.services
	if full {
		names = map[types.NamespacedName]bool{}
		for _, n := range p.tracker.serviceNames() {
			names[n] = true
		}
		for n := range p.desired.services {
			names[n] = true
		}
	}
	t := newTouched()
	var staleFilters = staleFiltersCollector{}
	for name := range names {
		svc, endpointSlices := p.tracker.input(name)
		var st *ServiceState
		if svc != nil {
			st = BuildService(svc, endpointSlices, node, p.cfg)
		}
		if p.started {
			staleFilters.add(staleUDPFlows(p.desired.services[name], st))
		}
		p.desired.set(name, st, t)
	}
	res.Services = len(names)
	conflicts := p.desired.conflicts(t.virtualServers)
	for name := range names {
		p.report(name, conflicts[name])
	}
	for name, problems := range conflicts {
		if !names[name] {
			p.report(name, problems)
		}
	}
	if full {
		p.view.touchAll(p.desired, t)
		adoptDraining(p.view, p.desired, p.draining, p.now().Add(p.cfg.DrainTimeout))
	}

	// Apply: the difference only.
	r := &reconciler{k: p.kernel, cfg: p.cfg, desired: p.desired, view: p.view, draining: p.draining, now: p.now()}
	r.apply(t)
	p.syncRules(r, full)
	r.drain()
	staleFilters.add(r.staleFlows)
	res.Writes = r.writes
	for _, e := range r.errs {
		res.WriteErrors[e.object]++
		if e.object == "iptables" && e.family != "" {
			res.IPTablesFailures[e.family]++
		}
	}

	// Conntrack last, once the new real servers are in place; one pass per
	// family so that deletions, time and failures are each counted under
	// their own family.
	if p.kernel.Conntrack != nil {
		for _, family := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
			fs := staleFilters.of(family)
			if len(fs) == 0 {
				continue
			}
			start := time.Now()
			n, err := p.kernel.Conntrack.DeleteFlows(fs...)
			res.Conntrack[family] = ConntrackPass{Deleted: n, Duration: time.Since(start), Failed: err != nil}
			res.ConntrackDeleted += n
			if err != nil {
				klog.ErrorS(err, "Deleting stale UDP conntrack flows failed", "family", family)
				res.WriteErrors["conntrack"]++
			}
		}
	}
	res.Draining = drainingCount(p.draining)
	p.started = p.started || len(res.WriteErrors) == 0
	p.finish(&res)
	return res
}

// finish records the outcome and tells the observer.
func (p *Proxier) finish(res *SyncResult) {
	res.Duration = p.now().Sub(res.Start)
	p.needFull = len(res.WriteErrors) > 0
	p.lastSync = p.now()
	res.HealthCheckNodePorts = map[types.NamespacedName]uint16{}
	res.LocalReadyEndpoints = map[types.NamespacedName]int{}
	res.NoLocalEndpoints = map[string]int{}
	for name, st := range p.desired.services {
		if st.HealthCheckNodePort != 0 {
			res.HealthCheckNodePorts[name] = st.HealthCheckNodePort
			res.LocalReadyEndpoints[name] = st.LocalReadyEndpoints
		}
		counted := map[string]bool{}
		for _, vs := range st.VirtualServers {
			if vs.LocalOnly && len(vs.RealServers) == 0 {
				policy := "external"
				if vs.Kind == KindClusterIP {
					policy = "internal"
				}
				if !counted[policy] {
					counted[policy] = true
					res.NoLocalEndpoints[policy]++
				}
			}
		}
	}
	if err := res.Err(); err != nil {
		klog.ErrorS(err, "Sync finished with failures", "full", res.Full)
	} else {
		klog.V(2).InfoS("Sync finished", "full", res.Full, "services", res.Services, "writes", res.Writes, "duration", res.Duration)
	}
	if p.OnSync != nil {
		p.OnSync(*res)
	}
}

// syncRules restores a family's iptables tables when they differ from what
// is wanted: on a full sync by reading them back, otherwise only when the
// wanted text changed (it depends on the configuration alone).
func (p *Proxier) syncRules(r *reconciler, full bool) {
	for _, family := range p.cfg.Families {
		ipt := p.kernel.IPTables[family]
		text := iptablesRules(p.cfg, family)
		if !full && p.appliedRules[family] == text {
			continue
		}
		ok := true
		for _, table := range []iptables.Table{iptables.TableNAT, iptables.TableFilter} {
			want := tableText(text, table)
			if save, err := ipt.Save(table); err == nil && rulesMatch(save, want, table) {
				continue
			}
			r.writes++
			if err := ipt.Restore([]byte(want)); err != nil {
				r.failFamily(family, "iptables", fmt.Errorf("restore %s %s rules: %w", family, table, err))
				ok = false
			}
		}
		for _, j := range jumpRules() {
			existed, err := ipt.EnsureRule(j.table, j.chain, j.rule...)
			if err != nil {
				r.failFamily(family, "iptables", fmt.Errorf("ensure %s jump from %s %s to %s: %w", family, j.table, j.chain, j.rule[len(j.rule)-1], err))
				ok = false
				continue
			}
			if !existed {
				r.writes++
			}
		}
		if ok {
			p.appliedRules[family] = text
		}
	}
}

// nodeInfo describes this node for the builder.
func (p *Proxier) nodeInfo() NodeInfo {
	info := NodeInfo{Name: p.nodeName}
	if n := p.tracker.Node(); n != nil {
		info.Zone = n.Labels[v1.LabelTopologyZone]
	}
	if p.view != nil {
		info.Addresses = p.view.hostAddresses
	}
	return info
}

// report emits an Event and a log line per problem, once per distinct set of
// problems of a Service, so a bad object is not reported every sync.
func (p *Proxier) report(name types.NamespacedName, conflicts []Problem) {
	var problems []Problem
	if st := p.desired.services[name]; st != nil {
		problems = append(append(problems, st.Problems...), conflicts...)
	}
	if len(problems) == 0 {
		delete(p.reported, name)
		return
	}
	var key strings.Builder
	for _, pr := range problems {
		key.WriteString(pr.String() + "\n")
	}
	if p.reported[name] == key.String() {
		return
	}
	p.reported[name] = key.String()
	for _, pr := range problems {
		klog.InfoS("Skipping bad input", "object", pr.Object.Kind+"/"+pr.Object.Namespace+"/"+pr.Object.Name, "reason", pr.Reason, "message", pr.Message)
		ref := pr.Object
		p.recorder.Eventf(&ref, v1.EventTypeWarning, pr.Reason, "%s", pr.Message)
	}
}

type staleFiltersCollector struct{ filters []conntrack.Filter }

func (c *staleFiltersCollector) add(f []conntrack.Filter) { c.filters = append(c.filters, f...) }

// of returns the filters of family, told by the address each selects by.
func (c *staleFiltersCollector) of(family v1.IPFamily) []conntrack.Filter {
	var out []conntrack.Filter
	for _, f := range c.filters {
		a := f.OrigDst
		if !a.IsValid() {
			a = f.ReplySrc
		}
		if a.IsValid() && familyOf(a.Unmap()) == family {
			out = append(out, f)
		}
	}
	return out
}

func sumValues(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
