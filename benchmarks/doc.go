// Package benchmarks holds the sync latency benchmarks (`make bench`). They
// drive internal/proxier's Proxier.Sync in process over the kernel fakes,
// the same code path the daemon runs; numbers are for comparing changes, not the
// kernel's own cost.
package benchmarks
