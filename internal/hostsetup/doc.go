// Package hostsetup readies the node for the proxier and clears what came
// before it: the IPVS scheduler probe with its fallback, the IPVS timeouts,
// the sysctls IPVS needs and kube-proxy's conntrack settings (Prepare), and
// kube-proxy's own leftovers of any mode (CleanupKubeProxyLeftovers). It
// runs before the first sync and never touches what the writer owns
// (internal/proxier), which it does not import.
package hostsetup
