package netif

import "errors"

var (
	// ErrNotFound: the link or address does not exist.
	ErrNotFound = errors.New("not found")
	// ErrExists: the address is already bound, or a route to the prefix
	// is already in table local.
	ErrExists = errors.New("already exists")
	// ErrUnsupported: the kernel has no dummy driver.
	ErrUnsupported = errors.New("dummy interfaces not supported")
)
