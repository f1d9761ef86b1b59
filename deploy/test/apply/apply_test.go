package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestApplyToAPIServer applies the manifests to the API server named by
// IPVSPROXY_TEST_KUBECONFIG (an admin kubeconfig of a throw-away cluster,
// such as the end-to-end suite's), checks the ServiceAccount's access, and
// proves that the server, not only the local decoder, rejects an invalid
// manifest.
func TestApplyToAPIServer(t *testing.T) {
	kubeconfig := os.Getenv("IPVSPROXY_TEST_KUBECONFIG")
	if kubeconfig == "" {
		t.Skip("IPVSPROXY_TEST_KUBECONFIG is not set: no API server to apply to")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	token := filepath.Join(t.TempDir(), "sa.kubeconfig")
	if err := run(ctx, kubeconfig, "ipvsproxy-deploy-test", "../../../docs/rbac.md", token, "", time.Hour,
		[]string{"../../overlays/example", "../../overlays/modprobe", "../../helm/ipvsproxy=../../helm/ipvsproxy/ci/kubeadm-values.yaml", "../../helm/ipvsproxy", "../../base"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(token); err != nil {
		t.Errorf("no ServiceAccount kubeconfig written: %v", err)
	}

	// A value the typed decoder accepts but the API server's validation
	// refuses: the apply must fail on the server's word.
	dir := t.TempDir()
	for _, f := range []string{"kustomization.yaml", "serviceaccount.yaml", "clusterrole.yaml", "clusterrolebinding.yaml", "configmap.yaml", "daemonset.yaml"} {
		data, err := os.ReadFile(filepath.Join("../../base", f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "daemonset.yaml" {
			data = []byte(strings.Replace(string(data), "dnsPolicy: Default", "dnsPolicy: NoSuchPolicy", 1))
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	err := run(ctx, kubeconfig, "ipvsproxy-deploy-test", "", "", "", time.Hour, []string{dir})
	if err == nil || !strings.Contains(err.Error(), "NoSuchPolicy") {
		t.Errorf("applying dnsPolicy NoSuchPolicy: got %v, want the server's validation error", err)
	}
}
