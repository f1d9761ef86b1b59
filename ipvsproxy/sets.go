package ipvsproxy

import (
	"github.com/ipvsproxy/ipvsproxy/ipset"
)

// SetEntry is one member the desired state wants in one set.
type SetEntry struct {
	Set   string
	Entry ipset.Entry
}

// Key is a comparable identity of the entry within its set.
func (e SetEntry) Key() SetEntryKey {
	return SetEntryKey{Set: e.Set, Entry: e.Entry}
}

type SetEntryKey struct {
	Set   string
	Entry ipset.Entry
}
