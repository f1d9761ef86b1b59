package deploy

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/doctable"
	"sigs.k8s.io/yaml"
)

func TestApplyTargets(t *testing.T) {
	got, err := ApplyTargets([]string{
		"kubectl apply --server-side -k deploy/overlays/example",
		"helm install ipvsproxy helm/ipvsproxy -n kube-system -f helm/ipvsproxy/ci/example-values.yaml",
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"deploy/overlays/example", "helm/ipvsproxy=helm/ipvsproxy/ci/example-values.yaml"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	for _, bad := range []string{
		"kubectl apply -f x.yaml",
		"helm install ipvsproxy helm/ipvsproxy -n kube-system --set a=b",
		"kubectl apply --server-side -k",
	} {
		if _, err := ApplyTargets([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestREADMEInstallCommandsRender: the README's install commands are ones the
// deploy check runs, and what they name renders (the deploy check then
// applies it to a real API server).
func TestREADMEInstallCommandsRender(t *testing.T) {
	cmds, err := doctable.Commands("../README.md", "install")
	if err != nil {
		t.Fatal(err)
	}
	targets, err := ApplyTargets(cmds)
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range targets {
		chart, values, isChart := strings.Cut(target, "=")
		path := "../" + chart
		if isChart {
			path += "=../" + values
		}
		if _, err := Render(path); err != nil {
			t.Errorf("%s: %v", target, err)
		}
	}
}

// TestMigrationGuideCommandsNameWhatExists: the migration guide's command
// blocks, which e2e `migrate-node-by-node` runs as written, name files and
// kustomizations that exist and render, so a renamed overlay fails here on
// the host before the VM runs it.
func TestMigrationGuideCommandsNameWhatExists(t *testing.T) {
	for _, block := range []string{"migrate-start", "migrate-install", "migrate-move", "migrate-check", "rollback-leave", "rollback-return"} {
		cmds, err := doctable.Commands("../docs/migrate-from-kube-proxy.md", block)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cmds {
			f := strings.Fields(c)
			for i, word := range f {
				switch {
				case word == "--patch-file" && i+1 < len(f):
					var patch map[string]any
					data, err := os.ReadFile("../" + f[i+1])
					if err == nil {
						err = yaml.Unmarshal(data, &patch)
					}
					if err != nil || len(patch) == 0 {
						t.Errorf("%s: %q: not a patch: %v", block, c, err)
					}
				case word == "-k" && i+1 < len(f):
					if _, err := Render("../" + f[i+1]); err != nil {
						t.Errorf("%s: %q: %v", block, c, err)
					}
				}
			}
			if f[0] != "kubectl" && f[0] != "curl" {
				t.Errorf("%s: %q is neither kubectl nor curl", block, c)
			}
		}
	}
}
