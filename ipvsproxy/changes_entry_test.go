package ipvsproxy

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
)

// A Service's entry in the tracker holds the Service, what the cluster-IP
// index recorded of it and its slices: each comes and goes on its own (the
// slices may arrive before the Service and outlive it), and the entry goes
// when none is left.
func TestTrackerEntryKeepsServiceIndexAndSlicesApart(t *testing.T) {
	tr := NewChangeTracker(servicetest.ThisNode, func() {})
	web := servicetest.Service("web", "10.96.0.10")
	name := types.NamespacedName{Namespace: web.Namespace, Name: web.Name}
	slices := func() int { return len(tr.EndpointSlicesOf(name)) }

	tr.SetEndpointSlice(servicetest.Slice(web, "web-a", 8080, "10.244.1.5@node1"))
	if svc, got := tr.Input(name); svc != nil || len(got) != 1 {
		t.Fatalf("a slice before its Service: Service %v and %d slices, want none and 1", svc, len(got))
	}
	tr.SetService(web)
	if indexed, current := tr.indexService(name); indexed != nil || current == nil {
		t.Fatalf("first index: indexed %v, current %v", indexed, current)
	}
	tr.DeleteService(web.Namespace, web.Name)
	if tr.Service(name) != nil || slices() != 1 {
		t.Fatalf("Service deleted: it is still %v, or its slice went (%d)", tr.Service(name), slices())
	}
	if indexed, current := tr.indexService(name); indexed == nil || current != nil {
		t.Fatalf("index after the delete: indexed %v, current %v; want the old one and none", indexed, current)
	}
	if indexed, _ := tr.indexService(name); indexed != nil {
		t.Fatalf("the index forgot the Service, but the tracker still gives %v", indexed)
	}
	if slices() != 1 {
		t.Fatalf("the index forgetting the Service dropped its slice")
	}
	tr.DeleteSlice(web.Namespace, "web-a")
	if n := len(tr.services); n != 0 {
		t.Fatalf("nothing is left of web, yet the tracker keeps %d entries: %+v", n, tr.services)
	}
}
