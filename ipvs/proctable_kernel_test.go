package ipvs

import (
	"io"
	"math"
	"net/netip"
	"os"
	"slices"
	"strconv"
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

// timedReads times each read(2) of the table and notes how many services
// had been parsed before it.
type timedReads struct {
	r      io.Reader
	paged  *pagedReader
	before []int
	took   []time.Duration
}

func (t *timedReads) Read(b []byte) (int, error) {
	t.before = append(t.before, t.paged.services)
	start := time.Now()
	n, err := t.r.Read(b)
	t.took = append(t.took, time.Since(start))
	return n, err
}

// BenchmarkKernelTableReadAlongTheTable measures, on a table of
// IPVSPROXY_TABLE_SERVICES virtual servers × 10 (default 20,000), what each
// page of one unbounded read costs per service along the table against a
// destination dump, and where the read should stop: the point that makes
// the table's pages before it plus a dump for each after it cheapest,
// against where pagedReader's rule stops. Not a timed test: it reports.
func BenchmarkKernelTableReadAlongTheTable(b *testing.B) {
	a, k := benchKernel(b)
	n := 20000
	if v, err := strconv.Atoi(os.Getenv("IPVSPROXY_TABLE_SERVICES")); err == nil && v > 0 {
		n = v
	}
	keys := manyVirtualServers(b, a, n, 10)
	var room []RealServer
	sampled, start := 0, time.Now()
	for i := 0; i < len(keys); i += max(len(keys)/500, 1) {
		rss, err := a.ListedRealServers(keys[i], room)
		ok(b, err)
		room, sampled = rss, sampled+1
	}
	dump := time.Since(start) / time.Duration(sampled)
	b.ResetTimer()
	for range b.N {
		_, err := k.table.file.Seek(0, io.SeekStart)
		ok(b, err)
		paged := &pagedReader{dumpCost: func() time.Duration { return time.Hour }}
		timed := &timedReads{r: k.table.file, paged: paged}
		paged.r = timed
		var rss []RealServer
		listed := 0
		whole := time.Now()
		ok(b, parseProcTable(paged, &rss, func(VirtualServerKey, []RealServer) error { listed++; return nil }))
		wall := time.Since(whole)
		if listed != n {
			b.Fatalf("listed %d of %d", listed, n)
		}
		var inReads time.Duration
		for _, d := range timed.took {
			inReads += d
		}
		parse := (wall - inReads) / time.Duration(n)
		b.Logf("%d virtual servers × 10: %d reads, %v in read(2), %v in all; a dump %v (mean of %d), parsing %v a service", n, len(timed.took), inReads.Round(time.Millisecond), wall.Round(time.Millisecond), dump, sampled, parse)
		// Per band of a tenth of the table: read(2) time per service.
		band := n / 10
		var bandTook time.Duration
		next := band
		for i, d := range timed.took {
			bandTook += d
			if i+1 < len(timed.before) && timed.before[i+1] >= next {
				b.Logf("  services %6d-%6d: %v a service in read(2)", next-band, next, bandTook/time.Duration(band))
				bandTook, next = 0, next+band
			}
		}
		// Where to stop: the table's reads up to read i plus a dump for
		// each service after it, at its cheapest; and where pagedReader's
		// rule, given the same reads, stops.
		var table time.Duration
		best, bestAt, ruleAt := time.Duration(math.MaxInt64), 0, -1
		rule := &pagedReader{dumpCost: func() time.Duration { return dump }}
		for i, d := range timed.took {
			table += d
			after := n
			if i+1 < len(timed.before) {
				after = timed.before[i+1]
			}
			if cost := table + time.Duration(n-after)*dump; cost < best {
				best, bestAt = cost, after
			}
			if ruleAt < 0 && i+1 < len(timed.before) {
				rule.before, rule.services, rule.lastRead = timed.before[i], after, d
				if !rule.worthAnotherRead() {
					ruleAt = after
				}
			}
		}
		b.Logf("  cheapest: stop after %d services (%v); the rule stops after %d; reading all %v in read(2), dumping all %v",
			bestAt, best.Round(time.Millisecond), ruleAt, inReads.Round(time.Millisecond), (time.Duration(n) * dump).Round(time.Millisecond))
	}
}
