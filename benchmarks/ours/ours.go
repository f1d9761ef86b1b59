// Package ours runs the benchmark operations on ipvsproxy's Proxier.Sync,
// the daemon's own sync path, over the kernel adapters it is given.
package ours

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/ipvsproxy/ipvsproxy/benchmarks/shape"
	"github.com/ipvsproxy/ipvsproxy/internal/adapters"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/internal/proxier"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// Config is the proxier configuration of the benchmarks: the shape's
// ranges, the families it needs.
func Config(s shape.Shape) ipvsproxy.Config {
	cfg := ipvsproxy.DefaultConfig()
	cfg.ClusterCIDRs = []netip.Prefix{shape.ClusterCIDR}
	cfg.ServiceCIDRs = []netip.Prefix{shape.ServiceCIDR}
	cfg.NodePortMin, cfg.NodePortMax = shape.NodePortMin, shape.NodePortMax
	cfg.ResyncShares = shape.ResyncShares
	if s.NoServiceCIDR {
		cfg.ServiceCIDRs = nil
	}
	if s.Mix {
		cfg.Families = append(cfg.Families, v1.IPv6Protocol)
		cfg.ClusterCIDRs = append(cfg.ClusterCIDRs, shape.ClusterCIDR6)
		cfg.ServiceCIDRs = append(cfg.ServiceCIDRs, shape.ServiceCIDR6)
	}
	return cfg
}

// FakeKernel is every adapter's Fake; links is the netif to use (a Fake,
// or the real one on an ifb link).
func FakeKernel(links netif.Interface) adapters.Kernel {
	k, _, _ := adapters.Open(adapters.Options{Fake: true, Families: adapters.BothFamilies, Links: links}) // the Fakes cannot fail
	return k
}

// Run times every operation on shape s: the cold sync once, the others
// repeats times each. k must be empty.
func Run(s shape.Shape, k adapters.Kernel, repeats int) (shape.Result, error) {
	return RunWith(s, k, repeats, nil)
}

// RunWith is Run, calling afterSync (when not nil) right after each sync,
// with the operation it timed ("" for a sync between operations that is
// not timed): where a caller counts each operation's kernel calls apart
// (kernel-bench's time per adapter call) or profiles after the cold sync.
func RunWith(s shape.Shape, k adapters.Kernel, repeats int, afterSync func(op string)) (shape.Result, error) {
	res := shape.Result{Side: "ipvsproxy", Shape: s.Name(), Services: s.Services, Millis: map[string][]float64{}, Writes: map[string]int{}}
	cfg := Config(s)
	p, err := proxier.New(cfg, shape.NodeName, k, nil)
	if err != nil {
		return res, err
	}
	// world is the latest of every object, for the restarted proxier.
	world := map[string]any{}
	// The Services and slices as the daemon's informer cache holds them:
	// compact, shared by the cache (here world) and the tracker.
	setService := func(svc *v1.Service) {
		compact := ipvsproxy.CompactService(svc)
		world["svc/"+svc.Name] = compact
		p.Tracker().SetCompactService(compact)
	}
	setSlices := func(sls []*discovery.EndpointSlice) {
		for _, sl := range sls {
			compact := ipvsproxy.CompactEndpointSlice(sl)
			world["slice/"+sl.Name] = compact
			p.Tracker().SetSlice(compact)
		}
	}
	for i := 0; i < s.Services; i++ {
		setService(s.Service(i))
		setSlices(s.Slices(i, s.Endpoints, 0))
	}
	var last proxier.SyncResult
	after := func(op string) {
		if afterSync != nil {
			afterSync(op)
		}
	}
	sync := func(op string, wantFull bool) error {
		start := time.Now()
		r := p.Sync()
		res.Millis[op] = append(res.Millis[op], float64(time.Since(start).Microseconds())/1000)
		after(op)
		last = r
		res.Writes[op] = r.Writes
		if err := r.Err(); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		if r.Full != wantFull {
			return fmt.Errorf("%s: full=%v, want %v", op, r.Full, wantFull)
		}
		return nil
	}
	if err := sync(shape.OpCold, true); err != nil {
		return res, err
	}
	mid := s.Services / 2
	for rep := 0; rep < repeats; rep++ {
		setSlices(s.Slices(mid, s.Endpoints+1, 0))
		if err := sync(shape.OpEndpointAdd, false); err != nil {
			return res, err
		}
		setSlices(s.Slices(mid, s.Endpoints, 0))
		if err := sync(shape.OpEndpointRemove, false); err != nil {
			return res, err
		}
		extra := s.Services + rep
		setService(s.Service(extra))
		setSlices(s.Slices(extra, s.Endpoints, 0))
		if err := sync(shape.OpServiceAdd, false); err != nil {
			return res, err
		}
		if err := sync(shape.OpNoop, false); err != nil {
			return res, err
		}
		p.RequestFullSync()
		if err := sync(shape.OpFullResync, true); err != nil {
			return res, err
		}
		// A period between full ones: every tenth is full, so skip it.
		if p.PeriodElapsed() {
			p.Sync()
			after("")
			p.PeriodElapsed()
		}
		if err := sync(shape.OpShareResync, false); err != nil {
			return res, err
		}
		if last.ResyncedVirtualServers == 0 || last.Writes != 0 {
			return res, fmt.Errorf("%s re-read %d virtual servers and wrote %d objects; want some and none", shape.OpShareResync, last.ResyncedVirtualServers, last.Writes)
		}
		// Ten periods in a row, the full one among them: the share row
		// above leaves the full period out, this one averages it in.
		var cycle time.Duration
		cycleWrites := 0
		for range shape.ResyncShares {
			p.PeriodElapsed()
			start := time.Now()
			r := p.Sync()
			cycle += time.Since(start)
			cycleWrites += r.Writes
			if err := r.Err(); err != nil {
				return res, fmt.Errorf("%s: %w", shape.OpResyncCycle, err)
			}
		}
		res.Millis[shape.OpResyncCycle] = append(res.Millis[shape.OpResyncCycle], float64(cycle.Microseconds())/1000/shape.ResyncShares)
		after(shape.OpResyncCycle)
		res.Writes[shape.OpResyncCycle] = cycleWrites
		// 1% of the endpoints: one of every tenth Service replaced.
		for _, i := range shape.Churned(s, rep) {
			setSlices(s.Slices(i, s.Endpoints, rep+1))
		}
		if err := sync(shape.OpChurn, false); err != nil {
			return res, err
		}
	}
	// Restart: a new proxier adopts what the old one left, repeats times.
	for rep := 0; rep < repeats; rep++ {
		p2, err := proxier.New(cfg, shape.NodeName, k, nil)
		if err != nil {
			return res, err
		}
		// The same world the first proxier ended with.
		for _, obj := range world {
			switch o := obj.(type) {
			case *ipvsproxy.Service:
				p2.Tracker().SetCompactService(o)
			case *ipvsproxy.EndpointSlice:
				p2.Tracker().SetSlice(o)
			}
		}
		p = p2
		if err := sync(shape.OpRestart, true); err != nil {
			return res, err
		}
		if w := res.Writes[shape.OpRestart]; w != 0 {
			return res, fmt.Errorf("restart adoption wrote %d kernel objects, want 0", w)
		}
	}
	return res, nil
}
