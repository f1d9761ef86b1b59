package proxier

import (
	"strings"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"

	v1 "k8s.io/api/core/v1"
)

// A Service that loses a virtual server to an older one programs nothing
// for it: its masquerade, source-range and hairpin members would otherwise
// apply to the winner's traffic.
func TestConflictLoserProgramsNothingForTheKey(t *testing.T) {
	fk := newFakeKernel()
	p, _ := newTestProxier(t, fk, testConfig())
	// The winner: Local policy, so its external IP is in no masquerade set.
	winner := servicetest.Service("winner", "10.96.0.10", servicetest.ExternalLocal(0), func(s *v1.Service) { s.Spec.ExternalIPs = []string{"203.0.113.5"} })
	winner.Spec.Type = v1.ServiceTypeNodePort
	// The loser, newer: Cluster policy would mark 203.0.113.5:80 for SNAT.
	loser := servicetest.Service("loser", "10.96.0.11", servicetest.CreatedAt(servicetest.Created.Add(time.Hour)), func(s *v1.Service) { s.Spec.ExternalIPs = []string{"203.0.113.5"} })
	p.Tracker().SetService(loser)
	p.Tracker().SetService(winner)
	p.Tracker().SetEndpointSlice(servicetest.Slice(winner, "winner-a", 8080, "10.244.1.5@node1"))
	// The loser's endpoint on this node would add a hairpin member.
	p.Tracker().SetEndpointSlice(servicetest.Slice(loser, "loser-a", 9090, "10.244.1.9@node1"))
	mustSync(t, p)
	check := func(when string) {
		t.Helper()
		dump := fk.ipset.Dump()
		if strings.Contains(dump, "KUBE-EXTERNAL-IP") && strings.Contains(after(dump, "set KUBE-EXTERNAL-IP "), "203.0.113.5") {
			t.Errorf("%s: the loser's KUBE-EXTERNAL-IP member marks the winner's traffic:\n%s", when, dump)
		}
		// The loser's cluster IP still works, with its hairpin member for that port only.
		if !strings.Contains(dump, "10.96.0.11,tcp:80") {
			t.Errorf("%s: the loser's cluster IP lost its members:\n%s", when, dump)
		}
		if got := realServers(t, fk, extVS5()); len(got) != 1 || got[ep1] != 1 {
			t.Errorf("%s: the winner's external IP: %v", when, got)
		}
	}
	check("first sync")
	// The winner changes (an endpoint more): still nothing of the loser.
	p.Tracker().SetEndpointSlice(servicetest.Slice(winner, "winner-a", 8080, "10.244.1.5@node1", "10.244.2.7@node2"))
	mustSync(t, p)
	check("partial sync")
	p.needFull = true
	mustSync(t, p)
	check("full sync")
	// The winner goes: now the loser takes the key, with its own members.
	p.Tracker().DeleteService("default", "winner")
	mustSync(t, p)
	if dump := fk.ipset.Dump(); !strings.Contains(after(dump, "set KUBE-EXTERNAL-IP "), "203.0.113.5,tcp:80") {
		t.Fatalf("the new owner's members are missing:\n%s", dump)
	}
}

// after is the part of s after the first line starting with prefix, up to
// the next "set " line: one set's members in an ipset Fake dump.
func after(s, prefix string) string {
	i := strings.Index(s, prefix)
	if i < 0 {
		return ""
	}
	rest := s[i+len(prefix):]
	if j := strings.Index(rest, "\nset "); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

func extVS5() ipvs.VirtualServerKey { return webVSFor("203.0.113.5") }
