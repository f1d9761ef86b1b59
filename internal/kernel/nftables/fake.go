package nftables

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Fake is nftables in memory: tables by family and name, each deleted
// whole, ErrNotFound for one that is not there, as the kernel answers.
type Fake struct {
	mu     sync.Mutex
	tables map[Family]map[string]bool
}

var _ Interface = (*Fake)(nil)

// NewFake returns a Fake without tables.
func NewFake() *Fake { return &Fake{tables: map[Family]map[string]bool{}} }

// AddTable creates a table, as another program would.
func (f *Fake) AddTable(family Family, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tables[family] == nil {
		f.tables[family] = map[string]bool{}
	}
	f.tables[family][name] = true
}

func (f *Fake) DeleteTable(family Family, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := nfproto[family]; !ok {
		return fmt.Errorf("delete table %s %s: unknown family", family, name)
	}
	if !f.tables[family][name] {
		return fmt.Errorf("delete table %s %s: %w", family, name, ErrNotFound)
	}
	delete(f.tables[family], name)
	return nil
}

// Dump lists the tables as `nft list tables` does, sorted.
func (f *Fake) Dump() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for fam, names := range f.tables {
		for n := range names {
			out = append(out, fmt.Sprintf("table %s %s", fam, n))
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}
