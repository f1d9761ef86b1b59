package ipvsproxy

import (
	"net/netip"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// ChangeTracker receives informer events and remembers, per Service, that
// something changed. It keeps the latest Services, EndpointSlices and Node so
// a sync can build exactly the Services that changed.
type ChangeTracker struct {
	mu       sync.Mutex
	nodeName string
	// services are, by Service name, the compact Service the informer
	// delivered (this is its only cache), the one the cluster-IP index last
	// recorded, and the EndpointSlices filed under the name: one entry for
	// all three (trackedService).
	services map[types.NamespacedName]trackedService
	// filed is each recorded slice as filed, by its namespace/name: its
	// ServiceName is the Service it is filed under. A slice's
	// kubernetes.io/service-name label can change or go, and then it must
	// leave the Service it was filed under, which neither its new labels nor
	// a tombstone's say. The slice, not the Service's name: a map of
	// names held 24 bytes more per slice.
	filed   map[types.NamespacedName]*EndpointSlice
	node    *v1.Node
	pending PendingChanges
	// start is when the tracker began: slices changed before it are not
	// network programming latency (a restart would report every slice's age).
	start time.Time
	// notify is called (without the lock) after every change that needs a
	// sync.
	notify func()

	// serviceCIDRs are the ranges of each ServiceCIDR object, by name.
	serviceCIDRs map[string][]netip.Prefix
}

// PendingChanges is what accumulated since the last Drain.
type PendingChanges struct {
	Services        map[types.NamespacedName]bool
	NodeChanged     bool
	ServiceChanges  int
	EndpointChanges int
	// oldest is when the oldest pending change arrived (zero when none).
	oldest time.Time
	// TriggerTimes are the EndpointSlices' last-change-trigger-time
	// annotations, for network programming latency, by the slice's family:
	// each observed once, under its own family.
	TriggerTimes map[v1.IPFamily][]time.Time

	// ServiceCIDRsChanged: a ServiceCIDR object came, went or changed.
	ServiceCIDRsChanged bool
}

// NewChangeTracker tracks the objects relevant to nodeName; notify is
// called whenever a sync is needed.
func NewChangeTracker(nodeName string, notify func()) *ChangeTracker {
	t := &ChangeTracker{
		nodeName: nodeName,
		services: map[types.NamespacedName]trackedService{},
		notify:   notify,
		start:    time.Now(),

		filed: map[types.NamespacedName]*EndpointSlice{},
	}
	t.serviceCIDRs = map[string][]netip.Prefix{}
	t.pending.Services = map[types.NamespacedName]bool{}
	return t
}

func (t *ChangeTracker) changed(name types.NamespacedName, endpoints bool) {
	if t.pending.oldest.IsZero() {
		t.pending.oldest = time.Now()
	}
	t.pending.Services[name] = true
	if endpoints {
		t.pending.EndpointChanges++
	} else {
		t.pending.ServiceChanges++
	}
}

func (t *ChangeTracker) fire() {
	if t.notify != nil {
		t.notify()
	}
}

// SetService records a Service given as the API object (tests, inspect):
// it keeps the compact form (SetCompactService).
func (t *ChangeTracker) SetService(svc *v1.Service) {
	t.SetCompactService(CompactService(svc))
}

// SetCompactService records a Service (added or updated).
func (t *ChangeTracker) SetCompactService(svc *Service) {
	name := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	t.mu.Lock()
	e := t.services[name]
	e.current = svc
	t.services[name] = e
	t.changed(name, false)
	t.mu.Unlock()
	t.fire()
}

// DeleteService forgets a Service.
func (t *ChangeTracker) DeleteService(namespace, name string) {
	n := types.NamespacedName{Namespace: namespace, Name: name}
	t.mu.Lock()
	// What the index recorded stays until it forgets it (indexService),
	// and the slices filed under the name until they go.
	e := t.services[n]
	e.current = nil
	t.put(n, e)
	t.changed(n, false)
	t.mu.Unlock()
	t.fire()
}

// SetEndpointSlice records an EndpointSlice given as the API object (tests,
// inspect): it keeps the compact form (SetSlice).
func (t *ChangeTracker) SetEndpointSlice(slice *discovery.EndpointSlice) {
	t.SetSlice(CompactEndpointSlice(slice))
}

// SetSlice records an EndpointSlice (added or updated) under the
// Service its kubernetes.io/service-name label names. A slice without the
// label belongs to no Service. A slice whose label changed or went leaves
// the Service it was filed under, which is rebuilt without its endpoints.
func (t *ChangeTracker) SetSlice(slice *EndpointSlice) {
	id := types.NamespacedName{Namespace: slice.Namespace, Name: slice.Name}
	name, labelled := serviceOfSlice(slice)
	t.mu.Lock()
	moved := t.unfileSlice(id, name, labelled)
	if !labelled {
		t.mu.Unlock()
		if moved {
			t.fire()
		}
		return
	}
	e := t.services[name]
	if i := slices.IndexFunc(e.slices, func(s *EndpointSlice) bool { return s.Name == slice.Name }); i >= 0 {
		e.slices[i] = slice
	} else {
		e.slices = append(e.slices, slice)
		t.services[name] = e
	}
	t.filed[id] = slice
	t.changed(name, true)
	if ts, ok := t.triggerTime(slice); ok {
		if fam, known := sliceFamily(slice); known {
			if t.pending.TriggerTimes == nil {
				t.pending.TriggerTimes = map[v1.IPFamily][]time.Time{}
			}
			t.pending.TriggerTimes[fam] = append(t.pending.TriggerTimes[fam], ts)
		}
	}
	t.mu.Unlock()
	t.fire()
}

// triggerTime is the slice's trigger time to observe, if any
// (networkProgrammingTrigger: a slice changed before the tracker began has
// none).
func (t *ChangeTracker) triggerTime(slice *EndpointSlice) (time.Time, bool) {
	ts, ok := slice.TriggerTime()
	if !ok || !ts.After(t.start) {
		return time.Time{}, false
	}
	return ts, true
}

// DeleteEndpointSlice forgets an EndpointSlice given as the API object
// (tests): DeleteSlice.
func (t *ChangeTracker) DeleteEndpointSlice(slice *discovery.EndpointSlice) {
	t.DeleteSlice(slice.Namespace, slice.Name)
}

// DeleteSlice forgets an EndpointSlice, from the Service it was filed under
// (a tombstone's labels can be older or newer than that).
func (t *ChangeTracker) DeleteSlice(namespace, name string) {
	id := types.NamespacedName{Namespace: namespace, Name: name}
	t.mu.Lock()
	removed := t.unfileSlice(id, types.NamespacedName{}, false)
	t.mu.Unlock()
	if removed {
		t.fire()
	}
}

// unfileSlice removes slice id from the Service it is filed under unless
// that is keep (when keeping is true), and marks that Service changed. It
// reports whether it removed anything. Called with the lock held.
func (t *ChangeTracker) unfileSlice(id, keep types.NamespacedName, keeping bool) bool {
	was, filed := t.filed[id]
	if !filed {
		return false
	}
	owner, _ := serviceOfSlice(was)
	if keeping && owner == keep {
		return false
	}
	delete(t.filed, id)
	e := t.services[owner]
	if e.slices = slices.DeleteFunc(e.slices, func(s *EndpointSlice) bool { return s.Name == id.Name }); len(e.slices) == 0 {
		e.slices = nil
	}
	t.put(owner, e)
	t.changed(owner, true)
	return true
}

// serviceOfSlice is the Service an EndpointSlice's
// kubernetes.io/service-name label names; false when it names none.
func serviceOfSlice(slice *EndpointSlice) (types.NamespacedName, bool) {
	svc := slice.ServiceName
	if svc == "" {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: slice.Namespace, Name: svc}, true
}

// SetNode records this node's object (nil when deleted). Only its zone
// label and its pod CIDRs change what is built (the pod CIDRs decide the
// rules under --detect-local-mode NodeCIDR, where kube-proxy exits instead);
// every Service is rebuilt and the rules rewritten when either changes.
func (t *ChangeTracker) SetNode(node *v1.Node) {
	t.mu.Lock()
	old, oldCIDRs := zoneOf(t.node), PodCIDRsOf(t.node)
	t.node = node
	if zoneOf(node) != old || !slices.Equal(PodCIDRsOf(node), oldCIDRs) {
		t.pending.NodeChanged = true
		if t.pending.oldest.IsZero() {
			t.pending.oldest = time.Now()
		}
	}
	changed := t.pending.NodeChanged
	t.mu.Unlock()
	if changed {
		t.fire()
	}
}

func zoneOf(n *v1.Node) string {
	if n == nil {
		return ""
	}
	return n.Labels[v1.LabelTopologyZone]
}

// PodCIDRsOf parses a Node's spec.podCIDRs (spec.podCIDR when the list is
// empty); unparsable entries are skipped.
func PodCIDRsOf(n *v1.Node) []netip.Prefix {
	if n == nil {
		return nil
	}
	list := n.Spec.PodCIDRs
	if len(list) == 0 && n.Spec.PodCIDR != "" {
		list = []string{n.Spec.PodCIDR}
	}
	var out []netip.Prefix
	for _, s := range list {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out
}

// Node returns the last Node object seen (nil before the first).
func (t *ChangeTracker) Node() *v1.Node {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.node
}

// Drain takes the pending changes.
func (t *ChangeTracker) Drain() PendingChanges {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.pending
	t.pending = PendingChanges{Services: map[types.NamespacedName]bool{}}
	return p
}

// Merge adds the changes drained after p to p: a sync that reads the
// kernel for seconds takes the changes that came during its read too.
func (p *PendingChanges) Merge(later PendingChanges) {
	if p.Services == nil {
		p.Services = map[types.NamespacedName]bool{}
	}
	for name := range later.Services {
		p.Services[name] = true
	}
	p.NodeChanged = p.NodeChanged || later.NodeChanged
	p.ServiceCIDRsChanged = p.ServiceCIDRsChanged || later.ServiceCIDRsChanged
	p.ServiceChanges += later.ServiceChanges
	p.EndpointChanges += later.EndpointChanges
	if p.oldest.IsZero() {
		p.oldest = later.oldest
	}
	for family, times := range later.TriggerTimes {
		if p.TriggerTimes == nil {
			p.TriggerTimes = map[v1.IPFamily][]time.Time{}
		}
		p.TriggerTimes[family] = append(p.TriggerTimes[family], times...)
	}
}

// Pending reports the queued changes without taking them (metrics, health).
func (t *ChangeTracker) Pending() (services, endpoints int, oldest time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pending.ServiceChanges, t.pending.EndpointChanges, t.pending.oldest
}

// Input returns the current Service as the API object BuildService reads
// (nil when absent; ToService, so the caller's own) and its slices.
func (t *ChangeTracker) Input(name types.NamespacedName) (*v1.Service, []*EndpointSlice) {
	t.mu.Lock()
	svc := t.services[name].current
	out := t.slicesOf(name)
	t.mu.Unlock()
	if svc == nil {
		return nil, out
	}
	return svc.ToService(), out
}

// EndpointSlicesOf returns the Service's current slices alone: for readers
// of the endpoints, without the API object Input makes.
func (t *ChangeTracker) EndpointSlicesOf(name types.NamespacedName) []*EndpointSlice {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.slicesOf(name)
}

func (t *ChangeTracker) slicesOf(name types.NamespacedName) []*EndpointSlice {
	var out []*EndpointSlice
	for _, s := range t.services[name].slices {
		out = append(out, s)
	}
	return out
}

// Service returns the current Service, nil when absent. It is shared with
// the cache: callers only read it.
func (t *ChangeTracker) Service(name types.NamespacedName) *Service {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.services[name].current
}

// trackedService is a Service as the informer last delivered it (current,
// nil once deleted), and as the model's cluster-IP index last recorded it
// (indexed), which the index compares the next one with, with the
// EndpointSlices filed under its name (slices, in a plain slice: a Service
// has one or a few, and with a map per Service the tracker held 531 bytes
// per slice, with this 297, BenchmarkTrackerHeldMemory). One entry for the
// three: a map of its own for the indexed Services cost about 55 bytes per
// Service (2.6 MiB at 50,000), one for the slices 2.4 MiB more.
type trackedService struct {
	current, indexed *Service
	slices           []*EndpointSlice
}

// put records e as name's entry, or forgets name when e holds nothing.
// Called with the lock held.
func (t *ChangeTracker) put(name types.NamespacedName, e trackedService) {
	if e.current == nil && e.indexed == nil && len(e.slices) == 0 {
		delete(t.services, name)
		return
	}
	t.services[name] = e
}

// indexService gives the Service the cluster-IP index last recorded as
// name and the current one (either nil: none), and records the current
// one as recorded; a Service deleted is forgotten then.
func (t *ChangeTracker) indexService(name types.NamespacedName) (indexed, current *Service) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.services[name]
	indexed, current = e.indexed, e.current
	if ok && e.indexed != e.current {
		e.indexed = e.current
		t.put(name, e)
	}
	return indexed, current
}

// ServiceNames lists every Service known.
func (t *ChangeTracker) ServiceNames() []types.NamespacedName {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]types.NamespacedName, 0, len(t.services))
	for n, e := range t.services {
		if e.current != nil {
			out = append(out, n)
		}
	}
	return out
}

// AppendServicesWithEndpointsAt appends to out every Service one of whose
// endpoints' addresses (the first, the one a real server takes) is in addrs.
func (t *ChangeTracker) AppendServicesWithEndpointsAt(out []types.NamespacedName, addrs []netip.Addr) []types.NamespacedName {
	want := make(map[netip.Addr]bool, len(addrs))
	for _, a := range addrs {
		want[a.Unmap()] = true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for name, e := range t.services {
	service:
		for _, s := range e.slices {
			for i := range s.Endpoints {
				if a, _, ok := s.Address(i); ok && want[a] {
					out = append(out, name)
					break service
				}
			}
		}
	}
	return out
}

// EventHandlers adapt the tracker to client-go informers.
func (t *ChangeTracker) ServiceHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.onService(obj) },
		UpdateFunc: func(_, obj any) { t.onService(obj) },
		DeleteFunc: func(obj any) {
			switch svc := untombstone(obj).(type) {
			case *Service:
				t.DeleteService(svc.Namespace, svc.Name)
			case *v1.Service:
				t.DeleteService(svc.Namespace, svc.Name)
			}
		},
	}
}

// onService takes what the daemon's caches hold, compact Services
// (CompactService); an informer without that transform hands API objects,
// which are converted.
func (t *ChangeTracker) onService(obj any) {
	switch svc := obj.(type) {
	case *Service:
		t.SetCompactService(svc)
	case *v1.Service:
		t.SetService(svc)
	}
}

// EndpointSliceHandler adapts the tracker to an EndpointSlice informer:
// the daemon's caches hold compact slices (CompactEndpointSlice); an
// informer without that transform hands API objects, which are converted.
func (t *ChangeTracker) EndpointSliceHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.onSlice(obj) },
		UpdateFunc: func(_, obj any) { t.onSlice(obj) },
		DeleteFunc: func(obj any) {
			switch s := untombstone(obj).(type) {
			case *EndpointSlice:
				t.DeleteSlice(s.Namespace, s.Name)
			case *discovery.EndpointSlice:
				t.DeleteSlice(s.Namespace, s.Name)
			}
		},
	}
}

func (t *ChangeTracker) onSlice(obj any) {
	switch s := obj.(type) {
	case *EndpointSlice:
		t.SetSlice(s)
	case *discovery.EndpointSlice:
		t.SetEndpointSlice(s)
	}
}

// NodeHandler adapts the tracker to an informer on this node only.
func (t *ChangeTracker) NodeHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.onNode(obj) },
		UpdateFunc: func(_, obj any) { t.onNode(obj) },
		DeleteFunc: func(obj any) { t.SetNode(nil) },
	}
}

func (t *ChangeTracker) onNode(obj any) {
	if n, ok := obj.(*v1.Node); ok && n.Name == t.nodeName {
		t.SetNode(n)
	}
}

func untombstone(obj any) any {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}

// sliceFamily is the IP family of an EndpointSlice's addresses; FQDN slices
// have none.
func sliceFamily(slice *EndpointSlice) (v1.IPFamily, bool) {
	switch slice.AddressType {
	case discovery.AddressTypeIPv4:
		return v1.IPv4Protocol, true
	case discovery.AddressTypeIPv6:
		return v1.IPv6Protocol, true
	}
	return "", false
}

// CurrentServices lists every Service the tracker holds (the ownership
// evidence of a full read), shared with the cache: callers only read them.
func (t *ChangeTracker) CurrentServices() []*Service {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*Service, 0, len(t.services))
	for _, e := range t.services {
		if e.current != nil {
			out = append(out, e.current)
		}
	}
	return out
}

// ServiceKeys is the tracker as its Service informer's record of what it
// delivered (cmd/ipvsproxy's trackedInformer): the Services it holds, by
// namespace/name. The informer keeps no cache of its own.
func (t *ChangeTracker) ServiceKeys() *TrackedKeys {
	return &TrackedKeys{t: t,
		each: func(yield func(types.NamespacedName)) {
			for name, e := range t.services {
				if e.current != nil {
					yield(name)
				}
			}
		},
		get: func(name types.NamespacedName) (any, bool) {
			if svc := t.services[name].current; svc != nil {
				return svc, true
			}
			return nil, false
		},
	}
}

// SliceKeys is the same for the EndpointSlice informer: the slices the
// tracker has filed under a Service.
func (t *ChangeTracker) SliceKeys() *TrackedKeys {
	return &TrackedKeys{t: t,
		each: func(yield func(types.NamespacedName)) {
			for id := range t.filed {
				yield(id)
			}
		},
		get: func(id types.NamespacedName) (any, bool) {
			if slice, ok := t.filed[id]; ok {
				return slice, true
			}
			return nil, false
		},
	}
}

// TrackedKeys is what an informer asks of the tracker in place of a store:
// client-go's queue lists and gets by namespace/name key at a relist
// (cache.KeyListerGetter), and the informer asks, per delta, what the tracker
// holds of the object's name (Get) without making a key of it.
type TrackedKeys struct {
	t *ChangeTracker
	// each and get are called with the tracker's lock held.
	each func(yield func(types.NamespacedName))
	get  func(types.NamespacedName) (any, bool)
}

func (k *TrackedKeys) ListKeys() []string {
	k.t.mu.Lock()
	defer k.t.mu.Unlock()
	var keys []string
	k.each(func(name types.NamespacedName) { keys = append(keys, name.Namespace+"/"+name.Name) })
	return keys
}

func (k *TrackedKeys) GetByKey(key string) (any, bool, error) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil, false, err
	}
	obj, ok := k.lookup(types.NamespacedName{Namespace: namespace, Name: name})
	return obj, ok, nil
}

// Get is what the tracker holds under obj's namespace and name.
func (k *TrackedKeys) Get(obj any) (any, bool, error) {
	name, err := cache.ObjectToName(obj)
	if err != nil {
		return nil, false, err
	}
	old, ok := k.lookup(types.NamespacedName{Namespace: name.Namespace, Name: name.Name})
	return old, ok, nil
}

func (k *TrackedKeys) lookup(name types.NamespacedName) (any, bool) {
	k.t.mu.Lock()
	defer k.t.mu.Unlock()
	return k.get(name)
}
