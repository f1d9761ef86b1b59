package ipvs

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	mobyipvs "github.com/moby/ipvs"
	"golang.org/x/sys/unix"
)

// manyVirtualServers adds n TCP virtual servers, half IPv4 and half IPv6,
// each with per real servers (batched), and returns their keys.
func manyVirtualServers(t testing.TB, a Interface, n, per int) []VirtualServerKey {
	t.Helper()
	var keys []VirtualServerKey
	var ws []RealServerWrite
	for i := range n {
		key := VirtualServerKey{Protocol: TCP, Address: netip.AddrFrom4([4]byte{192, 0, 2, byte(i % 250)}), Port: uint16(80 + i/250)}
		rip := func(r int) netip.Addr { return netip.AddrFrom4([4]byte{198, 51, 100, byte(r + 1)}) }
		if i%2 == 1 {
			key.Address = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 14: byte(i >> 8), 15: byte(i)})
			rip = func(r int) netip.Addr {
				return netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 1, 15: byte(r + 1)})
			}
		}
		ok(t, a.AddVirtualServer(VirtualServer{VirtualServerKey: key, Scheduler: "rr"}))
		keys = append(keys, key)
		for r := range per {
			ws = append(ws, RealServerWrite{Op: AddReal, VirtualServer: key, RealServer: rs(rip(r), uint16(8000+r), int32(r))})
		}
	}
	for i, err := range WriteRealServers(a, ws) {
		if err != nil {
			t.Fatalf("%v: %v", ws[i], err)
		}
	}
	return keys
}

// The kernel's table read lists every virtual server exactly as its own
// destination dump does, over many reads of the file (3,000 virtual
// servers, 15,000 real servers, both families: about 1 MB of text), and
// leaves a firewall-mark service and its real server out.
func TestKernelTableListsWhatTheDumpsList(t *testing.T) {
	skipUnlessKernel(t)
	a := newKernelInFreshNamespace(t)
	k := a.(*kernel)
	if k.table == nil {
		t.Fatal("no /proc/net/ip_vs opened in the namespace")
	}
	fwmark := &mobyipvs.Service{FWMark: 7, AddressFamily: unix.AF_INET, SchedName: "rr", Netmask: 0xffffffff}
	ok(t, k.handle.NewService(fwmark))
	ok(t, k.handle.NewDestination(fwmark, &mobyipvs.Destination{Address: rip4a.AsSlice(), Port: 80, Weight: 1, AddressFamily: unix.AF_INET}))
	keys := manyVirtualServers(t, a, 3000, 5)
	read := map[VirtualServerKey][]RealServer{}
	ok(t, k.EachRealServerList(func(key VirtualServerKey, rss []RealServer) error {
		if _, twice := read[key]; twice {
			t.Errorf("%s listed twice", key)
		}
		read[key] = slices.Clone(rss)
		return nil
	}))
	if len(read) != len(keys) {
		t.Fatalf("the table lists %d virtual servers, want %d", len(read), len(keys))
	}
	// The read timed a dump of the first virtual server it listed, to
	// weigh its pages against (no dump was made before it).
	if k.dumpCost.average() <= 0 {
		t.Fatal("the table read timed no dump")
	}
	for _, key := range keys {
		want, err := a.ListedRealServers(key, nil)
		ok(t, err)
		got := read[key]
		sortRealServers(got)
		sortRealServers(want)
		if len(want) != 5 || !slices.Equal(got, want) {
			t.Fatalf("the table lists %s's real servers as %v, its dump as %v", key, got, want)
		}
	}
	// A second read starts again from the top.
	n := 0
	ok(t, k.EachRealServerList(func(VirtualServerKey, []RealServer) error { n++; return nil }))
	if n != len(keys) {
		t.Fatalf("a second read listed %d virtual servers, want %d", n, len(keys))
	}
}

// On the kernel's table the read weighs each timed page against the
// adapter's dump cost: against dumps that cost next to nothing it stops
// after the first pages, against dumps that cost a second it lists all
// 3,000 virtual servers.
func TestKernelTableReadWeighsPagesAgainstDumps(t *testing.T) {
	skipUnlessKernel(t)
	a := newKernelInFreshNamespace(t)
	k := a.(*kernel)
	keys := manyVirtualServers(t, a, 3000, 5)
	count := func() int {
		n := 0
		ok(t, k.EachRealServerList(func(VirtualServerKey, []RealServer) error { n++; return nil }))
		return n
	}
	k.dumpCost.ns.Store(1) // a nanosecond: no page is worth reading after the first
	if n := count(); n == 0 || n >= len(keys)/10 {
		t.Fatalf("with dumps of 1 ns the read listed %d of %d virtual servers, want the first pages only", n, len(keys))
	}
	k.dumpCost.ns.Store(int64(time.Second))
	if n := count(); n != len(keys) {
		t.Fatalf("with dumps of 1 s the read listed %d of %d virtual servers, want all", n, len(keys))
	}
}

// BenchmarkKernelRealServerReads: reading every real server of 1,000
// virtual servers × 10, a destination dump each (the full re-check before)
// against one read of the table.
func BenchmarkKernelRealServerReads(b *testing.B) {
	a, k := benchKernel(b)
	keys := manyVirtualServers(b, a, 1000, 10)
	count := func(b *testing.B, n int) {
		if n != len(keys)*10 {
			b.Fatalf("read %d real servers, want %d", n, len(keys)*10)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(keys)), "ns/virtual-server")
	}
	b.Run("dump-each", func(b *testing.B) {
		var room []RealServer
		n := 0
		for range b.N {
			n = 0
			for _, key := range keys {
				rss, err := a.ListedRealServers(key, room)
				ok(b, err)
				room, n = rss, n+len(rss)
			}
		}
		count(b, n)
	})
	b.Run("table", func(b *testing.B) {
		n := 0
		for range b.N {
			n = 0
			ok(b, k.EachRealServerList(func(_ VirtualServerKey, rss []RealServer) error { n += len(rss); return nil }))
		}
		count(b, n)
	})
}
