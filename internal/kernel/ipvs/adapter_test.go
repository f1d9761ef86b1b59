package ipvs

import (
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/kerneltest"
)

// One table of cases, run against Fake always and against the kernel in a
// fresh network namespace when possible: the kernel half is what proves the
// fake faithful.

var (
	vip4  = netip.MustParseAddr("192.0.2.10")
	vip4b = netip.MustParseAddr("192.0.2.11")
	vip6  = netip.MustParseAddr("2001:db8::10")
	rip4a = netip.MustParseAddr("198.51.100.5")
	rip4b = netip.MustParseAddr("203.0.113.7")
	rip6  = netip.MustParseAddr("2001:db8:1::5")

	tcp80  = VirtualServerKey{Protocol: TCP, Address: vip4, Port: 80}
	udp80  = VirtualServerKey{Protocol: UDP, Address: vip4, Port: 80}
	sctp   = VirtualServerKey{Protocol: SCTP, Address: vip4b, Port: 3868}
	tcp6   = VirtualServerKey{Protocol: TCP, Address: vip6, Port: 443}
	udp6   = VirtualServerKey{Protocol: UDP, Address: vip6, Port: 53}
	tcp80b = VirtualServerKey{Protocol: TCP, Address: vip4b, Port: 80}
)

func rs(addr netip.Addr, port uint16, weight int32) RealServer {
	return RealServer{RealServerKey: RealServerKey{Address: addr, Port: port}, Weight: weight}
}

// timeoutReader is implemented by both *kernel and *Fake.
type timeoutReader interface {
	currentTimeouts() (Timeouts, error)
}

type adapterCase struct {
	name string
	run  func(t *testing.T, a Interface)
}

var adapterCases = []adapterCase{
	{"empty table lists an empty slice", func(t *testing.T, a Interface) {
		vss, err := a.VirtualServers()
		ok(t, err)
		if vss == nil || len(vss) != 0 {
			t.Fatalf("VirtualServers() = %#v, want empty non-nil slice", vss)
		}
	}},
	{"add and list virtual servers of every protocol and family", func(t *testing.T, a Interface) {
		add := []VirtualServer{
			{VirtualServerKey: tcp6, Scheduler: "sh", PersistenceTimeout: 10800 * time.Second},
			{VirtualServerKey: udp80, Scheduler: "wrr"},
			{VirtualServerKey: tcp80, Scheduler: "rr"},
			{VirtualServerKey: sctp, Scheduler: "rr"},
			{VirtualServerKey: udp6, Scheduler: "rr"},
		}
		for _, vs := range add {
			ok(t, a.AddVirtualServer(vs))
		}
		want := []VirtualServer{add[2], add[1], add[3], add[4], add[0]}
		wantVirtualServers(t, a, want...)
	}},
	{"adding an existing virtual server fails with ErrExists", func(t *testing.T, a Interface) {
		ok(t, a.AddVirtualServer(VirtualServer{VirtualServerKey: tcp80, Scheduler: "rr"}))
		wantErr(t, a.AddVirtualServer(VirtualServer{VirtualServerKey: tcp80, Scheduler: "wrr"}), ErrExists)
		// An IPv4-mapped IPv6 address reaches the kernel as IPv4.
		mapped := tcp80
		mapped.Address = netip.AddrFrom16(vip4.As16())
		wantErr(t, a.AddVirtualServer(VirtualServer{VirtualServerKey: mapped, Scheduler: "rr"}), ErrExists)
		wantVirtualServers(t, a, VirtualServer{VirtualServerKey: tcp80, Scheduler: "rr"})
	}},
	{"update changes scheduler and persistence", func(t *testing.T, a Interface) {
		ok(t, a.AddVirtualServer(VirtualServer{VirtualServerKey: tcp80, Scheduler: "rr"}))
		persistent := VirtualServer{VirtualServerKey: tcp80, Scheduler: "wrr", PersistenceTimeout: 60 * time.Second}
		ok(t, a.UpdateVirtualServer(persistent))
		wantVirtualServers(t, a, persistent)
		plain := VirtualServer{VirtualServerKey: tcp80, Scheduler: "wrr"}
		ok(t, a.UpdateVirtualServer(plain))
		wantVirtualServers(t, a, plain)
	}},
	{"scheduler flags of mh and sh are written, read back and updated", func(t *testing.T, a Interface) {
		mh := VirtualServer{VirtualServerKey: tcp80, Scheduler: "mh", SchedulerFlags: SchedulerFlag1 | SchedulerFlag2}
		sh := VirtualServer{VirtualServerKey: tcp6, Scheduler: "sh", SchedulerFlags: SchedulerFlag2, PersistenceTimeout: 60 * time.Second}
		ok(t, a.AddVirtualServer(mh))
		ok(t, a.AddVirtualServer(sh))
		wantVirtualServers(t, a, mh, sh)
		mh.SchedulerFlags = SchedulerFlag1
		ok(t, a.UpdateVirtualServer(mh))
		mh.SchedulerFlags = 0
		mh.Scheduler = "rr"
		ok(t, a.UpdateVirtualServer(mh))
		wantVirtualServers(t, a, mh, sh)
	}},
	{"update or delete of a missing virtual server fails with ErrNotFound", func(t *testing.T, a Interface) {
		ok(t, a.AddVirtualServer(VirtualServer{VirtualServerKey: tcp80, Scheduler: "rr"}))
		wantErr(t, a.UpdateVirtualServer(VirtualServer{VirtualServerKey: udp80, Scheduler: "rr"}), ErrNotFound)
		wantErr(t, a.DeleteVirtualServer(udp80), ErrNotFound)
		wantErr(t, a.DeleteVirtualServer(tcp6), ErrNotFound)
		wantVirtualServers(t, a, VirtualServer{VirtualServerKey: tcp80, Scheduler: "rr"})
	}},
	{"delete removes the virtual server and its real servers", func(t *testing.T, a Interface) {
		ok(t, a.AddVirtualServer(VirtualServer{VirtualServerKey: tcp80, Scheduler: "rr"}))
		ok(t, a.AddRealServer(tcp80, rs(rip4a, 8080, 1)))
		ok(t, a.DeleteVirtualServer(tcp80))
		wantVirtualServers(t, a)
		_, err := a.RealServers(tcp80)
		wantErr(t, err, ErrNotFound)
		ok(t, a.AddVirtualServer(VirtualServer{VirtualServerKey: tcp80, Scheduler: "rr"}))
		wantRealServers(t, a, tcp80)
	}},
	{"unknown scheduler fails with ErrNoScheduler", func(t *testing.T, a Interface) {
		wantErr(t, a.AddVirtualServer(VirtualServer{VirtualServerKey: tcp80, Scheduler: "nosuchsched"}), ErrNoScheduler)
		wantErr(t, a.AddVirtualServer(VirtualServer{VirtualServerKey: tcp80}), ErrNoScheduler)
		wantVirtualServers(t, a)
		ok(t, a.AddVirtualServer(VirtualServer{VirtualServerKey: tcp80, Scheduler: "rr"}))
		wantErr(t, a.UpdateVirtualServer(VirtualServer{VirtualServerKey: tcp80, Scheduler: "nosuchsched"}), ErrNoScheduler)
		wantVirtualServers(t, a, VirtualServer{VirtualServerKey: tcp80, Scheduler: "rr"})
	}},
	{"twos scheduler", func(t *testing.T, a Interface) {
		err := a.AddVirtualServer(VirtualServer{VirtualServerKey: tcp80, Scheduler: "twos"})
		if _, fake := a.(*Fake); !fake && kerneltest.KernelWithoutTwos() {
			// The kernel's refusal, which the daemon's fallback to wrr rests on.
			wantErr(t, err, ErrNoScheduler)
			wantVirtualServers(t, a)
			return
		}
		if errors.Is(err, ErrNoScheduler) {
			kerneltest.Skip(t, kerneltest.NoIPVS, "this kernel has no ip_vs_twos module: %v", err)
		}
		ok(t, err)
		wantVirtualServers(t, a, VirtualServer{VirtualServerKey: tcp80, Scheduler: "twos"})
	}},
	{"real servers: add, list, reweight, delete", func(t *testing.T, a Interface) {
		ok(t, a.AddVirtualServer(VirtualServer{VirtualServerKey: tcp80, Scheduler: "wrr"}))
		ok(t, a.AddRealServer(tcp80, rs(rip4b, 8080, 1)))
		ok(t, a.AddRealServer(tcp80, rs(rip4a, 8080, 3)))
		ok(t, a.AddRealServer(tcp80, rs(rip4a, 9090, 1)))
		wantRealServers(t, a, tcp80, rs(rip4a, 8080, 3), rs(rip4a, 9090, 1), rs(rip4b, 8080, 1))
		// Weight 0 is how a terminating endpoint drains.
		ok(t, a.UpdateRealServer(tcp80, rs(rip4a, 8080, 0)))
		wantRealServers(t, a, tcp80, rs(rip4a, 8080, 0), rs(rip4a, 9090, 1), rs(rip4b, 8080, 1))
		ok(t, a.DeleteRealServer(tcp80, RealServerKey{Address: rip4a, Port: 8080}))
		wantRealServers(t, a, tcp80, rs(rip4a, 9090, 1), rs(rip4b, 8080, 1))
	}},
	{"IPv6 real servers", func(t *testing.T, a Interface) {
		ok(t, a.AddVirtualServer(VirtualServer{VirtualServerKey: udp6, Scheduler: "rr"}))
		ok(t, a.AddRealServer(udp6, rs(rip6, 5353, 1)))
		ok(t, a.UpdateRealServer(udp6, rs(rip6, 5353, 7)))
		wantRealServers(t, a, udp6, rs(rip6, 5353, 7))
		ok(t, a.DeleteRealServer(udp6, RealServerKey{Address: rip6, Port: 5353}))
		wantRealServers(t, a, udp6)
	}},
	{"ListedRealServers lists as RealServers does, and a missing virtual server as empty", func(t *testing.T, a Interface) {
		ok(t, a.AddVirtualServer(VirtualServer{VirtualServerKey: tcp80, Scheduler: "rr"}))
		ok(t, a.AddRealServer(tcp80, rs(rip4b, 8080, 1)))
		ok(t, a.AddRealServer(tcp80, rs(rip4a, 8080, 2)))
		want := []RealServer{rs(rip4a, 8080, 2), rs(rip4b, 8080, 1)}
		same := func(a, b RealServer) bool { return a.RealServerKey == b.RealServerKey && a.Weight == b.Weight }
		got, err := a.ListedRealServers(tcp80, nil)
		ok(t, err)
		if !slices.EqualFunc(got, want, same) {
			t.Fatalf("ListedRealServers(%s, nil) = %v, want %v", tcp80, got, want)
		}
		// Into lent room: the same list, in that room.
		room := make([]RealServer, 5, 8)
		got, err = a.ListedRealServers(tcp80, room)
		ok(t, err)
		if !slices.EqualFunc(got, want, same) || &got[0] != &room[0] {
			t.Fatalf("ListedRealServers(%s, room) = %v (in the room: %v), want %v in it", tcp80, got, &got[0] == &room[0], want)
		}
		// The kernel's dump of a virtual server that does not exist is
		// empty, not an error: RealServers is the one that can tell.
		for _, into := range [][]RealServer{nil, room} {
			got, err = a.ListedRealServers(udp80, into)
			ok(t, err)
			if got == nil || len(got) != 0 {
				t.Fatalf("ListedRealServers(missing %s) = %#v, want an empty slice", udp80, got)
			}
		}
		_, err = a.RealServers(udp80)
		wantErr(t, err, ErrNotFound)
	}},
	{"adding an existing real server fails with ErrExists", func(t *testing.T, a Interface) {
		ok(t, a.AddVirtualServer(VirtualServer{VirtualServerKey: tcp80, Scheduler: "rr"}))
		ok(t, a.AddRealServer(tcp80, rs(rip4a, 8080, 1)))
		wantErr(t, a.AddRealServer(tcp80, rs(rip4a, 8080, 5)), ErrExists)
		wantRealServers(t, a, tcp80, rs(rip4a, 8080, 1))
	}},
	{"real server commands on a missing virtual server fail with ErrNotFound", func(t *testing.T, a Interface) {
		ok(t, a.AddVirtualServer(VirtualServer{VirtualServerKey: tcp80, Scheduler: "rr"}))
		_, err := a.RealServers(udp80)
		wantErr(t, err, ErrNotFound)
		wantErr(t, a.AddRealServer(udp80, rs(rip4a, 8080, 1)), ErrNotFound)
		wantErr(t, a.UpdateRealServer(udp80, rs(rip4a, 8080, 1)), ErrNotFound)
		wantErr(t, a.DeleteRealServer(udp80, RealServerKey{Address: rip4a, Port: 8080}), ErrNotFound)
	}},
	{"update or delete of a missing real server fails with ErrNotFound", func(t *testing.T, a Interface) {
		ok(t, a.AddVirtualServer(VirtualServer{VirtualServerKey: tcp80, Scheduler: "rr"}))
		ok(t, a.AddRealServer(tcp80, rs(rip4a, 8080, 1)))
		wantErr(t, a.UpdateRealServer(tcp80, rs(rip4a, 8081, 1)), ErrNotFound)
		wantErr(t, a.DeleteRealServer(tcp80, RealServerKey{Address: rip4b, Port: 8080}), ErrNotFound)
		wantErr(t, a.DeleteRealServer(tcp80, RealServerKey{Address: rip6, Port: 8080}), ErrNotFound)
		wantRealServers(t, a, tcp80, rs(rip4a, 8080, 1))
	}},
	{"a real server of the other address family is refused", func(t *testing.T, a Interface) {
		ok(t, a.AddVirtualServer(VirtualServer{VirtualServerKey: tcp80, Scheduler: "rr"}))
		err := a.AddRealServer(tcp80, rs(rip6, 8080, 1))
		if err == nil || errors.Is(err, ErrExists) || errors.Is(err, ErrNotFound) {
			t.Fatalf("AddRealServer(IPv6 to IPv4) = %v, want a plain error", err)
		}
		wantRealServers(t, a, tcp80)
	}},
	{"one real server in two virtual servers is two entries", func(t *testing.T, a Interface) {
		ok(t, a.AddVirtualServer(VirtualServer{VirtualServerKey: tcp80, Scheduler: "rr"}))
		ok(t, a.AddVirtualServer(VirtualServer{VirtualServerKey: tcp80b, Scheduler: "rr"}))
		ok(t, a.AddRealServer(tcp80, rs(rip4a, 8080, 1)))
		ok(t, a.AddRealServer(tcp80b, rs(rip4a, 8080, 2)))
		ok(t, a.DeleteRealServer(tcp80, RealServerKey{Address: rip4a, Port: 8080}))
		wantRealServers(t, a, tcp80)
		wantRealServers(t, a, tcp80b, rs(rip4a, 8080, 2))
	}},
	{"real servers written together: each write's outcome, a failed one not stopping the rest", func(t *testing.T, a Interface) {
		ok(t, a.AddVirtualServer(VirtualServer{VirtualServerKey: tcp80, Scheduler: "rr"}))
		ok(t, a.AddVirtualServer(VirtualServer{VirtualServerKey: tcp6, Scheduler: "rr"}))
		ws := []RealServerWrite{
			{Op: AddReal, VirtualServer: tcp80, RealServer: rs(rip4a, 8080, 1)},
			{Op: AddReal, VirtualServer: tcp80, RealServer: rs(rip4a, 8080, 1)},
			{Op: AddReal, VirtualServer: udp80, RealServer: rs(rip4a, 8080, 1)},
			{Op: AddReal, VirtualServer: tcp80, RealServer: rs(rip4b, 8081, -1)},
			{Op: AddReal, VirtualServer: tcp80, RealServer: rs(rip4b, 8081, 3)},
			{Op: UpdateReal, VirtualServer: tcp80, RealServer: rs(rip4b, 8081, 0)},
			{Op: UpdateReal, VirtualServer: tcp80, RealServer: rs(rip4b, 9999, 2)},
			{Op: AddReal, VirtualServer: tcp6, RealServer: rs(rip6, 443, 7)},
			{Op: AddReal, VirtualServer: tcp6, RealServer: rs(rip4a, 443, 7)},
			{Op: DeleteReal, VirtualServer: tcp80, RealServer: rs(rip4a, 8080, 0)},
			{Op: DeleteReal, VirtualServer: tcp80, RealServer: rs(rip4a, 8080, 0)},
		}
		got := WriteRealServers(a, ws)
		if len(got) != len(ws) {
			t.Fatalf("%d outcomes for %d writes", len(got), len(ws))
		}
		// nil: done; errInvalid: refused before the kernel.
		errInvalid := errors.New("invalid")
		want := []error{nil, ErrExists, ErrNotFound, errInvalid, nil, nil, ErrNotFound, nil, errInvalid, nil, ErrNotFound}
		for i := range ws {
			switch {
			case want[i] == nil && got[i] != nil:
				t.Errorf("%v: %v, want success", ws[i], got[i])
			case want[i] == errInvalid && got[i] == nil:
				t.Errorf("%v succeeded, want it refused", ws[i])
			case want[i] != nil && want[i] != errInvalid && !errors.Is(got[i], want[i]):
				t.Errorf("%v: %v, want %v", ws[i], got[i], want[i])
			}
		}
		wantRealServers(t, a, tcp80, rs(rip4b, 8081, 0))
		wantRealServers(t, a, tcp6, rs(rip6, 443, 7))
	}},
	{"invalid input is refused", func(t *testing.T, a Interface) {
		bad := []error{
			a.AddVirtualServer(VirtualServer{VirtualServerKey: VirtualServerKey{Protocol: 99, Address: vip4, Port: 80}, Scheduler: "rr"}),
			a.AddVirtualServer(VirtualServer{VirtualServerKey: VirtualServerKey{Protocol: TCP, Port: 80}, Scheduler: "rr"}),
			a.AddVirtualServer(VirtualServer{VirtualServerKey: tcp80, Scheduler: "rr", PersistenceTimeout: 1500 * time.Millisecond}),
			a.SetTimeouts(Timeouts{TCP: -time.Second}),
		}
		ok(t, a.AddVirtualServer(VirtualServer{VirtualServerKey: tcp80b, Scheduler: "rr"}))
		bad = append(bad, a.AddRealServer(tcp80b, rs(rip4a, 80, -1)), a.AddRealServer(tcp80b, rs(rip4a, 80, 65536)))
		// No unicast destination (the kernel's EINVAL): an endpoint the
		// proxier was given such an address would fail the same way here.
		for _, addr := range []string{"0.0.0.0", "0.1.2.3", "224.0.0.5", "255.255.255.255"} {
			bad = append(bad, a.AddRealServer(tcp80b, rs(netip.MustParseAddr(addr), 80, 1)))
		}
		for i, err := range bad {
			if err == nil {
				t.Errorf("invalid request %d succeeded", i)
			}
		}
		wantVirtualServers(t, a, VirtualServer{VirtualServerKey: tcp80b, Scheduler: "rr"})
		wantRealServers(t, a, tcp80b)
		ok(t, a.AddVirtualServer(VirtualServer{VirtualServerKey: tcp6, Scheduler: "rr"}))
		for _, addr := range []string{"::", "ff02::1", "ff05::2"} {
			if err := a.AddRealServer(tcp6, rs(netip.MustParseAddr(addr), 80, 1)); err == nil {
				t.Errorf("real server %s (no unicast address) added", addr)
			}
		}
		wantRealServers(t, a, tcp6)
	}},
	{"timeouts start at the kernel defaults and zero leaves one unchanged", func(t *testing.T, a Interface) {
		wantTimeouts(t, a, defaultTimeouts)
		ok(t, a.SetTimeouts(Timeouts{TCP: 901 * time.Second}))
		wantTimeouts(t, a, Timeouts{TCP: 901 * time.Second, TCPFin: defaultTimeouts.TCPFin, UDP: defaultTimeouts.UDP})
		ok(t, a.SetTimeouts(Timeouts{TCPFin: 5 * time.Second, UDP: 30 * time.Second}))
		wantTimeouts(t, a, Timeouts{TCP: 901 * time.Second, TCPFin: 5 * time.Second, UDP: 30 * time.Second})
	}},
	{"stats: zero for new servers, ErrNotFound for a missing virtual server", func(t *testing.T, a Interface) {
		r := a.(StatsReader)
		vss, err := r.VirtualServerStats()
		ok(t, err)
		if len(vss) != 0 {
			t.Fatalf("VirtualServerStats() of an empty table = %v, want empty", vss)
		}
		ok(t, a.AddVirtualServer(VirtualServer{VirtualServerKey: tcp80, Scheduler: "rr"}))
		ok(t, a.AddVirtualServer(VirtualServer{VirtualServerKey: udp6, Scheduler: "rr"}))
		ok(t, a.AddRealServer(tcp80, rs(rip4a, 8080, 1)))
		vss, err = r.VirtualServerStats()
		ok(t, err)
		if len(vss) != 2 || vss[tcp80] != (Stats{}) || vss[udp6] != (Stats{}) {
			t.Fatalf("VirtualServerStats() = %v, want zero counters for %s and %s", vss, tcp80, udp6)
		}
		rss, err := r.RealServerStats(tcp80)
		ok(t, err)
		if len(rss) != 1 || rss[RealServerKey{Address: rip4a, Port: 8080}] != (Stats{}) {
			t.Fatalf("RealServerStats(%s) = %v, want one zero entry", tcp80, rss)
		}
		_, err = r.RealServerStats(udp80)
		wantErr(t, err, ErrNotFound)
	}},
	{"virtual servers added together", func(t *testing.T, a Interface) {
		flags, err := ParseSchedulerFlags("sh", "sh-fallback,sh-port")
		ok(t, err)
		mapped := tcp80b
		mapped.Address = netip.AddrFrom16(vip4b.As16())
		add := []VirtualServer{
			{VirtualServerKey: tcp80, Scheduler: "rr"},
			{VirtualServerKey: udp80, Scheduler: "wrr", PersistenceTimeout: 3 * time.Hour},
			{VirtualServerKey: sctp, Scheduler: "rr"},
			{VirtualServerKey: tcp6, Scheduler: "sh", SchedulerFlags: flags},
			{VirtualServerKey: udp6, Scheduler: "rr", PersistenceTimeout: 10 * time.Second},
			{VirtualServerKey: tcp80, Scheduler: "wrr"},          // exists by now
			{VirtualServerKey: tcp80b, Scheduler: "nosuchsched"}, // unknown scheduler
			{VirtualServerKey: tcp80b},                           // no scheduler
			{VirtualServerKey: mapped, Scheduler: "rr"},          // reaches the kernel as IPv4
		}
		errs := AddVirtualServers(a, add)
		for _, err := range errs[:5] {
			ok(t, err)
		}
		wantErr(t, errs[5], ErrExists)
		wantErr(t, errs[6], ErrNoScheduler)
		wantErr(t, errs[7], ErrNoScheduler)
		ok(t, errs[8])
		want := []VirtualServer{add[0], add[1], {VirtualServerKey: tcp80b, Scheduler: "rr"}, add[2], add[4], add[3]}
		wantVirtualServers(t, a, want...)
		// More than one send's worth, each answered.
		var many []VirtualServer
		for i := range 150 {
			many = append(many, VirtualServer{VirtualServerKey: VirtualServerKey{Protocol: TCP, Address: netip.AddrFrom4([4]byte{203, 0, 113, byte(i)}), Port: 8080}, Scheduler: "rr"})
		}
		for i, err := range AddVirtualServers(a, many) {
			if err != nil {
				t.Fatalf("%s: %v", many[i].VirtualServerKey, err)
			}
		}
		// Each one is in the kernel: looked up by its key, which no other
		// namespace's table can shift.
		for _, vs := range many {
			if _, err := a.RealServers(vs.VirtualServerKey); err != nil {
				t.Fatalf("%s after adding it: %v", vs.VirtualServerKey, err)
			}
		}
		if n := settledCount(t, a); n != len(want)+len(many) {
			t.Fatalf("%d virtual servers after adding %d more, want %d", n, len(many), len(want)+len(many))
		}
	}},
	{"every real server read as one table", func(t *testing.T, a Interface) {
		table, isTable := a.(RealServerTable)
		if !isTable {
			t.Fatalf("%T reads no real-server table", a)
		}
		ok(t, a.AddVirtualServer(VirtualServer{VirtualServerKey: tcp80, Scheduler: "rr"}))
		ok(t, a.AddVirtualServer(VirtualServer{VirtualServerKey: udp80, Scheduler: "rr"}))
		ok(t, a.AddVirtualServer(VirtualServer{VirtualServerKey: sctp, Scheduler: "rr"}))
		ok(t, a.AddVirtualServer(VirtualServer{VirtualServerKey: tcp6, Scheduler: "sh", PersistenceTimeout: time.Hour}))
		ok(t, a.AddVirtualServer(VirtualServer{VirtualServerKey: udp6, Scheduler: "rr"})) // no real servers
		ok(t, a.AddRealServer(tcp80, rs(rip4a, 8080, 1)))
		ok(t, a.AddRealServer(tcp80, rs(rip4b, 65535, 0))) // draining
		ok(t, a.AddRealServer(udp80, rs(rip4a, 53, 65535)))
		ok(t, a.AddRealServer(sctp, rs(rip4b, 3868, 3)))
		ok(t, a.AddRealServer(tcp6, rs(rip6, 8443, 2)))
		ok(t, a.AddRealServer(tcp6, rs(netip.MustParseAddr("2001:db8:ffff::abcd"), 1, 1)))
		read := map[VirtualServerKey][]RealServer{}
		ok(t, table.EachRealServerList(func(key VirtualServerKey, rss []RealServer) error {
			if _, twice := read[key]; twice {
				t.Errorf("%s listed twice", key)
			}
			read[key] = slices.Clone(rss)
			return nil
		}))
		for _, key := range []VirtualServerKey{tcp80, udp80, sctp, tcp6, udp6} {
			want, err := a.ListedRealServers(key, nil)
			ok(t, err)
			got, listed := read[key]
			if !listed {
				t.Fatalf("%s not in the table read %v", key, read)
			}
			slices.SortFunc(got, func(x, y RealServer) int { return compareRealKeys(x.RealServerKey, y.RealServerKey) })
			slices.SortFunc(want, func(x, y RealServer) int { return compareRealKeys(x.RealServerKey, y.RealServerKey) })
			if !slices.Equal(got, want) {
				t.Fatalf("table lists %s's real servers as %v, its own dump as %v", key, got, want)
			}
		}
		if len(read) != 5 {
			t.Fatalf("table lists %d virtual servers, want 5: %v", len(read), read)
		}
		stop := errors.New("stop")
		if err := table.EachRealServerList(func(VirtualServerKey, []RealServer) error { return stop }); !errors.Is(err, stop) {
			t.Fatalf("an error from fn came back as %v", err)
		}
	}},
	{"calls after Close fail", func(t *testing.T, a Interface) {
		ok(t, a.Close())
		if _, err := a.VirtualServers(); err == nil {
			t.Fatal("VirtualServers after Close succeeded")
		}
		if err := a.AddVirtualServer(VirtualServer{VirtualServerKey: tcp80, Scheduler: "rr"}); err == nil {
			t.Fatal("AddVirtualServer after Close succeeded")
		}
	}},
}

func TestAdapter(t *testing.T) {
	t.Run("fake", func(t *testing.T) {
		for _, c := range adapterCases {
			t.Run(c.name, func(t *testing.T) { c.run(t, NewFake()) })
		}
	})
	t.Run("kernel", func(t *testing.T) {
		skipUnlessKernel(t)
		for _, c := range adapterCases {
			t.Run(c.name, func(t *testing.T) { c.run(t, newKernelInFreshNamespace(t)) })
		}
	})
}

func ok(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

func wantErr(t *testing.T, err, sentinel error) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("error = %v, want %v", err, sentinel)
	}
}

// settledCount is how many virtual servers a's listing holds once two
// listings in a row agree. The kernel (before per-namespace service tables)
// keeps one service table for every network namespace, and a dump longer
// than one message resumes by position in it: a namespace torn down
// meanwhile (an earlier test's, whose clean-up the kernel defers) shifts
// the position and the dump skips or repeats one. IPVS does not mark such a
// dump interrupted.
func settledCount(t *testing.T, a Interface) int {
	t.Helper()
	last := -1
	for range 5 {
		vss, err := a.VirtualServers()
		ok(t, err)
		if len(vss) == last {
			return last
		}
		last = len(vss)
		time.Sleep(100 * time.Millisecond)
	}
	return last
}

// wantVirtualServers: a listing holds want, in any order (want is sorted).
func wantVirtualServers(t *testing.T, a Interface, want ...VirtualServer) {
	t.Helper()
	got, err := a.VirtualServers()
	ok(t, err)
	sortVirtualServers(got)
	if !slices.Equal(got, want) {
		t.Fatalf("VirtualServers() =\n  %v\nwant\n  %v", got, want)
	}
}

func wantRealServers(t *testing.T, a Interface, vs VirtualServerKey, want ...RealServer) {
	t.Helper()
	got, err := a.RealServers(vs)
	ok(t, err)
	if !slices.Equal(got, want) {
		t.Fatalf("RealServers(%s) =\n  %v\nwant\n  %v", vs, got, want)
	}
}

func wantTimeouts(t *testing.T, a Interface, want Timeouts) {
	t.Helper()
	got, err := a.(timeoutReader).currentTimeouts()
	ok(t, err)
	if got != want {
		t.Fatalf("timeouts = %+v, want %+v", got, want)
	}
}
