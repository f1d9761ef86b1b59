//go:build e2e

package suite

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/ipvsproxy/ipvsproxy/e2e/controlplane/cluster"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/ipset"
)

// The protocols besides TCP: a UDP flow that outlives its endpoint, SCTP
// associations through a cluster IP and a node port.

// scenarioUDP: UDP and stale conntrack. A client keeps sending datagrams to
// a UDP Service from one socket (one source port), so they all belong to one
// conntrack flow and one IPVS connection. When the endpoint they reach is
// deleted, that flow still points at the dead address until the proxier
// deletes it (kube-proxy does the same: kubernetes#59368); replies must
// resume from the live endpoint within two periodic syncs of the
// EndpointSlice update. The deleted pod is put back when the scenario ends.
func scenarioUDP(s *S) {
	const sourcePort = 40053
	s.Step("udp-endpoint-removed", "UDP: after deleting the endpoint a flow reaches, replies from the other endpoint within two sync periods", func(v *V) {
		v.Heading("UDP: replies resume from a live endpoint after the endpoint is deleted")
		svc := v.ApplyService(service("{name: udp}", "ports: [{port: 53, targetPort: 8081, protocol: UDP}]"))
		ip := svc.Spec.ClusterIP
		v.SetEndpoints(svc, "u1@node1", "u2@node2")
		v.Show("-", "e2ectl apply-service udp.yaml && e2ectl set-endpoints udp "+podIP("u1")+"@node1 "+podIP("u2")+"@node2  # UDP 53 -> 8081", "CLUSTER_IP="+ip)
		v.WaitRealServers("node1", ipvs.UDP, ip, 53, podIP("u1")+":8081", podIP("u2")+":8081")

		// One socket, a datagram every 0.3 s.
		send := fmt.Sprintf("while sleep 0.3; do echo ping; done | socat - UDP:%s:53,sourceport=%d", ip, sourcePort)
		sender := v.Background("c1", send)
		replies := func() []timedLine {
			var out []timedLine
			for _, l := range sender.Lines() {
				if strings.HasPrefix(l.text, "hostname=") {
					out = append(out, timedLine{l.at, strings.TrimPrefix(l.text, "hostname=")})
				}
			}
			return out
		}
		v.WaitUntil(30*time.Second, "no reply to "+send, func() (bool, string) { return len(replies()) > 0, "" })
		time.Sleep(time.Second)
		var from []string
		for _, r := range replies() {
			if !slices.Contains(from, r.text) {
				from = append(from, r.text)
			}
		}
		v.Show("c1", send+" | grep hostname=  # replies so far", strings.Join(from, " "))
		if len(from) != 1 || (from[0] != "u1" && from[0] != "u2") {
			v.Fatalf("one flow reaches one endpoint: replies from %q", from)
		}
		victim, survivor := from[0], map[string]string{"u1": "u2", "u2": "u1"}[from[0]]
		v.Note("the flow from source port %d reaches %s; delete %s and its endpoint", sourcePort, victim, victim)

		tDel := time.Now()
		v.Must(topology("del-pod", victim))
		s.t.Cleanup(func() {
			// Put the pod back as setup.sh made it, for whatever runs next. The kernel
			// dismantles a deleted namespace later, in the background: its veth may still be
			// on the node, and the new pod's would clash with it.
			veth := "ip -n " + pods[victim].node + " link show v-" + victim
			run("-", veth+" >/dev/null 2>&1 && ip -n "+pods[victim].node+" link del v-"+victim)
			waitUntil(30*time.Second, func() (bool, string) { return run("-", veth).Status != 0, "" })
			if err := topology("add-pod", pods[victim].node, victim, podIP(victim)); err != nil {
				s.t.Errorf("clean-up: %v", err)
			} else if err := topology("echo", victim, "-http", "", "-udp", ":8081"); err != nil {
				s.t.Errorf("clean-up: %v", err)
			}
		})
		ctx, cancel := v.s.ctx()
		err := cluster.RemoveEndpoint(ctx, guest.client, cluster.ServiceRef{Namespace: svc.Namespace, Name: svc.Name}, net.ParseIP(podIP(victim)))
		cancel()
		v.Must(err)
		// Time from here: the EndpointSlice is updated once the call returned.
		t0 := time.Now()
		v.Show("-", fmt.Sprintf("topology.sh del-pod %s && e2ectl delete-endpoint udp %s  # took %ss", victim, podIP(victim), seconds(t0.Sub(tDel))), "")

		// Two periodic syncs: the longest the proxier may take to notice, were events missed.
		limit := 2 * syncPeriod
		resumed := func() (time.Duration, bool) {
			for _, r := range replies() {
				if r.at.After(t0) && r.text == survivor {
					return r.at.Sub(t0), true
				}
			}
			return 0, false
		}
		var trace []string // node1's real servers over time; the stamps bracket the read
		for time.Since(t0) <= limit {
			before := time.Since(t0)
			rss, err := realServers("node1", ipvs.UDP, ip, 53)
			state := joined(rss)
			if err != nil {
				state = err.Error()
			}
			trace = append(trace, fmt.Sprintf("+%ss..+%ss real servers: %s", seconds(before), seconds(time.Since(t0)), state))
			if _, ok := resumed(); ok {
				break
			}
			time.Sleep(300 * time.Millisecond)
		}
		time.Sleep(time.Second) // a few more replies for the record
		sender.Stop()
		v.Show("c1", "# replies over time, seconds relative to the EndpointSlice update", replyRuns(replies(), t0))
		v.Show("node1", "ipvsadm -Ln -u "+ip+":53  # while waiting, read with the ipvs package", strings.Join(trace, "\n"))
		v.Ask("node1", "conntrack -L -p udp --orig-dst "+ip+" 2>/dev/null")
		after, ok := resumed()
		when := "never"
		if ok {
			when = seconds(after) + "s"
		}
		v.about = fmt.Sprintf("UDP: after deleting %s, replies from %s within %ss (after %s; e2ectl took %ss)", victim, survivor, seconds(limit), when, seconds(t0.Sub(tDel)))
		if !ok || after > limit {
			v.Errorf("no reply from %s within %ss of the update", survivor, seconds(limit))
		}
	})
}

// replyRuns is the replies as runs of one sender: "+FIRSTs .. +LASTs NAME xN",
// the times relative to t0.
func replyRuns(replies []timedLine, t0 time.Time) string {
	var out []string
	for i := 0; i < len(replies); {
		j := i
		for j+1 < len(replies) && replies[j+1].text == replies[i].text {
			j++
		}
		out = append(out, fmt.Sprintf("%+.1fs .. %+.1fs %s x%d", replies[i].at.Sub(t0).Seconds(), replies[j].at.Sub(t0).Seconds(), replies[i].text, j-i+1))
		i = j + 1
	}
	return strings.Join(out, "\n")
}

// scenarioSCTP: SCTP Services carry real SCTP associations. The echo server
// is Go, whose standard library has no SCTP, so socat speaks it: in pod web
// a listener that answers each association with `hostname=web` and
// `client_address=<the peer it accepted>` and closes. One NodePort Service
// (Cluster policy) gives both paths: its cluster IP from c1 (web's node) and
// c2 (the other node) keeps the pod's address, as for TCP (tutorial-clusterip); its
// node port from the outside client is source-NATed to a node address on
// both nodes. As kube-proxy does, the SCTP node port's masquerade goes
// through the hash:ip,port set KUBE-NODE-PORT-SCTP-HASH (TCP and UDP use
// bitmap:port sets), so node2's entry is checked too. The VM loads the sctp
// module here (`modprobe` finds it in the kernel's module tree,
// e2e/vm/initramfs-init.sh).
//
// The Service is dual-stack (RequireDualStack, web's IPv4 and IPv6 address):
// a second listener in web (SCTP6-LISTEN, ipv6only) answers over IPv6, and
// the same checks run on the IPv6 cluster IP from c1 and c2 (their IPv6
// addresses seen) and on the node port at both nodes' IPv6 addresses from
// the client (SNATed to the node's IPv6 address; node2's entry in
// KUBE-6-NODE-PORT-SCTP-HASH): verdict sctp-ipv6. socat names an IPv6 peer in
// full, in brackets ([2001:0db8:...]); the checks expand the address they
// expect the same way.
func scenarioSCTP(s *S) {
	const port, nodePort = 9132, 30132
	s.DualStep("sctp", "SCTP: cluster IP from c1 and c2 keeps the pod's address; node port from the client on both nodes is SNATed to that node",
		"SCTP over IPv6: the IPv6 cluster IP from c1 and c2 keeps the pod's IPv6 address; node port on both nodes' IPv6 addresses from the client is SNATed to that node's IPv6 address; node2's entry in KUBE-6-NODE-PORT-SCTP-HASH",
		func(v *V, d *dual) {
			v.Heading("SCTP: a ClusterIP keeps the pod's address, a Cluster-policy NodePort source-NATs, on both families")
			if a := v.Ask("-", "modprobe sctp && grep -c '^SCTP ' /proc/net/protocols"); a.Status != 0 {
				v.Fatalf("the VM's kernel has no sctp module")
			}
			// SOCAT_PEERADDR: the address the accepted association came from, as the pod sees it.
			answer := `SYSTEM:'echo hostname=web; echo client_address=$SOCAT_PEERADDR'`
			v.Background("web", fmt.Sprintf("socat SCTP-LISTEN:%d,reuseaddr,fork %s", port, answer))
			v.Background("web", fmt.Sprintf("socat SCTP6-LISTEN:%d,ipv6only=1,reuseaddr,fork %s", port, answer))
			v.Show("web", fmt.Sprintf("socat SCTP-LISTEN:%d,reuseaddr,fork %s & socat SCTP6-LISTEN:%d,ipv6only=1,reuseaddr,fork SYSTEM:'...' &", port, answer, port), "")
			// Pod to pod first, no Service: SCTP itself works here, on both families.
			for _, f := range families {
				direct := fmt.Sprintf("socat -u -T 2 %s,connect-timeout=1 STDOUT", sctpConnect(f.pod("web"), port))
				if ok, last := waitUntil(10*time.Second, func() (bool, string) { a := run("c1", direct); return a.Status == 0, a.Out }); !ok {
					d.Errorf(f, "c1 -> web %s directly never answered: %s", hostPort(f.pod("web"), port), last)
				}
			}
			svc := v.ApplyService(service("{name: sctp}", "type: NodePort", "ipFamilyPolicy: RequireDualStack",
				fmt.Sprintf("ports: [{port: %d, targetPort: %d, nodePort: %d, protocol: SCTP}]", port, port, nodePort)))
			v.Show("-", fmt.Sprintf("e2ectl apply-service sctp.yaml  # NodePort, SCTP %d, nodePort %d, RequireDualStack", port, nodePort),
				serviceInfo(svc, "TYPE", "CLUSTER_IPS", "NODE_PORT_"+fmt.Sprint(port), "EXTERNAL_TRAFFIC_POLICY"))
			v.SetDualEndpoints(svc, "web@node1")
			v.Show("-", "e2ectl set-endpoints sctp "+podIP("web")+"@node1 "+ipFamily(6).pod("web")+"@node1", "")
			for _, f := range families {
				rs := hostPort(f.pod("web"), port)
				for _, node := range []string{"node1", "node2"} {
					d.WaitRealServers(f, node, ipvs.SCTP, f.clusterIP(svc), port, rs)
					d.WaitRealServers(f, node, ipvs.SCTP, f.node(node), nodePort, rs)
				}
			}
			rss, err := realServers("node2", ipvs.SCTP, node2Addr, nodePort)
			v.Show("node2", fmt.Sprintf("ipvsadm -Ln --sctp-service %s:%d  # read with the ipvs package", node2Addr, nodePort), fmt.Sprint(joined(rss), " ", errText(err)))
			for _, f := range families {
				set := map[ipFamily]string{4: "KUBE-NODE-PORT-SCTP-HASH", 6: "KUBE-6-NODE-PORT-SCTP-HASH"}[f]
				e := ipset.Entry{IP: netip.MustParseAddr(f.node("node2")), Protocol: "sctp", Port: nodePort}
				in, err := inSet("node2", set, e)
				v.Show("node2", "ipset test "+set+" "+e.String(ipset.HashIPPort)+"  # read with the ipset package", fmt.Sprint(in, " ", errText(err)))
				if !in {
					d.Errorf(f, "%s is not in node2's %s (%v)", e.String(ipset.HashIPPort), set, err)
				}
			}

			for _, c := range []string{"c1", "c2"} {
				for _, f := range families {
					want := "hostname=web client_address=" + sctpPeer(f.pod(c))
					if a := v.sctpAsk(c, f.clusterIP(svc), port); a.Out != want {
						d.Errorf(f, "%s -> %s: '%s', want %s", c, hostPort(f.clusterIP(svc), port), a.Out, want)
					}
				}
			}
			// Cluster policy: each node masquerades to its own address (web's reply must come back
			// through node2 for node2's association).
			for _, f := range families {
				for _, node := range []string{"node1", "node2"} {
					addr := f.node(node)
					want := "hostname=web client_address=" + sctpPeer(addr)
					if a := v.sctpAsk("client", addr, nodePort); a.Out != want {
						d.Errorf(f, "client -> %s: '%s', want %s", hostPort(addr, nodePort), a.Out, want)
					}
				}
			}
			// Deleted here, so that a virtual server left behind fails this verdict.
			v.DeleteService(svc)
			v.Show("-", "e2ectl delete-service sctp  # and both nodes lose its virtual servers", "")
		})
}

// sctpConnect is socat's address of an SCTP association to ip:port.
func sctpConnect(ip string, port int) string {
	if strings.Contains(ip, ":") {
		return fmt.Sprintf("SCTP6-CONNECT:[%s]:%d", ip, port)
	}
	return fmt.Sprintf("SCTP-CONNECT:%s:%d", ip, port)
}

// sctpAsk makes one SCTP association from where (over IPv6 when ip is one);
// the answer is what the server said, on one line ("hostname=web
// client_address=..."), its status socat's.
func (v *V) sctpAsk(where, ip string, port int) Answer {
	return v.Ask(where, fmt.Sprintf("socat -u -T 5 %s,connect-timeout=3 STDOUT | tr '\\n' ' ' | sed 's/ $//'; exit ${PIPESTATUS[0]}", sctpConnect(ip, port)))
}

// sctpPeer is how socat's SOCAT_PEERADDR names a peer at addr: an IPv6 one
// in full, eight groups of four hex digits, in brackets.
func sctpPeer(addr string) string {
	a := netip.MustParseAddr(addr)
	if a.Is4() {
		return addr
	}
	b := a.As16()
	var groups []string
	for i := 0; i < 16; i += 2 {
		groups = append(groups, fmt.Sprintf("%02x%02x", b[i], b[i+1]))
	}
	return "[" + strings.Join(groups, ":") + "]"
}

// WaitRealServers is V.WaitRealServers whose failure goes to family f's
// verdict, and the step goes on.
func (d *dual) WaitRealServers(f ipFamily, node string, proto ipvs.Protocol, addr string, port int, want ...string) {
	slices.Sort(want)
	ok, last := waitUntil(30*time.Second, hasRealServers(node, proto, addr, uint16(port), want))
	if !ok {
		d.Errorf(f, "after 30s, %s's %s %s has not exactly %v: %s", node, proto, hostPort(addr, port), want, last)
	}
}
