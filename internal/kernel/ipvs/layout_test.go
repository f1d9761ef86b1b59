package ipvs

import (
	"testing"
	"unsafe"
)

// A node at 10,000 Services holds about 100,000 real servers twice (what the
// build wants, what the full re-check read) and walks both on every re-check:
// a field that widens them costs memory and time at every size. The key is
// hashed and compared in one run of memory when its fields are ordered so.
// A real server is its key (32 bytes with padding that an embedded struct
// keeps) and three 32-bit fields; with ints it was 56.
func TestEntriesStayCompact(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"VirtualServerKey", unsafe.Sizeof(VirtualServerKey{}), 32},
		{"RealServer", unsafe.Sizeof(RealServer{}), 48},
	} {
		if c.got != c.want {
			t.Errorf("%s is %d bytes, want %d", c.name, c.got, c.want)
		}
	}
}
