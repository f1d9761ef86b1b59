// Command kube-proxy is the upstream kube-proxy, built from k8s.io/kubernetes
// at the version the control plane runs, so that the migration scenarios and
// the daemon benchmarks start from the proxy users really run (IPVS,
// iptables and nftables modes) rather than from leftovers made by hand.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-proxy/app"
)

func main() {
	os.Exit(cli.Run(app.NewProxyCommand()))
}
