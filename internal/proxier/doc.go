// Package proxier is the writer: the one package that changes the kernel
// for Services. A Proxier drains the ChangeTracker, has package ipvsproxy's
// pure Model build the desired state (one call, Model.Update; the writer
// never changes the desired state, it reports what it found in the kernel
// for the model to take in), and applies the difference through
// the kernel adapters (ipvs, netif, ipset, iptables, conntrack, sysctl) in
// one writer loop that keeps a status per object with backoff retries
// (objstatus.go), then reports.
//
// It owns only what it names (internal/owned): the virtual servers recorded
// in KUBE-IPVS-OWNED (ownership.go), the addresses and routes on kube-ipvs0,
// the KUBE-* sets and chains (internal/hostsetup sets the sysctls before
// the first sync). Everything else in the kernel, and
// anything inside --ipvs-exclude-cidrs, is never changed. The iptables
// rules it restores are computed by internal/rules; the Snapshot it serves
// to inspect is internal/snapshot's type. Removing what it installed is
// internal/cleanup's.
package proxier
