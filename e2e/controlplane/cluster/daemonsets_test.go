package cluster

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// RunsOn decides as the DaemonSet controller does: node selector, required
// node affinity (In, NotIn: a node without the label is not in), and the
// NoSchedule/NoExecute taints the pod does not tolerate.
func TestRunsOn(t *testing.T) {
	affinity := func(op corev1.NodeSelectorOperator, values ...string) *appsv1.DaemonSet {
		ds := &appsv1.DaemonSet{}
		ds.Spec.Template.Spec.NodeSelector = map[string]string{"kubernetes.io/os": "linux"}
		ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "ipvsproxy.io/proxy", Operator: op, Values: values}},
			}}},
		}}
		return ds
	}
	kubeProxy := affinity(corev1.NodeSelectorOpNotIn, "ipvsproxy", "rollback")
	ipvsproxy := affinity(corev1.NodeSelectorOpIn, "ipvsproxy")
	node := func(value string, taints ...corev1.Taint) *corev1.Node {
		n := &corev1.Node{}
		n.Labels = map[string]string{"kubernetes.io/os": "linux"}
		if value != "" {
			n.Labels["ipvsproxy.io/proxy"] = value
		}
		n.Spec.Taints = taints
		return n
	}
	noSchedule := corev1.Taint{Key: "example.com/dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}
	for _, c := range []struct {
		name      string
		ds        *appsv1.DaemonSet
		node      *corev1.Node
		want      bool
		tolerates bool
	}{
		{"kube-proxy on an unlabelled node", kubeProxy, node(""), true, false},
		{"kube-proxy on a node moved to ipvsproxy", kubeProxy, node("ipvsproxy"), false, false},
		{"kube-proxy on a node in rollback", kubeProxy, node("rollback"), false, false},
		{"ipvsproxy on an unlabelled node", ipvsproxy, node(""), false, false},
		{"ipvsproxy on its node", ipvsproxy, node("ipvsproxy"), true, false},
		{"ipvsproxy on its node, tainted", ipvsproxy, node("ipvsproxy", noSchedule), false, false},
		{"ipvsproxy on its node, tainted, tolerated", ipvsproxy, node("ipvsproxy", noSchedule), true, true},
	} {
		ds := c.ds.DeepCopy()
		if c.tolerates {
			ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}
		got, err := RunsOn(ds, c.node)
		if err != nil || got != c.want {
			t.Errorf("%s: %v, %v; want %v", c.name, got, err, c.want)
		}
	}
}
