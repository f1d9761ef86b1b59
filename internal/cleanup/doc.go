// Package cleanup removes what was on a node: the three clean-ups of
// `ipvsproxy cleanup`, one file each.
//
//   - Installed (installed.go): everything ipvsproxy installed, for an
//     uninstall or a rollback to kube-proxy's iptables or nftables mode.
//   - AfterKubeProxyIPVS (handback.go, --after-kube-proxy-ipvs): what
//     ipvsproxy installed and kube-proxy's IPVS mode does not take over,
//     once kube-proxy serves the node again.
//   - KubeProxyLeftovers (kubeproxy.go, --kube-proxy-leftovers): what
//     kube-proxy's modes left that ipvsproxy does not use, before ipvsproxy
//     starts.
//
// What each removes, object by object, is stated once in scope.go; the
// table of docs/migrate-from-kube-proxy.md is generated from it
// (TestScopeTableInMigrationGuide). Every name comes from internal/owned
// (ipvsproxy's) or kubeproxy.go (kube-proxy's), the same lists the
// clean-ups act on.
//
// Nothing else in the kernel is ever changed: a virtual server goes only
// when ipvsproxy's ownership record names it, a route only when it carries
// ipvsproxy's mark, a chain or set only by one of those names, and a name
// ipvsproxy shares with kube-proxy's IPVS mode only when the node's state
// is ipvsproxy's. The package never syncs Services (internal/proxier does),
// nor sets sysctls (internal/hostsetup does); it imports neither.
package cleanup
