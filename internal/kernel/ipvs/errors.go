package ipvs

import "errors"

// Sentinel errors, returned wrapped (test with errors.Is) by both the real
// implementation and Fake.
var (
	// ErrNotFound: the virtual or real server does not exist.
	ErrNotFound = errors.New("not found")
	// ErrExists: the virtual or real server already exists.
	ErrExists = errors.New("already exists")
	// ErrNoScheduler: the kernel has no such IPVS scheduler (module missing).
	ErrNoScheduler = errors.New("scheduler not available")
	// ErrUnsupported: IPVS is not available in this kernel.
	ErrUnsupported = errors.New("IPVS not available")
)
