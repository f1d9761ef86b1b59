package ipvs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/nldump"
)

// The reads of the IPVS table stream through internal/kernel/nldump and parse
// each answer straight into VirtualServer and RealServer. moby/ipvs (still
// used for the writes but those of real servers in batches, batch.go)
// gathers a whole dump, copies it, and parses every
// attribute and the statistics into slices of its own: at 10,000 virtual
// servers its GetServices alone held 27 MB while a full read ran.

// Generic netlink and IPVS numbers (linux/genetlink.h, linux/ip_vs.h).
const (
	genlHeaderLen   = 4 // struct genlmsghdr: cmd, version, reserved
	ipvsGenlVersion = 1

	ipvsCmdGetService = 4
	ipvsCmdGetDest    = 8

	ipvsCmdAttrService = 1
	ipvsCmdAttrDest    = 2

	ipvsSvcAttrAF        = 1
	ipvsSvcAttrProtocol  = 2
	ipvsSvcAttrAddr      = 3
	ipvsSvcAttrPort      = 4
	ipvsSvcAttrFWMark    = 5
	ipvsSvcAttrSchedName = 6
	ipvsSvcAttrFlags     = 7
	ipvsSvcAttrTimeout   = 8
	ipvsSvcAttrStats     = 10
	ipvsSvcAttrStats64   = 12

	ipvsDestAttrAddr        = 1
	ipvsDestAttrPort        = 2
	ipvsDestAttrWeight      = 4
	ipvsDestAttrActiveConns = 7
	ipvsDestAttrInactConns  = 8
	ipvsDestAttrStats       = 10
	ipvsDestAttrAddrFamily  = 11
	ipvsDestAttrStats64     = 12

	ipvsStatsConns    = 1
	ipvsStatsInPkts   = 2
	ipvsStatsOutPkts  = 3
	ipvsStatsInBytes  = 4
	ipvsStatsOutBytes = 5
)

// dumper reads the IPVS table of one namespace over its own generic
// netlink socket (moby/ipvs's keeps the single writes); the batched
// real-server writes share it (batch.go).
type dumper struct {
	conn   *netlink.Conn
	reader *nldump.Reader
	family netlink.HeaderType
	// scratch gathers one virtual server's real servers; the list handed
	// out is a copy of exactly their length. Appending to a fresh slice
	// left 10 real servers in room for 16: at 10,000 virtual servers a
	// full read's view held 3.5 MB of slack.
	scratch []RealServer
}

// dialDumper opens the socket in the namespace whose file descriptor is
// nsFD (0: the current one). family is the IPVS generic netlink family's
// number.
func dialDumper(nsFD int, family uint16) (*dumper, error) {
	conn, err := netlink.Dial(unix.NETLINK_GENERIC, &netlink.Config{NetNS: nsFD})
	if err != nil {
		return nil, fmt.Errorf("open IPVS dump socket: %w", err)
	}
	reader, err := nldump.NewReader(conn)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("open IPVS dump socket: %w", err)
	}
	return &dumper{conn: conn, reader: reader, family: netlink.HeaderType(family)}, nil
}

func (d *dumper) Close() error { return d.conn.Close() }

func (d *dumper) request(cmd uint8, attrs []byte) netlink.Message {
	data := make([]byte, genlHeaderLen, genlHeaderLen+len(attrs))
	data[0], data[1] = cmd, ipvsGenlVersion
	return netlink.Message{Header: netlink.Header{Type: d.family}, Data: append(data, attrs...)}
}

// eachVirtualServer dumps every virtual server with its counters.
// Firewall-mark services have no address and port and are left out.
func (d *dumper) eachVirtualServer(fn func(VirtualServer, Stats)) error {
	// The kernel's service dump takes no attributes; an empty service
	// attribute is what ipvsadm and moby/ipvs send.
	attrs := nldump.AppendAttribute(nil, ipvsCmdAttrService|unix.NLA_F_NESTED, nil)
	return d.reader.Dump(d.request(ipvsCmdGetService, attrs), func(payload []byte) error {
		vs, stats, ok, err := parseServiceMessage(payload)
		if err != nil {
			return fmt.Errorf("parse dumped virtual server: %w", err)
		}
		if ok {
			fn(vs, stats)
		}
		return nil
	}, nil)
}

// eachRealServer dumps the real servers of key (canonical) with their
// counters. The kernel answers a virtual server that does not exist with
// an empty dump.
func (d *dumper) eachRealServer(key VirtualServerKey, fn func(RealServer, Stats)) error {
	return d.reader.Dump(d.request(ipvsCmdGetDest, serviceKeyAttributes(key)), func(payload []byte) error {
		rs, stats, ok, err := parseDestinationMessage(payload, key.Address.Is6())
		if err != nil {
			return fmt.Errorf("parse dumped real server: %w", err)
		}
		if ok {
			fn(rs, stats)
		}
		return nil
	}, nil)
}

func (d *dumper) virtualServers() ([]VirtualServer, error) {
	out := []VirtualServer{}
	err := d.eachVirtualServer(func(vs VirtualServer, _ Stats) { out = append(out, vs) })
	return out, err
}

// realServers appends to into[:0], or (into nil) returns a new slice of
// the list's length.
func (d *dumper) realServers(key VirtualServerKey, into []RealServer) ([]RealServer, error) {
	if into != nil {
		into = into[:0]
		err := d.eachRealServer(key, func(rs RealServer, _ Stats) { into = append(into, rs) })
		return into, err
	}
	d.scratch = d.scratch[:0]
	err := d.eachRealServer(key, func(rs RealServer, _ Stats) { d.scratch = append(d.scratch, rs) })
	if err != nil {
		return nil, err
	}
	return append(make([]RealServer, 0, len(d.scratch)), d.scratch...), nil
}

// serviceKeyAttributes is IPVS_CMD_ATTR_SERVICE naming key: the family,
// protocol, address and port the kernel looks a service up by
// (ip_vs_genl_parse_service without the full entry).
func serviceKeyAttributes(key VirtualServerKey) []byte {
	af := uint16(unix.AF_INET)
	if key.Address.Is6() {
		af = unix.AF_INET6
	}
	var inner []byte
	inner = nldump.AppendAttribute(inner, ipvsSvcAttrAF, binary.NativeEndian.AppendUint16(nil, af))
	inner = nldump.AppendAttribute(inner, ipvsSvcAttrProtocol, binary.NativeEndian.AppendUint16(nil, uint16(key.Protocol)))
	inner = nldump.AppendAttribute(inner, ipvsSvcAttrAddr, key.Address.AsSlice())
	inner = nldump.AppendAttribute(inner, ipvsSvcAttrPort, binary.BigEndian.AppendUint16(nil, key.Port))
	return nldump.AppendAttribute(nil, ipvsCmdAttrService|unix.NLA_F_NESTED, inner)
}

// parseServiceMessage parses one answer of the service dump (genlmsghdr,
// then IPVS_CMD_ATTR_SERVICE). ok is false for a service that cannot be a
// VirtualServer (a firewall mark, an unknown family).
func parseServiceMessage(payload []byte) (VirtualServer, Stats, bool, error) {
	var vs VirtualServer
	var stats Stats
	ok := false
	err := commandAttribute(payload, ipvsCmdAttrService, func(attrs []byte) error {
		var af uint16
		var addr []byte
		var fwmark, flags, timeout uint32
		stats64 := false
		err := nldump.Attributes(attrs, func(typ uint16, v []byte) error {
			switch typ {
			case ipvsSvcAttrAF:
				af = nativeUint16(v)
			case ipvsSvcAttrProtocol:
				vs.Protocol = Protocol(nativeUint16(v))
			case ipvsSvcAttrAddr:
				addr = v
			case ipvsSvcAttrPort:
				if len(v) >= 2 {
					vs.Port = binary.BigEndian.Uint16(v)
				}
			case ipvsSvcAttrFWMark:
				fwmark = nativeUint32(v)
			case ipvsSvcAttrSchedName:
				vs.Scheduler = schedulerName(v)
			case ipvsSvcAttrFlags:
				flags = nativeUint32(v) // struct ip_vs_flags: flags, then mask
			case ipvsSvcAttrTimeout:
				timeout = nativeUint32(v)
			case ipvsSvcAttrStats:
				if !stats64 {
					return parseStats(v, false, &stats)
				}
			case ipvsSvcAttrStats64:
				stats64 = true
				return parseStats(v, true, &stats)
			}
			return nil
		})
		if err != nil || fwmark != 0 {
			return err
		}
		vs.Address, ok = addressOf(addr, af)
		if flags&flagPersistent != 0 {
			vs.PersistenceTimeout = time.Duration(timeout) * time.Second
		}
		vs.SchedulerFlags = SchedulerFlags(flags) & schedulerFlagMask
		return nil
	})
	return vs, stats, ok && err == nil, err
}

// parseDestinationMessage parses one answer of the destination dump.
// Kernels before 3.18 send no address family for a destination; it is then
// the virtual server's (is6).
func parseDestinationMessage(payload []byte, is6 bool) (RealServer, Stats, bool, error) {
	var rs RealServer
	var stats Stats
	ok := false
	err := commandAttribute(payload, ipvsCmdAttrDest, func(attrs []byte) error {
		af := uint16(unix.AF_INET)
		if is6 {
			af = unix.AF_INET6
		}
		var addr []byte
		stats64 := false
		err := nldump.Attributes(attrs, func(typ uint16, v []byte) error {
			switch typ {
			case ipvsDestAttrAddrFamily:
				af = nativeUint16(v)
			case ipvsDestAttrAddr:
				addr = v
			case ipvsDestAttrPort:
				if len(v) >= 2 {
					rs.Port = binary.BigEndian.Uint16(v)
				}
			case ipvsDestAttrWeight:
				rs.Weight = int32(nativeUint32(v))
			case ipvsDestAttrActiveConns:
				rs.ActiveConnections = nativeUint32(v)
			case ipvsDestAttrInactConns:
				rs.InactiveConnections = nativeUint32(v)
			case ipvsDestAttrStats:
				if !stats64 {
					return parseStats(v, false, &stats)
				}
			case ipvsDestAttrStats64:
				stats64 = true
				return parseStats(v, true, &stats)
			}
			return nil
		})
		if err != nil {
			return err
		}
		rs.Address, ok = addressOf(addr, af)
		return nil
	})
	return rs, stats, ok && err == nil, err
}

// parseStats reads IPVS_*_ATTR_STATS (connections and packets in 32 bits)
// or, from Linux 4.1, IPVS_*_ATTR_STATS64 (every counter in 64), which
// wins when both are sent.
func parseStats(b []byte, wide bool, s *Stats) error {
	*s = Stats{}
	return nldump.Attributes(b, func(typ uint16, v []byte) error {
		var n uint64
		switch {
		case wide || typ == ipvsStatsInBytes || typ == ipvsStatsOutBytes:
			if len(v) >= 8 {
				n = binary.NativeEndian.Uint64(v)
			}
		default:
			n = uint64(nativeUint32(v))
		}
		switch typ {
		case ipvsStatsConns:
			s.Connections = n
		case ipvsStatsInPkts:
			s.PacketsIn = n
		case ipvsStatsOutPkts:
			s.PacketsOut = n
		case ipvsStatsInBytes:
			s.BytesIn = n
		case ipvsStatsOutBytes:
			s.BytesOut = n
		}
		return nil
	})
}

var errNoCommandAttribute = errors.New("answer without its IPVS attribute")

// commandAttribute calls fn with the payload of the top-level attribute
// want of one IPVS answer (after its genlmsghdr).
func commandAttribute(payload []byte, want uint16, fn func(attrs []byte) error) error {
	if len(payload) < genlHeaderLen {
		return errors.New("short generic netlink message")
	}
	found := false
	err := nldump.Attributes(payload[genlHeaderLen:], func(typ uint16, v []byte) error {
		if typ != want || found {
			return nil
		}
		found = true
		return fn(v)
	})
	if err == nil && !found {
		err = errNoCommandAttribute
	}
	return err
}

// addressOf reads IPVS's union nf_inet_addr: an IPv4 address is its first
// four bytes.
func addressOf(b []byte, af uint16) (netip.Addr, bool) {
	switch {
	case af == unix.AF_INET && len(b) >= 4:
		return netip.AddrFrom4([4]byte(b[:4])), true
	case af == unix.AF_INET6 && len(b) >= 16:
		return netip.AddrFrom16([16]byte(b[:16])).Unmap(), true
	}
	return netip.Addr{}, false
}

func nativeUint16(v []byte) uint16 {
	if len(v) < 2 {
		return 0
	}
	return binary.NativeEndian.Uint16(v)
}

func nativeUint32(v []byte) uint32 {
	if len(v) < 4 {
		return 0
	}
	return binary.NativeEndian.Uint32(v)
}

// knownSchedulers lets a dumped scheduler name share one string instead of
// allocating one per virtual server.
var knownSchedulers = map[string]string{}

func init() {
	for _, name := range StockSchedulers {
		knownSchedulers[name] = name
	}
}

// schedulerName is the NUL-terminated name in v.
func schedulerName(v []byte) string {
	for i, c := range v {
		if c == 0 {
			v = v[:i]
			break
		}
	}
	if name, ok := knownSchedulers[string(v)]; ok {
		return name
	}
	return string(v)
}
