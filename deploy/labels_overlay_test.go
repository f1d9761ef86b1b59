package deploy

import "testing"

// The kube-proxy-labels overlay puts k8s-app: kube-proxy on the pods only:
// the DaemonSet's selector must never match kube-proxy's own pods.
func TestKubeProxyLabelsOverlay(t *testing.T) {
	r := renderTyped(t, "overlays/kube-proxy-labels")
	ds := r.daemonSet
	if got := ds.Spec.Template.Labels["k8s-app"]; got != "kube-proxy" {
		t.Errorf("pod label k8s-app = %q, want kube-proxy", got)
	}
	if _, ok := ds.Spec.Selector.MatchLabels["k8s-app"]; ok {
		t.Errorf("selector %v matches on k8s-app: it would adopt kube-proxy's pods", ds.Spec.Selector.MatchLabels)
	}
	if ds.Spec.Template.Labels["app.kubernetes.io/name"] != "ipvsproxy" {
		t.Errorf("pod labels %v lost the selector's label", ds.Spec.Template.Labels)
	}
}
