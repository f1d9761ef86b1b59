package ipvs

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/nldump"
)

// kernelAnswer builds one IPVS answer as ip_vs_ctl.c fills it: genlmsghdr,
// then the top-level attribute top nested around attrs.
func kernelAnswer(cmd uint8, top uint16, attrs []byte) []byte {
	b := []byte{cmd, ipvsGenlVersion, 0, 0}
	return append(b, nldump.AppendAttribute(nil, top|unix.NLA_F_NESTED, attrs)...)
}

func u16(v uint16) []byte  { return binary.NativeEndian.AppendUint16(nil, v) }
func u32(v uint32) []byte  { return binary.NativeEndian.AppendUint32(nil, v) }
func u64(v uint64) []byte  { return binary.NativeEndian.AppendUint64(nil, v) }
func be16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }

// unionAddr is union nf_inet_addr: an IPv4 address in the first 4 of 16.
func unionAddr(a netip.Addr) []byte {
	b := make([]byte, 16)
	copy(b, a.AsSlice())
	return b
}

func statsAttrs(wide bool, conns, in, out, bytesIn, bytesOut uint64) []byte {
	var b []byte
	for i, n := range []uint64{conns, in, out} {
		v := u32(uint32(n))
		if wide {
			v = u64(n)
		}
		b = nldump.AppendAttribute(b, uint16(i+1), v)
	}
	b = nldump.AppendAttribute(b, ipvsStatsInBytes, u64(bytesIn))
	return nldump.AppendAttribute(b, ipvsStatsOutBytes, u64(bytesOut))
}

func TestParseServiceAnswer(t *testing.T) {
	flags := append(u32(flagPersistent|uint32(SchedulerFlag1)|0x2 /* hashed, masked away */), u32(^uint32(0))...)
	var attrs []byte
	attrs = nldump.AppendAttribute(attrs, ipvsSvcAttrAF, u16(unix.AF_INET6))
	attrs = nldump.AppendAttribute(attrs, ipvsSvcAttrProtocol, u16(uint16(UDP)))
	attrs = nldump.AppendAttribute(attrs, ipvsSvcAttrAddr, unionAddr(vip6))
	attrs = nldump.AppendAttribute(attrs, ipvsSvcAttrPort, be16(53))
	attrs = nldump.AppendAttribute(attrs, ipvsSvcAttrSchedName, []byte("sh\x00"))
	attrs = nldump.AppendAttribute(attrs, ipvsSvcAttrFlags, flags)
	attrs = nldump.AppendAttribute(attrs, ipvsSvcAttrTimeout, u32(10800))
	// STATS in 32 bits first, then STATS64 which wins (a counter past 2^32).
	attrs = nldump.AppendAttribute(attrs, ipvsSvcAttrStats|unix.NLA_F_NESTED, statsAttrs(false, 1, 2, 3, 4, 5))
	attrs = nldump.AppendAttribute(attrs, ipvsSvcAttrStats64|unix.NLA_F_NESTED, statsAttrs(true, 1<<33, 2, 3, 4, 5))

	vs, stats, ok, err := parseServiceMessage(kernelAnswer(ipvsCmdGetService, ipvsCmdAttrService, attrs))
	if err != nil || !ok {
		t.Fatalf("parseServiceMessage: ok %v, err %v", ok, err)
	}
	want := VirtualServer{VirtualServerKey: udp6, Scheduler: "sh", SchedulerFlags: SchedulerFlag1, PersistenceTimeout: 3 * time.Hour}
	if vs != want {
		t.Errorf("parsed %+v, want %+v", vs, want)
	}
	if wantStats := (Stats{Connections: 1 << 33, PacketsIn: 2, PacketsOut: 3, BytesIn: 4, BytesOut: 5}); stats != wantStats {
		t.Errorf("counters %+v, want %+v", stats, wantStats)
	}
}

func TestParseServiceAnswerLeavesOutFirewallMarks(t *testing.T) {
	var attrs []byte
	attrs = nldump.AppendAttribute(attrs, ipvsSvcAttrAF, u16(unix.AF_INET))
	attrs = nldump.AppendAttribute(attrs, ipvsSvcAttrFWMark, u32(7))
	attrs = nldump.AppendAttribute(attrs, ipvsSvcAttrSchedName, []byte("rr\x00"))
	if _, _, ok, err := parseServiceMessage(kernelAnswer(ipvsCmdGetService, ipvsCmdAttrService, attrs)); ok || err != nil {
		t.Errorf("firewall-mark service: ok %v, err %v; want left out without an error", ok, err)
	}
}

func TestParseDestinationAnswer(t *testing.T) {
	for _, tc := range []struct {
		name     string
		family   []byte // nil: a kernel before 3.18, without the attribute
		is6      bool
		addr     netip.Addr
		wantAddr netip.Addr
	}{
		{"IPv4", u16(unix.AF_INET), false, rip4a, rip4a},
		{"IPv6", u16(unix.AF_INET6), true, rip6, rip6},
		{"IPv4 without a family attribute", nil, false, rip4b, rip4b},
		{"IPv6 without a family attribute", nil, true, rip6, rip6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var attrs []byte
			attrs = nldump.AppendAttribute(attrs, ipvsDestAttrAddr, unionAddr(tc.addr))
			attrs = nldump.AppendAttribute(attrs, ipvsDestAttrPort, be16(8080))
			attrs = nldump.AppendAttribute(attrs, 3 /* forwarding method */, u32(0))
			attrs = nldump.AppendAttribute(attrs, ipvsDestAttrWeight, u32(65535))
			attrs = nldump.AppendAttribute(attrs, ipvsDestAttrActiveConns, u32(4))
			attrs = nldump.AppendAttribute(attrs, ipvsDestAttrInactConns, u32(9))
			attrs = nldump.AppendAttribute(attrs, ipvsDestAttrStats|unix.NLA_F_NESTED, statsAttrs(false, 6, 7, 8, 9, 10))
			if tc.family != nil {
				attrs = nldump.AppendAttribute(attrs, ipvsDestAttrAddrFamily, tc.family)
			}
			got, stats, ok, err := parseDestinationMessage(kernelAnswer(ipvsCmdGetDest, ipvsCmdAttrDest, attrs), tc.is6)
			if err != nil || !ok {
				t.Fatalf("parseDestinationMessage: ok %v, err %v", ok, err)
			}
			want := RealServer{RealServerKey: RealServerKey{Address: tc.wantAddr, Port: 8080}, Weight: 65535, ActiveConnections: 4, InactiveConnections: 9}
			if got != want {
				t.Errorf("parsed %+v, want %+v", got, want)
			}
			if wantStats := (Stats{Connections: 6, PacketsIn: 7, PacketsOut: 8, BytesIn: 9, BytesOut: 10}); stats != wantStats {
				t.Errorf("counters %+v, want %+v", stats, wantStats)
			}
		})
	}
}

// A malformed answer is an error, never a panic or a made-up entry.
func TestParseMalformedAnswers(t *testing.T) {
	good := kernelAnswer(ipvsCmdGetDest, ipvsCmdAttrDest, nldump.AppendAttribute(nldump.AppendAttribute(nil, ipvsDestAttrAddr, unionAddr(rip4a)), ipvsDestAttrPort, be16(80)))
	for i := range good {
		if _, _, ok, err := parseDestinationMessage(good[:i], false); ok && err == nil && i < len(good)-2 {
			t.Errorf("answer cut to %d of %d bytes parsed as a real server", i, len(good))
		}
	}
	bad := append([]byte(nil), good...)
	binary.NativeEndian.PutUint16(bad[genlHeaderLen:], 0xffff) // top attribute longer than the answer
	if _, _, _, err := parseDestinationMessage(bad, false); err == nil {
		t.Errorf("an attribute longer than its message parsed without an error")
	}
	if _, _, _, err := parseServiceMessage([]byte{ipvsCmdGetService, 1, 0, 0}); err == nil {
		t.Errorf("an answer without its service attribute parsed without an error")
	}
	// A short family or address is no entry.
	attrs := nldump.AppendAttribute(nldump.AppendAttribute(nil, ipvsSvcAttrAF, u16(unix.AF_INET6)), ipvsSvcAttrAddr, []byte{1, 2, 3, 4})
	if _, _, ok, _ := parseServiceMessage(kernelAnswer(ipvsCmdGetService, ipvsCmdAttrService, attrs)); ok {
		t.Errorf("an IPv6 service with a 4-byte address parsed as a virtual server")
	}
}

func TestServiceKeyAttributesNameTheService(t *testing.T) {
	b := serviceKeyAttributes(tcp6)
	got := map[uint16][]byte{}
	err := commandAttribute(append([]byte{0, 0, 0, 0}, b...), ipvsCmdAttrService, func(attrs []byte) error {
		return attributesInto(attrs, got)
	})
	if err != nil {
		t.Fatal(err)
	}
	if nativeUint16(got[ipvsSvcAttrAF]) != unix.AF_INET6 || Protocol(nativeUint16(got[ipvsSvcAttrProtocol])) != TCP ||
		binary.BigEndian.Uint16(got[ipvsSvcAttrPort]) != 443 || netip.AddrFrom16([16]byte(got[ipvsSvcAttrAddr])) != vip6 {
		t.Errorf("service key attributes %v do not name %s", got, tcp6)
	}
}

func attributesInto(b []byte, m map[uint16][]byte) error {
	return nldump.Attributes(b, func(typ uint16, v []byte) error { m[typ] = v; return nil })
}

// The point of parsing by hand: a full read at 10,000 virtual servers and
// 100,000 real servers allocates nothing per answer beyond the entry itself.
func TestParsingAnAnswerAllocatesNothing(t *testing.T) {
	var attrs []byte
	attrs = nldump.AppendAttribute(attrs, ipvsDestAttrAddr, unionAddr(rip6))
	attrs = nldump.AppendAttribute(attrs, ipvsDestAttrPort, be16(8080))
	attrs = nldump.AppendAttribute(attrs, ipvsDestAttrWeight, u32(1))
	attrs = nldump.AppendAttribute(attrs, ipvsDestAttrStats64|unix.NLA_F_NESTED, statsAttrs(true, 1, 2, 3, 4, 5))
	attrs = nldump.AppendAttribute(attrs, ipvsDestAttrAddrFamily, u16(unix.AF_INET6))
	dest := kernelAnswer(ipvsCmdGetDest, ipvsCmdAttrDest, attrs)
	attrs = nil
	attrs = nldump.AppendAttribute(attrs, ipvsSvcAttrAF, u16(unix.AF_INET))
	attrs = nldump.AppendAttribute(attrs, ipvsSvcAttrProtocol, u16(uint16(TCP)))
	attrs = nldump.AppendAttribute(attrs, ipvsSvcAttrAddr, unionAddr(vip4))
	attrs = nldump.AppendAttribute(attrs, ipvsSvcAttrPort, be16(80))
	attrs = nldump.AppendAttribute(attrs, ipvsSvcAttrSchedName, []byte("rr\x00"))
	svc := kernelAnswer(ipvsCmdGetService, ipvsCmdAttrService, attrs)
	if n := testing.AllocsPerRun(100, func() { parseDestinationMessage(dest, true) }); n != 0 {
		t.Errorf("parsing a real server allocates %v times, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { parseServiceMessage(svc) }); n != 0 {
		t.Errorf("parsing a virtual server allocates %v times, want 0", n)
	}
}
