package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ipvsproxy/ipvsproxy/internal/daemon/kubeapi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// trackedInformer lists and watches one kind into handlers, keeping no cache
// of its own: what it has delivered is what the change tracker holds, which
// it asks (known) to tell an update from an add and, after a relist, which
// objects went. Every Service and EndpointSlice of the cluster is cached on
// every node; a shared informer kept each a second time in its store, under
// a key string, and queued the first list in a buffer per handler that
// never shrank (9 MiB at 50,000 Services, BenchmarkDaemonHeap). Its handlers
// run in the informer's own loop, one object at a time, in the order the
// API server sent them, as a shared informer's do.
type trackedInformer struct {
	lw        cache.ListerWatcher
	example   runtime.Object
	known     knownObjects
	transform cache.TransformFunc
	handlers  []cache.ResourceEventHandler

	mu         sync.Mutex
	watchError cache.WatchErrorHandlerWithContext
	controller cache.Controller // from RunWithContext on
}

// newTrackedInformer watches lw's kind as tweak selects it into handlers,
// each object trimmed by trimCached; known is what the first handler keeps
// of what it was handed (ChangeTracker.ServiceKeys, SliceKeys).
func newTrackedInformer[L runtime.Object](client kubeapi.Client, lw kubeapi.ListWatcher[L], example runtime.Object, tweak func(*metav1.ListOptions), known knownObjects, handlers ...cache.ResourceEventHandler) *trackedInformer {
	return &trackedInformer{lw: listWatcher(client, lw, tweak), example: example, known: known, transform: trimCached, handlers: handlers}
}

// knownObjects is what the handlers hold: the queue lists and gets it by
// key at a relist, the informer gets it by object for each delta
// (ipvsproxy.TrackedKeys).
type knownObjects interface {
	cache.KeyListerGetter
	Get(obj any) (item any, exists bool, err error)
}

// SetWatchErrorHandlerWithContext is called by the reflector after a failed
// list or watch (watchRequiredList). Call before RunWithContext.
func (i *trackedInformer) SetWatchErrorHandlerWithContext(h cache.WatchErrorHandlerWithContext) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.controller != nil {
		return errors.New("the informer has started")
	}
	i.watchError = h
	return nil
}

// HasSynced: the first list was delivered to every handler.
func (i *trackedInformer) HasSynced() bool {
	i.mu.Lock()
	c := i.controller
	i.mu.Unlock()
	return c != nil && c.HasSynced()
}

// LastSyncResourceVersion is the resource version the informer last listed
// or watched at ("" before its first list).
func (i *trackedInformer) LastSyncResourceVersion() string {
	i.mu.Lock()
	c := i.controller
	i.mu.Unlock()
	if c == nil {
		return ""
	}
	return c.LastSyncResourceVersion()
}

// RunWithContext lists, then watches, until ctx ends.
func (i *trackedInformer) RunWithContext(ctx context.Context) {
	i.mu.Lock()
	if i.controller != nil {
		i.mu.Unlock()
		return
	}
	c := cache.New(&cache.Config{
		Queue:                        i.queue(),
		ListerWatcher:                i.lw,
		ObjectType:                   i.example,
		Process:                      i.process,
		WatchErrorHandlerWithContext: i.watchError,
	})
	i.controller = c
	i.mu.Unlock()
	c.RunWithContext(ctx)
}

// queue is the informer's queue: a RealFIFO, as a shared informer has with
// client-go's default InOrderInformers (the deltas in the order they came),
// which asks known what went at a relist.
func (i *trackedInformer) queue() *cache.RealFIFO {
	return cache.NewRealFIFOWithOptions(cache.RealFIFOOptions{
		Name:         fmt.Sprintf("RealFIFO %T", i.example),
		KeyFunction:  cache.MetaNamespaceKeyFunc,
		KnownObjects: i.known,
		Transformer:  i.transform,
	})
}

// process hands one popped delta to every handler, as a shared informer's
// processDeltas would with its store: an object known already is an
// update, one not known an add. The old object is asked before the first
// handler, which records the new one.
func (i *trackedInformer) process(obj any, isInInitialList bool) error {
	deltas, ok := obj.(cache.Deltas)
	if !ok {
		return fmt.Errorf("the informer's queue handed a %T, not deltas", obj)
	}
	for _, d := range deltas {
		switch d.Type {
		case cache.Sync, cache.Replaced, cache.Added, cache.Updated:
			old, exists, err := i.known.Get(d.Object)
			if err != nil {
				return err
			}
			for _, h := range i.handlers {
				if exists {
					h.OnUpdate(old, d.Object)
				} else {
					h.OnAdd(d.Object, isInInitialList)
				}
			}
		case cache.Deleted:
			for _, h := range i.handlers {
				h.OnDelete(d.Object)
			}
		}
	}
	return nil
}
