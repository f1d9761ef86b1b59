package proxier

import (
	"errors"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/iptables"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	v1 "k8s.io/api/core/v1"
)

// On a dual-stack node an iptables failure is counted under the family whose
// rules failed, and the conntrack passes are each their own family's, so
// kube-proxy's per-family metrics are not all booked to the first family.
func TestSyncResultCountsFailuresAndConntrackByFamily(t *testing.T) {
	fk := newFakeKernel()
	f := &faults{}
	f.set(func(op, object string) error {
		if op == "iptables-restore" && object == iptables.IPv6.String() {
			return errors.New("injected: iptables-restore failed")
		}
		return nil
	})
	cfg := testConfig()
	cfg.Families = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	p, err := New(cfg, servicetest.ThisNode, fk.faultyKernel(f), newRecorder())
	if err != nil {
		t.Fatal(err)
	}
	res := p.Sync()
	if res.IPTablesFailures[v1.IPv6Protocol] == 0 || res.IPTablesFailures[v1.IPv4Protocol] != 0 {
		t.Errorf("iptables failures by family = %v, want IPv6 only", res.IPTablesFailures)
	}
	if res.WriteErrors[string(snapshot.ObjectRules)] != res.IPTablesFailures[v1.IPv6Protocol] {
		t.Errorf("iptables write errors %d, failures by family %v: each failure is one family's", res.WriteErrors[string(snapshot.ObjectRules)], res.IPTablesFailures)
	}
	// The full sync ran the UDP conntrack reconcile once per family.
	if _, ok := res.Conntrack[v1.IPv4Protocol]; !ok {
		t.Errorf("no IPv4 conntrack pass: %v", res.Conntrack)
	}
	if _, ok := res.Conntrack[v1.IPv6Protocol]; !ok {
		t.Errorf("no IPv6 conntrack pass: %v", res.Conntrack)
	}
}
