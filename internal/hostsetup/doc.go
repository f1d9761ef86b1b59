// Package hostsetup readies the node for the proxier: the IPVS scheduler
// probe with its fallback, the IPVS timeouts, the sysctls IPVS needs and
// kube-proxy's conntrack settings (Prepare). It runs before the first sync
// and never touches what the writer owns (internal/proxier), which it does
// not import; removing what came before is internal/cleanup's.
package hostsetup
