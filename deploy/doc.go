// Package deploy holds the manifests that install ipvsproxy as a DaemonSet in
// place of kube-proxy (base/ and overlays/), and the small amount of Go that
// renders and checks them where neither kustomize nor a cluster is at hand:
// Render resolves a kustomization the way kustomize does for the features the
// manifests use, and Decode turns each object into its typed Kubernetes form,
// failing on any field the API does not know.
//
// The package never talks to a cluster; deploy/test/apply does, and the
// end-to-end suite runs it against a real kube-apiserver.
package deploy
