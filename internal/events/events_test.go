package events

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// write is one call the sink saw.
type write struct {
	patch bool
	event v1.Event
	body  map[string]any // the merge patch, decoded
}

// sink records every write; fail, when set, answers one.
type sink struct {
	mu     sync.Mutex
	writes []write
	fail   func(w write) error
	block  chan struct{} // when set, every write waits for it
}

func (s *sink) Create(e *v1.Event) (*v1.Event, error) { return s.do(write{event: *e}) }

func (s *sink) Patch(e *v1.Event, mergePatch []byte) (*v1.Event, error) {
	w := write{patch: true, event: *e}
	if err := json.Unmarshal(mergePatch, &w.body); err != nil {
		return nil, err
	}
	return s.do(w)
}

func (s *sink) do(w write) (*v1.Event, error) {
	if s.block != nil {
		<-s.block
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes = append(s.writes, w)
	if s.fail != nil {
		if err := s.fail(w); err != nil {
			return nil, err
		}
	}
	out := w.event
	return &out, nil
}

func (s *sink) all() []write {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]write(nil), s.writes...)
}

// flush waits until every Event recorded before it was written: it records
// one about another object and waits for that one (one writer, in order).
func flush(t *testing.T, b *Broadcaster, s *sink) []write {
	t.Helper()
	marker := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "flush", Name: fmt.Sprint(time.Now().UnixNano())}}
	b.Event(marker, v1.EventTypeNormal, "Flush", "flush")
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		w := s.all()
		for _, x := range w {
			if x.event.InvolvedObject.Name == marker.Name {
				var others []write // every flush's marker left out
				for _, y := range w {
					if y.event.Namespace != "flush" {
						others = append(others, y)
					}
				}
				return others
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("the Events were not written within 10 s")
	return nil
}

func service(name string) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: name, UID: types.UID("uid-" + name)}}
}

func newTestBroadcaster(t *testing.T, s Sink, c clock.Clock) *Broadcaster {
	b := newBroadcaster(s, scheme.Scheme, v1.EventSource{Component: "ipvsproxy", Host: "node1"}, c, time.Millisecond)
	t.Cleanup(b.Shutdown)
	return b
}

// An Event is written as client-go's recorder writes it: named after its
// object, in the object's namespace (a Node's in default), with the source
// as component and reporting instance.
func TestAnEventIsWrittenAboutItsObject(t *testing.T) {
	s := &sink{}
	c := clocktesting.NewFakeClock(time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC))
	b := newTestBroadcaster(t, s, c)
	b.Eventf(service("web"), v1.EventTypeWarning, "PortConflict", "port %d taken", 80)
	b.Event(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1", UID: "n1"}}, v1.EventTypeWarning, "APIPermissionMissing", "list nodes")
	w := flush(t, b, s)
	if len(w) != 2 || w[0].patch || w[1].patch {
		t.Fatalf("writes %+v, want two creates", w)
	}
	e := w[0].event
	if e.Namespace != "tenant" || !strings.HasPrefix(e.Name, "web.") || e.InvolvedObject.Kind != "Service" || e.InvolvedObject.UID != "uid-web" ||
		e.Type != v1.EventTypeWarning || e.Reason != "PortConflict" || e.Message != "port 80 taken" || e.Count != 1 ||
		e.Source != (v1.EventSource{Component: "ipvsproxy", Host: "node1"}) || e.ReportingController != "ipvsproxy" || e.ReportingInstance != "node1" ||
		!e.FirstTimestamp.Equal(&e.LastTimestamp) || !e.FirstTimestamp.Time.Equal(c.Now()) {
		t.Errorf("Service Event %+v", e)
	}
	if n := w[1].event; n.Namespace != metav1.NamespaceDefault || n.InvolvedObject.Kind != "Node" {
		t.Errorf("Node Event in %q about %+v, want default and the Node", n.Namespace, n.InvolvedObject)
	}
}

// A repeat raises the count of the Event already written, by a merge patch
// of what changes; once that Event is gone (they expire), it is written anew
// with the count it has reached.
func TestARepeatRaisesTheCount(t *testing.T) {
	s := &sink{}
	c := clocktesting.NewFakeClock(time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC))
	b := newTestBroadcaster(t, s, c)
	b.Event(service("web"), v1.EventTypeWarning, "SyncFailed", "no route")
	flush(t, b, s)
	c.Step(time.Minute)
	b.Event(service("web"), v1.EventTypeWarning, "SyncFailed", "no route")
	w := flush(t, b, s)
	if len(w) != 2 || !w[1].patch {
		t.Fatalf("writes %+v, want a create and a patch", w)
	}
	first, repeat := w[0].event, w[1]
	if repeat.event.Name != first.Name || repeat.event.Namespace != first.Namespace {
		t.Errorf("the repeat patched %s/%s, want %s/%s", repeat.event.Namespace, repeat.event.Name, first.Namespace, first.Name)
	}
	want := map[string]any{"count": float64(2), "lastTimestamp": "2026-12-04T12:01:00Z", "message": "no route"}
	if fmt.Sprint(repeat.body) != fmt.Sprint(want) {
		t.Errorf("merge patch %v, want %v", repeat.body, want)
	}

	s.mu.Lock()
	s.fail = func(w write) error {
		if w.patch {
			return apierrors.NewNotFound(schema.GroupResource{Resource: "events"}, w.event.Name)
		}
		return nil
	}
	s.mu.Unlock()
	b.Event(service("web"), v1.EventTypeWarning, "SyncFailed", "no route")
	w = flush(t, b, s)
	if len(w) != 4 || !w[2].patch || w[3].patch || w[3].event.Count != 3 || !w[3].event.FirstTimestamp.Equal(&first.FirstTimestamp) {
		t.Fatalf("after the Event expired: %+v, want a patch refused and a create with count 3", w[2:])
	}
}

// Ten different messages of one reason about one object become one Event
// that says it combines them; its later messages raise that Event's count.
func TestManyMessagesOfOneKindAreCombined(t *testing.T) {
	s := &sink{}
	b := newTestBroadcaster(t, s, clocktesting.NewFakeClock(time.Now()))
	for i := range 12 {
		b.Eventf(service("web"), v1.EventTypeWarning, "SyncFailed", "attempt %d", i)
	}
	w := flush(t, b, s)
	if len(w) != 12 {
		t.Fatalf("%d writes, want 12", len(w))
	}
	for i := range 9 {
		if w[i].patch || w[i].event.Message != fmt.Sprintf("attempt %d", i) {
			t.Errorf("write %d: %+v, want its own Event", i, w[i])
		}
	}
	if w[9].patch || w[9].event.Message != combinedPrefix+"attempt 9" {
		t.Errorf("the tenth: %+v, want a combined Event", w[9])
	}
	for i := 10; i < 12; i++ {
		if !w[i].patch || w[i].event.Name != w[9].event.Name || w[i].body["message"] != fmt.Sprintf("%sattempt %d", combinedPrefix, i) {
			t.Errorf("write %d: %+v, want a patch of the combined Event", i, w[i])
		}
	}
	// Remembering the messages of one kind stops at what combining needs,
	// however many different ones come.
	for i := range 1000 {
		b.Eventf(service("web"), v1.EventTypeWarning, "SyncFailed", "attempt %d", 100+i)
	}
	flush(t, b, s)
	kind := kindOf(&v1.Event{Type: v1.EventTypeWarning, Reason: "SyncFailed",
		InvolvedObject: v1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: "tenant", Name: "web", UID: "uid-web"}})
	if n := len(b.similarOf(kind).messages); n > similarMax {
		t.Errorf("%d messages remembered, want at most %d", n, similarMax)
	}
}

// One object gets 25 Events at once and then one every five minutes; others
// are not held back by it.
func TestEventsAboutOneObjectAreLimited(t *testing.T) {
	s := &sink{}
	c := clocktesting.NewFakeClock(time.Now())
	b := newTestBroadcaster(t, s, c)
	for i := range 40 {
		b.Event(service("noisy"), v1.EventTypeWarning, fmt.Sprintf("Reason%d", i), "m")
	}
	b.Event(service("quiet"), v1.EventTypeWarning, "PortConflict", "m")
	w := flush(t, b, s)
	if len(w) != spamBurst+1 || w[spamBurst].event.InvolvedObject.Name != "quiet" {
		t.Fatalf("%d writes (last %+v), want %d about the noisy Service and the quiet one's", len(w), w[len(w)-1].event.InvolvedObject, spamBurst)
	}
	c.Step(spamInterval)
	b.Event(service("noisy"), v1.EventTypeWarning, "Later", "m")
	b.Event(service("noisy"), v1.EventTypeWarning, "Later2", "m")
	w = flush(t, b, s)
	if len(w) != spamBurst+2 || w[spamBurst+1].event.Reason != "Later" {
		t.Fatalf("after five minutes: %d writes, want one more about the noisy Service", len(w))
	}
}

// A write the API server refuses is not tried again; one that did not reach
// it is, a bounded number of times.
func TestOnlyUnreachedWritesAreRetried(t *testing.T) {
	s := &sink{fail: func(w write) error {
		if w.event.Reason == "Refused" {
			return apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, w.event.Name, errors.New("no"))
		}
		if w.event.Reason == "Unreached" {
			return errors.New("connection refused")
		}
		return nil
	}}
	b := newTestBroadcaster(t, s, clock.RealClock{})
	b.Event(service("a"), v1.EventTypeWarning, "Refused", "m")
	b.Event(service("b"), v1.EventTypeWarning, "Unreached", "m")
	w := flush(t, b, s)
	count := map[string]int{}
	for _, x := range w {
		count[x.event.Reason]++
	}
	if count["Refused"] != 1 || count["Unreached"] != maxTries {
		t.Errorf("tries %v, want 1 refused and %d unreached", count, maxTries)
	}
}

// Recording never waits for the API server: past the queue's length Events
// are dropped, and an Event of no known type or about an object the scheme
// cannot name is not recorded.
func TestRecordingNeverBlocks(t *testing.T) {
	s := &sink{block: make(chan struct{})}
	b := newTestBroadcaster(t, s, clock.RealClock{})
	done := make(chan struct{})
	go func() {
		for i := range queueLength + 100 {
			b.Event(service(fmt.Sprint("svc", i)), v1.EventTypeWarning, "SyncFailed", "m")
		}
		b.Event(service("x"), "Bogus", "SyncFailed", "m")
		b.Event(&unnamed{}, v1.EventTypeWarning, "SyncFailed", "m")
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("recording blocked behind a sink that does not answer")
	}
	close(s.block)
	// The queue is full until the writer takes from it: the marker of flush
	// must find room.
	for deadline := time.Now().Add(10 * time.Second); len(s.all()) < queueLength && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	w := flush(t, b, s)
	if len(w) > queueLength+1 || len(w) < queueLength {
		t.Errorf("%d written, want the %d queued (and the one in hand)", len(w), queueLength)
	}
	for _, x := range w {
		if x.event.Type != v1.EventTypeWarning || x.event.InvolvedObject.Name == "x" {
			t.Errorf("wrote %+v", x.event)
		}
	}
}

func (b *Broadcaster) similarOf(kind string) *similarEvents {
	v, ok := b.similar.Get(kind)
	if !ok {
		return &similarEvents{}
	}
	return v.(*similarEvents)
}

// unnamed is an object no scheme knows.
type unnamed struct{ metav1.ObjectMeta }

func (u *unnamed) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (u *unnamed) DeepCopyObject() runtime.Object   { return u }
