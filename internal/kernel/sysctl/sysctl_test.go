package sysctl

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// The same cases against the Fake and against files under a root, the way
// the real implementation reads /proc/sys (or a mount of it elsewhere).
func TestGetSet(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "net/ipv4/vs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "net/ipv4/vs/conntrack"), []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]Interface{
		"files": NewAt(root),
		"fake":  NewFake(map[string]string{"net.ipv4.vs.conntrack": "0"}),
	} {
		t.Run(name, func(t *testing.T) {
			if v, err := s.Get("net.ipv4.vs.conntrack"); err != nil || v != "0" {
				t.Fatalf("get: %q %v", v, err)
			}
			if err := s.Set("net.ipv4.vs.conntrack", "1"); err != nil {
				t.Fatal(err)
			}
			if v, _ := s.Get("net.ipv4.vs.conntrack"); v != "1" {
				t.Fatalf("after set: %q", v)
			}
			// A parameter whose module is not loaded does not exist.
			if _, err := s.Get("net.ipv4.vs.expire_nodest_conn"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("get missing: %v", err)
			}
			if err := s.Set("net.ipv4.vs.expire_nodest_conn", "1"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("set missing: %v", err)
			}
		})
	}
}
