package ipvs

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"testing"
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
	err := parseProcTable(strings.NewReader(procTableSample), &room, func(key VirtualServerKey, rss []RealServer) error {
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
			err := parseProcTable(strings.NewReader(text), &room, func(VirtualServerKey, []RealServer) error { return nil })
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
		ok(b, parseProcTable(strings.NewReader(text), &room, func(_ VirtualServerKey, rss []RealServer) error {
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

// A table of more services than walkPerDump pages' worth is read in part:
// the read stops where the next page's walk would cost more than the
// dumps it saves, every service before it whole.
func TestParseProcTableStopsWhereTheWalkCostsMoreThanDumps(t *testing.T) {
	heading := strings.Join(strings.Split(procTableSample, "\n")[:3], "\n") + "\n"
	for _, perPage := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d a page", perPage), func(t *testing.T) {
			pages := [][]byte{[]byte(heading)}
			const services = 3 * walkPerDump * 3
			for i := 0; i < services; i += perPage {
				var page []byte
				for j := i; j < i+perPage; j++ {
					page = fmt.Appendf(page, "TCP  0A60%s:0050 rr \n  -> 0A010001:1F90      Masq    1      0          0\n", hex4(j))
				}
				pages = append(pages, page)
			}
			r := &pageReader{pages: pages}
			var room []RealServer
			listed := 0
			ok(t, parseProcTable(r, &room, func(_ VirtualServerKey, rss []RealServer) error {
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
