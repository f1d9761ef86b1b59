package main

import (
	"os"
	"path/filepath"
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
