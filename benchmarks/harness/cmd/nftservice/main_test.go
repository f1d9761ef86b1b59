package main

import (
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables"

	"github.com/ipvsproxy/ipvsproxy/internal/kerneltest"
	"github.com/ipvsproxy/ipvsproxy/internal/netnstest"
)

// kubeProxyTable is a table in the shapes kube-proxy's nftables mode writes (v1.36 and v1.37):
// service-ips dispatching to a Service's chain, which DNATs through a numgen map, a single
// dnat, or (with `sessionAffinity: ClientIP`) jumps to endpoint chains through a numgen vmap.
const kubeProxyTable = `
table ip kube-proxy {
	chain endpoint-AAAA-bench/aff/tcp/http__10.244.0.21/8080 { meta l4proto tcp dnat to 10.244.0.21:8080 ; }
	chain endpoint-BBBB-bench/aff/tcp/http__10.244.0.22/8080 { meta l4proto tcp dnat to 10.244.0.22:8080 ; }
	chain service-MANY-bench/many/tcp/http {
		ip daddr 10.96.0.10 tcp dport 80 ip saddr != 10.244.0.0/15 jump mark-for-masquerade
		meta l4proto tcp dnat ip addr . port to numgen random mod 3 map { 0 : 10.244.0.1 . 8080, 1 : 10.244.0.2 . 8080, 2 : 10.244.255.200 . 8080 }
	}
	chain service-ONE-bench/one/tcp/http {
		meta l4proto tcp dnat to 10.244.0.9:8080
	}
	chain service-AFF-bench/aff/tcp/http {
		numgen random mod 2 vmap { 0 : goto endpoint-AAAA-bench/aff/tcp/http__10.244.0.21/8080, 1 : goto endpoint-BBBB-bench/aff/tcp/http__10.244.0.22/8080 }
	}
	chain mark-for-masquerade { meta mark set meta mark or 0x4000 ; }
	map service-ips {
		type ipv4_addr . inet_proto . inet_service : verdict
		elements = { 10.96.0.10 . tcp . 80 : goto service-MANY-bench/many/tcp/http,
			10.96.0.11 . tcp . 80 : goto service-ONE-bench/one/tcp/http,
			10.96.0.12 . tcp . 80 : goto service-AFF-bench/aff/tcp/http,
			10.96.0.11 . udp . 53 : goto service-ONE-bench/one/tcp/http }
	}
}
`

// kubeProxyTableInNamespace loads the table into a fresh network namespace
// and returns a netlink connection to it.
func kubeProxyTableInNamespace(t *testing.T) *nftables.Conn {
	t.Helper()
	kerneltest.RequireRootAndTools(t, "ip", "nft")
	ns, path := netnstest.NewNamed(t, "nftservice-test-")
	load := exec.Command("ip", "netns", "exec", strings.TrimPrefix(path, "/run/netns/"), "nft", "-f", "-")
	load.Stdin = strings.NewReader(kubeProxyTable)
	if out, err := load.CombinedOutput(); err != nil {
		t.Fatalf("nft -f: %v: %s", err, out)
	}
	conn, err := nftables.New(nftables.WithNetNSFd(int(ns)))
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

var table = &nftables.Table{Name: "kube-proxy", Family: nftables.TableFamilyIPv4}

func TestChainOfAServiceFromServiceIPs(t *testing.T) {
	conn := kubeProxyTableInNamespace(t)
	for _, c := range []struct {
		vip, proto string
		port       uint16
		want       string
	}{
		{"10.96.0.10", "tcp", 80, "service-MANY-bench/many/tcp/http"},
		{"10.96.0.11", "tcp", 80, "service-ONE-bench/one/tcp/http"},
		{"10.96.0.12", "tcp", 80, "service-AFF-bench/aff/tcp/http"},
	} {
		got, err := serviceChain(conn, table, netip.MustParseAddr(c.vip), c.proto, c.port)
		if err != nil || got != c.want {
			t.Errorf("%s %s %d: %q, %v; want %q", c.vip, c.proto, c.port, got, err, c.want)
		}
	}
	// Another port or protocol of a known address is another key.
	for _, miss := range []struct {
		proto string
		port  uint16
	}{{"tcp", 81}, {"udp", 80}} {
		if got, err := serviceChain(conn, table, netip.MustParseAddr("10.96.0.10"), miss.proto, miss.port); err == nil {
			t.Errorf("10.96.0.10 %s %d: found %q, want no element", miss.proto, miss.port, got)
		}
	}
}

func TestEndpointsOfEachShape(t *testing.T) {
	conn := kubeProxyTableInNamespace(t)
	for chain, want := range map[string][]string{
		"service-MANY-bench/many/tcp/http": {"10.244.0.1:8080", "10.244.0.2:8080", "10.244.255.200:8080"},
		"service-ONE-bench/one/tcp/http":   {"10.244.0.9:8080"},
		"service-AFF-bench/aff/tcp/http":   {"10.244.0.21:8080", "10.244.0.22:8080"},
	} {
		eps, err := endpoints(conn, table, chain)
		if err != nil {
			t.Fatalf("%s: %v", chain, err)
		}
		var got []string
		for _, ep := range eps {
			got = append(got, ep.String())
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", chain, got, want)
		}
	}
	if _, err := endpoints(conn, table, "service-GONE-bench/gone/tcp/http"); err == nil {
		t.Error("a chain that does not exist gave endpoints")
	}
}

func TestChainEndpointNames(t *testing.T) {
	for name, want := range map[string]string{
		"endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80": "10.180.0.1:80",
		"endpoint-X-ns/s/udp/dns__10.244.1.2/53":            "10.244.1.2:53",
		"service-X-ns/s/tcp/p80":                            "",
		"endpoint-X-ns/s/tcp/p80__nonsense":                 "",
	} {
		ep, ok := chainEndpoint(name)
		if got := map[bool]string{true: ep.String(), false: ""}[ok]; got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}
