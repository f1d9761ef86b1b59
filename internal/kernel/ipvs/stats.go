package ipvs

import "fmt"

// Stats are the traffic counters the kernel keeps for a virtual or a real
// server since it was created (ip_vs_stats). A virtual server's counters
// include the traffic of real servers that were deleted since.
type Stats struct {
	// Connections counts connections scheduled (a UDP "connection" is one
	// IPVS flow entry).
	Connections uint64
	PacketsIn   uint64
	PacketsOut  uint64
	BytesIn     uint64
	BytesOut    uint64
}

// Add returns the sum of s and o.
func (s Stats) Add(o Stats) Stats {
	return Stats{
		Connections: s.Connections + o.Connections,
		PacketsIn:   s.PacketsIn + o.PacketsIn, PacketsOut: s.PacketsOut + o.PacketsOut,
		BytesIn: s.BytesIn + o.BytesIn, BytesOut: s.BytesOut + o.BytesOut,
	}
}

// StatsReader reads the traffic counters. It is apart from Interface because
// only `ipvsproxy inspect` and the per-Service metrics read them, never the
// sync; the kernel table and Fake both implement it.
type StatsReader interface {
	// VirtualServerStats returns the counters of every virtual server in the
	// namespace (empty when there are none), from one dump.
	VirtualServerStats() (map[VirtualServerKey]Stats, error)
	// RealServerStats returns the counters of the real servers of vs (empty
	// when it has none); ErrNotFound when vs does not exist.
	RealServerStats(vs VirtualServerKey) (map[RealServerKey]Stats, error)
}

var (
	_ StatsReader = (*kernel)(nil)
	_ StatsReader = (*Fake)(nil)
)

func (k *kernel) VirtualServerStats() (map[VirtualServerKey]Stats, error) {
	if _, err := k.lock(); err != nil {
		return nil, err
	}
	defer k.mu.Unlock()
	out := map[VirtualServerKey]Stats{}
	err := k.dump.eachVirtualServer(func(vs VirtualServer, s Stats) { out[vs.VirtualServerKey] = s })
	if err != nil {
		return nil, fmt.Errorf("read virtual server stats: %w", err)
	}
	return out, nil
}

func (k *kernel) RealServerStats(key VirtualServerKey) (map[RealServerKey]Stats, error) {
	key, err := key.canonical()
	if err != nil {
		return nil, fmt.Errorf("read real server stats of %s: %w", key, err)
	}
	h, err := k.lock()
	if err != nil {
		return nil, err
	}
	defer k.mu.Unlock()
	// The destination dump answers an unknown virtual server with nothing.
	if _, err := h.GetService(toService(VirtualServer{VirtualServerKey: key})); err != nil {
		return nil, fmt.Errorf("read real server stats of %s: %w", key, serviceError(err))
	}
	out := map[RealServerKey]Stats{}
	err = k.dump.eachRealServer(key, func(rs RealServer, s Stats) { out[rs.RealServerKey] = s })
	if err != nil {
		return nil, fmt.Errorf("read real server stats of %s: %w", key, destinationError(err))
	}
	return out, nil
}

func (f *Fake) VirtualServerStats() (map[VirtualServerKey]Stats, error) {
	if err := f.begin(false); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	out := map[VirtualServerKey]Stats{}
	for k, s := range f.services {
		out[k] = s.stats
	}
	return out, nil
}

func (f *Fake) RealServerStats(key VirtualServerKey) (map[RealServerKey]Stats, error) {
	if err := f.begin(false); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	key, err := key.canonical()
	if err != nil {
		return nil, fmt.Errorf("read real server stats of %s: %w", key, err)
	}
	svc, ok := f.services[key]
	if !ok {
		return nil, fmt.Errorf("read real server stats of %s: %w", key, ErrNotFound)
	}
	out := map[RealServerKey]Stats{}
	for _, d := range svc.dests {
		out[d.RealServerKey] = svc.destStats[d.RealServerKey]
	}
	return out, nil
}

// AddTraffic counts traffic through a real server, as packets would: both
// the real server's and its virtual server's counters grow, and the virtual
// server keeps its share after the real server is deleted. It is not a write.
func (f *Fake) AddTraffic(vs VirtualServerKey, rs RealServerKey, s Stats) error {
	vs, rs, err := checkRealServerKey(vs, rs)
	if err != nil {
		return fmt.Errorf("add traffic to %s of %s: %w", rs, vs, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	svc, ok := f.services[vs]
	if !ok {
		return fmt.Errorf("add traffic to %s of %s: virtual server %w", rs, vs, ErrNotFound)
	}
	if _, ok := svc.dest(rs); !ok {
		return fmt.Errorf("add traffic to %s of %s: real server %w", rs, vs, ErrNotFound)
	}
	svc.stats = svc.stats.Add(s)
	svc.destStats[rs] = svc.destStats[rs].Add(s)
	return nil
}
