package ipvs

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"time"
)

// What both the kernel implementation and Fake accept. Checking here, before
// the kernel sees a request, makes the two fail the same way on bad input
// instead of one returning EINVAL and the other succeeding.

const (
	// maxSchedulerName is IP_VS_SCHEDNAME_MAXLEN minus the NUL byte; the
	// kernel's netlink policy rejects longer names with EINVAL.
	maxSchedulerName = 15
	// maxWeight is ipvsadm's limit. moby/ipvs also reads the weight back as
	// 16 bits, so larger weights would not round-trip.
	maxWeight = math.MaxUint16
	// maxTimeoutSeconds: the kernel stores timeouts as seconds*HZ in an int
	// and rejects anything above INT_MAX/HZ; 1000 is the largest HZ.
	maxTimeoutSeconds = math.MaxInt32 / 1000
)

// canonicalAddr strips what the kernel cannot store: an IPv4-mapped IPv6
// address is sent as IPv4 by moby/ipvs (net.IP.To4 succeeds on it), and IPVS
// has no zones.
func canonicalAddr(a netip.Addr) (netip.Addr, error) {
	if !a.IsValid() {
		return netip.Addr{}, errors.New("invalid address")
	}
	return a.Unmap().WithZone(""), nil
}

func (k VirtualServerKey) canonical() (VirtualServerKey, error) {
	switch k.Protocol {
	case TCP, UDP, SCTP:
	default:
		return k, fmt.Errorf("unsupported protocol %s", k.Protocol)
	}
	addr, err := canonicalAddr(k.Address)
	if err != nil {
		return k, err
	}
	k.Address = addr
	return k, nil
}

func checkVirtualServer(vs VirtualServer) (VirtualServer, error) {
	key, err := vs.VirtualServerKey.canonical()
	if err != nil {
		return vs, err
	}
	vs.VirtualServerKey = key
	// The kernel looks an empty name up as module "ip_vs_" and fails with
	// ENOENT like any other unknown scheduler.
	if vs.Scheduler == "" || len(vs.Scheduler) > maxSchedulerName {
		return vs, fmt.Errorf("scheduler %q: %w", vs.Scheduler, ErrNoScheduler)
	}
	if _, err := wholeSeconds(vs.PersistenceTimeout); err != nil {
		return vs, fmt.Errorf("persistence timeout: %w", err)
	}
	return vs, nil
}

// checkRealServerKey canonicalizes a real server's address. A real server of
// the other address family cannot exist (the proxier only masquerades, which
// the kernel refuses across families), so it is reported as not found.
func checkRealServerKey(vs VirtualServerKey, rs RealServerKey) (VirtualServerKey, RealServerKey, error) {
	vs, err := vs.canonical()
	if err != nil {
		return vs, rs, err
	}
	addr, err := canonicalAddr(rs.Address)
	if err != nil {
		return vs, rs, err
	}
	rs.Address = addr
	if addr.Is4() != vs.Address.Is4() {
		return vs, rs, fmt.Errorf("real server of another address family: %w", ErrNotFound)
	}
	return vs, rs, nil
}

// checkRealServer validates a real server to be added or updated.
func checkRealServer(vs VirtualServerKey, rs RealServer) (VirtualServerKey, RealServer, error) {
	vs, err := vs.canonical()
	if err != nil {
		return vs, rs, err
	}
	addr, err := canonicalAddr(rs.Address)
	if err != nil {
		return vs, rs, err
	}
	rs.Address = addr
	// Masquerading across address families is refused by the kernel
	// (EINVAL); moby/ipvs would not even send the family, so check here.
	if addr.Is4() != vs.Address.Is4() {
		return vs, rs, errors.New("real server and virtual server address families differ")
	}
	// The kernel takes only a unicast or local destination
	// (ip_vs_new_dest: inet_addr_type, ipv6_addr_type): never the zero
	// network, the limited broadcast, multicast or the IPv6 unspecified
	// address, wherever they are routed.
	if addr.IsUnspecified() || addr.IsMulticast() || addr.Is4() && (addr.As4()[0] == 0 || addr == netip.AddrFrom4([4]byte{255, 255, 255, 255})) {
		return vs, rs, fmt.Errorf("real server %s is no unicast address", addr)
	}
	if rs.Weight < 0 || rs.Weight > maxWeight {
		return vs, rs, fmt.Errorf("weight %d out of range 0-%d", rs.Weight, maxWeight)
	}
	rs.ActiveConnections, rs.InactiveConnections = 0, 0
	return vs, rs, nil
}

func checkTimeouts(t Timeouts) error {
	for _, d := range []struct {
		name string
		d    time.Duration
	}{{"tcp", t.TCP}, {"tcpfin", t.TCPFin}, {"udp", t.UDP}} {
		if _, err := wholeSeconds(d.d); err != nil {
			return fmt.Errorf("%s timeout: %w", d.name, err)
		}
	}
	return nil
}

// wholeSeconds converts d to the seconds IPVS stores. Fractions are refused
// rather than rounded: a 500ms timeout would silently become "unchanged".
func wholeSeconds(d time.Duration) (uint32, error) {
	if d < 0 || d%time.Second != 0 || d > maxTimeoutSeconds*time.Second {
		return 0, fmt.Errorf("%s is not a whole number of seconds in 0-%d", d, maxTimeoutSeconds)
	}
	return uint32(d / time.Second), nil
}
