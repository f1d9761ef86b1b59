// Package deploy holds the manifests that install ipvsproxy as a DaemonSet in
// place of kube-proxy (base/, overlays/ and helm/ipvsproxy), and the small amount of Go that
// renders and checks them where neither kubectl nor a cluster is at hand:
// Render builds a kustomization with kustomize's own library
// (sigs.k8s.io/kustomize/api/krusty), RenderChart renders the Helm chart
// helm/ipvsproxy with Helm's own engine (the same objects as base/ and the
// overlays, helm_test.go), and Decode turns each object into its
// typed Kubernetes form, failing on any field the API does not know.
//
// The package never talks to a cluster; deploy/test/apply does, and the
// end-to-end suite runs it against a real kube-apiserver.
package deploy
