package main

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/kerneltest"
	"github.com/ipvsproxy/ipvsproxy/internal/netnstest"
)

// kubeProxyIPVSFamily is what differs between kube-proxy's two IPVS-mode
// proxiers of a dual-stack node.
type kubeProxyIPVSFamily struct {
	ipset       string // the ipset family of its hash sets
	loopback    string // its KUBE-SERVICES RETURN for local sources
	clusterCIDR string // the local-traffic detector's cluster CIDR
	prefix      string // its set names' prefix: KUBE- or KUBE-6-
}

var (
	kubeProxyIPv4 = kubeProxyIPVSFamily{"inet", "127.0.0.0/8", "10.244.0.0/16", "KUBE-"}
	kubeProxyIPv6 = kubeProxyIPVSFamily{"inet6", "::1/128", "2001:db8:244::/56", "KUBE-6-"}
)

// set is kube-proxy's name of one of its sets in f: for IPv6 "KUBE-6-"
// and cut to ipset's 31 bytes (pkg/proxy/ipvs/ipset.go NewIPSet).
func (f kubeProxyIPVSFamily) set(base string) string {
	name := f.prefix + strings.TrimPrefix(base, "KUBE-")
	if len(name) > 31 {
		name = name[:31]
	}
	return name
}

// kubeProxyIPVSSets are kube-proxy v1.36.3's IPVS-mode sets with their
// types (pkg/proxy/ipvs/proxier.go ipsetInfo).
var kubeProxyIPVSSets = [][2]string{
	{"KUBE-LOOP-BACK", "hash:ip,port,ip"}, {"KUBE-CLUSTER-IP", "hash:ip,port"},
	{"KUBE-EXTERNAL-IP", "hash:ip,port"}, {"KUBE-EXTERNAL-IP-LOCAL", "hash:ip,port"},
	{"KUBE-LOAD-BALANCER", "hash:ip,port"}, {"KUBE-LOAD-BALANCER-FW", "hash:ip,port"},
	{"KUBE-LOAD-BALANCER-LOCAL", "hash:ip,port"}, {"KUBE-LOAD-BALANCER-SOURCE-IP", "hash:ip,port,ip"},
	{"KUBE-LOAD-BALANCER-SOURCE-CIDR", "hash:ip,port,net"},
	{"KUBE-NODE-PORT-TCP", "bitmap:port"}, {"KUBE-NODE-PORT-LOCAL-TCP", "bitmap:port"},
	{"KUBE-NODE-PORT-UDP", "bitmap:port"}, {"KUBE-NODE-PORT-LOCAL-UDP", "bitmap:port"},
	{"KUBE-NODE-PORT-SCTP-HASH", "hash:ip,port"}, {"KUBE-NODE-PORT-LOCAL-SCTP-HASH", "hash:ip,port"},
	{"KUBE-HEALTH-CHECK-NODE-PORT", "bitmap:port"}, {"KUBE-IPVS-IPS", "hash:ip"},
}

// kubeProxyOnlySets are the sets of kube-proxy's IPVS mode whose names
// ipvsproxy does not use: the ones the clean-up must destroy.
var kubeProxyOnlySets = []string{
	"KUBE-EXTERNAL-IP-LOCAL", "KUBE-LOAD-BALANCER-LOCAL", "KUBE-LOAD-BALANCER-SOURCE-IP",
	"KUBE-LOAD-BALANCER-SOURCE-CIDR", "KUBE-NODE-PORT-LOCAL-TCP", "KUBE-NODE-PORT-LOCAL-UDP",
	"KUBE-NODE-PORT-LOCAL-SCTP-HASH",
}

// ipsetScript creates kube-proxy's sets as its ipset runner does
// (pkg/proxy/ipvs/ipset/ipset.go createSet).
func (f kubeProxyIPVSFamily) ipsetScript() string {
	var b strings.Builder
	for _, s := range kubeProxyIPVSSets {
		name, typ := f.set(s[0]), s[1]
		if typ == "bitmap:port" {
			fmt.Fprintf(&b, "ipset create %s %s range 0-65535\n", name, typ)
		} else {
			fmt.Fprintf(&b, "ipset create %s %s family %s hashsize 1024 maxelem 65536\n", name, typ, f.ipset)
		}
	}
	return b.String()
}

// restore is the iptables-restore input of kube-proxy v1.36.3's IPVS
// proxier for f with every set non-empty (pkg/proxy/ipvs/proxier.go
// createAndLinkKubeChain, writeIptablesRules, acceptIPVSTraffic), mark
// 0x4000, a cluster CIDR detector. Left out: the `-m ipvs` DROP rules of
// filter KUBE-IPVS-OUT-FILTER, which need the IPVS module (the chain is
// here, empty).
func (f kubeProxyIPVSFamily) restore() string {
	c := func(base, comment string) string {
		return fmt.Sprintf(`-m comment --comment "%s" -m set --match-set %s`, comment, f.set(base))
	}
	return `*nat
:KUBE-SERVICES - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-NODE-PORT - [0:0]
:KUBE-LOAD-BALANCER - [0:0]
:KUBE-MARK-MASQ - [0:0]
-I OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-I PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-I POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
-A KUBE-SERVICES -s ` + f.loopback + ` -j RETURN
-A KUBE-POSTROUTING ` + c("KUBE-LOOP-BACK", "Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose") + ` dst,dst,src -j MASQUERADE
-A KUBE-SERVICES ` + c("KUBE-LOAD-BALANCER", "Kubernetes service lb portal") + ` dst,dst -j KUBE-LOAD-BALANCER
-A KUBE-LOAD-BALANCER ` + c("KUBE-LOAD-BALANCER-LOCAL", "Kubernetes service load balancer ip + port with externalTrafficPolicy=local") + ` dst,dst -j RETURN
-A KUBE-NODE-PORT -p tcp ` + c("KUBE-NODE-PORT-LOCAL-TCP", "Kubernetes nodeport TCP port with externalTrafficPolicy=local") + ` dst -j RETURN
-A KUBE-NODE-PORT -p tcp ` + c("KUBE-NODE-PORT-TCP", "Kubernetes nodeport TCP port for masquerade purpose") + ` dst -j KUBE-MARK-MASQ
-A KUBE-NODE-PORT -p udp ` + c("KUBE-NODE-PORT-LOCAL-UDP", "Kubernetes nodeport UDP port with externalTrafficPolicy=local") + ` dst -j RETURN
-A KUBE-NODE-PORT -p udp ` + c("KUBE-NODE-PORT-UDP", "Kubernetes nodeport UDP port for masquerade purpose") + ` dst -j KUBE-MARK-MASQ
-A KUBE-NODE-PORT -p sctp ` + c("KUBE-NODE-PORT-LOCAL-SCTP-HASH", "Kubernetes nodeport SCTP port with externalTrafficPolicy=local with type 'hash ip:port'") + ` dst,dst -j RETURN
-A KUBE-NODE-PORT -p sctp ` + c("KUBE-NODE-PORT-SCTP-HASH", "Kubernetes nodeport SCTP port for masquerade purpose with type 'hash ip:port'") + ` dst,dst -j KUBE-MARK-MASQ
-A KUBE-SERVICES ` + c("KUBE-CLUSTER-IP", "Kubernetes service cluster ip + port for masquerade purpose") + ` dst,dst ! -s ` + f.clusterCIDR + ` -j KUBE-MARK-MASQ
-A KUBE-SERVICES ` + c("KUBE-EXTERNAL-IP", "Kubernetes service external ip + port for masquerade and filter purpose") + ` dst,dst -j KUBE-MARK-MASQ
-A KUBE-SERVICES ` + c("KUBE-EXTERNAL-IP", "Kubernetes service external ip + port for masquerade and filter purpose") + ` dst,dst -m physdev ! --physdev-is-in -m addrtype ! --src-type LOCAL -j ACCEPT
-A KUBE-SERVICES ` + c("KUBE-EXTERNAL-IP", "Kubernetes service external ip + port for masquerade and filter purpose") + ` dst,dst -m addrtype --dst-type LOCAL -j ACCEPT
-A KUBE-SERVICES ` + c("KUBE-EXTERNAL-IP-LOCAL", "Kubernetes service external ip + port with externalTrafficPolicy=local") + ` dst,dst -m physdev ! --physdev-is-in -m addrtype ! --src-type LOCAL -j ACCEPT
-A KUBE-SERVICES ` + c("KUBE-EXTERNAL-IP-LOCAL", "Kubernetes service external ip + port with externalTrafficPolicy=local") + ` dst,dst -m addrtype --dst-type LOCAL -j ACCEPT
-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODE-PORT
-A KUBE-LOAD-BALANCER -j KUBE-MARK-MASQ
-A KUBE-SERVICES -m set --match-set ` + f.set("KUBE-CLUSTER-IP") + ` dst,dst -j ACCEPT
-A KUBE-SERVICES -m set --match-set ` + f.set("KUBE-LOAD-BALANCER") + ` dst,dst -j ACCEPT
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MARK --xor-mark 0x4000
-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000
COMMIT
*filter
:KUBE-FORWARD - [0:0]
:KUBE-NODE-PORT - [0:0]
:KUBE-PROXY-FIREWALL - [0:0]
:KUBE-SOURCE-RANGES-FIREWALL - [0:0]
:KUBE-IPVS-FILTER - [0:0]
:KUBE-IPVS-OUT-FILTER - [0:0]
-I FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
-I INPUT -m comment --comment "kubernetes health check rules" -j KUBE-NODE-PORT
-I INPUT -m comment --comment "kube-proxy firewall rules" -j KUBE-PROXY-FIREWALL
-I FORWARD -m comment --comment "kube-proxy firewall rules" -j KUBE-PROXY-FIREWALL
-I INPUT -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-FILTER
-I OUTPUT -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-OUT-FILTER
-A KUBE-PROXY-FIREWALL ` + c("KUBE-LOAD-BALANCER-FW", "Kubernetes service load balancer ip + port for load balancer with sourceRange") + ` dst,dst -j KUBE-SOURCE-RANGES-FIREWALL
-A KUBE-SOURCE-RANGES-FIREWALL ` + c("KUBE-LOAD-BALANCER-SOURCE-CIDR", "Kubernetes service load balancer ip + port + source cidr for packet filter purpose") + ` dst,dst,src -j RETURN
-A KUBE-SOURCE-RANGES-FIREWALL ` + c("KUBE-LOAD-BALANCER-SOURCE-IP", "Kubernetes service load balancer ip + port + source IP for packet filter purpose") + ` dst,dst,src -j RETURN
-A KUBE-SOURCE-RANGES-FIREWALL -j DROP
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A KUBE-NODE-PORT ` + c("KUBE-HEALTH-CHECK-NODE-PORT", "Kubernetes health check node port") + ` dst -j ACCEPT
-A KUBE-IPVS-FILTER -m set --match-set ` + f.set("KUBE-LOAD-BALANCER") + ` dst,dst -j RETURN
-A KUBE-IPVS-FILTER -m set --match-set ` + f.set("KUBE-CLUSTER-IP") + ` dst,dst -j RETURN
-A KUBE-IPVS-FILTER -m set --match-set ` + f.set("KUBE-EXTERNAL-IP") + ` dst,dst -j RETURN
-A KUBE-IPVS-FILTER -m set --match-set ` + f.set("KUBE-EXTERNAL-IP-LOCAL") + ` dst,dst -j RETURN
-A KUBE-IPVS-FILTER -m set --match-set ` + f.set("KUBE-HEALTH-CHECK-NODE-PORT") + ` dst -j RETURN
-A KUBE-IPVS-FILTER -m conntrack --ctstate NEW -m set --match-set ` + f.set("KUBE-IPVS-IPS") + ` dst -j REJECT
COMMIT
`
}

// kubeProxyNFTablesMode is a table of kube-proxy's nftables mode as
// v1.36.3 lays it out (pkg/proxy/nftables/proxier.go setupNFTables): base
// chains, jump chains, a set, a verdict map and one Service's chains.
func kubeProxyNFTablesMode(family, addr, endpoint string) string {
	dnatTo := endpoint + ":8080"
	if strings.Contains(endpoint, ":") {
		dnatTo = "[" + endpoint + "]:8080"
	}
	return `table ` + family + ` kube-proxy {
	comment "rules for kube-proxy"
	set cluster-ips { type ` + addr + `; comment "Active ClusterIPs"; }
	map service-ips { type ` + addr + ` . inet_proto . inet_service : verdict; comment "ClusterIP, ExternalIP and LoadBalancer IP traffic"; }
	chain filter-input { type filter hook input priority filter; policy accept; ct state new jump service-endpoints-check; }
	chain service-endpoints-check { }
	chain nat-prerouting { type nat hook prerouting priority dstnat; policy accept; jump services; }
	chain nat-output { type nat hook output priority -100; policy accept; jump services; }
	chain nat-postrouting { type nat hook postrouting priority srcnat; policy accept; jump masquerading; }
	chain masquerading { meta mark & 0x00004000 == 0 return; meta mark set meta mark ^ 0x00004000; masquerade fully-random; }
	chain endpoint-ABCDEFGH-default/web/tcp/http__` + strings.ReplaceAll(endpoint, ":", ".") + `/8080 { meta l4proto tcp dnat to ` + dnatTo + `; }
	chain service-ABCDEFGH-default/web/tcp/http { jump endpoint-ABCDEFGH-default/web/tcp/http__` + strings.ReplaceAll(endpoint, ":", ".") + `/8080; }
	chain services { ` + family + ` daddr . meta l4proto . th dport vmap @service-ips; }
}
`
}

// foreignState is a chain, a set and an nftables table that are neither
// kube-proxy's nor ipvsproxy's, and kubelet's KUBE-FIREWALL.
const foreignState = `ipset create OTHER-SET hash:ip
ipset create KUBE-6-OTHER hash:ip family inet6
nft -f - <<'EOF'
table inet other {
	set blocked { type ipv4_addr; elements = { 192.0.2.9 }; }
	chain input { type filter hook input priority 10; policy accept; ip saddr @blocked drop; }
}
table ip6 kube-proxy-not {
	chain c {
	}
}
EOF
`

// `ipvsproxy cleanup --kube-proxy-leftovers` on a node where kube-proxy
// v1.36.3 ran in IPVS mode (both families) and in nftables mode, on each
// iptables back end: it exits 0, kube-proxy's rules that name its sets and
// chains go before those sets and chains, and its nftables tables go; the
// sets named like ipvsproxy's stay (ipvsproxy adopts kube-proxy's virtual
// servers because they are there), and so does everything else. A second
// run removes nothing. No line of a library's own logger reaches the output.
func TestCleanupKubeProxyIPVSAndNFTablesModeInNamespace(t *testing.T) {
	kerneltest.RequireRootAndTools(t, "ip", "ipset", "nft", "iptables-legacy-restore", "iptables-nft-restore", "ip6tables-legacy-restore", "ip6tables-nft-restore")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, backend := range []string{"legacy", "nft"} {
		t.Run(backend, func(t *testing.T) {
			_, path := netnstest.NewNamed(t, "ipvsproxy-kpi-")
			name := strings.TrimPrefix(path, "/run/netns/")
			sh := netnstest.Shell(t, path)
			sh(kubeProxyIPv4.ipsetScript() + kubeProxyIPv6.ipsetScript() + foreignState +
				"iptables-" + backend + "-restore --noflush <<'EOF'\n" + kubeProxyIPv4.restore() + "EOF\n" +
				"ip6tables-" + backend + "-restore --noflush <<'EOF'\n" + kubeProxyIPv6.restore() + "EOF\n" +
				"nft -f - <<'EOF'\n" + kubeProxyNFTablesMode("ip", "ipv4_addr", "10.244.1.5") +
				kubeProxyNFTablesMode("ip6", "ipv6_addr", "2001:db8:244::5") + "EOF\n")
			// kubelet's chain and a foreign chain naming a foreign set.
			for _, ipt := range []string{"iptables-" + backend, "ip6tables-" + backend} {
				set := "OTHER-SET"
				if strings.HasPrefix(ipt, "ip6") {
					set = "KUBE-6-OTHER"
				}
				sh(ipt + " -N KUBE-FIREWALL; " + ipt + " -A INPUT -j KUBE-FIREWALL; " +
					ipt + " -N OTHER-CHAIN; " + ipt + " -A OTHER-CHAIN -m set --match-set " + set + " src -j DROP; " + ipt + " -A FORWARD -j OTHER-CHAIN")
			}
			dump := func() (rules4, rules6, sets, tables string) {
				// Without "# Generated ... on <time>": two dumps a second apart differ.
				return sh("iptables-" + backend + "-save | grep -v '^#'"), sh("ip6tables-" + backend + "-save | grep -v '^#'"),
					sh("ipset list -n | sort"), sh("nft list tables")
			}
			foreign := sh("nft list table inet other; nft list table ip6 kube-proxy-not")
			run := func() string {
				cmd := exec.Command("ip", "netns", "exec", name, self, "cleanup", "--kube-proxy-leftovers")
				cmd.Env = append(os.Environ(), "IPVSPROXY_TEST_AS_MAIN=1")
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("cleanup --kube-proxy-leftovers: %v\n%s", err, out)
				}
				if strings.Contains(string(out), "from kernel") {
					t.Errorf("a library's own log lines reached the output:\n%s", out)
				}
				return string(out)
			}
			out := run()
			rules4, rules6, sets, tables := dump()

			for _, f := range []kubeProxyIPVSFamily{kubeProxyIPv4, kubeProxyIPv6} {
				rules := rules4
				if f == kubeProxyIPv6 {
					rules = rules6
				}
				for _, base := range kubeProxyOnlySets {
					if n := f.set(base); regexp.MustCompile(`(?m)^`+n+`$`).MatchString(sets) || strings.Contains(rules, " "+n+" ") {
						t.Errorf("kube-proxy's set %s left (or a rule naming it):\n%s\n%s\ncleanup said:\n%s", n, sets, rules, out)
					}
				}
				for _, gone := range []string{":KUBE-LOAD-BALANCER ", ":KUBE-PROXY-FIREWALL ", ":KUBE-SOURCE-RANGES-FIREWALL ", ":KUBE-IPVS-OUT-FILTER ",
					"-j KUBE-LOAD-BALANCER", "-j KUBE-PROXY-FIREWALL", "kubernetes health check rules"} {
					if strings.Contains(rules, gone) {
						t.Errorf("%q left:\n%s\ncleanup said:\n%s", gone, rules, out)
					}
				}
				// filter KUBE-NODE-PORT is kube-proxy's; nat KUBE-NODE-PORT is a name of ipvsproxy's.
				_, filter, _ := strings.Cut(rules, "*filter")
				if filter, _, _ = strings.Cut(filter, "COMMIT"); strings.Contains(filter, "KUBE-NODE-PORT") {
					t.Errorf("filter KUBE-NODE-PORT left:\n%s", rules)
				}
				for _, kept := range []string{":KUBE-SERVICES ", ":KUBE-NODE-PORT ", ":KUBE-POSTROUTING ", ":KUBE-MARK-MASQ ", ":KUBE-IPVS-FILTER ", ":KUBE-FORWARD ",
					"-A INPUT -j KUBE-FIREWALL", ":OTHER-CHAIN ", "-A FORWARD -j OTHER-CHAIN", " src -j DROP",
					// kube-proxy's rules that name only what ipvsproxy names too: its first sync rewrites these chains.
					"-A KUBE-SERVICES -m set --match-set " + f.set("KUBE-CLUSTER-IP") + " dst,dst -j ACCEPT",
					"-A KUBE-NODE-PORT -p tcp -m comment --comment \"Kubernetes nodeport TCP port for masquerade purpose\" -m set --match-set " + f.set("KUBE-NODE-PORT-TCP") + " dst -j KUBE-MARK-MASQ"} {
					if !strings.Contains(rules, kept) {
						t.Errorf("%q removed:\n%s", kept, rules)
					}
				}
				for _, base := range []string{"KUBE-CLUSTER-IP", "KUBE-LOOP-BACK", "KUBE-NODE-PORT-TCP", "KUBE-IPVS-IPS", "KUBE-HEALTH-CHECK-NODE-PORT", "KUBE-LOAD-BALANCER-FW"} {
					if !regexp.MustCompile(`(?m)^` + f.set(base) + `$`).MatchString(sets) {
						t.Errorf("set %s (a name ipvsproxy uses) removed:\n%s", f.set(base), sets)
					}
				}
			}
			for _, kept := range []string{"OTHER-SET", "KUBE-6-OTHER"} {
				if !strings.Contains(sets, kept) {
					t.Errorf("foreign set %s removed:\n%s", kept, sets)
				}
			}
			if strings.Contains(tables, "ip kube-proxy\n") || strings.Contains(tables, "ip6 kube-proxy\n") {
				t.Errorf("kube-proxy's nftables tables left:\n%s\ncleanup said:\n%s", tables, out)
			}
			if got := sh("nft list table inet other; nft list table ip6 kube-proxy-not"); got != foreign {
				t.Errorf("foreign nftables tables changed:\n%s\nwant\n%s", got, foreign)
			}

			again := run()
			r4, r6, s, tb := dump()
			if !strings.Contains(again, "count=0") || r4 != rules4 || r6 != rules6 || s != sets || tb != tables {
				t.Errorf("a second run changed something:\n%s", again)
			}
		})
	}
}
