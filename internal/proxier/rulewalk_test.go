package proxier

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/iptables"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/ipset"
)

// A test-only packet walker over what the fakes hold after a sync: the
// iptables Fake's tables (the proxier's chains, its jumps and any host rule
// a test put there), the ipset Fake's members and the IPVS Fake's virtual
// servers. Unlike the inspect tracer (internal/rules), which has one verdict per
// rule the proxier writes, it interprets the rule text itself, host rules
// included, so it can check rule order against a host firewall.
// It walks the hooks in the kernel's priority order, so tests assert
// verdicts ("from SRC to DST:PORT is dropped by KUBE-IPVS-FILTER") rather
// than rule text:
//
//	from another host: nat PREROUTING (-100), filter INPUT (0), IPVS LOCAL_IN (98)
//	from the node:     mangle OUTPUT (-150), nat OUTPUT (-100), IPVS LOCAL_OUT (-98)
//
// It understands the matches the proxier writes and a few a host firewall
// uses (-s, -d, -i, -p, --dport with a port or a range, set, addrtype,
// conntrack, mark); an unknown one fails the test instead of being ignored.

// packet is one packet to trace; fromNode means a process on the node sent it.
type packet struct {
	src, dst netip.Addr
	proto    string // tcp, udp, sctp
	dport    uint16
	inIface  string // for packets from another host
	fromNode bool
	new      bool // conntrack state NEW (else ESTABLISHED)
}

// traceResult is what became of a packet.
type traceResult struct {
	// verdict is ACCEPT (reached IPVS or the local stack), DROP, REJECT or
	// DNAT (a host rule took it away from IPVS), with where it happened.
	verdict, where string
	// virtualServer is the IPVS entry that took it (nil: none).
	virtualServer *ipvs.VirtualServerKey
	realServers   int
	masqueraded   bool
}

func (r traceResult) String() string {
	s := r.verdict
	if r.where != "" {
		s += " in " + r.where
	}
	if r.virtualServer != nil {
		s += fmt.Sprintf(" -> virtual server %s with %d real servers", r.virtualServer, r.realServers)
	}
	if r.masqueraded {
		s += ", masqueraded"
	}
	return s
}

type tracer struct {
	t        *testing.T
	fk       *fakeKernel
	tables   map[iptables.Table]map[string][][]string
	policies map[hook]string
	mark     uint32
}

type hook struct {
	table iptables.Table
	chain string
}

func newTracer(t *testing.T, fk *fakeKernel) *tracer {
	t.Helper()
	tr := &tracer{t: t, fk: fk, tables: map[iptables.Table]map[string][][]string{}, policies: map[hook]string{}}
	for _, table := range []iptables.Table{iptables.TableNAT, iptables.TableFilter, iptables.TableMangle} {
		save, err := fk.ipt4.Save(table)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(save), "\n") {
			// ":INPUT DROP [0:0]": a built-in chain's policy.
			if f := strings.Fields(l); len(f) == 3 && strings.HasPrefix(l, ":") && f[1] != "-" {
				tr.policies[hook{table, f[0][1:]}] = f[1]
			}
		}
		chains := map[string][][]string{}
		for name, lines := range iptables.SavedRules(save) {
			for _, l := range lines {
				chains[name] = append(chains[name], splitWords(t, l)[2:])
			}
		}
		tr.tables[table] = chains
	}
	return tr
}

// trace follows p through the hooks until IPVS or a verdict.
func (tr *tracer) trace(p packet) traceResult {
	tr.t.Helper()
	tr.mark = 0
	hooks := []hook{{iptables.TableNAT, "PREROUTING"}, {iptables.TableFilter, "INPUT"}}
	if p.fromNode {
		hooks = []hook{{iptables.TableMangle, "OUTPUT"}, {iptables.TableNAT, "OUTPUT"}}
	}
	for _, h := range hooks {
		v, where := tr.walk(h.table, h.chain, p)
		if v == "" {
			v, where = tr.policies[h], h.chain+" policy"
		}
		switch v {
		case "DROP", "REJECT", "DNAT":
			return traceResult{verdict: v, where: string(h.table) + " " + where}
		}
	}
	res := traceResult{verdict: "ACCEPT"}
	k := ipvs.VirtualServerKey{Protocol: map[string]ipvs.Protocol{"tcp": ipvs.TCP, "udp": ipvs.UDP, "sctp": ipvs.SCTP}[p.proto], Address: p.dst, Port: p.dport}
	if rss, err := tr.fk.ipvs.RealServers(k); err == nil {
		res.virtualServer, res.realServers = &k, len(rss)
	}
	res.masqueraded = tr.mark&testConfig().MasqueradeMark != 0
	return res
}

// walk runs chain; it returns a terminal verdict ("" when the chain ran out
// or returned) and the chain that gave it.
func (tr *tracer) walk(table iptables.Table, chain string, p packet) (string, string) {
	tr.t.Helper()
	for _, rule := range tr.tables[table][chain] {
		target, args := tr.matches(rule, p)
		if target == "" {
			continue
		}
		switch target {
		case "ACCEPT", "DROP", "REJECT", "DNAT":
			return target, chain
		case "RETURN":
			return "", chain
		case "MARK":
			// --set-xmark VALUE/MASK
			v, m, _ := strings.Cut(args[len(args)-1], "/")
			value, _ := strconv.ParseUint(v, 0, 32)
			mask, _ := strconv.ParseUint(m, 0, 32)
			tr.mark = tr.mark&^uint32(mask) ^ uint32(value)
		default:
			if _, ok := tr.tables[table][target]; !ok {
				tr.t.Fatalf("tracer: %s %s jumps to unknown %s", table, chain, target)
			}
			if v, where := tr.walk(table, target, p); v != "" {
				return v, where
			}
		}
	}
	return "", chain
}

// matches evaluates one rule; it returns its target and the target's
// arguments when every match holds, else "".
func (tr *tracer) matches(rule []string, p packet) (string, []string) {
	tr.t.Helper()
	neg := false
	ok := true
	for i := 0; i < len(rule); i++ {
		w := rule[i]
		arg := func() string { i++; return rule[i] }
		var m bool
		switch w {
		case "!":
			neg = true
			continue
		case "-j":
			if !ok {
				return "", nil
			}
			return rule[i+1], rule[i+2:]
		case "-m":
			i++ // the match's name; its options follow
			continue
		case "--comment":
			arg()
			continue
		case "-s", "-d":
			pr, err := netip.ParsePrefix(arg())
			if err != nil {
				a, _ := netip.ParseAddr(rule[i])
				pr = netip.PrefixFrom(a, a.BitLen())
			}
			m = pr.Contains(map[string]netip.Addr{"-s": p.src, "-d": p.dst}[w])
		case "-i":
			name := arg()
			if strings.HasSuffix(name, "+") {
				m = p.inIface != "" && strings.HasPrefix(p.inIface, strings.TrimSuffix(name, "+"))
			} else {
				m = p.inIface == name
			}
		case "-p":
			m = arg() == p.proto
		case "--dport":
			// A port or a range FIRST:LAST.
			lo, hi, isRange := strings.Cut(arg(), ":")
			if !isRange {
				hi = lo
			}
			first, _ := strconv.Atoi(lo)
			last, _ := strconv.Atoi(hi)
			m = first <= int(p.dport) && int(p.dport) <= last
		case "--match-set":
			m = tr.inSet(arg(), arg(), p)
		case "--dst-type", "--src-type":
			if arg() != "LOCAL" {
				tr.t.Fatalf("tracer: addrtype %s", rule[i])
			}
			m = tr.local(map[string]netip.Addr{"--dst-type": p.dst, "--src-type": p.src}[w])
		case "--ctstate":
			states := arg()
			m = p.new && strings.Contains(states, "NEW") || !p.new && strings.Contains(states, "ESTABLISHED")
		case "--mark":
			v, mk, _ := strings.Cut(arg(), "/")
			value, _ := strconv.ParseUint(v, 0, 32)
			mask, _ := strconv.ParseUint(mk, 0, 32)
			m = tr.mark&uint32(mask) == uint32(value)
		default:
			tr.t.Fatalf("tracer: unknown match %q in %q", w, strings.Join(rule, " "))
		}
		if m == neg {
			ok = false
		}
		neg = false
	}
	return "", nil
}

// local: an address of the node or bound on kube-ipvs0 (--dst-type LOCAL).
func (tr *tracer) local(a netip.Addr) bool {
	host, _ := tr.fk.netif.HostAddresses()
	bound, _ := tr.fk.netif.DummyAddresses()
	for _, h := range append(host, bound...) {
		if h == a {
			return true
		}
	}
	return false
}

// inSet is ipset's match for the directions given ("dst,dst,src": the
// entry's first IP is the destination, its port the destination port, its
// second part the source).
func (tr *tracer) inSet(name, dirs string, p packet) bool {
	tr.t.Helper()
	entries, err := tr.fk.ipset.Entries(name)
	if err != nil {
		tr.t.Fatalf("tracer: rule names set %s: %v", name, err)
	}
	addr := func(dir string) netip.Addr {
		if dir == "src" {
			return p.src
		}
		return p.dst
	}
	d := strings.Split(dirs, ",")
	for _, e := range entries {
		var ok bool
		switch owned.SetType(name) {
		case ipset.HashIP:
			ok = e.IP == addr(d[0])
		case ipset.BitmapPort:
			ok = e.Port == p.dport // only "dst" is written
		case ipset.HashIPPort:
			ok = e.IP == addr(d[0]) && e.Protocol == p.proto && e.Port == p.dport
		case ipset.HashIPPortIP:
			ok = e.IP == addr(d[0]) && e.Protocol == p.proto && e.Port == p.dport && e.IP2 == addr(d[2])
		case ipset.HashIPPortNet:
			ok = e.IP == addr(d[0]) && e.Protocol == p.proto && e.Port == p.dport && e.Net.Contains(addr(d[2]))
		default:
			tr.t.Fatalf("tracer: set %s of unknown type", name)
		}
		if ok {
			return true
		}
	}
	return false
}

// splitWords splits an iptables-save line, keeping "quoted words" whole.
func splitWords(t *testing.T, line string) []string {
	var out []string
	var cur strings.Builder
	inQuote, any := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\\' && inQuote && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
		case c == '"':
			inQuote, any = !inQuote, true
		case c == ' ' && !inQuote:
			if cur.Len() > 0 || any {
				out = append(out, cur.String())
			}
			cur.Reset()
			any = false
		default:
			cur.WriteByte(c)
		}
	}
	if inQuote {
		t.Fatalf("tracer: unbalanced quote in %q", line)
	}
	if cur.Len() > 0 || any {
		out = append(out, cur.String())
	}
	return out
}
