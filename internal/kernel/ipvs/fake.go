package ipvs

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// kernelSchedulers are the schedulers a stock kernel ships.
var kernelSchedulers = StockSchedulers

// defaultTimeouts are what a fresh network namespace starts with: TCP
// established 15 min, FIN_WAIT 2 min, UDP 5 min (ip_vs_proto_{tcp,udp}.c).
var defaultTimeouts = Timeouts{TCP: 900 * time.Second, TCPFin: 120 * time.Second, UDP: 300 * time.Second}

// Fake is an in-memory IPVS table that fails where the kernel fails, with
// the same sentinel errors. It is safe for concurrent use.
type Fake struct {
	mu         sync.Mutex
	schedulers map[string]bool
	// loaded are the schedulers a virtual server has named: the kernel
	// loads ip_vs_<name> then (request_module), whoever asks.
	loaded   map[string]bool
	services map[VirtualServerKey]*fakeService
	timeouts Timeouts
	writes   int
	closed   bool
}

type fakeService struct {
	vs VirtualServer
	// dests are kept in listing order, so that a listing is a copy.
	dests []RealServer
	// stats and destStats are the traffic counters (AddTraffic).
	stats     Stats
	destStats map[RealServerKey]Stats
}

var (
	_ Interface       = (*Fake)(nil)
	_ RealServerTable = (*Fake)(nil)
)

// NewFake returns an empty table that knows every stock kernel scheduler.
func NewFake() *Fake {
	f := &Fake{services: map[VirtualServerKey]*fakeService{}, timeouts: defaultTimeouts}
	f.SetSchedulers(kernelSchedulers...)
	return f
}

// SetSchedulers replaces the set of schedulers the fake kernel knows.
func (f *Fake) SetSchedulers(names ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.schedulers, f.loaded = map[string]bool{}, map[string]bool{}
	for _, n := range names {
		f.schedulers[n] = true
	}
}

// LoadedSchedulers are the schedulers some virtual server has named, so
// that the kernel would have loaded their modules, sorted.
func (f *Fake) LoadedSchedulers() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.loaded))
}

// RemoveScheduler makes the fake kernel lack one scheduler module, e.g.
// "twos", which older kernels lack.
func (f *Fake) RemoveScheduler(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.schedulers, name)
}

// Writes counts the mutating calls made so far (Add*, Update*, Delete*,
// SetTimeouts), failed ones included: each would have been a netlink
// request. A resync that changes nothing leaves it unchanged.
func (f *Fake) Writes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.writes
}

// Timeouts returns the current connection timeouts.
func (f *Fake) Timeouts() Timeouts {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.timeouts
}

func (f *Fake) currentTimeouts() (Timeouts, error) { return f.Timeouts(), nil }

// SetConnections sets the connection counters the kernel would report for a
// real server, as traffic would; it is not counted as a write.
func (f *Fake) SetConnections(vs VirtualServerKey, rs RealServerKey, active, inactive uint32) error {
	vs, rs, err := checkRealServerKey(vs, rs)
	if err != nil {
		return fmt.Errorf("set connections of %s of %s: %w", rs, vs, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	svc, ok := f.services[vs]
	if !ok {
		return fmt.Errorf("set connections of %s of %s: virtual server %w", rs, vs, ErrNotFound)
	}
	i, ok := svc.dest(rs)
	if !ok {
		return fmt.Errorf("set connections of %s of %s: real server %w", rs, vs, ErrNotFound)
	}
	svc.dests[i].ActiveConnections, svc.dests[i].InactiveConnections = active, inactive
	return nil
}

// begin locks the fake and, for mutating calls, counts the write.
func (f *Fake) begin(write bool) error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return errClosed
	}
	if write {
		f.writes++
	}
	return nil
}

func (f *Fake) VirtualServers() ([]VirtualServer, error) {
	if err := f.begin(false); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	out := make([]VirtualServer, 0, len(f.services))
	for _, s := range f.services {
		out = append(out, s.vs)
	}
	return out, nil
}

// dest finds a real server in svc's sorted list: its index, or where it
// would go.
func (svc *fakeService) dest(key RealServerKey) (int, bool) {
	return slices.BinarySearchFunc(svc.dests, key, func(d RealServer, k RealServerKey) int { return compareRealKeys(d.RealServerKey, k) })
}

func (f *Fake) AddVirtualServer(vs VirtualServer) error {
	if err := f.begin(true); err != nil {
		return err
	}
	defer f.mu.Unlock()
	vs, err := checkVirtualServer(vs)
	if err != nil {
		return fmt.Errorf("add virtual server %s: %w", vs.VirtualServerKey, err)
	}
	// Same order as ip_vs_genl_set_cmd: existence before the scheduler.
	if _, ok := f.services[vs.VirtualServerKey]; ok {
		return fmt.Errorf("add virtual server %s: %w", vs.VirtualServerKey, ErrExists)
	}
	if !f.schedulers[vs.Scheduler] {
		return fmt.Errorf("add virtual server %s: scheduler %q: %w", vs.VirtualServerKey, vs.Scheduler, ErrNoScheduler)
	}
	f.loaded[vs.Scheduler] = true
	f.services[vs.VirtualServerKey] = &fakeService{vs: vs, destStats: map[RealServerKey]Stats{}}
	return nil
}

func (f *Fake) UpdateVirtualServer(vs VirtualServer) error {
	if err := f.begin(true); err != nil {
		return err
	}
	defer f.mu.Unlock()
	vs, err := checkVirtualServer(vs)
	if err != nil {
		return fmt.Errorf("update virtual server %s: %w", vs.VirtualServerKey, err)
	}
	svc, ok := f.services[vs.VirtualServerKey]
	if !ok {
		return fmt.Errorf("update virtual server %s: %w", vs.VirtualServerKey, ErrNotFound)
	}
	if !f.schedulers[vs.Scheduler] {
		return fmt.Errorf("update virtual server %s: scheduler %q: %w", vs.VirtualServerKey, vs.Scheduler, ErrNoScheduler)
	}
	f.loaded[vs.Scheduler] = true
	svc.vs = vs
	return nil
}

func (f *Fake) DeleteVirtualServer(key VirtualServerKey) error {
	if err := f.begin(true); err != nil {
		return err
	}
	defer f.mu.Unlock()
	key, err := key.canonical()
	if err != nil {
		return fmt.Errorf("delete virtual server %s: %w", key, err)
	}
	if _, ok := f.services[key]; !ok {
		return fmt.Errorf("delete virtual server %s: %w", key, ErrNotFound)
	}
	delete(f.services, key)
	return nil
}

func (f *Fake) RealServers(key VirtualServerKey) ([]RealServer, error) {
	return f.listRealServers(key, nil)
}

func (f *Fake) ListedRealServers(key VirtualServerKey, into []RealServer) ([]RealServer, error) {
	if into == nil {
		into = []RealServer{}
	}
	rss, err := f.listRealServers(key, into)
	if errors.Is(err, ErrNotFound) {
		return into[:0], nil // as the kernel's dump of a missing one
	}
	return rss, err
}

// listRealServers puts the list in into's room, or (into nil) in a new
// slice of its length.
func (f *Fake) listRealServers(key VirtualServerKey, into []RealServer) ([]RealServer, error) {
	if err := f.begin(false); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	key, err := key.canonical()
	if err != nil {
		return nil, fmt.Errorf("list real servers of %s: %w", key, err)
	}
	svc, ok := f.services[key]
	if !ok {
		return nil, fmt.Errorf("list real servers of %s: %w", key, ErrNotFound)
	}
	if into == nil {
		into = make([]RealServer, 0, len(svc.dests))
	}
	return append(into[:0], svc.dests...), nil
}

// EachRealServerList calls fn with each virtual server's real servers, as
// the kernel's table read: under the fake's lock, as the kernel adapter
// holds its table's, each list a copy in one reused room.
// EachRealServerList lists the table as it stood when called, and calls
// fn without holding the Fake: the kernel's table read takes no lock
// between its pages, and writes go on while a reader parses them.
func (f *Fake) EachRealServerList(fn func(VirtualServerKey, []RealServer) error) error {
	if err := f.begin(false); err != nil {
		return err
	}
	keys := make([]VirtualServerKey, 0, len(f.services))
	lists := make([][]RealServer, 0, len(f.services))
	for key, svc := range f.services {
		keys, lists = append(keys, key), append(lists, slices.Clone(svc.dests))
	}
	f.mu.Unlock()
	for i, key := range keys {
		if err := fn(key, lists[i]); err != nil {
			return err
		}
	}
	return nil
}

func (f *Fake) AddRealServer(vs VirtualServerKey, rs RealServer) error {
	if err := f.begin(true); err != nil {
		return err
	}
	defer f.mu.Unlock()
	vs, rs, err := checkRealServer(vs, rs)
	if err != nil {
		return fmt.Errorf("add real server %s to %s: %w", rs.RealServerKey, vs, err)
	}
	svc, ok := f.services[vs]
	if !ok {
		return fmt.Errorf("add real server %s to %s: virtual server %w", rs.RealServerKey, vs, ErrNotFound)
	}
	i, ok := svc.dest(rs.RealServerKey)
	if ok {
		return fmt.Errorf("add real server %s to %s: %w", rs.RealServerKey, vs, ErrExists)
	}
	svc.dests = slices.Insert(svc.dests, i, rs)
	return nil
}

func (f *Fake) UpdateRealServer(vs VirtualServerKey, rs RealServer) error {
	if err := f.begin(true); err != nil {
		return err
	}
	defer f.mu.Unlock()
	vs, rs, err := checkRealServer(vs, rs)
	if err != nil {
		return fmt.Errorf("update real server %s of %s: %w", rs.RealServerKey, vs, err)
	}
	svc, ok := f.services[vs]
	if !ok {
		return fmt.Errorf("update real server %s of %s: virtual server %w", rs.RealServerKey, vs, ErrNotFound)
	}
	i, ok := svc.dest(rs.RealServerKey)
	if !ok {
		return fmt.Errorf("update real server %s of %s: %w", rs.RealServerKey, vs, ErrNotFound)
	}
	// Like the kernel, keep the connection counters: they belong to traffic.
	svc.dests[i].Weight = rs.Weight
	return nil
}

func (f *Fake) DeleteRealServer(vs VirtualServerKey, key RealServerKey) error {
	if err := f.begin(true); err != nil {
		return err
	}
	defer f.mu.Unlock()
	vs, key, err := checkRealServerKey(vs, key)
	if err != nil {
		return fmt.Errorf("delete real server %s of %s: %w", key, vs, err)
	}
	svc, ok := f.services[vs]
	if !ok {
		return fmt.Errorf("delete real server %s of %s: virtual server %w", key, vs, ErrNotFound)
	}
	i, ok := svc.dest(key)
	if !ok {
		return fmt.Errorf("delete real server %s of %s: %w", key, vs, ErrNotFound)
	}
	svc.dests = slices.Delete(svc.dests, i, i+1)
	delete(svc.destStats, key) // a real server added again starts from zero, as in the kernel
	return nil
}

func (f *Fake) SetTimeouts(t Timeouts) error {
	if err := f.begin(true); err != nil {
		return err
	}
	defer f.mu.Unlock()
	if err := checkTimeouts(t); err != nil {
		return fmt.Errorf("set IPVS timeouts: %w", err)
	}
	// Zero leaves a timeout unchanged, as in ip_vs_set_timeout().
	if t.TCP != 0 {
		f.timeouts.TCP = t.TCP
	}
	if t.TCPFin != 0 {
		f.timeouts.TCPFin = t.TCPFin
	}
	if t.UDP != 0 {
		f.timeouts.UDP = t.UDP
	}
	return nil
}

// Close makes later calls fail, like using a closed netlink socket.
func (f *Fake) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

// Dump renders the table sorted, one virtual server per line followed by its
// real servers, for golden tests:
//
//	TCP 10.96.0.10:80 twos
//	  -> 10.244.1.5:8080 weight 1
//	UDP 10.96.0.10:53 rr persistent 10800
//	  -> 10.244.1.6:53 weight 0 active 2 inactive 5
//
// Connection counters appear only when non-zero, and a first "timeouts" line
// only when the timeouts differ from the kernel defaults.
func (f *Fake) Dump() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	if f.timeouts != defaultTimeouts {
		fmt.Fprintf(&b, "timeouts tcp %d tcpfin %d udp %d\n",
			f.timeouts.TCP/time.Second, f.timeouts.TCPFin/time.Second, f.timeouts.UDP/time.Second)
	}
	keys := slices.SortedFunc(maps.Keys(f.services), compareKeys)
	for _, k := range keys {
		svc := f.services[k]
		fmt.Fprintf(&b, "%s %s", k, svc.vs.Scheduler)
		if svc.vs.SchedulerFlags != 0 {
			fmt.Fprintf(&b, " flags %s", svc.vs.SchedulerFlags.For(svc.vs.Scheduler))
		}
		if svc.vs.PersistenceTimeout > 0 {
			fmt.Fprintf(&b, " persistent %d", svc.vs.PersistenceTimeout/time.Second)
		}
		b.WriteByte('\n')
		for _, d := range svc.dests {
			fmt.Fprintf(&b, "  -> %s weight %d", d.RealServerKey, d.Weight)
			if d.ActiveConnections != 0 || d.InactiveConnections != 0 {
				fmt.Fprintf(&b, " active %d inactive %d", d.ActiveConnections, d.InactiveConnections)
			}
			b.WriteByte('\n')
		}
	}
	return b.String()
}
