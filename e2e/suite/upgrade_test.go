//go:build e2e

package suite

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"
)

// upgradePort is the upgrade scenario's TCP node port.
const upgradePort = 30070

// previousBuild is the previous release's ipvsproxy (e2e/previous-build.sh,
// at the commit e2e/previous-release.env records), "" when the run built
// none.
func previousBuild() string { return os.Getenv("E2E_PREVIOUS_IPVSPROXY") }

// scenarioUpgradeDowngrade (upgrade-downgrade and its IPv6 half): a rolling update of the DaemonSet on
// a live node, both ways. node1 runs this build; streams run through it over
// each family (TCP from a pod to a cluster IP, TCP from outside to the
// NodePort, UDP from one source port to a cluster IP, and the control
// stream between pods). node1's daemon is stopped as the kubelet stops a
// pod (SIGTERM) and the previous release's build starts with the same flags
// (the downgrade, N to N-1); then that one is stopped and this build starts
// again (the upgrade, N-1 to N). Checked per family: no stream broke, no
// pause of its own of 1 s or more, the virtual servers adopted at each
// switch (their connection counters kept, so not recreated), new
// connections served under each build; under the previous build the IPVS
// table is this build's; after the upgrade the node's whole kernel state
// (readKernel: IPVS, ipsets, iptables and ip6tables, kube-ipvs0) is what
// this build had before the downgrade: nothing of the previous build's is
// left over.
func scenarioUpgradeDowngrade(s *S) {
	s.DualStep("upgrade-downgrade", "downgrade to the previous release and upgrade back on a live node",
		"the same downgrade and upgrade over IPv6", func(v *V, d *dual) {
			v.Heading("A rolling update to the previous release and back, under live connections")
			previous := previousBuild()
			if previous == "" {
				v.Fatalf("no previous release's build (E2E_PREVIOUS_IPVSPROXY; e2e/run.sh builds it with e2e/previous-build.sh)")
			}
			v.Show("-", previous+" version  # the previous release's build", v.Ask("-", previous+" version 2>&1 | head -n 3").Out)
			v.Show("-", ipvsproxyBin()+" version  # this build", v.Ask("-", ipvsproxyBin()+" version 2>&1 | head -n 3").Out)
			svcs := v.applyTCPAndUDP("upgrade70", upgradePort)
			vs4, vs6 := svcs.virtualServers(4), svcs.virtualServers(6)
			if ok, last := waitUntil(60*time.Second, func() (bool, string) { return programmed("node1", defaultScheduler(), slices.Concat(vs4, vs6)) }); !ok {
				v.Fatalf("node1 did not program the Services within 60 s: %s", last)
			}
			// The state to compare with at the end, once settled (an earlier scenario's real
			// server may still be draining): two reads 5 s apart alike.
			before := settledKernel(v, "node1")

			streams := v.kpmStartStreams(svcs)
			time.Sleep(3 * time.Second)
			switchTo := func(what string, r proxierRun) (string, counters, counters) {
				c4 := v.readCounters("node1", vs4, "streams open, before the "+what)
				c6 := v.readCounters("node1", vs6, "IPv6, streams open, before the "+what)
				t := time.Now()
				v.StopProxier("node1", syscall.SIGTERM)
				pid := v.LaunchProxier("node1", r)
				if err := waitProxierSynced("node1", pid, 120*time.Second); err != nil {
					v.Errorf("the %s: %v", what, err)
				}
				took := seconds(time.Since(t))
				v.Show("node1", "# SIGTERM to the running daemon -> the other build's first sync done ("+what+")", took+" s")
				time.Sleep(3 * time.Second)
				a4 := v.readCounters("node1", vs4, "after the "+what)
				a6 := v.readCounters("node1", vs6, "IPv6, after the "+what)
				if why := c4.dropped(a4); why != "" {
					v.Errorf("%s: virtual servers recreated: %s", what, why)
				}
				if why := c6.dropped(a6); why != "" {
					d.Errorf(6, "%s: IPv6 virtual servers recreated: %s", what, why)
				}
				v.kpmNewConnections(svcs, d, "after the "+what)
				return took, a4, a6
			}

			down, _, _ := switchTo("downgrade", proxierRun{binary: previous})
			under, err := readKernel("node1")
			v.Must(err)
			if under.ipvs.text != before.ipvs.text {
				v.Errorf("the previous build's IPVS table differs from this build's:\n%s", lineDiff(before.ipvs.text, under.ipvs.text))
			}
			v.Show("node1", "# the kernel state under the previous build, beside this build's (readKernel: - this build, + the previous)",
				orNone(lineDiff(normalized(before.text), normalized(under.text))))

			up, _, _ := switchTo("upgrade", proxierRun{})
			gaps4, gaps6 := streams.end(v, d, "across the downgrade and the upgrade")
			after := settledKernel(v, "node1")
			v.Show("node1", "# the kernel state after the upgrade, beside the same build's before the downgrade (- before, + after)",
				orNone(lineDiff(normalized(before.text), normalized(after.text))))
			if normalized(after.text) != normalized(before.text) {
				v.Errorf("after the upgrade the kernel state is not this build's own: something of the previous build's is left over or missing:\n%s", lineDiff(normalized(before.text), normalized(after.text)))
			}
			v.about = fmt.Sprintf("downgrade to the previous release (%s s to its first sync) and upgrade back (%s s) on node1 under live connections (gaps: %s): TCP from a pod, TCP to a NodePort from outside, UDP from one port: none broke, no pause of its own (beyond the control stream's) >= 1 s, virtual servers adopted both ways (counters kept), the same IPVS table under both builds, new connections served, after the upgrade the kernel state exactly this build's",
				down, up, gaps4)
			d.about6 = "the same downgrade and upgrade over IPv6 (gaps: " + gaps6 + "): TCP from a pod to the IPv6 cluster IP, TCP to node1's IPv6 NodePort from outside, UDP from one port to the IPv6 cluster IP: none broke, no pause of its own >= 1 s, the IPv6 virtual servers adopted both ways, new IPv6 connections served under both builds"
			// node1 runs this build on the suite's flags again.
		})
}

// settledKernel reads node's kernel state until two reads 5 s apart agree
// (at most 60 s; then the last read).
func settledKernel(v *V, node string) kernelState {
	last, err := readKernel(node)
	v.Must(err)
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
		time.Sleep(5 * time.Second)
		now, err := readKernel(node)
		v.Must(err)
		if normalized(now.text) == normalized(last.text) {
			return now
		}
		last = now
	}
	return last
}

// lineDiff lists the lines only in a (-) and only in b (+), each once, in
// a's and then b's order: enough to see what one state has that the other
// lacks.
func lineDiff(a, b string) string {
	count := func(s string) map[string]int {
		m := map[string]int{}
		for _, l := range strings.Split(s, "\n") {
			m[l]++
		}
		return m
	}
	ca, cb := count(a), count(b)
	var out []string
	for _, l := range strings.Split(a, "\n") {
		if ca[l] > cb[l] {
			out = append(out, "- "+l)
			cb[l]++
		}
	}
	ca, cb = count(a), count(b)
	for _, l := range strings.Split(b, "\n") {
		if cb[l] > ca[l] {
			out = append(out, "+ "+l)
			ca[l]++
		}
	}
	return strings.Join(out, "\n")
}

// normalized is a kernelState's text with each ipset's members sorted: a
// set made again lists the same members in another order. Everything else
// keeps its order, which means something (rules) or shows that objects
// were adopted, not made again (IPVS).
func normalized(text string) string {
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		if head, members, ok := strings.Cut(l, ":"); ok && strings.Contains(head, " maxelem ") {
			m := strings.Fields(members)
			slices.Sort(m)
			l = head + ": " + strings.Join(m, " ")
		}
		lines = append(lines, l)
	}
	return strings.Join(lines, "\n")
}

func orNone(s string) string {
	if s == "" {
		return "(no difference)"
	}
	return s
}
