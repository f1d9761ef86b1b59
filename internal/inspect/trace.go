package inspect

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/ipvsproxy/ipvsproxy/internal/rules"
	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
)

// ParsePacket reads `trace SRC DST:PORT[/PROTO]` (PROTO tcp, udp or sctp;
// tcp by default).
func ParsePacket(src, dst string) (rules.Packet, error) {
	var p rules.Packet
	s, err := netip.ParseAddr(src)
	if err != nil {
		return p, fmt.Errorf("source %q is not an IP address", src)
	}
	proto := "tcp"
	if i := strings.LastIndex(dst, "/"); i >= 0 {
		dst, proto = dst[:i], dst[i+1:]
	}
	d, err := netip.ParseAddrPort(dst)
	if err != nil {
		return p, fmt.Errorf("destination %q is not ADDRESS:PORT (IPv6 as [ADDRESS]:PORT)", dst)
	}
	p.Protocol = parseProtocol(proto)
	if p.Protocol == 0 {
		return p, fmt.Errorf("protocol %q is not tcp, udp or sctp", proto)
	}
	p.Source, p.Destination = s.Unmap(), netip.AddrPortFrom(d.Addr().Unmap(), d.Port())
	return p, nil
}

// NewTraceReport traces pkt through the snapshot (the proxier's own
// tracer) and checks what the trace relied on against the kernel.
func NewTraceReport(snap snapshot.Snapshot, k *KernelState, pkt rules.Packet) TraceReport {
	t := rules.TracePacket(snap, pkt)
	r := TraceReport{APIVersion: APIVersion, Kind: "TraceReport", Packet: pkt.String(), Trace: t, Kernel: []string{}}
	if k == nil {
		r.Kernel = append(r.Kernel, "not read")
		return r
	}
	r.Kernel = append(r.Kernel, k.Warnings...)
	key := ipvs.VirtualServerKey{Protocol: pkt.Protocol, Address: pkt.Destination.Addr(), Port: pkt.Destination.Port()}
	// The desired virtual server of the destination, whether or not the
	// packet reached it (a filter may drop it first).
	var want *snapshot.DesiredVirtualServer
	for i := range snap.VirtualServers {
		if snap.VirtualServers[i].VirtualServerKey == key {
			want = &snap.VirtualServers[i]
		}
	}
	var kvs *KernelVirtualServer
	for i := range k.VirtualServers {
		if k.VirtualServers[i].VirtualServerKey == key {
			kvs = &k.VirtualServers[i]
		}
	}
	switch {
	case want == nil && kvs == nil:
		r.Kernel = append(r.Kernel, fmt.Sprintf("no virtual server %s in the kernel either", key))
	case want == nil:
		r.Kernel = append(r.Kernel, fmt.Sprintf("DIFFERS: the kernel has a virtual server %s (%s) that the proxier does not want; IPVS takes the packet there", key, kvs.Scheduler))
	case kvs == nil:
		r.Kernel = append(r.Kernel, fmt.Sprintf("DIFFERS: virtual server %s is missing from the kernel; until the next full sync repairs it the packet is not load-balanced", key))
	default:
		have := map[ipvs.RealServerKey]int32{}
		for _, rs := range kvs.RealServers {
			have[rs.RealServerKey] = rs.Weight
		}
		var diffs []string
		for _, rs := range want.RealServers {
			w, ok := have[rs.RealServerKey]
			switch {
			case !ok:
				diffs = append(diffs, fmt.Sprintf("real server %s missing", rs.RealServerKey))
			case w != rs.Weight:
				diffs = append(diffs, fmt.Sprintf("real server %s has weight %d, want %d", rs.RealServerKey, w, rs.Weight))
			}
			delete(have, rs.RealServerKey)
		}
		for rk, w := range have {
			if w > 0 {
				diffs = append(diffs, fmt.Sprintf("real server %s (weight %d) is not wanted", rk, w))
			}
		}
		if len(diffs) == 0 {
			r.Kernel = append(r.Kernel, fmt.Sprintf("virtual server %s is in the kernel with the same real servers", key))
		} else {
			r.Kernel = append(r.Kernel, "DIFFERS: virtual server "+key.String()+": "+strings.Join(diffs, "; "))
		}
	}
	return r
}
