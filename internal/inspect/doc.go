// Package inspect answers `ipvsproxy inspect`: it reads what the kernel
// holds (IPVS virtual and real servers with their counters, the addresses
// on kube-ipvs0, the KUBE-* ipsets, conntrack flow counts) through the
// read side of the kernel adapters, names each object by the Kubernetes
// Service it serves from the proxier's Snapshot (fetched from the daemon's
// read-only endpoint, or built from the API server), compares the two
// (--check), and renders a table, JSON or YAML.
//
// It also holds that endpoint (endpoint.go): the daemon serves the
// proxier's Snapshot (desired state, Kubernetes names, sync status) as JSON
// under /inspect/v1/ on the metrics address. The endpoint answers GET and
// HEAD only: there is no write path.
//
// It never writes to the kernel: it calls no adapter method that changes
// anything. The packet tracer is internal/rules' TracePacket over the
// snapshot, the same code the proxier's tests assert verdicts with.
package inspect
