// Command kube-apiserver is the upstream Kubernetes API server, built from
// k8s.io/kubernetes so the end-to-end tests run the proxier against the real
// API (allocation of cluster IPs, node ports and health-check node ports,
// validation, RBAC) rather than a fake.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
