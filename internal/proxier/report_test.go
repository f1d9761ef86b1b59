package proxier

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
)

// At 1,000 bad Services on 100 nodes, each Service's cluster-wide problem is
// posted by exactly clusterReporters nodes, every node agreeing which, and
// the work is spread over the nodes.
func TestClusterProblemsArePostedByTwoNodes(t *testing.T) {
	var nodes []string
	for i := 0; i < 100; i++ {
		nodes = append(nodes, fmt.Sprintf("node-%03d", i))
	}
	perNode := map[string]int{}
	for s := 0; s < 1000; s++ {
		name := types.NamespacedName{Namespace: fmt.Sprintf("tenant-%d", s%37), Name: fmt.Sprintf("bad-%d", s)}
		reporters := designatedReporters(name, nodes, clusterReporters)
		if len(reporters) != clusterReporters {
			t.Fatalf("%s: reporters %v", name, reporters)
		}
		// Another node, with the list in another order, picks the same.
		reversed := append([]string(nil), nodes...)
		for i, j := 0, len(reversed)-1; i < j; i, j = i+1, j-1 {
			reversed[i], reversed[j] = reversed[j], reversed[i]
		}
		if again := designatedReporters(name, reversed, clusterReporters); fmt.Sprint(again) != fmt.Sprint(reporters) {
			t.Fatalf("%s: %v, then %v", name, reporters, again)
		}
		for _, n := range reporters {
			perNode[n]++
		}
	}
	total := 0
	for n, c := range perNode {
		total += c
		if c > 60 {
			t.Errorf("node %s posts for %d of 1,000 Services: not spread", n, c)
		}
	}
	if total != 2000 {
		t.Errorf("%d Events for 1,000 Services, want 2,000", total)
	}
}

func threeNodes(t *testing.T) (map[string]*Proxier, map[string]*record.FakeRecorder) {
	proxiers, recorders := map[string]*Proxier{}, map[string]*record.FakeRecorder{}
	for _, node := range []string{"node1", "node2", "node3"} {
		rec := record.NewFakeRecorder(1000)
		p, err := New(testConfig(), node, newFakeKernel().kernel(), rec)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"node1", "node2", "node3"} {
			p.ClusterNodes().Set(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
		}
		proxiers[node], recorders[node] = p, rec
	}
	return proxiers, recorders
}

// The same bad Service on three nodes is two Events, not three; an
// endpoint listed twice in two slices (legal while it moves) is none; and a
// problem is posted once while it lasts, a new one beside it alone.
func TestEventsAreBoundedAcrossNodes(t *testing.T) {
	proxiers, recorders := threeNodes(t)
	bad := servicetest.Service("bad", "10.96.0.61", externalIP("not-an-ip"))
	moving := servicetest.Service("moving", "10.96.0.60")
	for _, p := range proxiers {
		p.Tracker().SetService(bad)
		p.Tracker().SetService(moving)
		p.Tracker().SetEndpointSlice(servicetest.Slice(moving, "moving-a", 8080, "10.244.1.5@node1"))
		p.Tracker().SetEndpointSlice(servicetest.Slice(moving, "moving-b", 8080, "10.244.1.5@node1", "10.244.2.7@node2"))
		p.Sync()
	}
	var events []string
	count := func(text string) int {
		for _, r := range recorders {
			for more := true; more; {
				select {
				case e := <-r.Events:
					events = append(events, e)
				default:
					more = false
				}
			}
		}
		n := 0
		for _, e := range events {
			if strings.Contains(e, text) {
				n++
			}
		}
		return n
	}
	if n := count(`"not-an-ip"`); n != clusterReporters {
		t.Errorf("%d InvalidService Events from three nodes, want %d", n, clusterReporters)
	}
	if n := count("listed twice"); n != 0 {
		t.Errorf("%d Events for an endpoint listed twice, want none", n)
	}
	// A second problem joins the first: only the new one is posted.
	bad2 := bad.DeepCopy()
	bad2.Spec.ExternalIPs = []string{"not-an-ip", "not-an-ip-either"}
	for _, p := range proxiers {
		p.Tracker().SetService(bad2)
		p.Tracker().SetEndpointSlice(servicetest.Slice(bad2, "bad-a", 8080, "10.244.1.5@node1"))
		p.Sync()
		p.RequestFullSync()
		p.Sync()
	}
	if n := count(`"not-an-ip"`); n != clusterReporters {
		t.Errorf("the first problem was posted %d times, want %d (once per designated node)", n, clusterReporters)
	}
	if n := count("not-an-ip-either"); n != clusterReporters {
		t.Errorf("the new problem was posted %d times, want %d", n, clusterReporters)
	}
}
