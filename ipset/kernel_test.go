package ipset

import (
	"errors"
	"net/netip"
	"os/exec"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/ipvsproxy/ipvsproxy/internal/kerneltest"
)

// kernelInNamespace returns a Kernel in a fresh namespace and the namespace's
// name, skipping when not root.
func kernelInNamespace(t testing.TB) (*Kernel, string) {
	b := newKernelBackend(t)
	return b.Interface.(*Kernel), b.namespace
}

// TestKernelMatchesIPsetTool checks the netlink encoding against the ipset
// tool's own reading of the kernel, so that a mistake made symmetrically in
// encoding and decoding (byte order, attribute choice) cannot hide.
func TestKernelMatchesIPsetTool(t *testing.T) {
	k, ns := kernelWithIPsetTool(t)
	var want []string
	for _, sh := range shapes {
		create(t, k, sh.set)
		if err := k.AddEntry(sh.set.Name, sh.a); err != nil {
			t.Fatal(err)
		}
		want = append(want, "add "+sh.set.Name+" "+sh.a.String(sh.set.Type))
	}
	wantSaved(t, ns, want)
}

// kernelWithIPsetTool is kernelInNamespace for a test that reads the sets
// back with the ipset tool (wantSaved).
func kernelWithIPsetTool(t *testing.T) (*Kernel, string) {
	k, ns := kernelInNamespace(t)
	if _, err := exec.LookPath("ipset"); err != nil {
		kerneltest.Skip(t, kerneltest.NoTool, "cross-check needs the ipset tool")
	}
	return k, ns
}

// wantSaved checks that `ipset save` in namespace ns lists exactly the add
// lines want, in any order.
func wantSaved(t *testing.T, ns string, want []string) {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", ns, "ipset", "save").CombinedOutput()
	if err != nil {
		t.Fatalf("ipset save: %v\n%s", err, out)
	}
	var got []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "add ") {
			got = append(got, line)
		}
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("ipset save lists %d entries\n%s\nwant %d\n%s", len(got), strings.Join(got, "\n"), len(want), strings.Join(want, "\n"))
	}
}

// TestKernelLearnsTypeOfForeignSet adds through a second Kernel that did not
// create the set, so the type comes from the kernel (lookup on a miss).
func TestKernelLearnsTypeOfForeignSet(t *testing.T) {
	k, ns := kernelInNamespace(t)
	create(t, k, Set{Name: "ports", Type: BitmapPort}, Set{Name: "ipport6", Type: HashIPPort, Family: IPv6})
	h, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	other, err := NewInNamespace(h)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.AddEntry("ports", Entry{Port: 30080}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "v4 entry in a foreign v6 set", other.AddEntry("ipport6", Entry{IP: mustAddr("10.0.0.1"), Protocol: "tcp", Port: 80}), ErrInvalidEntry)
	if got := entries(t, k, "ports"); strings.Join(got, ",") != "30080" {
		t.Fatalf("ports = %q, want [30080]", got)
	}
}

// TestKernelErrorsForEntriesThatDoNotFit bypasses checkEntry to show that
// the kernel itself refuses such entries and that mapError names it.
func TestKernelErrorsForEntriesThatDoNotFit(t *testing.T) {
	k, _ := kernelInNamespace(t)
	create(t, k, Set{Name: "ip6", Type: HashIP, Family: IPv6}, Set{Name: "ipport4", Type: HashIPPort, Family: IPv4})
	for set, e := range map[string]*netlink.IPSetEntry{
		"ip6":     entryToNetlink(HashIP, Entry{IP: mustAddr("10.96.0.10")}),
		"ipport4": {IP: entryToNetlink(HashIP, Entry{IP: mustAddr("10.96.0.10")}).IP},
	} {
		err := mapError(k.h.IpsetAdd(set, e), false)
		if !errors.Is(err, ErrInvalidEntry) {
			t.Errorf("raw add to %s: got %v, want %v", set, err, ErrInvalidEntry)
		}
	}
}

// TestKernelLargeSet lists a set too large for one netlink message: the
// kernel splits the dump and only the first message carries the header.
func TestKernelLargeSet(t *testing.T) {
	k, _ := kernelInNamespace(t)
	create(t, k, Set{Name: "big", Type: HashIPPort, Family: IPv4}, Set{Name: "after", Type: HashIP, Family: IPv4})
	const n = 3000
	for i := range n {
		e := Entry{IP: netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), Protocol: "tcp", Port: uint16(1000 + i)}
		if err := k.AddEntry("big", e); err != nil {
			t.Fatal(err)
		}
	}
	got, err := k.Entries("big")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[Entry]bool{}
	for _, e := range got {
		if e.Protocol != "tcp" || int(e.Port) != 1000+int(e.IP.As4()[2])<<8+int(e.IP.As4()[3]) {
			t.Fatalf("entry %s was not added", e.String(HashIPPort))
		}
		seen[e] = true
	}
	if len(got) != n || len(seen) != n {
		t.Fatalf("Entries listed %d (%d distinct), want %d", len(got), len(seen), n)
	}
	sets, err := k.Sets()
	if err != nil {
		t.Fatal(err)
	}
	want := []Set{{Name: "big", Type: HashIPPort, Family: IPv4, MaxElem: DefaultMaxElem}, {Name: "after", Type: HashIP, Family: IPv4, MaxElem: DefaultMaxElem}}
	sort.Slice(sets, func(i, j int) bool { return sets[i].Name > sets[j].Name })
	if !reflect.DeepEqual(sets, want) {
		t.Fatalf("Sets() = %v, want %v", sets, want)
	}
}

// The Fake's name limit is the kernel's: the kernel itself (not checkSet,
// which the request bypasses here) takes 31 bytes and refuses 32.
func TestKernelNameLengthLimit(t *testing.T) {
	b := newKernelBackend(t)
	k := b.Interface.(*Kernel)
	create := func(name string) error {
		return guard(func() error {
			return k.h.IpsetCreate(name, string(HashIP), netlink.IpsetCreateOptions{Family: familyNumber(IPv4)})
		})
	}
	if err := create(strings.Repeat("a", maxNameLen)); err != nil {
		t.Fatalf("kernel refused a %d-byte name: %v", maxNameLen, err)
	}
	if err := create(strings.Repeat("b", maxNameLen+1)); err == nil {
		t.Fatalf("kernel accepted a %d-byte name", maxNameLen+1)
	}
}
