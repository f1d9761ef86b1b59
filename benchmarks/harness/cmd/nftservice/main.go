// Command nftservice reads one Service's endpoints from the kernel's tables of kube-proxy's
// nftables mode, over netlink, reading only what it names: the `service-ips` map, one
// Service's chain and the anonymous maps its rules look up. The nft binary lists every table
// and chain it has before printing one (tens of seconds at 10,000 Services), so the daemon
// tier, which polls until a change is in the kernel, reads it this way.
//
//	nftservice chain -vip 10.96.0.10 -proto tcp -port 80   the Service's chain (from service-ips)
//	nftservice endpoints -chain NAME [-count]               its endpoints, ADDR:PORT a line, or how many
//	nftservice services                                     how many elements service-ips holds
//
// It reads kube-proxy's shapes: a `numgen random mod N map { i : addr . port }` DNAT, a single
// `dnat to addr:port`, and the `numgen ... vmap { i : goto endpoint-…__ADDR/PORT }` jumps of a
// Service with `sessionAffinity: ClientIP`.
package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

const serviceIPsMap = "service-ips"

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	mode := os.Args[1]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	tableName := fs.String("table", "kube-proxy", "table name")
	family := fs.String("family", "ip", "table family: ip (the IPv4 table)")
	vip := fs.String("vip", "", "chain: the cluster IP")
	proto := fs.String("proto", "tcp", "chain: tcp, udp or sctp")
	port := fs.Int("port", 0, "chain: the Service port")
	chain := fs.String("chain", "", "endpoints: the Service's chain (from nftservice chain)")
	count := fs.Bool("count", false, "endpoints: print how many, not the list")
	_ = fs.Parse(os.Args[2:])
	if *family != "ip" {
		fail(fmt.Errorf("family %q: only ip (IPv4) is read", *family))
	}
	conn, err := nftables.New()
	if err != nil {
		fail(err)
	}
	table := &nftables.Table{Name: *tableName, Family: nftables.TableFamilyIPv4}
	switch mode {
	case "chain":
		addr, err := netip.ParseAddr(*vip)
		if err != nil || !addr.Is4() {
			fail(fmt.Errorf("-vip %q is not an IPv4 address", *vip))
		}
		name, err := serviceChain(conn, table, addr, *proto, uint16(*port))
		if err != nil {
			fail(err)
		}
		fmt.Println(name)
	case "endpoints":
		if *chain == "" {
			fail(errors.New("endpoints needs -chain"))
		}
		eps, err := endpoints(conn, table, *chain)
		if err != nil {
			fail(err)
		}
		if *count {
			fmt.Println(len(eps))
			return
		}
		for _, ep := range eps {
			fmt.Println(ep)
		}
	case "services":
		elems, err := conn.GetSetElements(&nftables.Set{Table: table, Name: serviceIPsMap})
		if err != nil {
			fail(fmt.Errorf("read map %s of table %s: %w", serviceIPsMap, table.Name, err))
		}
		fmt.Println(len(elems))
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: nftservice chain -vip IP -proto tcp -port N | endpoints -chain NAME [-count] | services")
	os.Exit(2)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "nftservice:", err)
	os.Exit(1)
}

var protocols = map[string]byte{"tcp": unix.IPPROTO_TCP, "udp": unix.IPPROTO_UDP, "sctp": unix.IPPROTO_SCTP}

// serviceChain finds the element of service-ips whose key is vip . proto . port and returns
// the chain its verdict goes to. Each field of a concatenated key is padded to 4 bytes.
func serviceChain(conn *nftables.Conn, table *nftables.Table, vip netip.Addr, proto string, port uint16) (string, error) {
	p, ok := protocols[proto]
	if !ok {
		return "", fmt.Errorf("protocol %q is not tcp, udp or sctp", proto)
	}
	elems, err := conn.GetSetElements(&nftables.Set{Table: table, Name: serviceIPsMap})
	if err != nil {
		return "", fmt.Errorf("read map %s of table %s: %w", serviceIPsMap, table.Name, err)
	}
	a := vip.As4()
	for _, e := range elems {
		k := e.Key
		if len(k) < 10 || netip.AddrFrom4([4]byte(k[0:4])) != vip || k[4] != p || binary.BigEndian.Uint16(k[8:10]) != port {
			continue
		}
		if name := verdictChain(e.Val); name != "" {
			return name, nil
		}
		return "", fmt.Errorf("%s . %s . %d in %s has no chain verdict", netip.AddrFrom4(a), proto, port, serviceIPsMap)
	}
	return "", fmt.Errorf("no %s . %s . %d in %s", vip, proto, port, serviceIPsMap)
}

// verdictChain is the chain of a verdict's netlink attributes (NFTA_VERDICT_CHAIN), "" when
// there is none.
func verdictChain(b []byte) string {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return ""
	}
	for ad.Next() {
		if ad.Type() == unix.NFTA_VERDICT_CHAIN {
			return ad.String()
		}
	}
	return ""
}

// endpoints reads the chain's rules and the anonymous maps they look up.
func endpoints(conn *nftables.Conn, table *nftables.Table, chain string) ([]netip.AddrPort, error) {
	rules, err := conn.GetRules(table, &nftables.Chain{Name: chain, Table: table})
	if err != nil {
		return nil, fmt.Errorf("read chain %s: %w", chain, err)
	}
	if len(rules) == 0 {
		return nil, fmt.Errorf("chain %s has no rules (or does not exist)", chain)
	}
	var eps []netip.AddrPort
	for _, r := range rules {
		var addr *netip.Addr
		var port *uint16
		isNAT := false
		for _, e := range r.Exprs {
			switch e := e.(type) {
			case *expr.Lookup:
				if e.SetName == "" || !e.IsDestRegSet {
					continue // a set, not a map: no endpoints in it
				}
				elems, err := conn.GetSetElements(&nftables.Set{Table: table, Name: e.SetName})
				if err != nil {
					return nil, fmt.Errorf("read map %s of chain %s: %w", e.SetName, chain, err)
				}
				for _, el := range elems {
					if ep, ok := elementEndpoint(el.Val); ok {
						eps = append(eps, ep)
					}
				}
			case *expr.Verdict:
				if ep, ok := chainEndpoint(e.Chain); ok {
					eps = append(eps, ep)
				}
			case *expr.Immediate:
				switch len(e.Data) {
				case 4:
					a := netip.AddrFrom4([4]byte(e.Data))
					addr = &a
				case 2:
					p := binary.BigEndian.Uint16(e.Data)
					port = &p
				}
			case *expr.NAT:
				isNAT = true
			}
		}
		if isNAT && addr != nil && port != nil {
			eps = append(eps, netip.AddrPortFrom(*addr, *port))
		}
	}
	return eps, nil
}

// elementEndpoint reads a map element's value: addr . port (8 bytes, each padded to 4), or a
// goto to an endpoint chain.
func elementEndpoint(val []byte) (netip.AddrPort, bool) {
	if len(val) == 8 {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(val[0:4])), binary.BigEndian.Uint16(val[4:6])), true
	}
	return chainEndpoint(verdictChain(val))
}

// chainEndpoint reads the endpoint from an endpoint chain's name, `endpoint-HASH-NS/NAME/PROTO/PORT__ADDR/PORT`.
func chainEndpoint(name string) (netip.AddrPort, bool) {
	if !strings.HasPrefix(name, "endpoint-") {
		return netip.AddrPort{}, false
	}
	_, ep, ok := strings.Cut(name, "__")
	if !ok {
		return netip.AddrPort{}, false
	}
	a, p, ok := strings.Cut(ep, "/")
	addr, err := netip.ParseAddr(a)
	n, perr := strconv.ParseUint(p, 10, 16)
	if !ok || err != nil || perr != nil {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(addr, uint16(n)), true
}
