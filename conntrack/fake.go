package conntrack

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Fake is an in-memory conntrack table. Like the kernel's, it holds at most
// one flow per original tuple. It is safe for concurrent use.
type Fake struct {
	mu      sync.Mutex
	flows   map[string]Flow // by original tuple
	deleted int
	closed  bool
}

var _ Interface = (*Fake)(nil)

// NewFake returns an empty table.
func NewFake() *Fake {
	return &Fake{flows: map[string]Flow{}}
}

// AddFlow adds a flow, as the kernel does when a packet starts a connection;
// a flow with the same original tuple is refused.
func (f *Fake) AddFlow(flow Flow) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := origTuple(flow)
	if _, ok := f.flows[key]; ok {
		return fmt.Errorf("add conntrack flow %s: original tuple already tracked", flow)
	}
	f.flows[key] = flow
	return nil
}

// Deleted counts the flows DeleteFlows removed so far.
func (f *Fake) Deleted() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.deleted
}

func (f *Fake) Flows(family int) ([]Flow, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.usable(); err != nil {
		return nil, err
	}
	if family != 4 && family != 6 {
		return nil, fmt.Errorf("list conntrack flows: address family %d is neither 4 nor 6", family)
	}
	var out []Flow
	for _, key := range f.keys() {
		if flowFamily(f.flows[key]) == family {
			out = append(out, f.flows[key])
		}
	}
	return out, nil
}

func (f *Fake) DeleteFlows(filters ...Filter) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.usable(); err != nil {
		return 0, err
	}
	idx := newFilterIndex(filters)
	n := 0
	for key, flow := range f.flows {
		if idx.matches(flow) {
			delete(f.flows, key)
			n++
		}
	}
	f.deleted += n
	return n, nil
}

func (f *Fake) DeleteFlowsMatching(family int, protocol uint8, stale func(Flow) bool) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.usable(); err != nil {
		return 0, err
	}
	if family != 4 && family != 6 {
		return 0, fmt.Errorf("delete conntrack flows: address family %d is neither 4 nor 6", family)
	}
	n := 0
	for key, flow := range f.flows {
		if flowFamily(flow) == family && (protocol == 0 || flow.Protocol == protocol) && stale(flow) {
			delete(f.flows, key)
			n++
		}
	}
	f.deleted += n
	return n, nil
}

func (f *Fake) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

// Dump lists the flows, one per line, sorted.
func (f *Fake) Dump() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	lines := make([]string, 0, len(f.flows))
	for _, flow := range f.flows {
		lines = append(lines, flow.String()+"\n")
	}
	sort.Strings(lines)
	return strings.Join(lines, "")
}

func (f *Fake) usable() error {
	if f.closed {
		return errors.New("conntrack table closed")
	}
	return nil
}

func (f *Fake) keys() []string {
	keys := make([]string, 0, len(f.flows))
	for k := range f.flows {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func origTuple(flow Flow) string {
	return fmt.Sprintf("%d %s %s", flow.Protocol, flow.OrigSrc, flow.OrigDst)
}
