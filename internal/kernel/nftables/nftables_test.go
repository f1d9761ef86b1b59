package nftables

import (
	"errors"
	"os/exec"
	"sort"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/kerneltest"
	"github.com/ipvsproxy/ipvsproxy/internal/netnstest"
)

// backend is one implementation under test and a way to make a table in it
// from outside, as kube-proxy would.
type backend struct {
	Interface
	addTable func(t *testing.T, family Family, name string)
	tables   func(t *testing.T) string
}

func backends(t *testing.T) map[string]func(t *testing.T) backend {
	return map[string]func(t *testing.T) backend{
		"fake": func(t *testing.T) backend {
			f := NewFake()
			return backend{f, func(t *testing.T, family Family, name string) { f.AddTable(family, name) }, func(*testing.T) string { return f.Dump() }}
		},
		"kernel": func(t *testing.T) backend {
			kerneltest.RequireRootAndTools(t, "ip", "nft")
			ns, path := netnstest.NewNamed(t, "ipvsproxy-nft-")
			name := strings.TrimPrefix(path, "/run/netns/")
			nft := func(t *testing.T, args ...string) string {
				t.Helper()
				out, err := exec.Command("ip", append([]string{"netns", "exec", name, "nft"}, args...)...).CombinedOutput()
				if err != nil {
					t.Fatalf("nft %v: %v\n%s", args, err, out)
				}
				return string(out)
			}
			return backend{NewInNamespace(ns),
				func(t *testing.T, family Family, table string) {
					cmd := exec.Command("ip", "netns", "exec", name, "nft", "-f", "-")
					cmd.Stdin = strings.NewReader("table " + string(family) + " " + table + " {\n\tset s { type ipv4_addr; }\n\tchain input { type filter hook input priority 0; policy accept; meta mark 0x1 drop; }\n\tchain c { }\n}\n")
					if out, err := cmd.CombinedOutput(); err != nil {
						t.Fatalf("nft add table %s %s: %v\n%s", family, table, err, out)
					}
				},
				func(t *testing.T) string {
					lines := strings.Split(strings.TrimSpace(nft(t, "list", "tables")), "\n")
					sort.Strings(lines)
					return strings.Join(lines, "\n")
				}}
		},
	}
}

// A named table goes with everything in it; a table of another family or
// name stays; deleting it again is ErrNotFound.
func TestDeleteTable(t *testing.T) {
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) {
			b := open(t)
			b.addTable(t, IPv4, "kube-proxy")
			b.addTable(t, IPv6, "kube-proxy")
			b.addTable(t, IPv4, "other")
			if err := b.DeleteTable(IPv4, "kube-proxy"); err != nil {
				t.Fatal(err)
			}
			if got, want := b.tables(t), "table ip other\ntable ip6 kube-proxy"; got != want {
				t.Errorf("tables after deleting ip kube-proxy:\n%s\nwant\n%s", got, want)
			}
			if err := b.DeleteTable(IPv4, "kube-proxy"); !errors.Is(err, ErrNotFound) {
				t.Errorf("deleting it again: %v, want ErrNotFound", err)
			}
			if err := b.DeleteTable(IPv6, "kube-proxy"); err != nil {
				t.Fatal(err)
			}
			if err := b.DeleteTable(IPv6, "kube-proxy"); !errors.Is(err, ErrNotFound) {
				t.Errorf("deleting ip6 kube-proxy again: %v, want ErrNotFound", err)
			}
			if got, want := b.tables(t), "table ip other"; got != want {
				t.Errorf("tables at the end:\n%s\nwant\n%s", got, want)
			}
			if err := b.DeleteTable(Family("inet6"), "x"); err == nil {
				t.Error("an unknown family was accepted")
			}
		})
	}
}
