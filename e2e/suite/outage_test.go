//go:build e2e

package suite

import (
	"cmp"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	v1 "k8s.io/api/core/v1"
)

// The API server unreachable from the nodes for 80 s, as a network outage
// between the nodes and the control plane looks to them.
//
// The proxiers reach the API server (E2E_HOST_ADDR:6443, qemu's guestfwd to
// the host) from the node namespaces through the VM's root namespace, which
// forwards and masquerades their traffic. The outage is two DROP rules in the
// root namespace's FORWARD chain: only forwarded traffic (the nodes') is cut,
// in both directions and silently, as a lost route would; this suite writes
// to the API from the root namespace itself (OUTPUT, not FORWARD) and still
// can, and the host's API server, shared with nothing else but this run's
// VM, is never touched.
//
// How long the return takes is client-go's. With the packets dropped nothing
// fails at once: the watches' HTTP/2 connection is found dead by its ping
// (30 s idle, 15 s to answer; the log says "watch ended with error ...
// client connection lost"), the reflector starts over with a watch-list
// whose request retries each timed-out dial (net.Dialer 30 s, Retry-After
// 1 s, 10 times) before the reflector sees an error. So /readyz, which turns
// 503 on a failed list, may stay 200 through such an outage
// (docs/architecture.md). At the return a dial in progress connects at its
// SYN's next retransmission (1 s apart four times, then 2, 4, 8 s: at most
// about 12 s before the dial's 30 s are up and a new one starts at once),
// then the watch-list and a sync follow. Had an error reached the reflector,
// its backoff (800 ms doubling to 30 s, jitter 1.0: [30, 60) s at the cap,
// tools/cache/reflector.go) would add to that: more than outageRecoveryMax
// fails.
const (
	outageFor         = 80 * time.Second
	outageRecoveryMax = 90 * time.Second
	outageNodePort    = 30162
	outageComment     = "e2e-outage-62"
)

// apiServerAddr is the API server's address as the guest reaches it.
func apiServerAddr() string {
	if a := os.Getenv("E2E_HOST_ADDR"); a != "" {
		return a
	}
	return "192.0.2.100"
}

// outageRules are the two DROP rules for the nodes' API traffic, as iptables
// takes them after -I or -D.
func outageRules() []string {
	api := apiServerAddr()
	return []string{
		"FORWARD -s 198.51.100.0/24 -d " + api + " -p tcp --dport 6443 -m comment --comment " + outageComment + " -j DROP",
		"FORWARD -s " + api + " -p tcp --sport 6443 -d 198.51.100.0/24 -m comment --comment " + outageComment + " -j DROP",
	}
}

// outageCut inserts the rules in the VM's root namespace.
func outageCut() error {
	for _, r := range outageRules() {
		if a := run("-", "iptables -w -I "+r); a.Status != 0 {
			return fmt.Errorf("iptables -I %s: %s", r, a.Out)
		}
	}
	return nil
}

// outageEnd deletes the rules, however many were inserted.
func outageEnd() {
	for range 10 {
		if !strings.Contains(run("-", "iptables -w -S FORWARD").Out, outageComment) {
			return
		}
		for _, r := range outageRules() {
			run("-", "iptables -w -D "+r)
		}
	}
}

// answeredBy is the hostname= of one answer from url to where, "" when none
// came (not recorded: the outage's rounds and the return's pollers make
// hundreds).
func answeredBy(where, url string) string {
	out := run(where, "curl -gs --max-time 2 '"+url+"'").Out
	for _, l := range strings.Split(out, "\n") {
		if h, ok := strings.CutPrefix(l, "hostname="); ok {
			return strings.TrimSpace(h)
		}
	}
	return ""
}

// apiCode is the HTTP code the API server answers the node's /livez with
// ("000": unreachable).
func apiCode(node string) string {
	return run(node, "curl -sk -o /dev/null -w '%{http_code}' --max-time 3 https://"+apiServerAddr()+":6443/livez").Out
}

// healthCode is the HTTP code of the node's proxier's path on :10256 ("000"
// when nothing answers).
func healthCode(node, path string) string {
	return run(node, "curl -s -o /dev/null -w '%{http_code}' --max-time 2 http://127.0.0.1:10256"+path).Out
}

// healthSample is one answer of a proxier's health endpoint during the
// outage.
type healthSample struct {
	at               time.Duration // since the cut
	node, path, code string
}

// healthLog is the proxiers' /livez, /healthz and /readyz through the
// outage, and each node's first 503 body from /readyz.
type healthLog struct {
	samples []healthSample
	first   map[string]string // node -> body of its first /readyz 503
}

// sample asks each proxier's three paths once; /readyz's body comes with its
// code, so the body kept is the 503's own.
func (h *healthLog) sample(cut time.Time) {
	for _, n := range []string{"node1", "node2"} {
		out := run(n, `for p in /livez /healthz; do curl -s -o /dev/null -w '%{http_code}\n' --max-time 2 http://127.0.0.1:10256$p; done
			curl -s --max-time 2 -w '\n%{http_code}' http://127.0.0.1:10256/readyz`).Out
		at := time.Since(cut)
		lines := strings.Split(out, "\n")
		if len(lines) < 3 {
			lines = append(lines, "?", "?", "?")
		}
		readyz := lines[len(lines)-1]
		h.samples = append(h.samples,
			healthSample{at, n, "/livez", lines[0]},
			healthSample{at, n, "/healthz", lines[1]},
			healthSample{at, n, "/readyz", readyz})
		if readyz == "503" && h.first[n] == "" {
			body := strings.Join(lines[2:len(lines)-1], "\n")
			if body == "" {
				body = "<empty>"
			}
			h.first[n] = body
			_ = os.WriteFile(filepath.Join(guest.logs, "scenario-62-readyz-"+n+".json"), []byte(body+"\n"), 0o644)
		}
	}
}

// text is the log as lines "SECONDS NODE PATH CODE".
func (h *healthLog) text() string {
	var b strings.Builder
	for _, s := range h.samples {
		fmt.Fprintf(&b, "%s %s %s %s\n", seconds(s.at), s.node, s.path, s.code)
	}
	return b.String()
}

// seen is each node and path with the codes it answered, in order of first
// appearance: "node1 /healthz=200 node1 /livez=200 node1 /readyz=200,503 ...".
func (h *healthLog) seen() string {
	codes := map[string][]string{}
	for _, s := range h.samples {
		k := s.node + " " + s.path
		if !slices.Contains(codes[k], s.code) {
			codes[k] = append(codes[k], s.code)
		}
	}
	var out []string
	for k, c := range codes {
		out = append(out, k+"="+strings.Join(c, ","))
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// where are the samples for which bad holds, as "SECONDS NODE PATH CODE".
func (h *healthLog) where(bad func(healthSample) bool) []string {
	var out []string
	for _, s := range h.samples {
		if bad(s) {
			out = append(out, fmt.Sprintf("%s %s %s %s", seconds(s.at), s.node, s.path, s.code))
		}
	}
	return out
}

// readyzCounts is how often /readyz answered each code: "200 x40 503 x3".
func (h *healthLog) readyzCounts() string {
	counts := map[string]int{}
	for _, s := range h.samples {
		if s.path == "/readyz" {
			counts[s.code]++
		}
	}
	var out []string
	for c, n := range counts {
		out = append(out, fmt.Sprintf("%s x%d", c, n))
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// firstReadyz503 is when the node's /readyz first answered 503.
func (h *healthLog) firstReadyz503(node string) string {
	for _, s := range h.samples {
		if s.node == node && s.path == "/readyz" && s.code == "503" {
			return seconds(s.at) + "s into the outage"
		}
	}
	return "never"
}

// kernelDiff is what changed from before to after, as diff -u's changed
// lines ("-" gone, "+" new) in order, at most limit: a longest common
// subsequence of the lines, so that a real server line, repeated under many
// virtual servers, is reported where it changed.
func kernelDiff(before, after string, limit int) []string {
	a, b := strings.Split(before, "\n"), strings.Split(after, "\n")
	// common[i][j]: the longest common subsequence of a[i:] and b[j:].
	common := make([][]int, len(a)+1)
	for i := range common {
		common[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				common[i][j] = common[i+1][j+1] + 1
			} else {
				common[i][j] = max(common[i+1][j], common[i][j+1])
			}
		}
	}
	var out []string
	i, j := 0, 0
	for (i < len(a) || j < len(b)) && len(out) < limit {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			i, j = i+1, j+1
		case j < len(b) && (i == len(a) || common[i][j+1] >= common[i+1][j]):
			out = append(out, "+"+b[j])
			j++
		default:
			out = append(out, "-"+a[i])
			i++
		}
	}
	return out
}

// hasVirtualServerAt: the IPVS table of the read has a virtual server at
// addr (any port and protocol).
func (st ipvsState) hasVirtualServerAt(addr string) bool {
	for k := range st.realServers {
		if k.Address.String() == addr {
			return true
		}
	}
	return false
}

// tcpRealServers are the TCP virtual server addr:port's real servers in the
// read (none: no such virtual server).
func (st ipvsState) tcpRealServers(addr string, port int) []ipvs.RealServer {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return nil
	}
	return st.realServers[ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: a, Port: uint16(port)}]
}

// weights are real servers with their weights, "IP:PORT" -> weight.
func weights(rss []ipvs.RealServer) map[string]int {
	out := map[string]int{}
	for _, rs := range rss {
		out[rs.String()] = int(rs.Weight)
	}
	return out
}

// reflectorLine shortens a klog line of client-go's reflector to "TIME
// TYPE: ERROR".
var (
	reflectorLine  = regexp.MustCompile(`^[IWE][0-9]+ ([0-9:.]{12})[0-9]* .*type="\*v1\.([A-Za-z]+)".*err="(.*)"$`)
	undecodedEvent = regexp.MustCompile(`an error on the server \(\\"unable to decode an event from the watch stream: ([^\\]*)\\"\).*`)
)

// reflectorLog is what client-go said in the node's proxier log from the
// wall time from ("15:04:05.000") on: its reflector and "Failed to" lines,
// written in full to scenario-62-reflector-NODE.log, shortened and joined.
func reflectorLog(node, from string) string {
	var full, short []string
	for _, l := range strings.Split(readFile(proxierLog(node)), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || f[1] < from || !(strings.Contains(l, "reflector") || strings.Contains(l, "Failed to")) {
			continue
		}
		full = append(full, l)
		s := reflectorLine.ReplaceAllString(l, "$1 $2: $3")
		s = undecodedEvent.ReplaceAllString(s, "$1")
		if len(s) > 90 {
			s = s[:90]
		}
		short = append(short, s)
	}
	_ = os.WriteFile(filepath.Join(guest.logs, "scenario-62-reflector-"+node+".log"), []byte(strings.Join(full, "\n")+"\n"), 0o644)
	return strings.Join(short, ";")
}

// recovery is one condition of the API's return, polled on its own.
type recovery struct {
	name   string
	family ipFamily
	holds  func() bool
}

// scenarioAPIOutage: the proxiers' path to the API server dropped for 80 s.
// During the outage a stream through a ClusterIP (from c1) and one through a
// NodePort (from the outside client) keep flowing; new connections to the
// ClusterIP and to both nodes' NodePort are answered; the kernel state of
// both nodes (readKernel: IPVS without its connection counts, ipsets,
// iptables and ip6tables without counters, kube-ipvs0's addresses and
// routes) stays exactly as before; /livez and /healthz answer 200
// throughout, /readyz may turn 503 once a list or watch has failed, naming
// it under listFailures (docs/architecture.md, docs/rbac.md). Changes
// written meanwhile (an endpoint removed and another added to one Service, a
// new Service) must not reach the kernel before the API returns, and must
// after: the time from restoring the path to each node's kernel and to the
// first answer through the new Service is printed.
//
// The three Services are dual-stack (RequireDualStack, each endpoint's IPv4
// and IPv6 address), so the outage is also measured over IPv6 (verdict
// api-outage-ipv6): a stream through the IPv6 cluster IP from c1 and one through node1's
// IPv6 node port from the client, a new connection each round (from c2 to
// the IPv6 cluster IP and from the client to node2's IPv6 node port in
// turn), and after the return new62's IPv6 virtual server and moving62's
// IPv6 swap in each kernel, new62 answering over IPv6 and moving62's IPv6
// cluster IP sending c2 to s3, each timed like their IPv4 twins. (The kernel
// snapshots, verdict 62, hold both families' state.)
func scenarioAPIOutage(s *S) {
	nodes := []string{"node1", "node2"}
	s.DualStep("api-outage", fmt.Sprintf("API unreachable from the nodes for %.0fs", outageFor.Seconds()), "API outage over IPv6", func(v *V, d *dual) {
		v.Heading(fmt.Sprintf("The API server unreachable from the nodes for %.0fs: Services keep working, nothing is removed, changes follow its return", outageFor.Seconds()))
		dualStack := "ipFamilyPolicy: RequireDualStack"
		steady := v.ApplyService(service("{name: steady62}", "type: NodePort", dualStack,
			fmt.Sprintf("ports: [{port: 8062, targetPort: 8080, nodePort: %d, protocol: TCP}]", outageNodePort)))
		moving := v.ApplyService(service("{name: moving62}", dualStack, "ports: [{port: 8063, targetPort: 8080, protocol: TCP}]"))
		v.SetDualEndpoints(steady, "web@node1", "s2@node2")
		v.SetDualEndpoints(moving, "web@node1", "s2@node2")
		ip := map[ipFamily]map[string]string{}
		for _, f := range families {
			ip[f] = map[string]string{"steady": f.clusterIP(steady), "moving": f.clusterIP(moving)}
		}
		v.Show("-", fmt.Sprintf("e2ectl apply-service steady62.yaml (NodePort %d) moving62.yaml  # RequireDualStack; e2ectl set-endpoints steady62|moving62 web@node1 s2@node2  # IPv4 and IPv6", outageNodePort),
			fmt.Sprintf("steady62 %s [%s], moving62 %s [%s]", ip[4]["steady"], ip[6]["steady"], ip[4]["moving"], ip[6]["moving"]))
		for _, n := range nodes {
			for _, f := range families {
				want := []string{hostPort(f.pod("web"), 8080), hostPort(f.pod("s2"), 8080)}
				d.waitRealServers(n, ip[f]["steady"], 8062, want...)
				d.waitRealServers(n, ip[f]["moving"], 8063, want...)
				d.waitRealServers(n, f.node(n), outageNodePort, want...)
			}
			if ok, last := waitUntil(30*time.Second, func() (bool, string) { c := healthCode(n, "/readyz"); return c == "200", c }); !ok {
				v.Errorf("%s: /readyz not 200 before the outage: %s", n, last)
			}
		}

		// The streams, each one connection from before the cut to after the return.
		streams := map[ipFamily][2]*stream{}
		for _, f := range families {
			streams[f] = [2]*stream{v.Stream("c1", ip[f]["steady"], 8062), v.Stream("client", f.node("node1"), outageNodePort)}
		}
		for _, f := range families {
			for _, st := range streams[f] {
				if !st.WaitFlowing(20 * time.Second) {
					d.Errorf(f, "no stream line through %s within 20s", st.target)
				}
			}
		}
		if a := v.Ask("node1", "curl -sk -o /dev/null -w '%{http_code}' --max-time 3 https://"+apiServerAddr()+":6443/livez  # the API from the node"); !regexp.MustCompile(`^[1-5][0-9][0-9]$`).MatchString(a.Out) {
			v.Errorf("the API server does not answer node1 before the outage: %q", a.Out)
		}
		snapshot := func(when string) (map[string]kernelState, error) {
			out := map[string]kernelState{}
			for _, n := range nodes {
				ks, err := readKernel(n)
				if err != nil {
					return out, fmt.Errorf("%s's kernel %s: %w", n, when, err)
				}
				out[n] = ks
				_ = os.WriteFile(filepath.Join(guest.logs, "scenario-62-kernel-"+when+"-"+n+".txt"), []byte(ks.text), 0o644)
			}
			return out, nil
		}
		before, err := snapshot("before")
		v.Must(err)

		// The outage.
		v.t.Cleanup(outageEnd) // whatever fails, the path comes back when the step ends
		if err := outageCut(); err != nil {
			v.Fatalf("API outage: iptables in the VM's root namespace: %v", err)
		}
		tCut := time.Now()
		v.Show("-", "iptables -I FORWARD -s 198.51.100.0/24 -d "+apiServerAddr()+" -p tcp --dport 6443 -j DROP; iptables -I FORWARD -s "+apiServerAddr()+" -p tcp --sport 6443 -d 198.51.100.0/24 -j DROP", "")
		if a := v.Ask("node1", "curl -sk -o /dev/null -w '%{http_code}' --max-time 3 https://"+apiServerAddr()+":6443/livez  # the API from the node"); !strings.HasPrefix(a.Out, "000") {
			v.Errorf("node1 still reaches the API server during the outage: %q", a.Out)
		}

		// Changes through the admin path (this process, in the VM's root namespace), which the
		// outage leaves alone.
		v.SetDualEndpoints(moving, "s2@node2", "s3@node1")
		added := v.ApplyService(service("{name: new62}", dualStack, "ports: [{port: 8064, targetPort: 8080, protocol: TCP}]"))
		v.SetDualEndpoints(added, "s3@node1")
		for _, f := range families {
			ip[f]["new"] = f.clusterIP(added)
		}
		v.Show("-", "e2ectl set-endpoints moving62 s2@node2 s3@node1  # web removed, s3 added; e2ectl apply-service new62.yaml; e2ectl set-endpoints new62 s3@node1  (admin, from the VM's root namespace)",
			fmt.Sprintf("new62 %s [%s]; written %ss into the outage", ip[4]["new"], ip[6]["new"], seconds(time.Since(tCut))))

		// Through the outage, in rounds a second apart: new connections, the health endpoints,
		// the kernel once past the middle; the kernel again at the end, then the return.
		refused := map[ipFamily][]string{}
		try := func(f ipFamily, where, url, what string) {
			if answeredBy(where, url) == "" {
				refused[f] = append(refused[f], fmt.Sprintf("%s at %ss", what, seconds(time.Since(tCut))))
			}
		}
		health := &healthLog{first: map[string]string{}}
		var mid map[string]kernelState
		midTaken := time.Duration(-1)
		var midErr error
		tries := 0
		for deadline := tCut.Add(outageFor - 10*time.Second); time.Now().Before(deadline); {
			tries++
			steady4 := hostPort(ip[4]["steady"], 8062)
			try(4, "c2", "http://"+steady4+"/", "c2 -> "+steady4)
			for _, n := range nodes {
				try(4, "client", fmt.Sprintf("http://%s/", hostPort(ipFamily(4).node(n), outageNodePort)), fmt.Sprintf("client -> %s:%d", n, outageNodePort))
			}
			// One IPv6 connection a round, the two paths in turn: a round costs seconds under
			// emulation.
			if tries%2 == 1 {
				steady6 := hostPort(ip[6]["steady"], 8062)
				try(6, "c2", "http://"+steady6+"/", "c2 -> "+steady6)
			} else {
				np6 := hostPort(ipFamily(6).node("node2"), outageNodePort)
				try(6, "client", "http://"+np6+"/", "client -> "+np6)
			}
			health.sample(tCut)
			if midTaken < 0 && time.Since(tCut) >= 30*time.Second {
				mid, midErr = snapshot("mid")
				midTaken = time.Since(tCut)
			}
			time.Sleep(time.Second)
		}
		end, endErr := snapshot("end")
		endTaken := time.Since(tCut)
		apiEnd := apiCode("node2")
		health.sample(tCut)
		// What the proxier's connections to the API server are doing as it returns (ss -o: a
		// SYN's retransmission timer, the established connection).
		sockets := run("node1", `ss -Htno state all '( dport = :6443 )' | awk '{ printf "%s%s %s", sep, $1, $NF; sep = "; " }'`).Out

		// The API returns.
		outageEnd()
		tRestore := time.Now()
		outage := tRestore.Sub(tCut)

		// Each condition polled by its own goroutine, so that a slow one does not delay
		// another's time.
		kernelHas := func(n string, f ipFamily) func() bool {
			return func() bool {
				if ok, _ := realServersAre(n, ip[f]["new"], 8064, []string{hostPort(f.pod("s3"), 8080)}); !ok {
					return false
				}
				rss, err := realServers(n, ipvs.TCP, ip[f]["moving"], 8063)
				return err == nil && moved(rss, f)
			}
		}
		answers := func(where, url, want string) func() bool {
			return func() bool { return answeredBy(where, url) == want }
		}
		var conds []recovery
		for _, f := range families {
			k, t, m := "kernel-", "traffic-", "moved-"
			if f == 6 {
				k, t, m = "kernel6-", "traffic6-", "moved6-"
			}
			for _, n := range nodes {
				conds = append(conds, recovery{k + n, f, kernelHas(n, f)})
			}
			for _, p := range []string{"c1", "c2"} {
				conds = append(conds, recovery{t + p, f, answers(p, "http://"+hostPort(ip[f]["new"], 8064)+"/", "s3")})
			}
			conds = append(conds, recovery{m + "c2", f, answers("c2", "http://"+hostPort(ip[f]["moving"], 8063)+"/", "s3")})
			if f == 4 {
				for _, n := range nodes {
					conds = append(conds, recovery{"readyz-" + n, f, func() bool { return healthCode(n, "/readyz") == "200" }})
				}
			}
		}
		took := make([]time.Duration, len(conds))
		var wg sync.WaitGroup
		for i, c := range conds {
			took[i] = -1
			wg.Go(func() {
				for {
					if c.holds() {
						took[i] = time.Since(tRestore)
						return
					}
					if time.Since(tRestore) >= outageRecoveryMax {
						return
					}
					time.Sleep(200 * time.Millisecond)
				}
			})
		}
		wg.Wait()
		times := map[ipFamily][]string{}
		for i, c := range conds {
			when := "never"
			if took[i] >= 0 {
				when = seconds(took[i]) + "s"
			}
			times[c.family] = append(times[c.family], c.name+" "+when)
			if took[i] < 0 || took[i] > outageRecoveryMax {
				d.Errorf(c.family, "%s: not within %.0fs of the API's return (%s)", c.name, outageRecoveryMax.Seconds(), when)
			}
		}
		wallCut, wallRestore := tCut.UTC().Format("15:04:05.000"), tRestore.UTC().Format("15:04:05.000")
		v.Show("-", fmt.Sprintf("iptables -D FORWARD ... (both rules)  # at %s, %ss after the cut at %s", wallRestore, seconds(outage), wallCut),
			"node1's sockets to :6443 then: "+cmp.Or(sockets, "none"))

		// The outage, as recorded.
		if !strings.HasPrefix(apiEnd, "000") {
			v.Errorf("node2 reached the API server at the outage's end: %q", apiEnd)
		}
		if len(refused[4]) > 0 {
			v.Errorf("new connections failed during the outage: %s", strings.Join(refused[4], ", "))
		}
		if len(refused[6]) > 0 {
			d.Errorf(6, "new IPv6 connections failed during the outage: %s", strings.Join(refused[6], ", "))
		}
		answered4, answered6 := 3*tries-len(refused[4]), tries-len(refused[6])
		v.Show("-", fmt.Sprintf("# in rounds through the outage: c2 -> %s, client -> node1:%d and node2:%d, then each proxier's /livez, /healthz, /readyz", hostPort(ip[4]["steady"], 8062), outageNodePort, outageNodePort),
			fmt.Sprintf("%d rounds (one every %.1fs), %d of %d answered; node2 -> API at the end: %s", tries, endTaken.Seconds()/float64(max(tries, 1)), answered4, 3*tries, apiEnd))
		v.Show("-", fmt.Sprintf("# in the same rounds, in turn: c2 -> %s, client -> %s", hostPort(ip[6]["steady"], 8062), hostPort(ipFamily(6).node("node2"), outageNodePort)),
			fmt.Sprintf("%d of %d answered", answered6, tries))
		var changed []string
		for _, e := range []error{midErr, endErr} {
			if e != nil {
				v.Errorf("%v", e)
			}
		}
		for _, n := range nodes {
			for _, w := range []struct {
				when string
				got  map[string]kernelState
			}{{"mid", mid}, {"end", end}} {
				after, ok := w.got[n]
				if !ok {
					continue // not taken (or not read: failed above)
				}
				if diff := kernelDiff(before[n].text, after.text, 6); len(diff) > 0 {
					v.Errorf("%s's kernel changed during the outage (%s): %s", n, w.when, strings.Join(diff, ";"))
					changed = append(changed, n+"/"+w.when)
				}
			}
		}
		kernels := "identical"
		if len(changed) > 0 {
			kernels = "changed: " + strings.Join(changed, " ")
		}
		midText := "?"
		if midTaken >= 0 {
			midText = seconds(midTaken)
		}
		v.Show("-", fmt.Sprintf("# kernel of both nodes before, %ss and %ss into the outage: IPVS (no counts), ipsets, iptables and ip6tables (no counters), kube-ipvs0  # read with the ipvs, ipset, iptables and netif packages", midText, seconds(endTaken)),
			fmt.Sprintf("%d and %d lines; %s", strings.Count(before["node1"].text, "\n"), strings.Count(before["node2"].text, "\n"), kernels))
		// The changes did not reach the kernel during the outage (the identical snapshots say so
		// too; this names them).
		for _, n := range nodes {
			st, ok := end[n]
			if !ok {
				continue
			}
			for _, f := range families {
				if st.ipvs.hasVirtualServerAt(ip[f]["new"]) {
					d.Errorf(f, "new62's IPv%d cluster IP %s reached %s's kernel during the outage", f, ip[f]["new"], n)
				}
				if _, ok := weights(st.ipvs.tcpRealServers(ip[f]["moving"], 8063))[hostPort(f.pod("s3"), 8080)]; ok {
					d.Errorf(f, "moving62's added IPv%d endpoint reached %s's kernel during the outage", f, n)
				}
			}
		}
		_ = os.WriteFile(filepath.Join(guest.logs, "scenario-62-health.log"), []byte(health.text()), 0o644)
		v.Show("-", "# /livez, /healthz, /readyz of both proxiers during the outage (codes seen)", health.seen())
		if bad := health.where(func(s healthSample) bool { return (s.path == "/livez" || s.path == "/healthz") && s.code != "200" }); len(bad) > 0 {
			v.Errorf("/livez or /healthz not 200 during the outage: %s", strings.Join(bad[:min(3, len(bad))], ";"))
		}
		if bad := health.where(func(s healthSample) bool { return s.path == "/readyz" && s.code != "200" && s.code != "503" }); len(bad) > 0 {
			v.Errorf("/readyz answered neither 200 nor 503 during the outage: %s", strings.Join(bad[:min(3, len(bad))], ";"))
		}
		for _, n := range nodes {
			body, ok := health.first[n]
			if !ok {
				continue
			}
			v.Show(n, "curl http://127.0.0.1:10256/readyz  # its first 503, "+health.firstReadyz503(n), body)
			if !strings.Contains(body, "listFailures") {
				v.Errorf("%s's /readyz 503 does not name a list failure: %s", n, body)
			}
		}
		// What client-go said meanwhile (node1; in full in scenario-62-reflector-node1.log).
		v.Show("node1", "# the proxier's log from the cut: reflector lines (time, type, error)", reflectorLog("node1", wallCut))

		v.Show("-", "# after the API's return: each node's kernel has new62 (s3) and moving62 without web, with s3; new62 answers c1 and c2; moving62 sends c2 to s3; /readyz 200",
			strings.Join(times[4], ", "))
		v.Show("-", fmt.Sprintf("# the same over IPv6: new62 [%s] and moving62 [%s] in each kernel, new62 answers c1 and c2, moving62 sends c2 to s3", ip[6]["new"], ip[6]["moving"]),
			strings.Join(times[6], ", "))
		// And web, removed from moving62, gets no new connection.
		for _, f := range families {
			url := "http://" + hostPort(ip[f]["moving"], 8063) + "/"
			var got []string
			for range 6 {
				got = append(got, answeredBy("c1", url))
			}
			v.Show("c1", "for i in 1..6; do curl -s "+url+" | grep hostname=; done", strings.Join(got, " "))
			if slices.Contains(got, "web") || slices.Contains(got, "") {
				d.Errorf(f, "moving62's IPv%d cluster IP after the outage answered from: %q, want s2 and s3 only", f, got)
			}
		}

		// The streams: unbroken across the outage and the return.
		tEnd := time.Now()
		after := map[*stream]map[string]int{}
		for _, f := range families {
			for _, st := range streams[f] {
				after[st] = st.From(tRestore)
				st.Stop()
			}
		}
		gaps := map[ipFamily][]string{}
		for _, f := range families {
			var shown []string
			for i, st := range streams[f] {
				gap, _ := st.Gap(tCut, tEnd)
				gaps[f] = append(gaps[f], fmt.Sprintf("%.2f", gap.Seconds()))
				shown = append(shown, st.where+" -> "+st.target+" "+st.GapText(tCut, tEnd))
				kind := [2]string{"ClusterIP", "NodePort"}[i]
				if len(after[st]) == 0 {
					d.Errorf(f, "the IPv%d %s stream has no line after the API's return", f, kind)
				}
				if gap >= streamLineGapMax {
					d.Errorf(f, "the IPv%d %s stream's largest gap was %.2f s, want < %.1f s", f, kind, gap.Seconds(), streamLineGapMax.Seconds())
				}
			}
			what := "# the streams from the cut to now: longest silence, counted to both ends"
			if f == 6 {
				what = "# the IPv6 streams from the cut to now: longest silence, counted to both ends"
			}
			v.Show("-", what, strings.Join(shown, "; "))
		}

		for _, svc := range []*v1.Service{steady, moving, added} {
			v.DeleteServiceObjects(svc)
		}
		for _, n := range nodes {
			for _, f := range families {
				for _, name := range []string{"steady", "moving", "new"} {
					if ok, last := waitNoVirtualServer(n, []string{ip[f][name]}, 60*time.Second); !ok {
						d.Errorf(f, "%s %s after 60s (%s62's IPv%d virtual servers)", n, last, name, f)
					}
				}
			}
		}
		v.about = fmt.Sprintf("API unreachable from the nodes for %.0fs: streams flowed (largest gaps %s s), %d/%d new connections answered, kernels %s, /livez and /healthz 200 (/readyz: %s); after the return: %s",
			outage.Seconds(), strings.Join(gaps[4], "/"), answered4, 3*tries, kernels, health.readyzCounts(), strings.Join(times[4], ", "))
		d.about6 = fmt.Sprintf("API outage over IPv6: streams through %s and %s flowed (largest gaps %s s), %d/%d new IPv6 connections answered; after the return: %s",
			streams[6][0].target, streams[6][1].target, strings.Join(gaps[6], "/"), answered6, tries, strings.Join(times[6], ", "))
	})
}

// moved: the endpoint change written during the outage is in moving62's
// real servers of family f: s3 at weight 1, and web, removed, gone or at
// weight 0 (draining).
func moved(rss []ipvs.RealServer, f ipFamily) bool {
	w := weights(rss)
	web, hasWeb := w[hostPort(f.pod("web"), 8080)]
	return w[hostPort(f.pod("s3"), 8080)] == 1 && (!hasWeb || web == 0)
}
