package ipvs

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

// A table as Linux 6.12 prints it (ip_vs_info_seq_show): an IPv4 service
// with two destinations, a one-packet UDP one, a persistent IPv6 one, a
// firewall-mark one whose destination is not any VirtualServer's, an
// IPv6 one without destinations and an ICMPv6 one (no VirtualServer has
// that protocol).
const procTableSample = `IP Virtual Server version 1.2.1 (size=4096)
Prot LocalAddress:Port Scheduler Flags
  -> RemoteAddress:Port Forward Weight ActiveConn InActConn
TCP  C000020A:0050 rr 
  -> C6336405:1F90      Masq    1      3          7         
  -> CB007107:FFFF      Masq    0      0          0         
UDP  C000020A:0035 rr ops 
  -> C6336405:0035      Masq    65535  0          4294967295
TCP  [2001:0db8:0000:0000:0000:0000:0000:0010]:01BB sh persistent 3600 FFFFFFFF
  -> [2001:0db8:0001:0000:0000:0000:0000:abcd]:20FB      Masq    2      0          0         
FWM  00000007 rr 
  -> C6336406:0050      Route   1      0          0         
UDP  [2001:0db8:0000:0000:0000:0000:0000:0010]:0035 rr 
ICMPv6  [2001:0db8:0000:0000:0000:0000:0000:0011]:0000 rr 
SCTP  C000020B:0F1C rr 
  -> CB007107:0F1C      Masq    3      0          0         
`

func TestParseProcTable(t *testing.T) {
	var room []RealServer
	type listed struct {
		key VirtualServerKey
		rss []RealServer
	}
	var got []listed
	err := parseProcTable(&pagedReader{r: strings.NewReader(procTableSample)}, &room, func(key VirtualServerKey, rss []RealServer) error {
		got = append(got, listed{key, slices.Clone(rss)})
		return nil
	})
	ok(t, err)
	withConns := func(r RealServer, active, inactive uint32) RealServer {
		r.ActiveConnections, r.InactiveConnections = active, inactive
		return r
	}
	want := []listed{
		{tcp80, []RealServer{withConns(rs(rip4a, 8080, 1), 3, 7), rs(rip4b, 65535, 0)}},
		{VirtualServerKey{Protocol: UDP, Address: vip4, Port: 53}, []RealServer{withConns(rs(rip4a, 53, 65535), 0, 4294967295)}},
		{tcp6, []RealServer{rs(netip.MustParseAddr("2001:db8:1::abcd"), 8443, 2)}},
		{udp6, []RealServer{}},
		{sctp, []RealServer{rs(rip4b, 3868, 3)}},
	}
	if len(got) != len(want) {
		t.Fatalf("parsed %d virtual servers %v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i].key != want[i].key || !slices.Equal(got[i].rss, want[i].rss) {
			t.Errorf("virtual server %d: %s %v, want %s %v", i, got[i].key, got[i].rss, want[i].key, want[i].rss)
		}
	}
}

func TestParseProcTableRefusesWhatItDoesNotKnow(t *testing.T) {
	heading := strings.Join(strings.Split(procTableSample, "\n")[:3], "\n") + "\n"
	for name, text := range map[string]string{
		"another heading":         strings.Replace(procTableSample, "Prot LocalAddress:Port Scheduler Flags", "Prot LocalAddress:Port Scheduler Flags Extra", 1),
		"no heading":              "TCP  C000020A:0050 rr \n",
		"a short address":         heading + "TCP  C00002:0050 rr \n",
		"a compressed IPv6":       heading + "TCP  [2001:db8::10]:01BB rr \n",
		"a decimal port":          heading + "TCP  C000020A:80 rr \n",
		"a destination too short": heading + "TCP  C000020A:0050 rr \n  -> C6336405:1F90      Masq    1      3\n",
		"a negative weight":       heading + "TCP  C000020A:0050 rr \n  -> C6336405:1F90      Masq    -1     0          0\n",
		"a weight too large":      heading + "TCP  C000020A:0050 rr \n  -> C6336405:1F90      Masq    2147483648 0          0\n",
		"a non-hex address":       heading + "TCP  C00002ZA:0050 rr \n",
	} {
		t.Run(name, func(t *testing.T) {
			var room []RealServer
			err := parseProcTable(&pagedReader{r: strings.NewReader(text)}, &room, func(VirtualServerKey, []RealServer) error { return nil })
			if !errors.Is(err, errProcTableFormat) {
				t.Fatalf("parse = %v, want errProcTableFormat", err)
			}
		})
	}
}

func BenchmarkParseProcTable(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(strings.Join(strings.Split(procTableSample, "\n")[:3], "\n") + "\n")
	for i := range 1000 {
		sb.WriteString("TCP  0A60" + hex4(i) + ":0050 rr \n")
		for j := range 10 {
			sb.WriteString("  -> 0A01" + hex4(i) + ":" + hex4(8000+j) + "      Masq    1      0          0         \n")
		}
	}
	text := sb.String()
	var room []RealServer
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		ok(b, parseProcTable(&pagedReader{r: strings.NewReader(text)}, &room, func(_ VirtualServerKey, rss []RealServer) error {
			n += len(rss)
			return nil
		}))
		if n != 10000 {
			b.Fatalf("parsed %d real servers, want 10000", n)
		}
	}
}

func hex4(i int) string {
	const digits = "0123456789ABCDEF"
	return string([]byte{digits[i>>12&15], digits[i>>8&15], digits[i>>4&15], digits[i&15]})
}

// pageReader answers each read with one page of services, as the kernel's
// seq_file does (a page each), counting the reads.
type pageReader struct {
	pages [][]byte
	reads int
}

func (p *pageReader) Read(b []byte) (int, error) {
	if p.reads == len(p.pages) {
		return 0, io.EOF
	}
	p.reads++
	return copy(b, p.pages[p.reads-1]), nil
}

// tablePages is a table of services, perPage of them a page (the heading
// its own page), each service with one real server.
func tablePages(services, perPage int) [][]byte {
	heading := strings.Join(strings.Split(procTableSample, "\n")[:3], "\n") + "\n"
	pages := [][]byte{[]byte(heading)}
	for i := 0; i < services; i += perPage {
		var page []byte
		for j := i; j < i+perPage; j++ {
			page = fmt.Appendf(page, "TCP  0A60%s:0050 rr \n  -> 0A010001:1F90      Masq    1      0          0\n", hex4(j))
		}
		pages = append(pages, page)
	}
	return pages
}

// clockedPages answers reads as pageReader does, each taking the time
// cost(the read's number) on a clock of its own.
type clockedPages struct {
	pageReader
	clock time.Time
	cost  func(read int) time.Duration
}

func (c *clockedPages) Read(b []byte) (int, error) {
	c.clock = c.clock.Add(c.cost(c.reads))
	return c.pageReader.Read(b)
}

// readClocked parses pages read at cost against dumps of dumpCost each and
// returns how many services were listed.
func readClocked(t *testing.T, pages [][]byte, dumpCost time.Duration, cost func(read int) time.Duration) (listed int, r *clockedPages) {
	t.Helper()
	r = &clockedPages{pageReader: pageReader{pages: pages}, cost: cost}
	paged := &pagedReader{r: r, dumpCost: func() time.Duration { return dumpCost }, now: func() time.Time { return r.clock }}
	var room []RealServer
	ok(t, parseProcTable(paged, &room, func(VirtualServerKey, []RealServer) error { listed++; return nil }))
	return listed, r
}

// With dumps timed, the table is read on while its pages cost less than
// the dumps of the services they hold, however many services that is:
// 18,000 services, where the bound used before a dump is timed
// (walkPerDump) stops at 6,000.
func TestTableReadGoesOnWhilePagesCostLessThanDumps(t *testing.T) {
	const services, perPage = 3 * walkPerDump * 3, 3
	pages := tablePages(services, perPage)
	// A walk step 1 ns, a dump 100 µs: the last page costs 18 µs against
	// 300 µs of dumps.
	listed, r := readClocked(t, pages, 100*time.Microsecond, func(read int) time.Duration {
		return time.Duration(read*perPage) * time.Nanosecond
	})
	if listed != services || r.reads != len(pages) {
		t.Fatalf("listed %d of %d services in %d of %d reads, want all", listed, services, r.reads, len(pages))
	}
}

// The read stops where pages cost more than the dumps they save: a walk
// step 50 ns and a dump 100 µs cross at 6,000 services before a page of
// three (300 µs). Slow pages here and there (a preemption, two in a row)
// do not stop it.
func TestTableReadStopsWherePagesCostMoreThanDumps(t *testing.T) {
	const services, perPage = 12000, 3
	pages := tablePages(services, perPage)
	step := func(read int) time.Duration { return time.Duration(read*perPage) * 50 * time.Nanosecond }
	listed, _ := readClocked(t, pages, 100*time.Microsecond, func(read int) time.Duration {
		if read == 500 || read == 900 || read == 901 {
			return time.Second
		}
		return step(read)
	})
	// The first page over is read 2,001 (6,003 services before it); the
	// estimate from the average is within a few dozen services of it (the
	// three slow pages, each capped at four dumps a service, and c0).
	if want := 6000; listed < want-60 || listed > want+120 {
		t.Fatalf("listed %d services, want about %d", listed, want)
	}
}

// dumpCost starts at its first sample and then moves a sixteenth of the
// way to each new one.
func TestDumpCostIsARunningAverage(t *testing.T) {
	var c dumpCost
	if c.average() != 0 {
		t.Fatalf("average before any dump %v, want 0", c.average())
	}
	c.add(160 * time.Microsecond)
	if got := c.average(); got != 160*time.Microsecond {
		t.Fatalf("after one dump %v, want 160µs", got)
	}
	c.add(320 * time.Microsecond)
	if got := c.average(); got != 170*time.Microsecond {
		t.Fatalf("after a slow dump %v, want 170µs", got)
	}
}

// Before any dump was timed, a table of more services than walkPerDump
// pages' worth is read in part: the read stops where the services before
// a read pass walkPerDump × a page's, every service before it whole.
func TestParseProcTableStopsWhereTheWalkCostsMoreThanDumps(t *testing.T) {
	for _, perPage := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d a page", perPage), func(t *testing.T) {
			pages := tablePages(3*walkPerDump*3, perPage)
			r := &pageReader{pages: pages}
			var room []RealServer
			listed := 0
			ok(t, parseProcTable(&pagedReader{r: r}, &room, func(_ VirtualServerKey, rss []RealServer) error {
				if len(rss) != 1 {
					t.Fatalf("a service listed with %d real servers, want 1", len(rss))
				}
				listed++
				return nil
			}))
			// The read stops once the services before a read pass
			// walkPerDump × the services a page; the last one read is
			// not passed on (it could continue in the next page).
			want := walkPerDump*perPage + perPage - 1
			if listed < want-perPage || listed > want+perPage {
				t.Fatalf("listed %d services in %d reads, want about %d", listed, r.reads, want)
			}
			if r.reads >= len(pages) {
				t.Fatalf("read all %d pages: the walk was not bounded", r.reads)
			}
		})
	}
}
