// Package inspectserver is the daemon's read-only inspect endpoint: it
// serves the proxier's Snapshot (desired state, Kubernetes names, sync
// status) as JSON under /inspect/v1/ on the metrics address, for
// `ipvsproxy inspect` to name what the kernel holds.
//
// It answers GET and HEAD only: there is no write path, and it never reads
// or touches the kernel itself.
package inspectserver
