//go:build e2e

package suite

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/iptables"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Scenarios that stop a node's daemon, change what it starts on (a host
// firewall, other flags) and start it again; each leaves the daemon on the
// suite's flags when it ends.

// savedRules reads a table of the node's iptables (or ip6tables) with the
// project's iptables package: each chain's rule lines, in order.
func savedRules(node string, family iptables.Family, table iptables.Table) (map[string][]string, error) {
	ipt, err := iptables.New(family, iptables.InNetNS("/run/netns/"+node))
	if err != nil {
		return nil, err
	}
	save, err := ipt.Save(table)
	if err != nil {
		return nil, err
	}
	return iptables.SavedRules(save), nil
}

// ipsetHeader reads one set's header (type, maxelem) in the node with the
// project's ipset package.
func ipsetHeader(node, name string) (ipset.Set, error) {
	var found ipset.Set
	err := withIPSet(node, func(k *ipset.Kernel) error {
		sets, err := k.Sets()
		if err != nil {
			return err
		}
		i := slices.IndexFunc(sets, func(s ipset.Set) bool { return s.Name == name })
		if i < 0 {
			return fmt.Errorf("%s has no ip set %s", node, name)
		}
		found = sets[i]
		return nil
	})
	return found, err
}

// hostFirewall is what RHEL, Docker and CNI portmap put on a node before
// any proxy: INPUT ending in a REJECT (IPv4 and IPv6), FORWARD accepting pod
// traffic then rejecting, a DOCKER and a CNI-HOSTPORT-DNAT chain jumped to
// for every --dst-type LOCAL packet (which every service address is), which
// DNAT a container's published port 8016 and a hostPort 30116 to the
// bridge's closed port 9. op is -A or -D.
func hostFirewall(op string) string {
	rules := []string{
		"iptables INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
		"iptables INPUT -i lo -j ACCEPT",
		"iptables INPUT -p icmp -j ACCEPT",
		"iptables INPUT -j REJECT --reject-with icmp-host-prohibited",
		"iptables FORWARD -s 10.244.0.0/16 -j ACCEPT",
		"iptables FORWARD -d 10.244.0.0/16 -j ACCEPT",
		"iptables FORWARD -j REJECT --reject-with icmp-host-prohibited",
		"ip6tables INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
		"ip6tables INPUT -i lo -j ACCEPT",
		"ip6tables INPUT -p ipv6-icmp -j ACCEPT",
		"ip6tables INPUT -j REJECT --reject-with icmp6-adm-prohibited",
		"ip6tables FORWARD -s 2001:db8:244::/48 -j ACCEPT",
		"ip6tables FORWARD -d 2001:db8:244::/48 -j ACCEPT",
		"ip6tables FORWARD -j REJECT --reject-with icmp6-adm-prohibited",
		"iptables -t nat " + op + " PREROUTING -m addrtype --dst-type LOCAL -j DOCKER",
		"iptables -t nat " + op + " OUTPUT ! -d 127.0.0.0/8 -m addrtype --dst-type LOCAL -j DOCKER",
		"iptables -t nat " + op + " PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT",
		"iptables -t nat " + op + " OUTPUT -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT",
		"iptables -t nat " + op + " DOCKER -p tcp --dport 8016 -j DNAT --to-destination 198.51.100.254:9",
		"iptables -t nat " + op + " CNI-HOSTPORT-DNAT -p tcp --dport 30116 -j DNAT --to-destination 198.51.100.254:9",
	}
	var cmds []string
	if op == "-A" {
		cmds = append(cmds, "iptables -t nat -N DOCKER", "iptables -t nat -N CNI-HOSTPORT-DNAT")
	}
	for _, r := range rules {
		if cmd, rule, _ := strings.Cut(r, " "); strings.HasPrefix(rule, "-t nat") {
			cmds = append(cmds, r)
		} else {
			cmds = append(cmds, cmd+" "+op+" "+rule)
		}
	}
	if op == "-D" {
		cmds = append(cmds, "iptables -t nat -X DOCKER", "iptables -t nat -X CNI-HOSTPORT-DNAT")
	}
	return strings.Join(cmds, " && ")
}

// scenarioHostFirewall: a host firewall installed before the daemon
// starts. node2's daemon is stopped and cleaned up; node2 gets hostFirewall;
// the daemon then starts: its jumps go first (kube-proxy prepends them), so
// DOCKER's and CNI portmap's DNAT never take service traffic (their
// counters stay 0). What the host's INPUT rules say of Service traffic is
// theirs, as under kube-proxy: c2 to the cluster IP and the client to the
// node port meet the REJECT, both families, while node2's own connections
// (taken by IPVS before INPUT) are answered. Restarted with
// --accept-service-traffic, the daemon accepts Service traffic ahead of the
// host's rules and every Service answers. The host rules are removed and
// node2's daemon is back on the suite's flags at the end.
func scenarioHostFirewall(s *S) {
	s.Step("host-firewall", "host firewall before the daemon (RHEL REJECTs, DOCKER and CNI DNATs): the kube jumps are first and the DNATs take nothing; by default the host's REJECT decides c2's and the client's Service traffic, both families, node2's own is answered; with --accept-service-traffic all answer", func(v *V) {
		v.Heading("A host firewall installed before the daemon: its rules decide Service traffic unless --accept-service-traffic")
		svc := v.ApplyService(service("{name: corner-fw}", "type: NodePort", "ipFamilyPolicy: RequireDualStack",
			"ports: [{port: 8016, targetPort: 8080, nodePort: 30116, protocol: TCP}]"))
		v.SetEndpoints(svc, "web@node1", v6.pod("web")+"@node1")
		v.Show("-", "e2ectl apply-service corner-fw.yaml  # NodePort 30116, RequireDualStack, endpoint web", serviceInfo(svc, "TYPE", "CLUSTER_IPS"))
		v.StopProxier("node2", syscall.SIGTERM)
		if a := run("node2", ipvsproxyBin()+" cleanup --lock-file "+nodeLock("node2")+" >>"+proxierLog("node2")+" 2>&1"); a.Status != 0 {
			v.Errorf("ipvsproxy cleanup on node2: exit %d", a.Status)
		}
		if a := run("node2", hostFirewall("-A")); a.Status != 0 {
			v.Fatalf("node2's host firewall: %s", a.Out)
		}
		s.t.Cleanup(func() { run("node2", hostFirewall("-D")) })
		v.Show("node2", "ipvsproxy cleanup; iptables ... # RHEL INPUT/FORWARD REJECT (IPv4, IPv6), DOCKER and CNI-HOSTPORT-DNAT DNAT of :8016 and :30116",
			run("node2", "iptables-save | grep -E '^-A (INPUT|FORWARD|PREROUTING|OUTPUT|DOCKER|CNI-HOSTPORT-DNAT) '; ip6tables-save | grep -E '^-A (INPUT|FORWARD) '").Out)

		served := func(want bool) {
			for _, f := range families {
				ip := f.clusterIP(svc)
				v.WaitRealServers("node2", ipvs.TCP, ip, 8016, hostPort(f.pod("web"), 8080))
				v.ExpectServed(v.Curl("node2", httpURL(ip, 8016)), "hostname=web")
				for _, c := range []struct{ from, url string }{{"c2", httpURL(ip, 8016)}, {"client", httpURL(f.node("node2"), 30116)}} {
					if want {
						v.ExpectServed(v.Curl(c.from, c.url), "hostname=web")
					} else if a := v.Ask(c.from, "curl -gsS --max-time 3 '"+c.url+"' 2>&1; echo exit=$?"); !strings.HasSuffix(a.Out, "exit=7") {
						v.Errorf("%s: '%s', want the host's REJECT (curl exit 7)", v.last(), oneline(a.Out))
					}
				}
			}
			dnats := run("node2", "iptables -w -t nat -nvxL DOCKER | awk 'NR > 2 { n += $1 } END { print n + 0 }'; iptables -w -t nat -nvxL CNI-HOSTPORT-DNAT | awk 'NR > 2 { n += $1 } END { print n + 0 }'").Out
			v.Show("node2", "iptables -t nat -nvxL DOCKER; iptables -t nat -nvxL CNI-HOSTPORT-DNAT  # packets their DNATs took", dnats)
			if dnats != "0\n0" {
				v.Errorf("DOCKER or CNI-HOSTPORT-DNAT took Service traffic from IPVS: %q packets", dnats)
			}
		}
		v.StartProxier("node2", proxierRun{})
		served(false)
		v.RestartProxier("node2", proxierRun{extra: []string{"--accept-service-traffic"}})
		served(true)
		var shown []string
		for _, c := range []struct {
			table iptables.Table
			chain string
		}{
			{iptables.TableFilter, "INPUT"}, {iptables.TableFilter, "FORWARD"},
			{iptables.TableNAT, "PREROUTING"}, {iptables.TableNAT, "OUTPUT"}, {iptables.TableNAT, "POSTROUTING"},
		} {
			chains, err := savedRules("node2", iptables.IPv4, c.table)
			v.Must(err)
			first := ""
			if rules := chains[c.chain]; len(rules) > 0 {
				first = rules[0]
			}
			shown = append(shown, string(c.table)+" "+c.chain+": "+first)
			if !strings.Contains(first, "-j KUBE-") {
				v.Errorf("%s %s starts with '%s', want the kube jump", c.table, c.chain, first)
			}
		}
		v.Show("node2", "iptables -t TABLE -S CHAIN | sed -n 2p  # the first rule, read with the iptables package", strings.Join(shown, "\n"))
		v.RestoreProxier("node2")
	})
}

// scenarioLocalDetect: local-traffic detection. node2's daemon is
// restarted three times with other flags, then with the suite's own:
//
//   - no --cluster-cidr: kube-proxy's fallback masquerades what the node
//     sends from a service address, so node2 reaches a cluster IP whose
//     endpoint is on node1;
//   - --detect-local-mode NodeCIDR: starts without a pod CIDR on the Node;
//     once spec.podCIDRs is set the rules follow without a restart
//     (kube-proxy exits);
//   - InterfaceNamePrefix v-: the pods' veths on the node are v-NAME.
//
// In each, c2 keeps its address to the cluster IP and node2 is answered.
func scenarioLocalDetect(s *S) {
	s.Step("local-traffic-detection", "local-traffic detection on node2: without --cluster-cidr, with NodeCIDR (rules follow spec.podCIDRs, no restart) and InterfaceNamePrefix v-: c2 keeps its address, node2 is answered", func(v *V) {
		v.Heading("Local-traffic detection: fallback without --cluster-cidr, NodeCIDR, InterfaceNamePrefix")
		svc := v.corner("corner-detect", service("{name: corner-detect}", "type: ClusterIP",
			"ports: [{port: 8017, targetPort: 8080, protocol: TCP}]"))
		ip := svc.Spec.ClusterIP
		checks := func() {
			v.ExpectServed(v.Curl("c2", "http://"+ip+":8017/"), "hostname=web", "client_address="+podIP("c2"))
			v.ExpectServed(v.Curl("node2", "http://"+ip+":8017/"), "hostname=web")
		}

		v.RestartProxier("node2", proxierRun{noClusterCIDR: true})
		v.WaitRealServers("node2", ipvs.TCP, ip, 8017, podIP("web")+":8080")
		checks()

		pid := v.RestartProxier("node2", proxierRun{noClusterCIDR: true, extra: []string{"--detect-local-mode", "NodeCIDR"}})
		v.WaitRealServers("node2", ipvs.TCP, ip, 8017, podIP("web")+":8080")
		patch := `{"spec":{"podCIDR":"10.244.2.0/24","podCIDRs":["10.244.2.0/24","2001:db8:244:2::/64"]}}`
		ctx, cancel := s.ctx()
		_, err := guest.client.CoreV1().Nodes().Patch(ctx, "node2", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		cancel()
		if err != nil {
			v.Errorf("PATCH node2 spec.podCIDRs failed: %v", err)
		}
		v.Show("-", "kubectl patch node node2 -p '"+patch+"'", "")
		for _, want := range []struct {
			family iptables.Family
			line   string
		}{
			{iptables.IPv4, "-A KUBE-SERVICES ! -s 10.244.2.0/24 -m set --match-set KUBE-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ"},
			{iptables.IPv6, "-A KUBE-SERVICES ! -s 2001:db8:244:2::/64 -m set --match-set KUBE-6-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ"},
		} {
			var masq []string
			ok, _ := waitUntil(30*time.Second, func() (bool, string) {
				chains, err := savedRules("node2", want.family, iptables.TableNAT)
				if err != nil {
					return false, err.Error()
				}
				masq = masqRules(chains["KUBE-SERVICES"])
				return slices.Contains(chains["KUBE-SERVICES"], want.line), ""
			})
			v.Show("node2", fmt.Sprintf("%s-save -t nat | grep -- '-A KUBE-SERVICES.*CLUSTER-IP.*KUBE-MARK-MASQ'  # read with the iptables package", map[iptables.Family]string{iptables.IPv4: "iptables", iptables.IPv6: "ip6tables"}[want.family]),
				strings.Join(masq, "\n"))
			if !ok {
				v.Errorf("node2's IPv%d rules did not follow spec.podCIDRs: no %q", want.family, want.line)
			}
		}
		if proxierPid("node2") != pid || !alive(pid) {
			v.Errorf("node2's daemon restarted or exited on the pod CIDR change")
		}
		checks()

		v.RestartProxier("node2", proxierRun{noClusterCIDR: true, extra: []string{"--detect-local-mode", "InterfaceNamePrefix", "--pod-interface-name-prefix", "v-"}})
		v.WaitRealServers("node2", ipvs.TCP, ip, 8017, podIP("web")+":8080")
		chains, err := savedRules("node2", iptables.IPv4, iptables.TableNAT)
		v.Must(err)
		v.Show("node2", "iptables-save -t nat | grep -- '-A KUBE-SERVICES.*KUBE-CLUSTER-IP.*KUBE-MARK-MASQ'  # read with the iptables package",
			strings.Join(masqRules(chains["KUBE-SERVICES"]), "\n"))
		checks()

		v.RestoreProxier("node2")
	})
}

// masqRules are the KUBE-SERVICES lines that mark cluster-IP traffic for
// masquerading.
func masqRules(lines []string) []string {
	var out []string
	for _, l := range lines {
		if strings.Contains(l, "CLUSTER-IP") && strings.Contains(l, "-j KUBE-MARK-MASQ") {
			out = append(out, l)
		}
	}
	return out
}

// scenarioExternalIPGuard: the CVE-2020-8554 guard. node1's daemon runs with
// --external-ip-cidrs 203.0.113.0/25,10.96.210.0/24. Service squat (created
// first, so it would win a clash) names four external IPs on port 8080,
// served by s3: 10.96.210.10, not yet anyone's, then Service victim's
// cluster IP; 10.244.2.10, pod s2's address (inside --cluster-cidr);
// 203.0.113.210, outside --external-ip-cidrs; 203.0.113.30, an ordinary
// one inside it. Without the guard, c1 calling victim's cluster IP or pod s2
// reached s3, and node1 answered 203.0.113.210. With it: victim's cluster IP
// reaches web, s2 answers as itself, 203.0.113.210 gets nothing,
// 203.0.113.30 is served, and squat has ExternalIPRefused Events. Once
// victim is deleted, 10.96.210.10 stays refused: it lies in the API
// server's Service range (its ServiceCIDR), which no external IP may use.
func scenarioExternalIPGuard(s *S) {
	const taken, outside, fine, pod = "10.96.210.10", "203.0.113.210", "203.0.113.30", "10.244.2.10"
	s.Step("external-ip-guard", "external IP guard: another Service's cluster IP, a pod IP and an address outside --external-ip-cidrs are refused with Events; an allowed one is served; after victim's deletion its address stays refused (in the Service range)", func(v *V) {
		v.Heading("External IPs that would intercept someone else's traffic are refused (CVE-2020-8554)")
		v.RestartProxier("node1", proxierRun{extra: []string{"--external-ip-cidrs", "203.0.113.0/25,10.96.210.0/24"}})
		squat := v.ApplyService(service("{name: squat}", "ports: [{port: 8080, targetPort: 8080, protocol: TCP}]",
			"externalIPs: ["+strings.Join([]string{taken, pod, outside, fine}, ", ")+"]"))
		v.SetEndpoints(squat, "s3@node1")
		v.Show("-", "e2ectl apply-service squat.yaml  # externalIPs "+taken+" "+pod+" "+outside+" "+fine+", endpoint s3", "")
		v.WaitRealServers("node1", ipvs.TCP, fine, 8080, podIP("s3")+":8080")
		time.Sleep(time.Second)
		victim := v.ApplyService(service("{name: victim}", "clusterIP: "+taken, "ports: [{port: 8080, targetPort: 8080, protocol: TCP}]"))
		v.SetEndpoints(victim, "web@node1")
		v.Show("-", "e2ectl apply-service victim.yaml  # clusterIP "+taken+", endpoint web", "")
		waitUntil(30*time.Second, func() (bool, string) {
			return strings.Contains(run("c1", "curl -s --max-time 2 "+taken+":8080").Out, "hostname=web"), ""
		})
		hostname := func(where, curl string) string { return v.Ask(where, curl+" | grep ^hostname=").Out }
		if a := hostname("c1", "curl -s --max-time 5 "+taken+":8080"); a != "hostname=web" {
			v.Errorf("victim's cluster IP answered '%s', want hostname=web", a)
		}
		if a := hostname("c1", "curl -s --max-time 5 "+pod+":8080"); a != "hostname=s2" {
			v.Errorf("pod s2 answered '%s', want hostname=s2", a)
		}
		if a := hostname("node1", "curl -s --connect-timeout 2 --max-time 3 "+outside+":8080"); a != "" {
			v.Errorf("node1 answered %s for an external IP outside --external-ip-cidrs", a)
		}
		if a := hostname("c1", "curl -s --max-time 5 "+fine+":8080"); a != "hostname=s3" {
			v.Errorf("the allowed external IP answered '%s', want hostname=s3", a)
		}
		// Events are posted asynchronously by the daemons' broadcasters.
		var refused []string
		waitUntil(20*time.Second, func() (bool, string) {
			refused = refusedEvents("squat")
			return slices.ContainsFunc(refused, func(m string) bool {
				return strings.Contains(m, taken+" is the cluster IP of Service default/victim")
			}), ""
		})
		v.Show("-", "kubectl get events --field-selector involvedObject.name=squat,reason=ExternalIPRefused", strings.Join(refused, "\n"))
		v.DeleteService(victim)
		v.Show("-", "e2ectl delete-service victim", "")
		time.Sleep(5 * time.Second) // many sync periods: time for a wrong answer to show
		refused = refusedEvents("squat")
		for _, want := range []string{taken + " is the cluster IP of Service default/victim", pod + " lies in the pod range 10.244.0.0/16",
			outside + " is outside --external-ip-cidrs", taken + " lies in the Service range"} {
			if !slices.ContainsFunc(refused, func(m string) bool { return strings.Contains(m, want) }) {
				v.Errorf("no Event saying '%s'", want)
			}
		}
		if a := hostname("c1", "curl -s --connect-timeout 2 --max-time 3 "+taken+":8080"); a == "hostname=s3" {
			v.Errorf("after victim's deletion squat took its address (answered %s): a Service-range address must stay refused", a)
		}
		v.RestoreProxier("node1")
	})
}

// refusedEvents are the messages of the ExternalIPRefused Events on the
// Service, each once.
func refusedEvents(name string) []string {
	all, err := events(name)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, e := range all {
		if _, msg, ok := strings.Cut(e, " ExternalIPRefused: "); ok && !slices.Contains(out, msg) {
			out = append(out, msg)
		}
	}
	slices.Sort(out)
	return out
}

// scenarioOwnershipRecord: losing the ownership record does not cut a
// cluster IP. A pod on node1 sends requests without pause to Service
// record48's cluster IP (endpoint web; routed by the Service CIDR route, not
// bound) while `ipset flush KUBE-IPVS-OWNED` runs on node1 under the running
// daemon, then node1's daemon restarts with --ipset-max-elements 131072,
// which replaces every owned set, the record's included. Before the fix the
// next full read found no record, took the cluster IP's virtual server for
// someone else's, removed its set members, and the pod's requests hit
// KUBE-SERVICE-CIDRS' REJECT. Now no request fails, the record holds the
// cluster IP again, and the record set has the new maxelem.
func scenarioOwnershipRecord(s *S) {
	s.Step("ownership-record-rewritten", "ipset flush KUBE-IPVS-OWNED and a restart with a larger --ipset-max-elements: no request to the cluster IP failed, the record is written again", func(v *V) {
		v.Heading("The ownership record flushed or replaced: cluster IP traffic goes on")
		svc := v.ApplyService(service("{name: record48}", httpPort))
		ip := svc.Spec.ClusterIP
		v.SetEndpoints(svc, "web@node1")
		v.Show("-", "e2ectl apply-service record48.yaml  # cluster IP "+ip+", endpoint web", "")
		v.WaitRealServers("node1", ipvs.TCP, ip, 80, podIP("web")+":8080")
		record := ipset.Entry{IP: netip.MustParseAddr(ip), Protocol: "tcp", Port: 80}

		requests := startRequestLoop(v, "c1", "http://"+ip+"/", filepath.Join(guest.logs, "record-requests.log"), "sleep 0.1")
		time.Sleep(2 * time.Second)
		full, _ := metric("node1", "ipvsproxy_sync_full_total")
		tFlush := time.Now()
		if a := run("node1", "ipset flush KUBE-IPVS-OWNED"); a.Status != 0 {
			v.Fatalf("ipset flush KUBE-IPVS-OWNED: %s", a.Out)
		}
		v.Show("node1", "ipset flush KUBE-IPVS-OWNED  # under the running daemon", "")
		waitUntil(60*time.Second, func() (bool, string) {
			n, _ := metric("node1", "ipvsproxy_sync_full_total")
			return n > full+1, ""
		})
		in, err := inSet("node1", "KUBE-IPVS-OWNED", record)
		v.Must(err)
		v.Show("node1", "ipset test KUBE-IPVS-OWNED "+record.String(ipset.HashIPPort)+"  # read with the ipset package", fmt.Sprintf("in the set: %v", in))
		if !in {
			v.Errorf("after the flush: %s is not in KUBE-IPVS-OWNED, want the record written again", record.String(ipset.HashIPPort))
		}
		v.RestartProxier("node1", proxierRun{extra: []string{"--ipset-max-elements", "131072"}})
		time.Sleep(2 * time.Second)
		tStop := time.Now()
		codes := requests.stop()
		counts := map[string]int{}
		for _, c := range codes {
			counts[c]++
		}
		v.Show("c1", "sort record-requests.log | uniq -c  # the requests made meanwhile", fmt.Sprint(counts))
		failures := map[string]int{}
		for c, n := range counts {
			if c != "200" {
				failures[c] = n
			}
		}
		if len(failures) > 0 {
			v.Errorf("requests failed meanwhile: %v", failures)
		}
		if counts["200"] <= 20 {
			v.Errorf("too few requests answered: %d of %d", counts["200"], len(codes))
		}
		if quiet := requests.silence(tFlush, tStop); quiet >= streamLineGapMax {
			v.Errorf("no request ended for %.2f s between the flush and the end, want < %.1f s", quiet.Seconds(), streamLineGapMax.Seconds())
		}
		header, err := ipsetHeader("node1", "KUBE-IPVS-OWNED")
		v.Must(err)
		in, err = inSet("node1", "KUBE-IPVS-OWNED", record)
		v.Must(err)
		v.Show("node1", "ipset list KUBE-IPVS-OWNED | grep maxelem; ipset test KUBE-IPVS-OWNED "+record.String(ipset.HashIPPort)+"  # read with the ipset package",
			fmt.Sprintf("maxelem %d; in the set: %v", header.MaxElem, in))
		if header.MaxElem != 131072 || !in {
			v.Errorf("after the restart: maxelem %d (want 131072), record in the set: %v", header.MaxElem, in)
		}
		v.RestoreProxier("node1")
	})
}

// requestLoop is a pod's curl to one URL again and again (pause, a shell
// command, between two), each request's end time and HTTP code (or
// "failed") a line of its log.
type requestLoop struct {
	cmd           *exec.Cmd
	log, stopFile string
	// ends are when each request ended, read by stop.
	ends []time.Time
}

// startRequestLoop starts the loop in pod where; the scenario stops it at
// its end if the step did not.
func startRequestLoop(v *V, where, url, log, pause string) *requestLoop {
	l := &requestLoop{log: log, stopFile: log + ".stop"}
	os.Remove(l.stopFile)
	f, err := os.Create(log)
	v.Must(err)
	defer f.Close()
	l.cmd = exec.Command("ip", "netns", "exec", where, "bash", "-c", `
		while [[ ! -e `+l.stopFile+` ]]; do
			code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 3 `+url+`) || code=failed
			echo "$(date +%s.%N) $code"
			`+pause+`
		done`)
	l.cmd.Stdout, l.cmd.Stderr = f, f
	v.Must(l.cmd.Start())
	v.s.t.Cleanup(func() { l.stop() })
	return l
}

// stop ends the loop and returns what each request gave, in order.
func (l *requestLoop) stop() []string {
	if l.cmd.ProcessState == nil {
		_ = os.WriteFile(l.stopFile, nil, 0o644)
		_ = l.cmd.Wait()
		os.Remove(l.stopFile)
	}
	b, _ := os.ReadFile(l.log)
	var codes []string
	l.ends = l.ends[:0]
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		at, code, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if secs, err := strconv.ParseFloat(at, 64); err == nil {
			l.ends = append(l.ends, time.Unix(0, int64(secs*1e9)))
		}
		codes = append(codes, code)
	}
	return codes
}

// silence is the longest time between two requests' ends in [from, to],
// counted to the window's ends (largestSilence): a loop that stalled or
// died before to shows it. Read after stop.
func (l *requestLoop) silence(from, to time.Time) time.Duration {
	gap, _ := largestSilence(l.ends, from, to)
	return gap
}
