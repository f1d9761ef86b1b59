// Package events writes the daemon's Events (core/v1) to the API server, as
// client-go's record package does for kube-proxy's own components: without
// blocking the caller, a repeat of an Event as a higher count on the one
// already written, many Events about one object that differ only in their
// message combined into one, and at most a burst of 25 per object and then
// one every five minutes.
//
// It stands in for client-go's tools/record, whose Event correlator patches
// repeats with a strategic merge patch: that links the strategic-merge
// machinery with kube-openapi's OpenAPI models (gnostic), about 1.5 MB of
// code and their protobuf descriptors, paid in every node's memory
// (docs/performance.md). A repeat here is a JSON merge patch of the fields
// that change, which the API server applies to Events the same way.
package events

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"golang.org/x/time/rate"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/reference"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/lru"
)

// Recorder records an Event about an object. client-go's
// record.EventRecorder (and its FakeRecorder, in tests) is one.
type Recorder interface {
	Event(object runtime.Object, eventtype, reason, message string)
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any)
}

// Sink is where Events are written: the API server's events resource.
type Sink interface {
	Create(e *v1.Event) (*v1.Event, error)
	// Patch applies a JSON merge patch to the Event e names.
	Patch(e *v1.Event, mergePatch []byte) (*v1.Event, error)
}

// The limits client-go's recorder keeps (tools/record), so that an operator
// sees the same number of Events as from kube-proxy.
const (
	queueLength     = 1000             // Events waiting to be written; more are dropped
	cacheSize       = 4096             // Events and objects remembered for repeats and limits
	spamBurst       = 25               // Events about one object at once
	spamInterval    = 5 * time.Minute  // then one per interval
	similarMax      = 10               // different messages of one kind before they are combined
	similarInterval = 10 * time.Minute // within this long
	maxTries        = 12               // writes of one Event while the API server cannot be reached
	retryInterval   = 10 * time.Second
	combinedPrefix  = "(combined from similar events): "
)

// Broadcaster queues Events and writes them to a Sink from one goroutine.
type Broadcaster struct {
	sink   Sink
	scheme *runtime.Scheme
	source v1.EventSource
	clock  clock.Clock
	retry  time.Duration

	queue chan *v1.Event
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once

	// Owned by the writing goroutine.
	written *lru.Cache // kind of Event -> writtenEvent
	similar *lru.Cache // similarKey -> *similarEvents
	limits  *lru.Cache // object key -> *rate.Limiter
}

// New starts a Broadcaster writing to sink; Shutdown stops it. scheme names
// the objects Events are about; source is the component and node.
func New(sink Sink, scheme *runtime.Scheme, source v1.EventSource) *Broadcaster {
	return newBroadcaster(sink, scheme, source, clock.RealClock{}, retryInterval)
}

func newBroadcaster(sink Sink, scheme *runtime.Scheme, source v1.EventSource, c clock.Clock, retry time.Duration) *Broadcaster {
	b := &Broadcaster{
		sink: sink, scheme: scheme, source: source, clock: c, retry: retry,
		queue:   make(chan *v1.Event, queueLength),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		written: lru.New(cacheSize),
		similar: lru.New(cacheSize),
		limits:  lru.New(cacheSize),
	}
	go b.run()
	return b
}

// Shutdown stops writing; Events still queued are dropped.
func (b *Broadcaster) Shutdown() {
	b.once.Do(func() { close(b.stop) })
	<-b.done
}

// Event queues an Event about object; it never blocks.
func (b *Broadcaster) Event(object runtime.Object, eventtype, reason, message string) {
	ref, err := reference.GetReference(b.scheme, object)
	if err != nil {
		klog.ErrorS(err, "Could not name the object of an Event; not recording it", "reason", reason, "message", message)
		return
	}
	if eventtype != v1.EventTypeNormal && eventtype != v1.EventTypeWarning {
		klog.ErrorS(nil, "Event type must be Normal or Warning; not recording it", "type", eventtype, "reason", reason)
		return
	}
	now := metav1.NewTime(b.clock.Now())
	namespace := ref.Namespace
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	e := &v1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%v.%x", ref.Name, now.UnixNano()), Namespace: namespace},
		InvolvedObject:      *ref,
		Reason:              reason,
		Message:             message,
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		Type:                eventtype,
		Source:              b.source,
		ReportingController: b.source.Component,
		ReportingInstance:   b.source.Host,
	}
	select {
	case <-b.stop:
	case b.queue <- e:
	default:
		klog.ErrorS(nil, "Too many Events queued; dropping one", "object", klog.KRef(ref.Namespace, ref.Name), "reason", reason)
	}
}

// Eventf is Event with a formatted message.
func (b *Broadcaster) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	b.Event(object, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

func (b *Broadcaster) run() {
	defer close(b.done)
	for {
		select {
		case <-b.stop:
			return
		case e := <-b.queue:
			b.write(e)
		}
	}
}

// objectKey names the object an Event is about.
func objectKey(e *v1.Event) string {
	o := e.InvolvedObject
	return fmt.Sprintf("%s/%s/%s/%s/%s/%s", o.Kind, o.Namespace, o.Name, o.UID, o.APIVersion, o.FieldPath)
}

// kindOf names the Events about one object of one type and reason, which
// are combined when their messages are many.
func kindOf(e *v1.Event) string { return objectKey(e) + "/" + e.Type + "/" + e.Reason }

// writtenEvent is what a repeat needs of the Event it repeats: not the
// object the API server returned, whose managed fields would be kept too.
type writtenEvent struct {
	name, namespace string
	first           metav1.Time
	count           int32
}

type similarEvents struct {
	messages map[string]bool
	last     time.Time
}

// write writes e, or the repeat it is, unless its object is over its limit.
func (b *Broadcaster) write(e *v1.Event) {
	// client-go's spam filter limits one object's Events of one type.
	spamKey := objectKey(e) + "/" + e.Type
	limiter, ok := b.limits.Get(spamKey)
	if !ok {
		limiter = rate.NewLimiter(rate.Every(spamInterval), spamBurst)
		b.limits.Add(spamKey, limiter)
	}
	if !limiter.(*rate.Limiter).AllowN(b.clock.Now(), 1) {
		klog.V(4).InfoS("Too many Events about one object; dropping one", "object", spamKey, "reason", e.Reason)
		return
	}

	// Many different messages of one kind about one object become one
	// Event, as client-go's aggregator makes them.
	kind := kindOf(e)
	now := e.LastTimestamp.Time
	s, _ := b.similar.Get(kind)
	similar, _ := s.(*similarEvents)
	if similar == nil || now.Sub(similar.last) > similarInterval {
		similar = &similarEvents{messages: map[string]bool{}}
		b.similar.Add(kind, similar)
	}
	similar.last = now
	if len(similar.messages) < similarMax { // the set grows no larger than it needs to
		similar.messages[e.Message] = true
	}
	if len(similar.messages) >= similarMax {
		e.Message = combinedPrefix + e.Message
		kind += "/combined"
	} else {
		kind += "/" + e.Message
	}

	prev, repeat := b.written.Get(kind)
	if repeat {
		old := prev.(writtenEvent)
		e.Name, e.Namespace = old.name, old.namespace
		e.FirstTimestamp = old.first
		e.Count = old.count + 1
	}
	for try := 1; ; try++ {
		written, err := b.send(e, repeat)
		if err == nil {
			b.written.Add(kind, writtenEvent{name: written.Name, namespace: written.Namespace, first: written.FirstTimestamp, count: written.Count})
			return
		}
		if !retryable(err) {
			klog.ErrorS(err, "The API server refused an Event; not retrying", "event", klog.KRef(e.Namespace, e.Name), "reason", e.Reason)
			return
		}
		if try == maxTries {
			klog.ErrorS(err, "Could not write an Event; giving up", "event", klog.KRef(e.Namespace, e.Name), "reason", e.Reason, "tries", try)
			return
		}
		klog.ErrorS(err, "Could not write an Event; retrying", "event", klog.KRef(e.Namespace, e.Name), "reason", e.Reason)
		// The first retry comes at a random point of the interval, so that
		// every node's daemons do not come back at once.
		wait := b.retry
		if try == 1 {
			wait = time.Duration(float64(b.retry) * rand.Float64())
		}
		select {
		case <-b.stop:
			return
		case <-b.clock.After(wait):
		}
	}
}

// send patches the Event a repeat repeats, or creates e: also when the
// Event repeated is gone (Events expire after an hour).
func (b *Broadcaster) send(e *v1.Event, repeat bool) (*v1.Event, error) {
	if repeat {
		patch, err := json.Marshal(repeatPatch{Count: e.Count, LastTimestamp: e.LastTimestamp, Message: e.Message})
		if err != nil {
			return nil, err
		}
		written, err := b.sink.Patch(e, patch)
		if !apierrors.IsNotFound(err) {
			return written, err
		}
	}
	e.ResourceVersion = ""
	return b.sink.Create(e)
}

// repeatPatch is what a repeat changes of the Event it repeats.
type repeatPatch struct {
	Count         int32       `json:"count"`
	LastTimestamp metav1.Time `json:"lastTimestamp"`
	Message       string      `json:"message"`
}

// retryable is whether writing again can succeed: the API server could not
// be reached, rather than refused the Event.
func retryable(err error) bool {
	var status apierrors.APIStatus
	var construction *rest.RequestConstructionError
	return !errors.As(err, &status) && !errors.As(err, &construction)
}

// Discard is a Recorder that records nothing.
type Discard struct{}

func (Discard) Event(runtime.Object, string, string, string)          {}
func (Discard) Eventf(runtime.Object, string, string, string, ...any) {}
