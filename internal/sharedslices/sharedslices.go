// Package sharedslices lets holders of equal slices share one copy: the
// informer caches keep every EndpointSlice of the cluster on every node, and
// the slices of one Service list the same ports. The table holds each copy
// weakly, so a copy no holder keeps is collected as if the table did not
// exist. It only shares memory; nothing reads the kernel here.
package sharedslices

import (
	"hash/maphash"
	"slices"
	"sync"
	"unsafe"
	"weak"
)

// Table shares slices of T whose elements are equal. The zero Table is not
// usable: use New.
type Table[T comparable] struct {
	// Min is the shortest slice shared; shorter ones are returned as they
	// are (their copies cost less than the lookup's table entry).
	Min int

	mu    sync.Mutex
	seed  maphash.Seed
	lists map[uint64][]shared[T]
	// added counts the copies added since the last sweep.
	added int
}

// shared is one shared copy: its first element, held weakly, and its
// length.
type shared[T any] struct {
	first weak.Pointer[T]
	n     int
}

// sweepEvery is how many additions pass between two sweeps of the copies
// collected.
const sweepEvery = 1024

// New returns a Table sharing slices of at least min elements.
func New[T comparable](min int) *Table[T] {
	return &Table[T]{Min: min, seed: maphash.MakeSeed(), lists: map[uint64][]shared[T]{}}
}

// Share returns a slice equal to list that others may hold too: a copy
// already shared, or list itself (clipped to its length) when it is the
// first. Neither the result nor list may be written afterwards.
func (t *Table[T]) Share(list []T) []T {
	if len(list) < t.Min || len(list) == 0 {
		return list
	}
	var h maphash.Hash
	h.SetSeed(t.seed)
	for _, e := range list {
		maphash.WriteComparable(&h, e)
	}
	sum := h.Sum64()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.lists[sum] {
		if s.n != len(list) {
			continue
		}
		if first := s.first.Value(); first != nil {
			// The copy is whole while its first element is reachable: it
			// is one allocation of s.n elements.
			if kept := unsafe.Slice(first, s.n); slices.Equal(kept, list) {
				return kept
			}
		}
	}
	list = slices.Clip(list)
	t.lists[sum] = append(t.lists[sum], shared[T]{first: weak.Make(&list[0]), n: len(list)})
	if t.added++; t.added >= sweepEvery {
		t.sweep()
	}
	return list
}

// sweep drops the copies no holder keeps any more.
func (t *Table[T]) sweep() {
	t.added = 0
	for sum, ss := range t.lists {
		ss = slices.DeleteFunc(ss, func(s shared[T]) bool { return s.first.Value() == nil })
		if len(ss) == 0 {
			delete(t.lists, sum)
		} else {
			t.lists[sum] = ss
		}
	}
}

// Len is how many copies the table holds, collected ones included until
// the next sweep.
func (t *Table[T]) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, ss := range t.lists {
		n += len(ss)
	}
	return n
}
