// Package proxier is the writer: the one package that changes the kernel
// for Services. A Proxier drains the ChangeTracker, builds the desired state
// with package ipvsproxy's pure builder, and applies the difference through
// the kernel adapters (ipvs, netif, ipset, iptables, conntrack, sysctl) in
// one writer loop that keeps a status per object with backoff retries
// (objstatus.go), then reports.
//
// It owns only what it names (internal/owned): the virtual servers recorded
// in KUBE-IPVS-OWNED (ownership.go), the addresses and routes on kube-ipvs0,
// the KUBE-* sets and chains, and the sysctls of setup.go and
// conntrack_sysctls.go (kube-proxy's). Everything else in the kernel, and
// anything inside --ipvs-exclude-cidrs, is never changed. The iptables
// rules and their tracer model (rules.go, trace.go, trace_rules.go), host
// set-up (setup.go, conntrack_sysctls.go, kubeproxy_leftovers.go,
// handover.go) and cleanup.go live here too.
package proxier
