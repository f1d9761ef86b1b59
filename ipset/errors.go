package ipset

import "errors"

var (
	// ErrNotFound: the set or entry does not exist.
	ErrNotFound = errors.New("not found")
	// ErrExists: the set or entry already exists.
	ErrExists = errors.New("already exists")
	// ErrBusy: the set is referenced (by an iptables rule) and cannot be destroyed.
	ErrBusy = errors.New("set in use")
	// ErrInvalidEntry: the entry does not fit the set's type or family.
	ErrInvalidEntry = errors.New("entry does not fit set")
	// ErrFull: the set holds maxelem entries (IPSET_ERR_HASH_FULL).
	ErrFull = errors.New("set is full")
	// ErrUnsupported: the kernel lacks ip_set or the set type.
	ErrUnsupported = errors.New("ipset not supported")
)
