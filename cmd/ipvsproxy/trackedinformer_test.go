package main

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// A relist (the watch broke and the reflector listed again) updates what the
// new list holds and deletes from the tracker what it no longer does: the
// informer's queue asks the tracker what was delivered, as a shared
// informer's asks its store. Every handler sees the same events.
func TestTrackedInformerRelistDeletesWhatWentAndUpdatesTheRest(t *testing.T) {
	tracker := ipvsproxy.NewChangeTracker("node1", nil)
	var events []string
	name := func(obj any) string {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			return "tombstone " + tomb.Key
		}
		return obj.(*ipvsproxy.Service).Name
	}
	record := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { events = append(events, "add "+name(obj)) },
		UpdateFunc: func(old, obj any) { events = append(events, "update "+name(old)+" to "+name(obj)) },
		DeleteFunc: func(obj any) { events = append(events, "delete "+name(obj)) },
	}
	informer := &trackedInformer{example: &v1.Service{}, known: tracker.ServiceKeys(), transform: trimCached,
		handlers: []cache.ResourceEventHandler{tracker.ServiceHandler(), record}}
	queue := informer.queue()
	service := func(name, clusterIP string) *v1.Service {
		return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: v1.ServiceSpec{ClusterIP: clusterIP, ClusterIPs: []string{clusterIP}, Ports: []v1.ServicePort{{Port: 80, Protocol: v1.ProtocolTCP}}}}
	}
	clusterIPs := func(n string) []string {
		svc, _ := tracker.Input(types.NamespacedName{Namespace: "default", Name: n})
		if svc == nil {
			return nil
		}
		return svc.Spec.ClusterIPs
	}

	if err := queue.Replace([]any{service("web", "10.96.0.20"), service("db", "10.96.0.21")}, "1"); err != nil {
		t.Fatal(err)
	}
	popDeltas(t, queue, 2, informer.process)
	if want := []string{"add web", "add db"}; !slices.Equal(events, want) {
		t.Errorf("first list: handlers saw %q, want %q", events, want)
	}
	if !queue.HasSynced() {
		t.Error("the first list was delivered, but the informer has not synced")
	}

	events = nil
	if err := queue.Replace([]any{service("web", "10.96.0.30")}, "2"); err != nil {
		t.Fatal(err)
	}
	popDeltas(t, queue, 2, informer.process)
	slices.Sort(events) // the queue hands over what went before what stayed
	if want := []string{"delete tombstone default/db", "update web to web"}; !slices.Equal(events, want) {
		t.Errorf("relist: handlers saw %q, want %q", events, want)
	}
	if got := clusterIPs("web"); !slices.Equal(got, []string{"10.96.0.30"}) {
		t.Errorf("after the relist the tracker holds web at %v, want 10.96.0.30", got)
	}
	if got := clusterIPs("db"); got != nil {
		t.Errorf("after the relist the tracker still holds db at %v", got)
	}
	if keys := tracker.ServiceKeys().ListKeys(); !slices.Equal(keys, []string{"default/web"}) {
		t.Errorf("the tracker lists %v, want default/web alone", keys)
	}
}

// popDeltas hands n deltas of queue to process, failing (rather than
// hanging) when fewer come within a few seconds.
func popDeltas(t *testing.T, queue *cache.RealFIFO, n int, process cache.PopProcessFunc) {
	t.Helper()
	timer := time.AfterFunc(5*time.Second, queue.Close)
	defer timer.Stop()
	for k := 0; k < n; k++ {
		if _, err := queue.Pop(process); err != nil {
			t.Fatal(fmt.Errorf("delta %d of %d: %w", k+1, n, err))
		}
	}
}
