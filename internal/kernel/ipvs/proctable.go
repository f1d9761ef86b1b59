package ipvs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"sync"

	"github.com/vishvananda/netns"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/nsthread"
)

// Every virtual server's real servers in one read. IPVS's netlink interface
// has no dump of every destination: IPVS_CMD_GET_DEST names one service,
// and each costs a request, a buffer of destinations and another receive
// for the dump's end. A full re-check of 10,000 Services (12,500 virtual
// servers) made 12,500 of those round trips, most of its time on a real
// kernel. The kernel's /proc/net/ip_vs lists each service followed by its
// destinations (address, port, forwarding method, weight, active and
// inactive connections: everything RealServer holds), a page of it per
// read(2).

// RealServerTable reads the real servers of every virtual server in one
// pass.
type RealServerTable interface {
	// EachRealServerList calls fn with each virtual server that has an
	// address (firewall-mark services are left out) and its real servers,
	// in the kernel's order. rss is valid during the call only. The read is
	// not one snapshot: a virtual server added or removed by someone else
	// meanwhile may shift the read, so that one is missed or listed twice;
	// each one listed is whole. A large table is listed in part (where
	// reading on would cost more than a dump per virtual server): the
	// caller reads what is not listed one at a time. The kernel adapter
	// whose table could not be opened answers every read with why.
	EachRealServerList(fn func(key VirtualServerKey, rss []RealServer) error) error
}

var _ RealServerTable = (*kernel)(nil)

// procTableReadSize is the buffer of one read(2) of the table. The kernel
// answers a read with at most its own buffer's worth (a page, unless one
// service's listing needed more), whatever was asked.
const procTableReadSize = 256 << 10

// walkPerDump bounds a table read. At every read(2) the kernel walks its
// service table from the start to the read's position
// (ip_vs_info_seq_start), and a read returns a page: n services, r a
// page, cost n²/2r steps of that walk in all, quadratic. A read is worth
// it while its walk (as many steps as services before it) costs less than
// the destination dumps of the r services it returns: on the VM's emulated
// CPU a dump cost about 2,500 steps (185 µs against 73 ns,
// BenchmarkKernelRealServerReads at 1,000 and 10,000). Past that the read
// stops and the caller reads the rest one virtual server at a time.
const walkPerDump = 2000

// procTable is /proc/net/ip_vs of the adapter's namespace, opened once
// (a proc file stays bound to the namespace it was opened in) and read
// again from its start each time.
type procTable struct {
	mu   sync.Mutex
	file *os.File
	rss  []RealServer // one virtual server's, reused
}

// openProcTable opens the namespace's table from a thread inside it (nsFD
// 0: the current namespace). A missing table only takes the fast read
// away, so its error is for the caller to log, not to fail on.
func openProcTable(nsFD int) (*procTable, error) {
	var (
		f   *os.File
		err error
	)
	if nsFD == 0 {
		f, err = os.Open("/proc/thread-self/net/ip_vs")
	} else if e := nsthread.Do(netns.NsHandle(nsFD), func() { f, err = os.Open("/proc/thread-self/net/ip_vs") }); e != nil {
		err = e
	}
	if err != nil {
		return nil, fmt.Errorf("open the IPVS table in /proc: %w", err)
	}
	return &procTable{file: f}, nil
}

func (t *procTable) close() error {
	if t == nil {
		return nil
	}
	return t.file.Close()
}

// each reads the table from its start.
func (t *procTable) each(fn func(VirtualServerKey, []RealServer) error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, err := t.file.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("read the IPVS table: %w", err)
	}
	return parseProcTable(t.file, &t.rss, fn)
}

// pagedReader counts the table's reads and the services parsed so far,
// and ends the read (errWalkTooLong) once the next read's walk would cost
// more than the dumps it saves (walkPerDump).
type pagedReader struct {
	r                io.Reader
	reads            int
	services, before int // parsed in all; when the last read was made
}

var errWalkTooLong = errors.New("the rest of the table costs more to read than a dump a virtual server")

func (p *pagedReader) Read(b []byte) (int, error) {
	if p.reads > 0 {
		perRead := max(p.services-p.before, 1)
		if p.services > walkPerDump*perRead {
			return 0, errWalkTooLong
		}
	}
	p.reads++
	p.before = p.services
	return p.r.Read(b)
}

func (k *kernel) EachRealServerList(fn func(VirtualServerKey, []RealServer) error) error {
	if k.table == nil {
		return fmt.Errorf("no table to read: %w", k.tableErr)
	}
	return k.table.each(fn)
}

// The table's three heading lines (ip_vs_info_seq_show); a kernel that
// prints others has a format this parser does not know.
var procTableHeading = [][]byte{
	[]byte("IP Virtual Server version "),
	[]byte("Prot LocalAddress:Port Scheduler Flags"),
	[]byte("  -> RemoteAddress:Port Forward Weight ActiveConn InActConn"),
}

var errProcTableFormat = errors.New("unknown format")

// parseProcTable parses /proc/net/ip_vs: after the heading, a line per
// service ("TCP  0A600001:0050 rr ", "UDP  [2001:0db8:…:000a]:0035 rr
// persistent 10800 FFFFFFFF", "FWM  00000001 rr ") followed by a line per
// destination ("  -> 0A000001:0050      Masq    1      0          0"),
// each address in hexadecimal (IPv4 as a big-endian number, IPv6 as
// %pI6's eight groups). rss is the room for one service's list.
//
// A table large enough that reading its end costs more than a destination
// dump a virtual server (walkPerDump) is read in part: the services after
// that point, and the one being read, are not passed to fn, and the read
// ends without an error.
func parseProcTable(file io.Reader, rss *[]RealServer, fn func(VirtualServerKey, []RealServer) error) error {
	paged := &pagedReader{r: file}
	r := bufio.NewReaderSize(paged, procTableReadSize)
	var (
		key     VirtualServerKey
		inKey   bool // the current service has an address: its list goes to fn
		lineNum int
	)
	flush := func() error {
		if !inKey {
			return nil
		}
		inKey = false
		return fn(key, *rss)
	}
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, errWalkTooLong) {
			return nil
		}
		if errors.Is(err, io.EOF) && len(line) == 0 {
			break
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read the IPVS table: %w", err)
		}
		lineNum++
		line = bytes.TrimRight(line, "\n")
		if lineNum <= len(procTableHeading) {
			// The first line ends in the version and the hash size.
			want := procTableHeading[lineNum-1]
			if lineNum == 1 && !bytes.HasPrefix(line, want) || lineNum > 1 && !bytes.Equal(line, want) {
				return fmt.Errorf("the IPVS table's line %d %q: %w", lineNum, line, errProcTableFormat)
			}
			continue
		}
		if rest, ok := bytes.CutPrefix(line, []byte("  -> ")); ok {
			if !inKey {
				continue // a firewall-mark service's
			}
			rs, err := parseProcDestination(rest)
			if err != nil {
				return fmt.Errorf("the IPVS table's line %d %q: %w", lineNum, line, err)
			}
			*rss = append(*rss, rs)
			continue
		}
		if err := flush(); err != nil {
			return err
		}
		*rss = (*rss)[:0]
		paged.services++
		key, inKey, err = parseProcService(line)
		if err != nil {
			return fmt.Errorf("the IPVS table's line %d %q: %w", lineNum, line, err)
		}
	}
	return flush()
}

// parseProcService reads a service line's protocol, address and port. ok
// is false for a firewall-mark service and for a protocol other than TCP,
// UDP and SCTP (no VirtualServer has one).
func parseProcService(line []byte) (key VirtualServerKey, ok bool, err error) {
	proto, rest := nextField(line)
	addr, _ := nextField(rest)
	if len(addr) == 0 {
		return key, false, errProcTableFormat
	}
	switch string(proto) {
	case "TCP":
		key.Protocol = TCP
	case "UDP":
		key.Protocol = UDP
	case "SCTP":
		key.Protocol = SCTP
	default:
		return key, false, nil // FWM, or a protocol no VirtualServer has
	}
	key.Address, key.Port, err = parseProcAddrPort(addr)
	return key, err == nil, err
}

// parseProcDestination reads a destination line after its arrow: address
// and port, forwarding method, weight, active and inactive connections.
// It allocates nothing: a table of 125,000 lines is read at every full
// re-check.
func parseProcDestination(rest []byte) (RealServer, error) {
	var rs RealServer
	var fields [5][]byte
	for i := range fields {
		if fields[i], rest = nextField(rest); len(fields[i]) == 0 {
			return rs, errProcTableFormat
		}
	}
	if extra, _ := nextField(rest); len(extra) != 0 {
		return rs, errProcTableFormat
	}
	var err error
	if rs.Address, rs.Port, err = parseProcAddrPort(fields[0]); err != nil {
		return rs, err
	}
	weight, ok1 := parseDecimal(fields[2], 1<<31-1)
	active, ok2 := parseDecimal(fields[3], 1<<32-1)
	inactive, ok3 := parseDecimal(fields[4], 1<<32-1)
	if !ok1 || !ok2 || !ok3 {
		return rs, fmt.Errorf("weight or connections: %w", errProcTableFormat)
	}
	rs.Weight, rs.ActiveConnections, rs.InactiveConnections = int32(weight), uint32(active), uint32(inactive)
	return rs, nil
}

// parseProcAddrPort reads "0A600001:0050" (IPv4, a big-endian number) or
// "[2001:0db8:0000:0000:0000:0000:0000:000a]:0035" (IPv6, %pI6: eight
// groups of four digits).
func parseProcAddrPort(b []byte) (netip.Addr, uint16, error) {
	colon := bytes.LastIndexByte(b, ':')
	if colon < 0 || len(b)-colon-1 != 4 {
		return netip.Addr{}, 0, fmt.Errorf("address and port %q: %w", b, errProcTableFormat)
	}
	port, ok := parseHex(b[colon+1:])
	if !ok {
		return netip.Addr{}, 0, fmt.Errorf("port %q: %w", b[colon+1:], errProcTableFormat)
	}
	host := b[:colon]
	if len(host) == 8 {
		v, ok := parseHex(host)
		if !ok {
			return netip.Addr{}, 0, fmt.Errorf("address %q: %w", host, errProcTableFormat)
		}
		return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), uint16(port), nil
	}
	// [ then eight groups of four digits, seven colons between, then ]
	if len(host) != 41 || host[0] != '[' || host[40] != ']' {
		return netip.Addr{}, 0, fmt.Errorf("address %q: %w", host, errProcTableFormat)
	}
	var a [16]byte
	for g := range 8 {
		group := host[1+5*g : 1+5*g+4]
		v, ok := parseHex(group)
		if !ok || g < 7 && host[1+5*g+4] != ':' {
			return netip.Addr{}, 0, fmt.Errorf("address %q: %w", host, errProcTableFormat)
		}
		a[2*g], a[2*g+1] = byte(v>>8), byte(v)
	}
	return netip.AddrFrom16(a), uint16(port), nil
}

// nextField splits off b's first space-separated field.
func nextField(b []byte) (field, rest []byte) {
	b = bytes.TrimLeft(b, " ")
	end := bytes.IndexByte(b, ' ')
	if end < 0 {
		return b, nil
	}
	return b[:end], b[end:]
}

// parseHex reads up to 8 hexadecimal digits.
func parseHex(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 8 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		switch {
		case '0' <= c && c <= '9':
			v = v<<4 | uint64(c-'0')
		case 'A' <= c && c <= 'F':
			v = v<<4 | uint64(c-'A'+10)
		case 'a' <= c && c <= 'f':
			v = v<<4 | uint64(c-'a'+10)
		default:
			return 0, false
		}
	}
	return v, true
}

// parseDecimal reads a non-negative decimal number up to limit.
func parseDecimal(b []byte, limit uint64) (uint64, bool) {
	if len(b) == 0 || len(b) > 10 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	return v, v <= limit
}
