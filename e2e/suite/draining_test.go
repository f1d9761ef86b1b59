//go:build e2e

package suite

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
)

// Established TCP connections across endpoint and Service removal, measured
// with the echo server's /stream (a line every 100 ms) through a Service:
// the longest silence, counted to the ends of the observation window
// (stream.Gap), shows whether the connection kept flowing.

// The longest silence allowed is streamLineGapMax (background_test.go), as
// for the outage's streams.

// vsState is a TCP virtual server's real servers read with the ipvs
// package; gone: no such virtual server.
func vsState(node, addr string, port uint16) (rss []ipvs.RealServer, gone bool, err error) {
	rss, err = realServers(node, ipvs.TCP, addr, port)
	if errors.Is(err, ipvs.ErrNotFound) {
		return nil, true, nil
	}
	return rss, false, err
}

// weightOf is the weight of real server rs ("IP:PORT"), as the transcript
// shows it: a number, "none" (no such real server) or "no virtual server".
func weightOf(node, addr string, port uint16, rs string) string {
	rss, gone, err := vsState(node, addr, port)
	switch {
	case err != nil:
		return err.Error()
	case gone:
		return "no virtual server"
	}
	for _, r := range rss {
		if r.String() == rs {
			return strconv.Itoa(int(r.Weight))
		}
	}
	return "none"
}

// vsGone: the node has no TCP virtual server addr:port.
func vsGone(node, addr string, port uint16) bool {
	_, gone, err := vsState(node, addr, port)
	return err == nil && gone
}

// scenarioTerminatingEndpoint: the endpoint a live connection reaches turns
// terminating (serving), then terminating and not serving, then is removed:
// its real server stays at weight 0 and the stream flows; new connections
// go to the other endpoint; once the stream is closed (RST) the real server
// goes.
func scenarioTerminatingEndpoint(s *S) {
	s.Step("terminating-endpoint", "terminating endpoint", func(v *V) {
		v.Heading("A live connection to an endpoint that turns terminating, then goes: it keeps flowing at weight 0")
		svc := v.ApplyService(service("{name: life}", "ports: [{port: 8060, targetPort: 8080, protocol: TCP}]"))
		ip := svc.Spec.ClusterIP
		v.SetEndpoints(svc, "web@node1", "s2@node2")
		v.Show("-", "e2ectl apply-service life.yaml && e2ectl set-endpoints life web@node1 s2@node2", "CLUSTER_IP="+ip)
		v.WaitRealServers("node1", ipvs.TCP, ip, 8060, podIP("web")+":8080", podIP("s2")+":8080")

		st := v.Stream("c1", ip, 8060)
		v.WaitUntil(20*time.Second, fmt.Sprintf("no stream line from %s:8060", ip), func() (bool, string) {
			return len(st.Received()) > 0, "no line"
		})
		victim := st.Received()[0].host
		var survivor, vnode, snode string
		switch victim {
		case "web":
			survivor, vnode, snode = "s2", "node1", "node2"
		case "s2":
			survivor, vnode, snode = "web", "node2", "node1"
		default:
			st.Close()
			v.about = "terminating endpoint: the stream names its endpoint"
			v.Fatalf("stream from %q", victim)
		}
		vrs := podIP(victim) + ":8080"
		weight := func() string { return weightOf("node1", ip, 8060, vrs) }
		v.Note("c1's stream reaches %s; it turns terminating", victim)
		t0 := time.Now()
		v.SetEndpoints(svc, victim+"@"+vnode+":terminating", survivor+"@"+snode)
		if ok, _ := waitUntil(20*time.Second, func() (bool, string) { return weight() == "0", "" }); !ok {
			v.Errorf("%s not at weight 0 within 20 s of turning terminating", vrs)
		}
		v.Show("-", fmt.Sprintf("e2ectl set-endpoints life %s@%s:terminating %s@%s  # ready=false serving=true terminating=true", victim, vnode, survivor, snode),
			fmt.Sprintf("node1: %s weight %s after %ss", vrs, weight(), seconds(time.Since(t0))))
		// New connections avoid it: 8 of 8 to the survivor (by chance with both at weight 1: 1/256).
		reached := v.Reached("c1", fmt.Sprintf("http://%s:8060/", ip), 8)
		if reached[victim] != 0 || reached[survivor] != 8 {
			v.Errorf("new connections reached: %s, want %s 8 times", reachedText(reached), survivor)
		}

		t1 := time.Now()
		v.SetEndpoints(svc, victim+"@"+vnode+":terminating-notserving", survivor+"@"+snode)
		time.Sleep(1500 * time.Millisecond)
		w := weight()
		v.Show("-", fmt.Sprintf("e2ectl set-endpoints life %s@%s:terminating-notserving %s@%s  # serving=false", victim, vnode, survivor, snode),
			fmt.Sprintf("node1 after %ss: %s weight %s", seconds(time.Since(t1)), vrs, w))
		if w != "0" {
			v.Errorf("%s not at weight 0 while terminating and not serving", vrs)
		}

		t2 := time.Now()
		v.SetEndpoints(svc, survivor+"@"+snode)
		// Removed from the slice: drained at weight 0 (a sync or two to be sure it was not deleted).
		time.Sleep(2 * time.Second)
		w = weight()
		conns := ""
		if rss, _, err := vsState("node1", ip, 8060); err == nil {
			for _, r := range rss {
				if r.String() == vrs {
					conns = fmt.Sprintf("; active %d, inactive %d", r.ActiveConnections, r.InactiveConnections)
				}
			}
		}
		v.Show("-", fmt.Sprintf("e2ectl set-endpoints life %s@%s  # %s removed", survivor, snode, victim),
			fmt.Sprintf("node1 after %ss: %s weight %s%s", seconds(time.Since(t2)), vrs, w, conns))
		if w != "0" {
			v.Errorf("%s not kept at weight 0 after its removal while the stream lives", vrs)
		}
		t3 := time.Now()
		time.Sleep(time.Second)
		afterCounts := st.From(t3)
		after := reachedText(afterCounts)
		if after == "" {
			after = "none"
		}
		if afterCounts[victim] == 0 {
			v.Errorf("no stream line from %s after the removal (lines: %s)", victim, after)
		}

		// The window ends as the stream is closed: lines are demanded up to then.
		tClose := time.Now()
		st.Close()
		took := "never"
		if ok, _ := waitUntil(45*time.Second, func() (bool, string) {
			w := weight()
			return w == "none" || w == "no virtual server", w
		}); ok {
			took = seconds(time.Since(tClose))
		} else {
			v.Errorf("%s still in node1's IPVS 45 s after the stream closed", vrs)
		}
		gap, _ := st.Gap(time.Time{}, tClose)
		gapText := st.GapText(time.Time{}, tClose)
		v.Show("c1", "# the stream: longest silence, to the close, while "+victim+" turned terminating and was removed",
			fmt.Sprintf("%s; from %s after the removal: %s; real server gone %s s after the stream closed (IPVS CLOSE 10 s + a sync)", gapText, victim, after, took))
		if gap >= streamLineGapMax {
			v.Errorf("largest gap %.2f s, want < %.1f s", gap.Seconds(), streamLineGapMax.Seconds())
		}
		if rss, gone, err := vsState("node1", ip, 8060); err == nil && !gone {
			var got []string
			for _, r := range rss {
				got = append(got, r.String())
			}
			if !slices.Equal(got, []string{podIP(survivor) + ":8080"}) {
				v.Errorf("node1's real servers at the end: %s", strings.Join(got, " "))
			}
		}
		v.about = fmt.Sprintf("a stream to %s kept flowing while it turned terminating (serving, then not) and was removed (largest gap %s), at weight 0, 8 new connections to %s; its real server gone %ss after the stream closed",
			victim, gapText, survivor, took)
	})
}

// scenarioServiceDeletionDrains: node1 restarted with --ipvs-drain-timeout
// 45s (long enough that the cluster IP stream closes, and its virtual server
// goes, before it under a loaded emulated VM: 20 s was not); deleting a
// Service keeps a stream through its cluster IP and one through its
// NodePort (from outside) flowing at weight 0; the cluster IP's virtual
// server goes once its stream closes; the NodePort's at the first sync
// after the limit, which cuts its stream (expire_nodest_conn). node1 goes
// back to the suite's flags.
func scenarioServiceDeletionDrains(s *S) {
	const limit = 45 * time.Second
	s.Step("service-deletion-drains", "Service deletion drains", func(v *V) {
		v.Heading("Deleting a Service drains its established connections (kubernetes#71894), up to --ipvs-drain-timeout")
		v.RestartProxier("node1", proxierRun{extra: []string{"--ipvs-drain-timeout", limit.String()}, syncWithin: 60 * time.Second})
		svc := v.ApplyService(service("{name: drain}", "type: NodePort",
			"ports: [{port: 8061, targetPort: 8080, nodePort: 30161, protocol: TCP}]"))
		ip := svc.Spec.ClusterIP
		v.SetEndpoints(svc, "web@node1", "s2@node2")
		v.Show("-", "node1: ipvsproxy run ... --ipvs-drain-timeout 45s; e2ectl apply-service drain.yaml (NodePort 30161) && e2ectl set-endpoints drain web@node1 s2@node2", "CLUSTER_IP="+ip)
		want := []string{podIP("web") + ":8080", podIP("s2") + ":8080"}
		v.WaitRealServers("node1", ipvs.TCP, ip, 8061, want...)
		v.WaitRealServers("node1", ipvs.TCP, node1Addr, 30161, want...)

		stC := v.Stream("c1", ip, 8061)
		stN := v.Stream("client", node1Addr, 30161)
		for _, x := range []struct {
			st  *stream
			via string
		}{{stC, "the cluster IP"}, {stN, "the NodePort"}} {
			if ok, _ := waitUntil(20*time.Second, func() (bool, string) { return len(x.st.Received()) > 0, "" }); !ok {
				v.Errorf("no line through %s", x.via)
			}
		}

		tDel := time.Now()
		v.DeleteServiceObjects(svc)
		// From when node1 set the weights to 0 (the API calls themselves take seconds under emulation).
		waitUntil(30*time.Second, func() (bool, string) {
			rss, gone, err := vsState("node1", node1Addr, 30161)
			if err != nil || gone || len(rss) == 0 {
				return false, ""
			}
			return !slices.ContainsFunc(rss, func(r ipvs.RealServer) bool { return r.Weight != 0 }), ""
		})
		tSeen := time.Now()
		seen := seconds(tSeen.Sub(tDel))
		time.Sleep(time.Second)
		rss, gone, err := vsState("node1", ip, 8061)
		v.Must(err)
		var state []string
		for _, r := range rss {
			state = append(state, fmt.Sprintf("%s w%d a%d", r, r.Weight, r.ActiveConnections))
		}
		shown := strings.Join(state, " ")
		if gone {
			shown = "gone"
		}
		v.Show("node1", fmt.Sprintf("ipvsadm -Ln -t %s:8061  # after e2ectl delete-service drain, read with the ipvs package (weight 0 seen %ss after the deletion began)", ip, seen), shown)
		if gone {
			v.Errorf("the cluster IP's virtual server is gone after the deletion, with a stream open")
		}
		if slices.ContainsFunc(rss, func(r ipvs.RealServer) bool { return r.Weight != 0 }) {
			v.Errorf("a real server of the deleted Service is not at weight 0")
		}
		if len(stC.From(tSeen)) == 0 {
			v.Errorf("the cluster IP's stream stopped at the deletion")
		}
		if len(stN.From(tSeen)) == 0 {
			v.Errorf("the NodePort's stream stopped at the deletion")
		}

		// The cluster IP's stream ends: its virtual server goes (no established connection left).
		tClose := time.Now()
		stC.Close()
		// A new connection finds nothing.
		if a := v.Ask("c1", fmt.Sprintf("curl -sS --max-time 2 http://%s:8061/ >/dev/null", ip)); a.Status == 0 {
			v.Errorf("a new connection to the deleted cluster IP was answered")
		}
		tookC := "never"
		if ok, _ := waitUntil(30*time.Second, func() (bool, string) { return vsGone("node1", ip, 8061), "" }); ok {
			tookC = seconds(time.Since(tClose))
		} else {
			v.Errorf("the cluster IP's virtual server still there 30 s after its stream closed")
		}
		// Gone because its stream closed, not because the limit passed: the NodePort's virtual
		// server, whose deadline was set in the same sync, is still there.
		goneC := seconds(time.Since(tSeen))
		if vsGone("node1", node1Addr, 30161) {
			v.Errorf("the NodePort's virtual server went with the cluster IP's (%ss after the weights went 0): the limit removed them, not the close", goneC)
		}
		// The NodePort's stream lives on: cut at the first sync after the limit.
		tookN := "never"
		if ok, _ := waitUntil(limit+2*syncPeriod, func() (bool, string) { return vsGone("node1", node1Addr, 30161), "" }); ok {
			tookN = seconds(time.Since(tSeen))
		} else {
			v.Errorf("the NodePort's virtual server still there %.0f s after the deletion", (limit + 2*syncPeriod).Seconds())
		}
		time.Sleep(1500 * time.Millisecond)
		stN.Close()
		linesN := stN.Received()
		var lastN, lastNDel time.Duration
		if len(linesN) > 0 {
			lastN, lastNDel = linesN[len(linesN)-1].at.Sub(tSeen), linesN[len(linesN)-1].at.Sub(tDel)
		}
		gapC, _ := stC.Gap(time.Time{}, tClose)
		// The NodePort's stream must flow until the limit, counted from the
		// deletion's start (its deadline was set after that): lines are
		// demanded up to there, as the cut check below allows.
		untilN := tDel.Add(limit - 500*time.Millisecond)
		gapN, _ := stN.Gap(time.Time{}, untilN)
		gapCText, gapNText := stC.GapText(time.Time{}, tClose), stN.GapText(time.Time{}, untilN)
		v.Show("-", "# streams, seconds after node1 set the weights to 0",
			fmt.Sprintf("cluster IP: largest gap %s until closed at %ss, virtual server gone %ss after (%ss after the weights went 0); NodePort from %s: largest gap %s, last line at %ss (%ss after the deletion began; limit %s, sync period %s), virtual server gone by %ss",
				gapCText, seconds(tClose.Sub(tSeen)), tookC, goneC, clientAddr, gapNText, seconds(lastN), seconds(lastNDel), limit, syncPeriod, tookN))
		for _, g := range []time.Duration{gapC, gapN} {
			if g >= streamLineGapMax {
				v.Errorf("largest gap %.2f s, want < %.1f s", g.Seconds(), streamLineGapMax.Seconds())
			}
		}
		// Cut at the first sync after the limit: not before the limit counted from the deletion's
		// start, at most a sync period (and 2 s of slack) after the limit counted from when the
		// weights were seen at 0 (the API calls and the watch take seconds under emulation).
		cutMax := limit + syncPeriod + 2*time.Second
		if tookN == "never" || lastNDel < limit-500*time.Millisecond || lastN > cutMax {
			v.Errorf("NodePort stream's last line %ss after the deletion began, %ss after the weights went 0: want cut after %s and by %s",
				seconds(lastNDel), seconds(lastN), limit, cutMax)
		}

		v.RestoreProxierWithin("node1", 60*time.Second)
		v.about = fmt.Sprintf("Service deleted: streams through its cluster IP and NodePort kept flowing at weight 0 (gaps %.2f/%.2f s); cluster IP's virtual server gone %ss after its stream closed; the NodePort's stream cut %ss after the weights went 0 (limit %s)",
			gapC.Seconds(), gapN.Seconds(), tookC, seconds(lastN), limit)
	})
}
