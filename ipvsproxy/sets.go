package ipvsproxy

import (
	"github.com/ipvsproxy/ipvsproxy/ipset"
)

// SetEntry is one member the desired state wants in one set.
type SetEntry struct {
	Set   string
	Entry ipset.Entry
}

// key is a comparable identity of the entry within its set.
func (e SetEntry) key() setEntryKey {
	return setEntryKey{set: e.Set, entry: e.Entry}
}

type setEntryKey struct {
	set   string
	entry ipset.Entry
}
