package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// Every variable the DaemonSet's ConfigMaps set must be a flag of `run`:
// a misspelt one would be silently ignored on every node.
func TestDeployConfigMapsSetOnlyRealFlags(t *testing.T) {
	known := map[string]bool{}
	for _, c := range newApp().Commands {
		if c.Name != "run" {
			continue
		}
		for _, f := range c.Flags {
			for _, env := range f.(interface{ GetEnvVars() []string }).GetEnvVars() {
				known[env] = true
			}
		}
	}
	files, _ := filepath.Glob("../../deploy/*/configmap*.yaml")
	more, _ := filepath.Glob("../../deploy/overlays/*/configmap*.yaml")
	files = append(files, more...)
	if len(files) == 0 {
		t.Fatal("no ConfigMap manifests found under deploy/")
	}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var cm struct {
			Data map[string]string `json:"data"`
		}
		if err := yaml.Unmarshal(raw, &cm); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for key := range cm.Data {
			if !known[key] {
				t.Errorf("%s sets %s, which no flag of `ipvsproxy run` reads", file, key)
			}
		}
	}
}

// Every flag of `run` has a row in the migration guide's flag table, so an
// operator translating kube-proxy's flags finds each one.
func TestEveryRunFlagIsInTheMigrationGuide(t *testing.T) {
	doc, err := os.ReadFile("../../docs/migrate-from-kube-proxy.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range newApp().Commands {
		if c.Name != "run" {
			continue
		}
		for _, f := range c.Flags {
			name := f.Names()[0]
			if !strings.Contains(string(doc), "| `--"+name+"` |") {
				t.Errorf("--%s has no row in docs/migrate-from-kube-proxy.md", name)
			}
		}
	}
}
