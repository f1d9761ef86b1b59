package ipset

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Fake is an in-memory Interface that applies the kernel's rules: names and
// entries are unique, names are at most 31 bytes, entries must fit their
// set's type and family (checkEntry, shared with Kernel), a hash set holds at
// most maxelem entries (65536 by default), a busy set cannot be destroyed, and only
// sets of the same type and family can be swapped (IPSET_ERR_TYPE_MISMATCH).
// It is safe for concurrent use.
type Fake struct {
	mu     sync.Mutex
	sets   map[string]*fakeSet
	writes int
}

type fakeSet struct {
	set     Set
	entries map[string]Entry // by Entry.String(set.Type)
	busy    bool
}

var _ Interface = (*Fake)(nil)

// NewFake returns a Fake with no sets.
func NewFake() *Fake {
	return &Fake{sets: map[string]*fakeSet{}}
}

// MarkBusy makes DestroySet fail with ErrBusy, as when an iptables rule
// references the set (-m set --match-set).
func (f *Fake) MarkBusy(name string, busy bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.sets[name]; ok {
		s.busy = busy
	}
}

// Writes counts calls of the mutating methods (create, destroy, add, delete,
// swap), failed ones included: each would have been a netlink request.
func (f *Fake) Writes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.writes
}

func (f *Fake) Sets() ([]Set, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var sets []Set
	for _, name := range f.names() {
		sets = append(sets, f.sets[name].set)
	}
	return sets, nil
}

func (f *Fake) CreateSet(s Set) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes++
	s, err := checkSet(s)
	if err != nil {
		return fmt.Errorf("create ip set: %w", err)
	}
	if _, ok := f.sets[s.Name]; ok {
		return fmt.Errorf("create %s set %s: %w", s.Type, s.Name, ErrExists)
	}
	f.sets[s.Name] = &fakeSet{set: s, entries: map[string]Entry{}}
	return nil
}

func (f *Fake) DestroySet(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes++
	s, ok := f.sets[name]
	switch {
	case !ok:
		return fmt.Errorf("destroy ip set %s: %w", name, ErrNotFound)
	case s.busy:
		return fmt.Errorf("destroy ip set %s: %w", name, ErrBusy)
	}
	delete(f.sets, name)
	return nil
}

func (f *Fake) Entries(name string) ([]Entry, error) {
	entries := []Entry{}
	if err := f.EachEntry(name, func(e Entry) { entries = append(entries, e) }); err != nil {
		return nil, err
	}
	return entries, nil
}

// EachEntry calls fn in no particular order, as the kernel lists a hash set
// in its buckets' order (and kube-proxy's fake in its map's): sorting 30,000
// members at each listing was most of this fake's cost in the benchmarks, a
// cost no kernel has.
func (f *Fake) EachEntry(name string, fn func(Entry)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.sets[name]
	if !ok {
		return fmt.Errorf("list entries of ip set %s: %w", name, ErrNotFound)
	}
	for _, e := range s.entries {
		fn(e)
	}
	return nil
}

func (f *Fake) AddEntry(name string, e Entry) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes++
	s, ok := f.sets[name]
	if !ok {
		return fmt.Errorf("add entry in ip set %s: %w", name, ErrNotFound)
	}
	e, err := checkEntry(s.set, e)
	if err != nil {
		return fmt.Errorf("add: %w", err)
	}
	key := e.String(s.set.Type)
	if _, ok := s.entries[key]; ok {
		return fmt.Errorf("add entry %s in %s set %s: %w", key, s.set.Type, name, ErrExists)
	}
	if s.set.MaxElem > 0 && len(s.entries) >= int(s.set.MaxElem) {
		return fmt.Errorf("add entry %s in %s set %s of maxelem %d: %w", key, s.set.Type, name, s.set.MaxElem, ErrFull)
	}
	s.entries[key] = e
	return nil
}

func (f *Fake) DeleteEntry(name string, e Entry) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes++
	s, ok := f.sets[name]
	if !ok {
		return fmt.Errorf("delete entry in ip set %s: %w", name, ErrNotFound)
	}
	e, err := checkEntry(s.set, e)
	if err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	key := e.String(s.set.Type)
	if _, ok := s.entries[key]; !ok {
		return fmt.Errorf("delete entry %s in %s set %s: %w", key, s.set.Type, name, ErrNotFound)
	}
	delete(s.entries, key)
	return nil
}

// SwapSets exchanges contents; names and references (busy) stay with the
// names, as in the kernel's ip_set_swap.
func (f *Fake) SwapSets(a, b string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes++
	sa, okA := f.sets[a]
	sb, okB := f.sets[b]
	switch {
	case !okA || !okB:
		return fmt.Errorf("swap ip sets %s and %s: %w", a, b, ErrNotFound)
	case sa.set.Type != sb.set.Type || sa.set.Family != sb.set.Family:
		return fmt.Errorf("swap ip sets %s (%s %s) and %s (%s %s): type mismatch: %w",
			a, sa.set.Type, sa.set.Family, b, sb.set.Type, sb.set.Family, ErrInvalidEntry)
	}
	sa.entries, sb.entries = sb.entries, sa.entries
	return nil
}

// Dump renders every set and its entries, sorted, one entry per line:
//
//	set KUBE-CLUSTER-IP hash:ip,port inet
//	  10.96.0.10,tcp:80
func (f *Fake) Dump() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	for _, name := range f.names() {
		s := f.sets[name]
		fmt.Fprintf(&b, "set %s %s", name, s.set.Type)
		if s.set.Family != "" {
			fmt.Fprintf(&b, " %s", s.set.Family)
		}
		b.WriteString("\n")
		for _, key := range sortedKeys(s.entries) {
			fmt.Fprintf(&b, "  %s\n", key)
		}
	}
	return b.String()
}

func (f *Fake) names() []string {
	names := make([]string, 0, len(f.sets))
	for name := range f.sets {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func sortedKeys(m map[string]Entry) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
