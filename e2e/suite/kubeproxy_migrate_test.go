//go:build e2e

package suite

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/iptables"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	v1 "k8s.io/api/core/v1"
)

// The migration of docs/migrate-from-kube-proxy.md from the real kube-proxy
// v1.37.2 (built beside the API server: E2E_BIN/kube-proxy), with live
// connections measured across the switch, and the rollbacks the guide gives.
// Each stream is e2e/echoserver -measure (a line or a datagram per 100 ms,
// the longest gap between arrivals and every pause reported at the end); a
// control stream between two pods, crossing no proxy, tells the loaded VM's
// stalls (every stream pauses at once) from the switch's.
//
// migrate-from-kube-proxy-ipvs (and its IPv6 half) is in the default order;
// rollback-to-kube-proxy-ipvs and the migrations from and rollbacks to the
// iptables and nftables modes are run by name only, for time (`make
// e2e-migrate`).

const (
	kpmPort    = 30044 // the TCP Service's node port
	kpmUDPPort = 53
)

// kpmOwnSets are the sets of kube-proxy's IPVS mode that ipvsproxy does not
// make: `cleanup --kube-proxy-leftovers` must remove them.
var kpmOwnSets = regexp.MustCompile(`^KUBE-(6-)?(NODE-PORT-LOCAL-|EXTERNAL-IP-LOCAL|LOAD-BALANCER-LOCAL|LOAD-BALANCER-SOURCE-)`)

// kubeProxy is the real kube-proxy running in a node's namespace as its
// DaemonSet's pod would run it (hostNetwork), with the admin's kubeconfig.
type kubeProxy struct {
	node string
	cmd  *exec.Cmd
	done chan struct{}
}

func kubeProxyLog(node string) string { return filepath.Join(guest.logs, "kube-proxy-"+node+".log") }

// StartKubeProxy starts kube-proxy in mode on node. nf_conntrack_max is
// global, not writable from a node's namespace: --conntrack-max-per-core 0
// leaves it, as kube-proxy allows. Should the scenario end with it still
// running, it is stopped and its leftovers removed (before the daemon is put
// back on the suite's flags).
func (v *V) StartKubeProxy(node, mode string) *kubeProxy {
	log, err := os.OpenFile(kubeProxyLog(node), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	v.Must(err)
	defer log.Close()
	fmt.Fprintf(log, "--- start --proxy-mode %s %s\n", mode, time.Now().UTC().Format("15:04:05.000000000"))
	cmd := exec.Command("ip", "netns", "exec", node, filepath.Join(os.Getenv("E2E_BIN"), "kube-proxy"),
		"--kubeconfig", os.Getenv("ADMIN_KUBECONFIG"), "--hostname-override", node, "--proxy-mode", mode,
		"--cluster-cidr", clusterCIDRs, "--conntrack-max-per-core", "0")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		v.Fatalf("start kube-proxy on %s: %v", node, err)
	}
	k := &kubeProxy{node: node, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(k.done) }()
	v.Show(node, "kube-proxy --proxy-mode "+mode+" --hostname-override "+node+" --cluster-cidr "+clusterCIDRs+" --conntrack-max-per-core 0 &", "")
	v.s.t.Cleanup(func() {
		select {
		case <-k.done:
			return
		default:
		}
		k.Stop()
		run(node, "ipvsproxy cleanup --kube-proxy-leftovers >/dev/null 2>&1")
	})
	return k
}

// Stop sends SIGTERM, as the kubelet stops the pod, and waits until it is
// gone (SIGKILL after 60 s).
func (k *kubeProxy) Stop() {
	_ = k.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-k.done:
	case <-time.After(60 * time.Second):
		_ = k.cmd.Process.Kill()
		<-k.done
	}
}

// measuredStream is one e2e/echoserver -measure run in a namespace.
type measuredStream struct {
	name string
	b    *background
}

// StartStream starts a measuring stream named name in where's namespace:
// proto tcp (one connection to addr's /stream) or udp (a datagram per
// 100 ms from one source port).
func (v *V) StartStream(name, where, proto, addr string) *measuredStream {
	return &measuredStream{name: name, b: v.Background(where, "exec "+echoserver()+" -measure "+proto+" -to "+addr)}
}

// streamReport is a stream's last line: received=N max_gap=S ... error=E
// pauses=FROM-TO,... (or "no report: ..." when it printed none).
type streamReport string

// EndStreams stops the streams at once (stopped one by one, the last would
// count the others' stopping as its own final silence) and returns each
// one's report, in order.
func EndStreams(streams ...*measuredStream) []streamReport {
	for _, st := range streams {
		_ = syscall.Kill(-st.b.cmd.Process.Pid, syscall.SIGTERM)
	}
	reports := make([]streamReport, len(streams))
	for i, st := range streams {
		var last string
		waitUntil(20*time.Second, func() (bool, string) {
			var all []string
			for _, l := range st.b.Lines() {
				all = append(all, l.text)
				if strings.HasPrefix(l.text, "received=") {
					last = l.text
					return true, ""
				}
			}
			last = "no report: " + oneline(strings.Join(all, "\n"))
			return false, ""
		})
		reports[i] = streamReport(last)
	}
	return reports
}

// field is the value of key= in the report ("" without one).
func (r streamReport) field(key string) string {
	for _, f := range strings.Fields(string(r)) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v
		}
	}
	return ""
}

// gap is the longest gap as the report prints it, in seconds.
func (r streamReport) gap() string { return r.field("max_gap") }

type interval struct{ from, to float64 }

func (r streamReport) pauses() []interval {
	var out []interval
	for _, p := range strings.Split(r.field("pauses"), ",") {
		a, b, ok := strings.Cut(p, "-")
		if !ok {
			continue
		}
		from, err1 := strconv.ParseFloat(a, 64)
		to, err2 := strconv.ParseFloat(b, 64)
		if err1 == nil && err2 == nil {
			out = append(out, interval{from, to})
		}
	}
	return out
}

// ownGap is the longest pause of the stream that the control stream (two
// pods, no proxy between them) did not share: each pause less its overlap
// with the control's pauses. A loaded VM stops every process in it for
// seconds at times; those stalls show in every stream at once and are not
// the switch's.
func (r streamReport) ownGap(control streamReport) float64 {
	cp := control.pauses()
	longest := 0.0
	for _, p := range r.pauses() {
		own := p.to - p.from
		for _, c := range cp {
			if lo, hi := max(p.from, c.from), min(p.to, c.to); hi > lo {
				own -= hi - lo
			}
		}
		longest = max(longest, own)
	}
	return longest
}

// problem is why the stream fails, "" when it passes: an error, fewer than
// 20 arrivals, or a pause of its own of 1 s or more.
func (r streamReport) problem(name string, control streamReport) string {
	if !strings.Contains(string(r), "error=none") {
		return fmt.Sprintf("%s broke: %s", name, r)
	}
	if got, err := strconv.Atoi(r.field("received")); err != nil || got < 20 {
		return fmt.Sprintf("%s: too few arrivals: %s", name, r)
	}
	if own := r.ownGap(control); own >= 1.0 {
		return fmt.Sprintf("%s: a pause of %.3fs the control did not share: %s; control: %s", name, own, r, control)
	}
	return ""
}

// kpmServices are the scenarios' Services, their addresses per family.
type kpmServices struct {
	tcp, udp *v1.Service
	nodePort int // the TCP Service's
}

// kpmApply writes the TCP NodePort kpm44 (web on node1) and the UDP
// ClusterIP kpm44-udp (u1 on node1), both RequireDualStack with each pod's
// two addresses.
func (v *V) kpmApply() kpmServices { return v.applyTCPAndUDP("kpm44", kpmPort) }

// applyTCPAndUDP writes the TCP NodePort NAME on nodePort (web on node1) and
// the UDP ClusterIP NAME-udp on port 53 (u1 on node1), both
// RequireDualStack with each pod's two addresses.
func (v *V) applyTCPAndUDP(name string, nodePort int) kpmServices {
	s := kpmServices{nodePort: nodePort}
	s.tcp = v.ApplyService(service("{name: "+name+"}", "type: NodePort", "ipFamilyPolicy: RequireDualStack",
		fmt.Sprintf("ports: [{port: 80, targetPort: 8080, nodePort: %d, protocol: TCP}]", nodePort)))
	v.SetDualEndpoints(s.tcp, "web@node1")
	s.udp = v.ApplyService(service("{name: "+name+"-udp}", "ipFamilyPolicy: RequireDualStack",
		fmt.Sprintf("ports: [{port: %d, targetPort: 8081, protocol: UDP}]", kpmUDPPort)))
	v.SetDualEndpoints(s.udp, "u1@node1")
	for _, f := range families {
		if f.clusterIP(s.tcp) == "" || f.clusterIP(s.udp) == "" {
			v.Fatalf("the Services lack an IPv%d cluster IP: %v, %v", f, s.tcp.Spec.ClusterIPs, s.udp.Spec.ClusterIPs)
		}
	}
	v.Show("-", "e2ectl apply-service "+name+" "+name+"-udp && e2ectl set-endpoints ... web@node1 / u1@node1  # RequireDualStack, each pod's two addresses",
		name+":\n"+serviceInfo(s.tcp, "TYPE", "CLUSTER_IPS")+"\n"+name+"-udp:\n"+serviceInfo(s.udp, "TYPE", "CLUSTER_IPS"))
	return s
}

// virtualServers are the three virtual servers through node1 of a family:
// the cluster IP, node1's node port, the UDP cluster IP.
func (s kpmServices) virtualServers(f ipFamily) []ipvs.VirtualServerKey {
	return []ipvs.VirtualServerKey{
		{Protocol: ipvs.TCP, Address: netip.MustParseAddr(f.clusterIP(s.tcp)), Port: 80},
		{Protocol: ipvs.TCP, Address: netip.MustParseAddr(f.node("node1")), Port: uint16(s.nodePort)},
		{Protocol: ipvs.UDP, Address: netip.MustParseAddr(f.clusterIP(s.udp)), Port: kpmUDPPort},
	}
}

// programmed tells whether each virtual server exists on node with sched
// and a real server.
func programmed(node, sched string, keys []ipvs.VirtualServerKey) (bool, string) {
	vss, err := virtualServers(node)
	if err != nil {
		return false, err.Error()
	}
	for _, key := range keys {
		found := false
		for _, vs := range vss {
			if vs.VirtualServerKey == key {
				found = true
				if vs.Scheduler != sched {
					return false, fmt.Sprintf("%s has scheduler %s", key, vs.Scheduler)
				}
			}
		}
		if !found {
			return false, key.String() + " missing"
		}
		rss, err := realServers(node, key.Protocol, key.Address.String(), key.Port)
		if err != nil {
			return false, err.Error()
		}
		if len(rss) == 0 {
			return false, key.String() + " has no real server"
		}
	}
	return true, ""
}

// vsScheduler is one virtual server's scheduler ("" without it).
func vsScheduler(node string, key ipvs.VirtualServerKey) string {
	vss, _ := virtualServers(node)
	for _, vs := range vss {
		if vs.VirtualServerKey == key {
			return vs.Scheduler
		}
	}
	return ""
}

// counters are the connection counters of the given virtual servers (-1:
// no such virtual server), read with the ipvs package as `ipvsadm -Ln
// --stats --exact` shows them.
type counters struct {
	keys  []ipvs.VirtualServerKey
	conns []int64
}

func (v *V) readCounters(node string, keys []ipvs.VirtualServerKey, what string) counters {
	c := counters{keys: keys}
	all, err := vsConnections(node)
	if err != nil {
		v.Errorf("read %s's connection counters: %v", node, err)
	}
	var lines []string
	for _, k := range keys {
		n, ok := all[k]
		if !ok {
			c.conns = append(c.conns, -1)
			lines = append(lines, k.String()+" none")
			continue
		}
		c.conns = append(c.conns, int64(n))
		lines = append(lines, fmt.Sprintf("%s %d", k, n))
	}
	v.Show(node, "ipvsadm -Ln --stats --exact  # connections per virtual server, "+what, strings.Join(lines, "\n"))
	return c
}

// dropped says which counters of after are missing or below before's ("":
// every virtual server kept, so not recreated).
func (before counters) dropped(after counters) string {
	var bad []string
	for i, k := range before.keys {
		if before.conns[i] < 0 || after.conns[i] < 0 || after.conns[i] < before.conns[i] {
			bad = append(bad, fmt.Sprintf("%s connections %s -> %s", k, connText(before.conns[i]), connText(after.conns[i])))
		}
	}
	return strings.Join(bad, "; ")
}

func connText(n int64) string {
	if n < 0 {
		return "none"
	}
	return strconv.FormatInt(n, 10)
}

// setsMatching are the names of the node's ip sets that re matches, read
// with the ipset package.
func setsMatching(node string, re *regexp.Regexp) ([]string, error) {
	var names []string
	err := withIPSet(node, func(k *ipset.Kernel) error {
		sets, err := k.Sets()
		for _, s := range sets {
			if re.MatchString(s.Name) {
				names = append(names, s.Name)
			}
		}
		return err
	})
	return names, err
}

// kpmOwnSetCount counts kube-proxy's own sets on node (kpmOwnSets).
func (v *V) kpmOwnSetCount(node, when string) int {
	names, err := setsMatching(node, kpmOwnSets)
	if err != nil {
		v.Errorf("list %s's ip sets: %v", node, err)
	}
	v.Show(node, "ipset list -n | grep -E '^KUBE-(6-)?(NODE-PORT-LOCAL-|EXTERNAL-IP-LOCAL|LOAD-BALANCER-LOCAL|LOAD-BALANCER-SOURCE-)'  # kube-proxy's own sets, "+when, strings.Join(names, "\n"))
	return len(names)
}

// kpmNewConnections: fresh connections through node1 answer over each
// family (c1 to the cluster IP, the client to the node port, a new UDP
// socket of c1); IPv4 failures fail v, IPv6 ones d's IPv6 verdict (d nil:
// v's too).
func (v *V) kpmNewConnections(s kpmServices, d *dual, when string) {
	fail := func(f ipFamily, format string, args ...any) {
		if f == 6 && d != nil {
			d.Errorf(6, format, args...)
			return
		}
		v.Errorf(format, args...)
	}
	for _, f := range families {
		v6, udp := "", "UDP"
		if f == 6 {
			v6, udp = " IPv6", "UDP6"
		}
		ip, udpIP := f.clusterIP(s.tcp), f.clusterIP(s.udp)
		a := v.Ask("c1", fmt.Sprintf("curl -s -o /dev/null -w '%%{http_code}' --max-time 5 'http://%s/'  # a new%s connection %s", hostPort(ip, 80), v6, when))
		if a.Out != "200" {
			fail(f, "c1 ->%s cluster IP %s: %s", v6, when, a.Out)
		}
		a = v.Ask("client", fmt.Sprintf("curl -s -o /dev/null -w '%%{http_code}' --max-time 5 'http://%s/'  # a new%s connection %s", hostPort(f.node("node1"), s.nodePort), v6, when))
		if a.Out != "200" {
			fail(f, "client ->%s NodePort %s: %s", v6, when, a.Out)
		}
		a = v.Ask("c1", fmt.Sprintf("echo ping | timeout 8 socat -t 5 - '%s:%s' | grep hostname=  # a new%s UDP socket %s", udp, hostPort(udpIP, kpmUDPPort), v6, when))
		if a.Out != "hostname=u1" {
			fail(f, "c1 ->%s UDP cluster IP %s: %s", v6, when, a.Out)
		}
	}
}

// kpmStreams are the three streams through node1 of each family and the
// control (c1 to web's pod IP, no proxy).
type kpmStreams struct {
	names   []string // control first, then the IPv4 ones, then the IPv6 ones
	streams []*measuredStream
}

func (v *V) kpmStartStreams(s kpmServices) kpmStreams {
	var ks kpmStreams
	add := func(name, where, proto, addr string) {
		ks.names = append(ks.names, name)
		ks.streams = append(ks.streams, v.StartStream(name, where, proto, addr))
	}
	add("control", "c1", "tcp", podIP("web")+":8080")
	for _, f := range families {
		sfx := ""
		if f == 6 {
			sfx = "6"
		}
		add("c1-tcp"+sfx, "c1", "tcp", hostPort(f.clusterIP(s.tcp), 80))
		add("client-nodeport"+sfx, "client", "tcp", hostPort(f.node("node1"), s.nodePort))
		add("c1-udp"+sfx, "c1", "udp", hostPort(f.clusterIP(s.udp), kpmUDPPort))
	}
	return ks
}

// end stops the streams, shows their reports and checks them (the IPv4
// ones fail v, the IPv6 ones d's IPv6 verdict; d nil: v with an "IPv6: "
// prefix); it returns each family's gaps as the verdict prints them.
func (ks kpmStreams) end(v *V, d *dual, what string) (gaps4, gaps6 string) {
	reports := EndStreams(ks.streams...)
	control := reports[0]
	var g4, g6 []string
	for i, name := range ks.names[1:] {
		r := reports[i+1]
		v.Show("-", "stream "+name+" "+what, string(r))
		g := fmt.Sprintf("%s %s s (own %.3f s)", name, r.gap(), r.ownGap(control))
		why := r.problem(name, control)
		if strings.HasSuffix(name, "6") {
			g6 = append(g6, g)
			switch {
			case why == "":
			case d != nil:
				d.Errorf(6, "%s", why)
			default:
				v.Errorf("IPv6: %s", why)
			}
		} else {
			g4 = append(g4, g)
			if why != "" {
				v.Errorf("%s", why)
			}
		}
	}
	v.Show("-", "stream control (c1 -> web's pod IP, no proxy) "+what, string(control))
	g4 = append(g4, "control "+control.gap()+" s")
	g6 = append(g6, "control "+control.gap()+" s")
	return strings.Join(g4, ", "), strings.Join(g6, ", ")
}

// errorLines are a command's error lines (klog's E...), shortened: the
// verdict line has room for little.
func errorLines(out string) string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if len(l) > 1 && l[0] == 'E' && l[1] >= '0' && l[1] <= '9' {
			if len(l) > 200 {
				l = l[:200]
			}
			lines = append(lines, l)
			if len(lines) == 2 {
				break
			}
		}
	}
	return strings.Join(lines, " ")
}

// kpmToIPVSProxy is the documented switch on node1: kube-proxy stopped, the
// init container's clean-up (exit 0, then 0 again with nothing removed),
// ipvsproxy started; it returns the time from kube-proxy's stop to
// ipvsproxy's first sync.
func (v *V) kpmToIPVSProxy(kp *kubeProxy) string {
	t := time.Now()
	kp.Stop()
	a := v.Ask("node1", "ipvsproxy cleanup --kube-proxy-leftovers  # the init container")
	if a.Status != 0 {
		v.Errorf("cleanup --kube-proxy-leftovers exited %d: %s", a.Status, errorLines(a.Out))
	}
	if !strings.Contains(a.Out, "Removed kube-proxy's leftovers") || strings.Contains(a.Out, "count=0") {
		v.Errorf("the clean-up removed nothing")
	}
	a = v.Ask("node1", "ipvsproxy cleanup --kube-proxy-leftovers  # again: a restart's init container")
	if a.Status != 0 {
		v.Errorf("the second cleanup --kube-proxy-leftovers exited %d: %s", a.Status, errorLines(a.Out))
	}
	if !strings.Contains(a.Out, "count=0") {
		v.Errorf("the second clean-up removed something: %s", oneline(a.Out))
	}
	pid := v.LaunchProxier("node1", proxierRun{})
	if err := waitProxierSynced("node1", pid, 120*time.Second); err != nil {
		v.Errorf("ipvsproxy did not sync on node1: %v", err)
	}
	switched := seconds(time.Since(t))
	v.Show("node1", "# kube-proxy stopped -> ipvsproxy's first sync done", switched+" s")
	return switched
}

// kpmHandToKubeProxy stops node1's ipvsproxy and removes its state (the
// rollback pod's clean-up), so that kube-proxy starts on a clean node.
func (v *V) kpmHandToKubeProxy() {
	v.StopProxier("node1", syscall.SIGTERM)
	v.Ask("node1", "ipvsproxy cleanup  # node1 handed to kube-proxy")
}

// scenarioMigrateKubeProxy (migrate-from-kube-proxy-ipvs and its IPv6 half): node1's ipvsproxy is stopped and
// cleaned up as the rollback pod would; kube-proxy runs in IPVS mode, run
// dual-stack, and programs the two Services with its scheduler, rr. Then
// the streams run over each family and the switch is the documented one:
// kube-proxy stopped, `ipvsproxy cleanup --kube-proxy-leftovers` (exits 0,
// and 0 again), ipvsproxy started. Checked per family: no stream broke, no
// pause of its own of 1 s or more, the virtual servers adopted (their
// connection counters kept, the scheduler rewritten to twos), new
// connections served under both proxies; kube-proxy's own sets gone.
func scenarioMigrateKubeProxy(s *S) {
	s.DualStep("migrate-from-kube-proxy-ipvs", "migration from the real kube-proxy in IPVS mode with live connections",
		"the same switch over IPv6", func(v *V, d *dual) {
			v.Heading("Migration from the real kube-proxy in IPVS mode with live connections")
			svcs := v.kpmApply()
			vs4, vs6 := svcs.virtualServers(4), svcs.virtualServers(6)

			v.kpmHandToKubeProxy()
			t := time.Now()
			kp := v.StartKubeProxy("node1", "ipvs")
			if ok, last := waitUntil(180*time.Second, func() (bool, string) { return programmed("node1", "rr", vs4) }); !ok {
				v.Errorf("kube-proxy did not program the Services within 180 s: %s", last)
			}
			if ok, last := waitUntil(60*time.Second, func() (bool, string) { return programmed("node1", "rr", vs6) }); !ok {
				d.Errorf(6, "kube-proxy did not program the IPv6 Services within 60 s of the IPv4 ones: %s", last)
			}
			table, _ := ipvsTable("node1")
			v.Show("node1", "ipvsadm -Ln  # kube-proxy's, "+seconds(time.Since(t))+" s after its start", table)
			v.kpmNewConnections(svcs, d, "under kube-proxy")
			ownSets := v.kpmOwnSetCount("node1", "under kube-proxy")

			streams := v.kpmStartStreams(svcs)
			time.Sleep(3 * time.Second)
			before4 := v.readCounters("node1", vs4, "streams open")
			before6 := v.readCounters("node1", vs6, "IPv6, streams open")
			switched := v.kpmToIPVSProxy(kp)
			time.Sleep(3 * time.Second)
			after4 := v.readCounters("node1", vs4, "after the switch")
			after6 := v.readCounters("node1", vs6, "IPv6, after the switch")
			if why := before4.dropped(after4); why != "" {
				v.Errorf("virtual servers recreated: %s", why)
			}
			if why := before6.dropped(after6); why != "" {
				d.Errorf(6, "IPv6 virtual servers recreated: %s", why)
			}
			sched4, sched6 := vsScheduler("node1", vs4[0]), vsScheduler("node1", vs6[0])
			v.Show("node1", "ipvsadm -Ln --tcp-service "+hostPort(vs4[0].Address.String(), 80)+"; ipvsadm -Ln --tcp-service "+hostPort(vs6[0].Address.String(), 80)+"  # the cluster IPs' schedulers",
				sched4+"\n"+sched6)
			if sched4 != defaultScheduler() {
				v.Errorf("the cluster IP's virtual server does not have ipvsproxy's scheduler (%q): not adopted", sched4)
			}
			if sched6 != defaultScheduler() {
				d.Errorf(6, "the IPv6 cluster IP's virtual server does not have ipvsproxy's scheduler (%q): not adopted", sched6)
			}
			v.kpmNewConnections(svcs, d, "under ipvsproxy")
			gaps4, gaps6 := streams.end(v, d, "across the switch")
			left := v.kpmOwnSetCount("node1", "after the clean-up")
			if ownSets == 0 {
				v.Errorf("kube-proxy made none of its own sets: nothing to check the clean-up against")
			}
			if left != 0 {
				v.Errorf("%d of kube-proxy's own sets left", left)
			}
			v.about = "migration from the real kube-proxy in IPVS mode with live connections (gaps: " + gaps4 + "; switch " + switched + " s): TCP from a pod, TCP to a NodePort from outside, UDP from one port: none broke, no pause of its own (beyond the control stream's) >= 1 s, virtual servers adopted (counters kept, scheduler rewritten), the clean-up exits 0 twice, kube-proxy's own sets gone, new connections served"
			d.about6 = "the same switch over IPv6 (gaps: " + gaps6 + "): TCP from a pod to the IPv6 cluster IP, TCP to node1's IPv6 NodePort from outside, UDP from one port to the IPv6 cluster IP: none broke, no pause of its own >= 1 s, the IPv6 virtual servers adopted (counters kept, scheduler rewritten), new IPv6 connections served under both proxies"
			// node1 is on ipvsproxy now, as the other scenarios expect it.
		})
}

// kpmBackToIPVSProxy puts node1 from kube-proxy back on ipvsproxy, as the
// scenarios after a rollback expect it.
func (v *V) kpmBackToIPVSProxy(kp *kubeProxy) {
	kp.Stop()
	run("node1", "ipvsproxy cleanup --kube-proxy-leftovers >/dev/null 2>&1")
	pid := v.LaunchProxier("node1", proxierRun{})
	if err := waitProxierSynced("node1", pid, 120*time.Second); err != nil {
		v.Errorf("node1's ipvsproxy did not come back: %v", err)
	}
}

// ipvsproxyOwnSets are ipvsproxy's sets that kube-proxy's IPVS mode does not
// take over: `cleanup --after-kube-proxy-ipvs` removes them.
var ipvsproxyOwnSets = regexp.MustCompile(`IPVS-OWNED|SERVICE-CIDRS|NO-NODE|IPVS-SERVICES`)

// kpmAfterKubeProxyLeft reads what `cleanup --after-kube-proxy-ipvs` must
// remove: ipvsproxy's own sets, its Service-range routes on kube-ipvs0, its
// mangle filter (OUT-FILTER).
func kpmAfterKubeProxyLeft(node string) (string, error) {
	sets, err := setsMatching(node, ipvsproxyOwnSets)
	if err != nil {
		return "", err
	}
	routes, err := serviceRoutes(node)
	if err != nil {
		return "", err
	}
	mangle, err := savedRules(node, iptables.IPv4, iptables.TableMangle)
	if err != nil {
		return "", err
	}
	var filter []string
	for chain, rules := range mangle {
		if strings.Contains(chain, "OUT-FILTER") {
			filter = append(filter, ":"+chain)
		}
		for _, r := range rules {
			if strings.Contains(r, "OUT-FILTER") {
				filter = append(filter, r)
			}
		}
	}
	if len(sets)+len(routes)+len(filter) == 0 {
		return "", nil
	}
	return fmt.Sprintf("sets %v, routes %v, mangle %v", sets, routes, filter), nil
}

// scenarioRollbackKubeProxyIPVS (rollback-to-kube-proxy-ipvs): the rollback to kube-proxy's
// IPVS mode, measured the same way: ipvsproxy stopped, kube-proxy started
// on the state it left (no `ipvsproxy cleanup`: that deletes the virtual
// servers, and IPVS resets the connections they carried; see the docs),
// then `cleanup --after-kube-proxy-ipvs` under the streams, and later a
// plain `ipvsproxy cleanup`, which must leave kube-proxy's state and
// traffic.
func scenarioRollbackKubeProxyIPVS(s *S) {
	s.Step("rollback-to-kube-proxy-ipvs", "rollback to the real kube-proxy in IPVS mode", func(v *V) {
		v.Heading("Rollback from ipvsproxy to the real kube-proxy in IPVS mode with live connections")
		svcs := v.kpmApply()
		vss := append(svcs.virtualServers(4), svcs.virtualServers(6)...)
		if ok, last := waitUntil(60*time.Second, func() (bool, string) { return programmed("node1", defaultScheduler(), vss) }); !ok {
			v.Errorf("ipvsproxy did not program the Services within 60 s: %s", last)
		}
		streams := v.kpmStartStreams(svcs)
		time.Sleep(3 * time.Second)
		before := v.readCounters("node1", vss, "streams open")
		t := time.Now()
		v.StopProxier("node1", syscall.SIGTERM)
		kp := v.StartKubeProxy("node1", "ipvs")
		v.Note("the rollback, on ipvsproxy's state")
		if ok, last := waitUntil(180*time.Second, func() (bool, string) { return programmed("node1", "rr", vss) }); !ok {
			v.Errorf("kube-proxy did not program the Services within 180 s: %s", last)
		}
		switched := seconds(time.Since(t))
		v.Show("node1", "# ipvsproxy stopped -> kube-proxy rewrote the virtual servers", switched+" s")
		time.Sleep(3 * time.Second)
		v.Ask("node1", "ipset list -n | grep -E 'IPVS-OWNED|SERVICE-CIDRS|NO-NODE'; ip route show table local dev kube-ipvs0 proto 233; iptables-save | grep -E '^[*]|SERVICE-CIDRS|NO-NODE|OUT-FILTER'  # what kube-proxy left of ipvsproxy's")
		// The rollback's last step, under the live streams: refused until
		// kube-proxy's first sync has rewritten the shared chains, then it
		// removes what kube-proxy does not take over.
		const handover = "ipvsproxy cleanup --after-kube-proxy-ipvs"
		if ok, last := waitUntil(60*time.Second, func() (bool, string) {
			a := run("node1", handover)
			return a.Status == 0, fmt.Sprintf("exit %d: %s", a.Status, errorLines(a.Out))
		}); !ok {
			v.Errorf("cleanup --after-kube-proxy-ipvs did not exit 0 within 60 s: %s", last)
		}
		a := v.Ask("node1", handover+" 2>&1 | grep -c 'count=0'; echo exit ${PIPESTATUS[0]}  # a second run removes nothing")
		if !strings.Contains(a.Out, "exit 0") || !strings.HasPrefix(a.Out, "1") {
			v.Errorf("a second cleanup --after-kube-proxy-ipvs: %s", oneline(a.Out))
		}
		left, err := kpmAfterKubeProxyLeft("node1")
		if err != nil {
			v.Errorf("read node1: %v", err)
		}
		v.Show("node1", "ipset list -n | grep -E 'IPVS-OWNED|SERVICE-CIDRS|NO-NODE|IPVS-SERVICES'; ip route show table local dev kube-ipvs0 proto 233; iptables-save -t mangle | grep OUT-FILTER  # ipvsproxy's own sets, routes, mangle filter after it", left)
		if left != "" {
			v.Errorf("left after cleanup --after-kube-proxy-ipvs: %s", left)
		}
		all, err := virtualServers("node1")
		if err != nil {
			v.Errorf("read node1's virtual servers: %v", err)
		}
		dummy := "present"
		if _, err := boundIn("node1"); err != nil {
			dummy = err.Error()
		}
		v.Show("node1", "ipvsadm -Ln | grep -c '^[TU]'; ip -br link show kube-ipvs0  # the virtual servers and kube-ipvs0 stay, kube-proxy's",
			fmt.Sprintf("%d virtual servers; kube-ipvs0 %s", len(all), dummy))
		if len(all) < 6 || dummy != "present" {
			v.Errorf("virtual servers or kube-ipvs0 gone: %d virtual servers, kube-ipvs0 %s", len(all), dummy)
		}
		after := v.readCounters("node1", vss, "after the rollback and the clean-up")
		if why := before.dropped(after); why != "" {
			v.Errorf("virtual servers recreated: %s", why)
		}
		v.kpmNewConnections(svcs, nil, "under kube-proxy again")

		// A later plain clean-up (the rollback pod run again, an
		// uninstall job) finds no state of ipvsproxy's: kube-proxy's
		// virtual servers, kube-ipvs0 and traffic stay.
		a = v.Ask("node1", "ipvsproxy cleanup  # later, on the node handed back")
		if a.Status != 0 {
			v.Errorf("a later ipvsproxy cleanup exited %d: %s", a.Status, errorLines(a.Out))
		}
		later, err := virtualServers("node1")
		if err != nil {
			v.Errorf("read node1's virtual servers: %v", err)
		}
		dummy = "present"
		if _, err := boundIn("node1"); err != nil {
			dummy = err.Error()
		}
		v.Show("node1", "ipvsadm -Ln | grep -c '^[TU]'; ip -br link show kube-ipvs0  # after the later cleanup",
			fmt.Sprintf("%d virtual servers; kube-ipvs0 %s", len(later), dummy))
		if len(later) != len(all) || dummy != "present" {
			v.Errorf("a later ipvsproxy cleanup removed kube-proxy's state: %d of %d virtual servers left, kube-ipvs0 %s", len(later), len(all), dummy)
		}
		if ok, why := programmed("node1", "rr", vss); !ok {
			v.Errorf("kube-proxy's virtual servers after a later ipvsproxy cleanup: %s", why)
		}
		v.kpmNewConnections(svcs, nil, "after a later ipvsproxy cleanup")
		gaps4, gaps6 := streams.end(v, nil, "across the rollback and the later cleanup")

		v.kpmBackToIPVSProxy(kp)
		v.about = "rollback to the real kube-proxy in IPVS mode (gaps: " + gaps4 + "; IPv6: " + gaps6 + "; switch " + switched + " s): the three streams over each family kept across the switch and cleanup --after-kube-proxy-ipvs, no pause of their own >= 1 s, counters kept, new connections served; ipvsproxy's own sets, routes and mangle filter gone, a second run removes nothing; a later plain ipvsproxy cleanup leaves kube-proxy's virtual servers, kube-ipvs0 and traffic over both families"
	})
}

// kpmModeRules counts kube-proxy's rules of its iptables or nftables mode
// for the Services on node: KUBE-SVC-/KUBE-SEP- rules in iptables (read
// with the iptables package), or the kube-proxy tables and the Services'
// entries in nftables (with nft: the project's nftables package deletes
// tables by name and lists none).
func (v *V) kpmModeRules(node, mode, when string) int {
	if mode == "nftables" {
		a := v.Ask(node, "{ nft list tables; nft list table ip kube-proxy; } 2>/dev/null | grep -cE 'table ip6? kube-proxy|kpm44'  # kube-proxy's rules for the Services, "+when)
		n, err := strconv.Atoi(a.Out)
		if err != nil {
			return -1
		}
		return n
	}
	ipt, err := iptables.New(iptables.IPv4, iptables.InNetNS("/run/netns/"+node))
	if err != nil {
		v.Errorf("iptables on %s: %v", node, err)
		return -1
	}
	tables, err := ipt.SaveTables(iptables.TableFilter, iptables.TableNAT, iptables.TableMangle, "raw")
	if err != nil {
		v.Errorf("iptables-save on %s: %v", node, err)
		return -1
	}
	var rules []string
	for _, t := range tables {
		for chain, rs := range iptables.SavedRules(t) {
			if strings.HasPrefix(chain, "KUBE-SVC-") || strings.HasPrefix(chain, "KUBE-SEP-") {
				rules = append(rules, rs...)
			}
		}
	}
	v.Show(node, "iptables-save | grep -E '^-A KUBE-(SVC|SEP)-'  # kube-proxy's rules for the Services, "+when, strings.Join(rules, "\n"))
	return len(rules)
}

// kpmServedByKubeProxy waits up to 180 s until c1 gets an answer from the
// cluster IP: ipvsproxy's state is gone, so an answer is kube-proxy's.
func (v *V) kpmServedByKubeProxy(svcs kpmServices) {
	url := "http://" + svcs.tcp.Spec.ClusterIP + "/"
	if ok, last := waitUntil(180*time.Second, func() (bool, string) {
		a := run("c1", "curl -s -o /dev/null -w '%{http_code}' --max-time 2 "+url)
		return a.Out == "200", a.Out
	}); !ok {
		v.Errorf("kube-proxy did not serve the cluster IP within 180 s (last %q)", last)
	}
}

// scenarioMigrateKubeProxyMode (migrate-from-kube-proxy-iptables, -nftables): the migration from
// kube-proxy's iptables or nftables mode with one TCP stream (c1 to the
// cluster IP) and the control: the clean-up removes the mode's rules or
// tables, exits 0 twice, the stream survives, ipvsproxy serves.
func scenarioMigrateKubeProxyMode(mode string) func(*S) {
	return func(s *S) {
		s.Step("migrate-from-kube-proxy-"+mode, "migration from kube-proxy "+mode+" mode", func(v *V) {
			v.Heading("Migration from the real kube-proxy in " + mode + " mode")
			svcs := v.kpmApply()
			v.kpmHandToKubeProxy()
			t := time.Now()
			kp := v.StartKubeProxy("node1", mode)
			v.kpmServedByKubeProxy(svcs)
			had := v.kpmModeRules("node1", mode, seconds(time.Since(t))+" s after its start")
			tcp := v.StartStream("c1-tcp", "c1", "tcp", hostPort(svcs.tcp.Spec.ClusterIP, 80))
			control := v.StartStream("control", "c1", "tcp", podIP("web")+":8080")
			time.Sleep(3 * time.Second)
			switched := v.kpmToIPVSProxy(kp)
			left := v.kpmModeRules("node1", mode, "after the clean-up")
			if had < 1 {
				v.Errorf("kube-proxy's %s rules not found before the switch", mode)
			}
			if left != 0 {
				v.Errorf("%d of kube-proxy's %s rules left", left, mode)
			}
			time.Sleep(3 * time.Second)
			a := v.Ask("c1", "curl -s -o /dev/null -w '%{http_code}' --max-time 5 http://"+svcs.tcp.Spec.ClusterIP+"/  # a new connection under ipvsproxy")
			if a.Out != "200" {
				v.Errorf("c1 -> cluster IP under ipvsproxy: %s", a.Out)
			}
			reports := EndStreams(control, tcp)
			v.Show("-", "stream c1-tcp across the switch", string(reports[1]))
			v.Show("-", "stream control (c1 -> web's pod IP, no proxy)", string(reports[0]))
			if why := reports[1].problem("c1-tcp", reports[0]); why != "" {
				v.Errorf("%s", why)
			}
			v.about = fmt.Sprintf("migration from the real kube-proxy in %s mode (gap c1-tcp %s s, own %.3f s, control %s s; switch %s s): its rules removed, the clean-up exits 0 twice, the TCP stream kept, ipvsproxy serves",
				mode, reports[1].gap(), reports[1].ownGap(reports[0]), reports[0].gap(), switched)
		})
	}
}

// scenarioRollbackKubeProxyMode (rollback-to-kube-proxy-iptables, -nftables): the rollback
// to kube-proxy's iptables or nftables mode, as the migration guide gives it
// (ipvsproxy stopped, `ipvsproxy cleanup`, kube-proxy started), under a TCP
// stream and a UDP stream through node1 and the control. Those modes do not
// use IPVS, so the clean-up deletes the virtual servers and their
// connections with them: the scenario measures what a user sees (each
// stream's end, the time until a new connection is served by kube-proxy) and
// checks that kube-proxy then serves, its rules are there and nothing of
// ipvsproxy's is left.
func scenarioRollbackKubeProxyMode(mode string) func(*S) {
	return func(s *S) {
		s.Step("rollback-to-kube-proxy-"+mode, "rollback to kube-proxy "+mode+" mode", func(v *V) {
			v.Heading("Rollback from ipvsproxy to the real kube-proxy in " + mode + " mode")
			svcs := v.kpmApply()
			vs4 := svcs.virtualServers(4)
			if ok, last := waitUntil(60*time.Second, func() (bool, string) {
				return programmed("node1", defaultScheduler(), []ipvs.VirtualServerKey{vs4[0], vs4[2]})
			}); !ok {
				v.Errorf("ipvsproxy did not program the Services within 60 s: %s", last)
			}
			tcp := v.StartStream("c1-tcp", "c1", "tcp", hostPort(svcs.tcp.Spec.ClusterIP, 80))
			udp := v.StartStream("c1-udp", "c1", "udp", hostPort(svcs.udp.Spec.ClusterIP, kpmUDPPort))
			control := v.StartStream("control", "c1", "tcp", podIP("web")+":8080")
			time.Sleep(3 * time.Second)
			t := time.Now()
			v.StopProxier("node1", syscall.SIGTERM)
			if a := v.Ask("node1", "ipvsproxy cleanup  # the rollback pod"); a.Status != 0 {
				v.Errorf("ipvsproxy cleanup exited %d", a.Status)
			}
			kp := v.StartKubeProxy("node1", mode)
			v.kpmServedByKubeProxy(svcs)
			outage := seconds(time.Since(t))
			v.Show("-", "# ipvsproxy stopped -> a new connection to the cluster IP answered by kube-proxy", outage+" s")
			a := v.Ask("c1", fmt.Sprintf("echo ping | timeout 8 socat -t 5 - UDP:%s | grep hostname=  # a new UDP socket under kube-proxy", hostPort(svcs.udp.Spec.ClusterIP, kpmUDPPort)))
			if a.Out != "hostname=u1" {
				v.Errorf("c1 -> UDP cluster IP under kube-proxy: %s", a.Out)
			}
			if n := v.kpmModeRules("node1", mode, "under kube-proxy"); n < 1 {
				v.Errorf("kube-proxy's %s rules not found", mode)
			}
			left := ipvsproxyStateLeft("node1")
			v.Show("node1", "ipvsadm -Ln; ip link show kube-ipvs0; ipset list -n | grep '^KUBE-'  # ipvsproxy's virtual servers, kube-ipvs0, sets", left)
			if left != "" {
				v.Errorf("left of ipvsproxy's state under kube-proxy %s: %s", mode, left)
			}
			time.Sleep(3 * time.Second)
			reports := EndStreams(control, tcp, udp)
			v.Show("-", "stream c1-tcp across the rollback", string(reports[1]))
			v.Show("-", "stream c1-udp across the rollback", string(reports[2]))
			v.Show("-", "stream control (c1 -> web's pod IP, no proxy)", string(reports[0]))
			if !strings.Contains(string(reports[0]), "error=none") {
				v.Errorf("the control stream broke: %s", reports[0])
			}
			v.kpmBackToIPVSProxy(kp)
			v.about = fmt.Sprintf("rollback to the real kube-proxy in %s mode (new connections served again after %s s; TCP stream: error=%s gap %s s; UDP stream: error=%s gap %s s; control gap %s s): the clean-up exits 0, kube-proxy serves TCP and UDP, its rules are there, no virtual server, kube-ipvs0 or KUBE- set of ipvsproxy's left",
				mode, outage, reports[1].field("error"), reports[1].gap(), reports[2].field("error"), reports[2].gap(), reports[0].gap())
		})
	}
}

// ipvsproxyStateLeft is what of ipvsproxy's state the node holds (""
// none): virtual servers, kube-ipvs0, KUBE- sets.
func ipvsproxyStateLeft(node string) string {
	l, err := leftovers(node)
	if err != nil {
		return err.Error()
	}
	var left []string
	if len(l.virtualServers) > 0 {
		left = append(left, fmt.Sprintf("virtual servers %v", l.virtualServers))
	}
	if l.dummy {
		left = append(left, "kube-ipvs0")
	}
	if len(l.sets) > 0 {
		left = append(left, fmt.Sprintf("KUBE- sets %v", l.sets))
	}
	return strings.Join(left, "; ")
}
