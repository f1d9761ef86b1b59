//go:build e2e

package suite

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netns"

	"github.com/ipvsproxy/ipvsproxy/e2e/controlplane/cluster"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/iptables"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// A node's daemon killed, stopped or cleaned up under traffic: what the next
// one (or `ipvsproxy cleanup`) makes of the kernel the last one left.

// scenarioConntrackReconcile: UDP conntrack is reconciled, not only
// event-driven (kubernetes#112604). A daemon that dies between removing a
// real server and deleting its flows leaves a client's UDP flow pointing at
// the dead endpoint: IPVS never rewrites a confirmed flow, so the client's
// datagrams keep going nowhere for as long as it sends. Here the daemon is
// stopped, the endpoint deleted and its real server removed by hand (what
// the daemon had done just before it died) and the daemon started again:
// its first full sync must find the flow whose reply source is no real
// server and delete it, so replies resume from the live endpoint.
func scenarioConntrackReconcile(s *S) {
	const srcPort, addrA, addrB = 40035, "10.244.1.35", "10.244.2.35"
	s.Step("udp-stale-flow-after-restart", "UDP reconcile: SIGTERM kept the real servers; after a restart over a stale flow, replies from the other endpoint", func(v *V) {
		v.Heading("UDP flows are reconciled: a flow left stale by a crash is deleted by the restarted daemon")
		// Pods of its own, so that this runs after udp-endpoint-removed (which deletes one) or alone.
		for _, p := range []struct{ node, name, ip string }{{"node1", "u35a", addrA}, {"node2", "u35b", addrB}} {
			v.Must(topology("add-pod", p.node, p.name, p.ip))
			name := p.name
			s.t.Cleanup(func() { _ = topology("del-pod", name) })
			v.Must(topology("echo", p.name, "-http", "", "-udp", ":8081"))
		}
		svc := v.ApplyService(service("{name: udp35}", "ports: [{port: 5353, targetPort: 8081, protocol: UDP}]"))
		ip := svc.Spec.ClusterIP
		v.SetEndpoints(svc, addrA+"@node1", addrB+"@node2")
		v.Show("-", "e2ectl apply-service udp35.yaml && e2ectl set-endpoints udp35 "+addrA+"@node1 "+addrB+"@node2  # UDP 5353 -> 8081", "CLUSTER_IP="+ip)
		v.WaitRealServers("node1", ipvs.UDP, ip, 5353, addrA+":8081", addrB+":8081")

		replies := filepath.Join(guest.logs, "udp35-replies.log")
		sender := startBackground(v, "c1", replies, fmt.Sprintf(`
			while sleep 0.3; do echo ping; done |
				socat - UDP:%s:5353,sourceport=%d |
				while read -r line; do [[ $line == hostname=* ]] && echo "$(date +%%s.%%N) $line"; done`, ip, srcPort))
		v.WaitUntil(30*time.Second, "no reply from udp35", func() (bool, string) {
			return len(udpReplies(replies)) > 0, "no hostname= line in " + replies
		})
		time.Sleep(time.Second)
		var from []string
		for _, r := range udpReplies(replies) {
			if !slices.Contains(from, r.host) {
				from = append(from, r.host)
			}
		}
		var victim, survivor, victimIP string
		switch strings.Join(from, " ") {
		case "u35a":
			victim, survivor, victimIP = "u35a", "u35b", addrA
		case "u35b":
			victim, survivor, victimIP = "u35b", "u35a", addrB
		default:
			sender.stop()
			v.about = "UDP reconcile: one flow reaches one endpoint"
			v.Fatalf("replies from: %v", from)
		}
		v.Note("the flow from source port %d reaches %s; stop node1's daemon, then remove %s as it would have", srcPort, victim, victim)
		v.StopProxier("node1", syscall.SIGTERM)
		// SIGTERM leaves the kernel state in place: the virtual server keeps both real servers.
		rss, err := realServers("node1", ipvs.UDP, ip, 5353)
		v.Must(err)
		var kept []string
		for _, rs := range rss {
			kept = append(kept, rs.String())
		}
		slices.Sort(kept)
		v.Show("node1", "ipvsadm -Ln -u "+ip+":5353  # after SIGTERM, read with the ipvs package", "real servers: "+strings.Join(kept, " "))
		if !slices.Equal(kept, []string{addrA + ":8081", addrB + ":8081"}) {
			v.Errorf("after SIGTERM the real servers were: %v", kept)
		}
		v.Must(topology("del-pod", victim))
		ctx, cancel := s.ctx()
		err = cluster.RemoveEndpoint(ctx, guest.client, cluster.ServiceRef{Namespace: svc.Namespace, Name: svc.Name}, net.ParseIP(victimIP))
		cancel()
		v.Must(err)
		// The daemon's last act before dying: the real server is gone, its flow is not.
		if a := run("node1", fmt.Sprintf("ipvsadm -d -u %s:5353 -r %s:8081", ip, victimIP)); a.Status != 0 {
			v.Fatalf("ipvsadm -d: %s", a.Out)
		}
		v.Show("node1", fmt.Sprintf("ipvsadm -d -u %s:5353 -r %s:8081; conntrack -L -p udp --orig-dst %s  # daemon stopped", ip, victimIP, ip),
			run("node1", "conntrack -L -p udp --orig-dst "+ip+" 2>/dev/null").Out)
		t0 := time.Now()
		pid := v.LaunchProxier("node1", proxierRun{})
		// Under emulation the daemon needs seconds to list the API and sync; then one full sync.
		limit := 60*time.Second + 2*syncPeriod
		resumed := time.Duration(-1)
		waitUntil(limit, func() (bool, string) {
			for _, r := range udpReplies(replies) {
				if r.host == survivor && r.at.After(t0) {
					resumed = r.at.Sub(t0)
					return true, ""
				}
			}
			return false, ""
		})
		time.Sleep(time.Second)
		sender.stop()
		v.Ask("node1", "conntrack -L -p udp --orig-dst "+ip+" 2>/dev/null")
		deleted, _ := metric("node1", "ipvsproxy_conntrack_entries_deleted_total")
		v.Show("node1", "curl -s 127.0.0.1:10249/metrics | grep ipvsproxy_conntrack_entries_deleted_total", fmt.Sprint(deleted))
		_ = topology("del-pod", survivor)
		when := "never"
		if resumed >= 0 {
			when = fmt.Sprintf("after %.1fs", resumed.Seconds())
		} else {
			v.Errorf("the flow stayed stale: no reply from %s", survivor)
		}
		v.about = fmt.Sprintf("UDP reconcile: SIGTERM kept the real servers; after a restart over a stale flow to %s, replies from %s within %.0fs of the start (%s)", victim, survivor, limit.Seconds(), when)
		// The next scenario finds node1 synced.
		v.Must(waitProxierSynced("node1", pid, 120*time.Second))
	})
}

// udpReply is one line of a UDP sender's log: when, and which endpoint.
type udpReply struct {
	at   time.Time
	host string
}

// udpReplies reads the "UNIXTIME hostname=NAME" lines of a sender's log.
func udpReplies(log string) []udpReply {
	b, _ := os.ReadFile(log)
	var out []udpReply
	for _, l := range strings.Split(string(b), "\n") {
		ts, host, ok := strings.Cut(l, " hostname=")
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(ts, 64)
		if err != nil {
			continue
		}
		sec := int64(f)
		out = append(out, udpReply{at: time.Unix(sec, int64((f-float64(sec))*1e9)), host: strings.TrimSpace(host)})
	}
	return out
}

// pipeline is a shell pipeline running in a namespace, in a process
// group of its own so that stop ends all of it.
type pipeline struct{ cmd *exec.Cmd }

// startBackground runs script under bash in namespace where, its output
// appended to log; the scenario stops it at its end if the step did not.
func startBackground(v *V, where, log, script string) *pipeline {
	f, err := os.OpenFile(log, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	v.Must(err)
	defer f.Close()
	cmd := shell(where, script)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	v.Must(cmd.Start())
	b := &pipeline{cmd: cmd}
	v.s.t.Cleanup(b.stop)
	return b
}

func (b *pipeline) stop() {
	if b.cmd.ProcessState != nil {
		return
	}
	_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGTERM)
	_ = b.cmd.Wait()
}

// ipvsTable is the node's IPVS table read with the ipvs package, without
// the connection counts (which move): a line per virtual server, then one
// per real server with its forwarding method (procForwards) and weight.
func ipvsTable(node string) (string, error) {
	t, err := readIPVS(node)
	return t.text, err
}

// ipvsState is one read of a node's IPVS table: ipvsTable's text and, from
// the same read, each virtual server's real servers.
type ipvsState struct {
	text        string
	realServers map[ipvs.VirtualServerKey][]ipvs.RealServer
}

func readIPVS(node string) (ipvsState, error) {
	st := ipvsState{realServers: map[ipvs.VirtualServerKey][]ipvs.RealServer{}}
	forwards, err := procForwards(node)
	if err != nil {
		return st, err
	}
	var b strings.Builder
	err = withIPVS(node, func(k ipvs.Interface) error {
		vss, err := k.VirtualServers()
		if err != nil {
			return err
		}
		for _, vs := range vss {
			fmt.Fprintf(&b, "%s %s flags %q persistent %s\n", vs, vs.Scheduler, vs.SchedulerFlags.For(vs.Scheduler), vs.PersistenceTimeout)
			rss, err := k.RealServers(vs.VirtualServerKey)
			if err != nil {
				return err
			}
			st.realServers[vs.VirtualServerKey] = rss
			for _, rs := range rss {
				fmt.Fprintf(&b, "  -> %s %s weight %d\n", rs, forwards[procForwardKey(vs.VirtualServerKey, rs.RealServerKey)], rs.Weight)
			}
		}
		return nil
	})
	st.text = b.String()
	return st, err
}

// vsConnections are the node's virtual servers' connection counters (a
// virtual server deleted and added again would restart from 0).
func vsConnections(node string) (map[ipvs.VirtualServerKey]uint64, error) {
	out := map[ipvs.VirtualServerKey]uint64{}
	err := withIPVS(node, func(k ipvs.Interface) error {
		sr, ok := k.(ipvs.StatsReader)
		if !ok {
			return fmt.Errorf("the ipvs kernel table reads no counters")
		}
		stats, err := sr.VirtualServerStats()
		for key, s := range stats {
			out[key] = s.Connections
		}
		return err
	})
	return out, err
}

// ipsetDump is every set of the node with its header and its members in
// the kernel's order, read with the ipset package.
func ipsetDump(node string) (string, error) {
	var b strings.Builder
	err := withIPSet(node, func(k *ipset.Kernel) error {
		sets, err := k.Sets()
		if err != nil {
			return err
		}
		for _, s := range sets {
			fmt.Fprintf(&b, "%s %s %s maxelem %d:", s.Name, s.Type, s.Family, s.MaxElem)
			entries, err := k.Entries(s.Name)
			if err != nil {
				return err
			}
			for _, e := range entries {
				b.WriteString(" " + e.String(s.Type))
			}
			b.WriteString("\n")
		}
		return nil
	})
	return b.String(), err
}

// kernelState is everything the proxier writes into a node, read with the
// project's packages, without what traffic changes (IPVS connection counts,
// rule and chain counters), as text in a stable order: the IPVS table
// (readIPVS), every ipset with its members (ipsetDump), the filter, nat,
// mangle and raw tables of iptables and ip6tables (the iptables package,
// which saves without counters), and kube-ipvs0's addresses and Service
// routes (the netif package). ipvs holds the IPVS table of the same read.
type kernelState struct {
	text string
	ipvs ipvsState
}

func readKernel(node string) (kernelState, error) {
	var ks kernelState
	var b strings.Builder
	var err error
	if ks.ipvs, err = readIPVS(node); err != nil {
		return ks, err
	}
	b.WriteString("== IPVS\n" + ks.ipvs.text)
	sets, err := ipsetDump(node)
	if err != nil {
		return ks, err
	}
	b.WriteString("== ipsets\n" + sets)
	tables := []iptables.Table{iptables.TableFilter, iptables.TableNAT, iptables.TableMangle, "raw"}
	for _, f := range []iptables.Family{iptables.IPv4, iptables.IPv6} {
		ipt, err := iptables.New(f, iptables.InNetNS("/run/netns/"+node))
		if err != nil {
			return ks, err
		}
		saved, err := ipt.SaveTables(tables...)
		if err != nil {
			return ks, err
		}
		fmt.Fprintf(&b, "== %s rules\n", f)
		for _, t := range tables {
			b.Write(saved[t])
		}
	}
	err = withDummy(node, func(k netif.Interface) error {
		addrs, err := k.DummyAddresses()
		if err != nil {
			return err
		}
		routes, err := k.ServiceRoutes()
		if err != nil {
			return err
		}
		slices.SortFunc(addrs, netip.Addr.Compare)
		slices.SortFunc(routes, func(a, b netip.Prefix) int { return strings.Compare(a.String(), b.String()) })
		b.WriteString("== kube-ipvs0 addresses\n" + joined(addrs) + "\n== kube-ipvs0 Service routes\n" + joined(routes) + "\n")
		return nil
	})
	ks.text = b.String()
	return ks, err
}

// ruleCounter is one iptables rule with its packet counter.
type ruleCounter struct {
	rule    string // "TABLE -A CHAIN ..."
	packets uint64
}

// ruleCounters reads the node's IPv4 rules with their packet counters
// (`iptables-save -c`: the iptables package saves without counters, since
// the proxier compares rules, never counts).
func ruleCounters(node string) ([]ruleCounter, error) {
	a := run(node, "iptables-save -c")
	if a.Status != 0 {
		return nil, fmt.Errorf("%s: iptables-save -c: %s", node, a.Out)
	}
	var out []ruleCounter
	table := ""
	for _, l := range strings.Split(a.Out, "\n") {
		switch {
		case strings.HasPrefix(l, "*"):
			table = l[1:]
		case strings.HasPrefix(l, "["):
			counters, rule, _ := strings.Cut(l, " ")
			pkts, _, _ := strings.Cut(strings.Trim(counters, "[]"), ":")
			n, err := strconv.ParseUint(pkts, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: iptables-save -c line %q: %w", node, l, err)
			}
			out = append(out, ruleCounter{rule: table + " " + rule, packets: n})
		}
	}
	return out, nil
}

// scenarioRestart: a daemon restart must not disturb traffic: the new
// process adopts what the old one wrote instead of rewriting it. A pod on
// node1 sends requests without pause to a Service with three endpoints
// (restart9, its own) while node1's daemon is killed (SIGKILL, as an OOM
// kill or a node drain would) and started again. Evidence that nothing was
// rewritten: the IPVS table is the same before and after; the virtual
// servers' connection counters only grew (a virtual server deleted and
// added again would restart from 0); the iptables rules are the same and
// their packet counters only grew (an iptables-restore of a chain resets
// its counters); the ipsets are the same; `ip monitor address link` and
// `xtables-monitor -e` in the node report no change at all while the new
// daemon starts and syncs.
func scenarioRestart(s *S) {
	s.Step("restart-under-load", "restart under load: no request failed, IPVS, iptables and ipsets not rewritten", func(v *V) {
		v.Heading("Restart the daemon under load")
		svc := v.ApplyService(service("{name: restart9}", httpPort))
		ip := svc.Spec.ClusterIP
		v.SetEndpoints(svc, "web@node1", "s3@node1", "s2@node2")
		v.Show("-", "e2ectl apply-service restart9.yaml && e2ectl set-endpoints restart9 web s3 s2  # cluster IP "+ip, "")
		v.WaitRealServers("node1", ipvs.TCP, ip, 80, podIP("web")+":8080", podIP("s3")+":8080", podIP("s2")+":8080")
		requests := startRequestLoop(v, "c1", "http://"+ip+"/", filepath.Join(guest.logs, "restart-requests.log"), "")
		time.Sleep(2 * time.Second)
		ipvsBefore, err := ipvsTable("node1")
		v.Must(err)
		connsBefore, err := vsConnections("node1")
		v.Must(err)
		rulesBefore, err := ruleCounters("node1")
		v.Must(err)
		setsBefore, err := ipsetDump("node1")
		v.Must(err)

		// Watch the kernel for writes while the new daemon starts: address and link changes
		// (kube-ipvs0) and iptables rule changes (the nft back end reports every rule added or
		// deleted).
		monIP := filepath.Join(guest.logs, "restart-ip-monitor.log")
		monIPT := filepath.Join(guest.logs, "restart-xtables-monitor.log")
		mon1 := startBackground(v, "node1", monIP, "exec ip monitor address link")
		mon2 := startBackground(v, "node1", monIPT, "exec xtables-monitor -e")
		tKill := time.Now()
		v.StopProxier("node1", syscall.SIGKILL)
		pid := v.LaunchProxier("node1", proxierRun{})
		v.Show("-", "kill -KILL <node1's ipvsproxy>; ip netns exec node1 ipvsproxy run ... &", "")
		syncErr := waitProxierSynced("node1", pid, 120*time.Second)
		time.Sleep(2 * time.Second) // requests after the first sync, too
		tStop := time.Now()
		codes := requests.stop()
		quiet := requests.silence(tKill, tStop)
		mon1.stop()
		mon2.stop()
		monitored := strings.TrimSpace(readFile(monIP) + readFile(monIPT))
		v.Show("node1", "ip monitor address link; xtables-monitor -e  # while the daemon restarted", monitored)

		counts := map[string]int{}
		for _, c := range codes {
			counts[c]++
		}
		v.Show("c1", "sort restart-requests.log | uniq -c  # HTTP codes of the requests made meanwhile", fmt.Sprint(counts))
		ipvsAfter, err := ipvsTable("node1")
		v.Must(err)
		v.Show("node1", "ipvsadm -Ln  # read with the ipvs package, compared with before the restart, without the connection counts", ipvsAfter)
		connsAfter, err := vsConnections("node1")
		v.Must(err)
		rulesAfter, err := ruleCounters("node1")
		v.Must(err)
		setsAfter, err := ipsetDump("node1")
		v.Must(err)
		v.Ask("node1", "curl -s localhost:10249/metrics | grep -E '^ipvsproxy_(sync_full_total|sync_partial_total|kernel_write_failures_total)'")

		if syncErr != nil {
			v.Fatalf("the restarted daemon did not finish a sync: %v", syncErr)
		}
		for c, n := range counts {
			if c != "200" {
				v.Errorf("requests failed: %d answered %s (%v)", n, c, counts)
			}
		}
		if len(codes) < 5 {
			v.Errorf("only %d requests ran during the restart", len(codes))
		}
		v.Show("c1", "# the longest time without a request ending, from the kill to the end", fmt.Sprintf("%.2f s", quiet.Seconds()))
		if quiet >= streamLineGapMax {
			v.Errorf("no request ended for %.2f s between the kill and the end, want < %.1f s", quiet.Seconds(), streamLineGapMax.Seconds())
		}
		if ipvsBefore != ipvsAfter {
			v.Errorf("the IPVS table changed: before %q, after %q", ipvsBefore, ipvsAfter)
		}
		for key, n := range connsAfter {
			if before := connsBefore[key]; n < before {
				v.Errorf("%s connection counter went from %d to %d: recreated", key, before, n)
			}
		}
		if len(rulesBefore) != len(rulesAfter) {
			v.Errorf("iptables rules changed: %d rules before, %d after", len(rulesBefore), len(rulesAfter))
		} else {
			for i, b := range rulesBefore {
				a := rulesAfter[i]
				switch {
				case a.rule != b.rule:
					v.Errorf("iptables rules changed: %q became %q", b.rule, a.rule)
				case a.packets < b.packets:
					v.Errorf("iptables counters reset (rules rewritten): %s (was %d, now %d)", a.rule, b.packets, a.packets)
				}
			}
		}
		if setsBefore != setsAfter {
			v.Errorf("ipsets changed: before %q, after %q", setsBefore, setsAfter)
		}
		if monitored != "" {
			v.Errorf("the kernel reported writes during the restart: %s", monitored)
		}
	})
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// scenarioCleanup: `ipvsproxy cleanup` removes everything the proxier
// installed in a node: virtual servers, KUBE-* ipsets and chains, and the
// kube-ipvs0 interface, for IPv6 as for IPv4: the dual-stack daemons made
// ip6tables chains, KUBE-6-* sets and IPv6 addresses and routes on
// kube-ipvs0 (checked present first, so that their absence afterwards means
// something). It ends the run: the daemons stay stopped.
func scenarioCleanup(s *S) {
	s.Step("cleanup-leaves-nothing", "ipvsproxy cleanup leaves no IPVS service, KUBE-* or KUBE-6-* ipset, iptables or ip6tables chain, IPv6 route or address, or kube-ipvs0", func(v *V) {
		v.Heading("ipvsproxy cleanup")
		for _, n := range []string{"node1", "node2"} {
			// Not StopProxier: nothing restarts the daemons after this scenario.
			v.Must(stopProxier(n, syscall.SIGTERM))
			proxierRuns[n] = proxierRun{stopped: true}
			before, err := leftovers(n)
			v.Must(err)
			v.Show(n, "ip6tables-save | grep -c KUBE-; ipset list -n | grep -c '^KUBE-6-'; ip -6 route show table local dev kube-ipvs0 | grep -c .  # read with the iptables, ipset and netif packages",
				fmt.Sprintf("%d %d %d", before.kubeRules6, before.sets6, before.routes6))
			if before.kubeRules6 == 0 || before.sets6 == 0 || before.routes6 == 0 {
				v.Errorf("%s: before cleanup want IPv6 chains, KUBE-6-* sets and IPv6 addresses or routes on kube-ipvs0, got counts %d %d %d", n, before.kubeRules6, before.sets6, before.routes6)
			}
			if a := v.Ask(n, "ipvsproxy cleanup"); a.Status != 0 {
				v.Errorf("%s: cleanup failed: %s", n, oneline(a.Out))
			}
			after, err := leftovers(n)
			v.Must(err)
			v.Show(n, "ipvsadm -Ln; ipset list -n | grep KUBE-; iptables-save | grep KUBE-; ip6tables-save | grep KUBE-; ip -6 route show table all proto 233; ip -6 addr; ip link show kube-ipvs0  # read with the project's packages",
				after.String())
			for _, f := range []struct {
				left bool
				what string
			}{
				{len(after.virtualServers) > 0, "virtual servers left"},
				{len(after.sets) > 0, "KUBE- ipsets left"},
				{after.kubeRules4 > 0, "KUBE- iptables left"},
				{after.dummy, "kube-ipvs0 left"},
				{after.kubeRules6 > 0, "KUBE- ip6tables left"},
				{len(after.proto233) > 0, "IPv6 routes of proto 233 left"},
				{len(after.serviceAddrs6) > 0, "IPv6 service addresses left"},
			} {
				if f.left {
					v.Errorf("%s: %s", n, f.what)
				}
			}
		}
	})
}

// nodeLeftovers is what of the proxier's a node holds.
type nodeLeftovers struct {
	virtualServers         []string
	sets                   []string // KUBE-*
	sets6                  int      // KUBE-6-*
	kubeRules4, kubeRules6 int      // iptables and ip6tables lines naming KUBE-
	dummy                  bool     // kube-ipvs0 exists
	routes6                int      // IPv6 addresses and service routes on kube-ipvs0
	proto233               []string // IPv6 routes of the proxier's protocol, any table
	serviceAddrs6          []string // 2001:db8:(96|113|114):: addresses on any interface
}

func (l nodeLeftovers) String() string {
	return fmt.Sprintf("virtual servers %v; KUBE- sets %v; KUBE- lines iptables %d ip6tables %d; kube-ipvs0 %v; IPv6 proto 233 routes %v; IPv6 service addresses %v",
		l.virtualServers, l.sets, l.kubeRules4, l.kubeRules6, l.dummy, l.proto233, l.serviceAddrs6)
}

// leftovers reads the node with the ipvs, ipset, iptables and netif
// packages (and netlink for the routes of any table).
func leftovers(node string) (nodeLeftovers, error) {
	var l nodeLeftovers
	vss, err := virtualServers(node)
	if err != nil {
		return l, err
	}
	for _, vs := range vss {
		l.virtualServers = append(l.virtualServers, vs.Protocol.String()+" "+vs.String())
	}
	for _, f := range []iptables.Family{iptables.IPv4, iptables.IPv6} {
		ipt, err := iptables.New(f, iptables.InNetNS("/run/netns/"+node))
		if err != nil {
			return l, err
		}
		tables, err := ipt.SaveTables(iptables.TableFilter, iptables.TableNAT, iptables.TableMangle, "raw")
		if err != nil {
			return l, err
		}
		n := 0
		for _, t := range tables {
			n += strings.Count(string(t), "KUBE-")
		}
		if f == iptables.IPv4 {
			l.kubeRules4 = n
		} else {
			l.kubeRules6 = n
		}
	}
	err = inNamespace(node, func(h netns.NsHandle) error {
		k, err := ipset.NewInNamespace(h)
		if err != nil {
			return err
		}
		defer k.Close()
		sets, err := k.Sets()
		if err != nil {
			return err
		}
		for _, s := range sets {
			if strings.HasPrefix(s.Name, "KUBE-") {
				l.sets = append(l.sets, s.Name)
			}
			if strings.HasPrefix(s.Name, "KUBE-6-") {
				l.sets6++
			}
		}
		ni, err := netif.NewInNamespace("kube-ipvs0", h)
		if err != nil {
			return err
		}
		if c, ok := ni.(interface{ Close() error }); ok {
			defer c.Close()
		}
		dummy, host, err := ni.Addresses()
		if err != nil {
			return err
		}
		if _, err := ni.DummyAddresses(); err == nil {
			l.dummy = true
			routes, err := ni.ServiceRoutes()
			if err != nil {
				return err
			}
			for _, p := range routes {
				if p.Addr().Is6() {
					l.routes6++
				}
			}
		} else if !errors.Is(err, netif.ErrNotFound) {
			return err
		}
		for _, a := range dummy {
			if a.Is6() {
				l.routes6++ // a bound address is a local route on the link
			}
		}
		for _, a := range append(dummy, host...) {
			for _, p := range []string{"2001:db8:96::/48", "2001:db8:113::/48", "2001:db8:114::/48"} {
				if netip.MustParsePrefix(p).Contains(a) {
					l.serviceAddrs6 = append(l.serviceAddrs6, a.String())
				}
			}
		}
		nh, err := netlink.NewHandleAt(h)
		if err != nil {
			return err
		}
		defer nh.Close()
		routes, err := nh.RouteListFiltered(netlink.FAMILY_V6, &netlink.Route{Table: unix.RT_TABLE_UNSPEC, Protocol: 233},
			netlink.RT_FILTER_TABLE|netlink.RT_FILTER_PROTOCOL)
		if err != nil {
			return err
		}
		for _, r := range routes {
			l.proto233 = append(l.proto233, r.String())
		}
		return nil
	})
	return l, err
}
