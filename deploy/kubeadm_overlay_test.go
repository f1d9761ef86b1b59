package deploy

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The kubeadm overlay runs ipvsproxy from kube-proxy's own ConfigMap, as
// kube-proxy's DaemonSet runs kube-proxy, with nothing overriding the file
// but the mode.
func TestKubeadmOverlay(t *testing.T) {
	r := renderTyped(t, "overlays/kubeadm")
	spec := r.daemonSet.Spec.Template.Spec
	c := proxyContainer(t, r.daemonSet)
	if !slices.Contains(c.Command, "--config=/var/lib/kube-proxy/config.conf") {
		t.Errorf("command %q does not read kube-proxy's config.conf", c.Command)
	}
	// The file's mode is kube-proxy's (kubeadm v1.37 writes iptables where none was chosen).
	if !slices.Contains(c.Command, "--proxy-mode=ipvs") {
		t.Errorf("command %q leaves the mode to the file", c.Command)
	}
	if len(c.EnvFrom) != 0 {
		t.Errorf("envFrom %v would override the file", c.EnvFrom)
	}
	mounted := false
	for _, m := range c.VolumeMounts {
		mounted = mounted || m.Name == "kube-proxy" && m.MountPath == "/var/lib/kube-proxy" && m.ReadOnly
	}
	var cm *corev1.ConfigMapVolumeSource
	for _, v := range spec.Volumes {
		if v.Name == "kube-proxy" {
			cm = v.ConfigMap
		}
	}
	if !mounted || cm == nil || cm.Name != "kube-proxy" {
		t.Errorf("kube-proxy ConfigMap not mounted at /var/lib/kube-proxy: mounts %v volumes %v", c.VolumeMounts, spec.Volumes)
	}
	if spec.DNSPolicy != corev1.DNSDefault {
		t.Errorf("dnsPolicy %s: a host name in kubeconfig.conf would need cluster DNS, which needs a proxy", spec.DNSPolicy)
	}
	// The base's other mounts stay.
	base := proxyContainer(t, renderTyped(t, "base").daemonSet)
	for _, want := range base.VolumeMounts {
		if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == want.Name && m.MountPath == want.MountPath }) {
			t.Errorf("the base's mount %s at %s is gone: mounts %v", want.Name, want.MountPath, c.VolumeMounts)
		}
	}
}
