// Package ipvsproxy is the proxier: it turns Kubernetes Services and
// EndpointSlices into IPVS virtual servers, addresses on the kube-ipvs0 dummy
// interface, ipset members and a few iptables rules that mark traffic for
// masquerade.
//
// Data flows one way:
//
//	informers → ChangeTracker (per Service) → BuildService (pure, build.go)
//	→ desiredState (conflicts resolved) → reconcile against kernelView
//	→ the kernel adapters (packages ipvs, netif, ipset, iptables, conntrack)
//
// build.go is where a Service becomes IPVS entries; it makes no syscalls.
// The reconciler (reconcile*.go) is the only writer of kernel objects and
// keeps a status per object with backoff retries (objstatus.go).
// The package owns only what it names: the virtual servers recorded in
// KUBE-IPVS-OWNED (ownership.go), the addresses on kube-ipvs0, the KUBE-*
// sets and chains listed in sets.go and rules.go, and the sysctls of setup.go
// and conntrack_sysctls.go (kube-proxy's). Everything else in the kernel, and
// anything inside --ipvs-exclude-cidrs, is never changed.
package ipvsproxy
