package ipset

import (
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/kerneltest"
	"github.com/ipvsproxy/ipvsproxy/internal/netnstest"
)

// backend is one implementation under test plus a way to make a set
// referenced, as an iptables rule does.
type backend struct {
	Interface
	// reference makes name referenced (busy) or not.
	reference func(t *testing.T, name string, on bool)
	// namespace names the kernel backend's network namespace.
	namespace string
}

// backends returns the Fake always and, when root with ip_set available, the
// kernel inside a fresh network namespace removed at the end of the test.
func backends(t *testing.T) map[string]func(t *testing.T) backend {
	return map[string]func(t *testing.T) backend{
		"fake": func(t *testing.T) backend {
			f := NewFake()
			return backend{Interface: f, reference: func(t *testing.T, name string, on bool) { f.MarkBusy(name, on) }}
		},
		"kernel": func(t *testing.T) backend { return newKernelBackend(t) },
	}
}

func newKernelBackend(t testing.TB) backend {
	kerneltest.RequireRootAndTools(t, "ip")
	ns, path := netnstest.NewNamed(t, "ipvsproxy-ipset-")
	name := strings.TrimPrefix(path, "/run/netns/")
	k, err := NewInNamespace(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	if _, err := k.Sets(); errors.Is(err, ErrUnsupported) {
		kerneltest.Skip(t, kerneltest.NoKernelFeature, "kernel has no ip_set: %v", err)
	}
	return backend{Interface: k, namespace: name, reference: func(t *testing.T, set string, on bool) {
		if _, err := exec.LookPath("iptables"); err != nil {
			kerneltest.Skip(t, kerneltest.NoTool, "referencing a set needs iptables")
		}
		op := "-D"
		if on {
			op = "-A"
		}
		run(t, "ip", "netns", "exec", name, "iptables", "-w", op, "INPUT",
			"-m", "set", "--match-set", set, "src", "-j", "ACCEPT")
	}}
}

func run(t testing.TB, cmd ...string) {
	t.Helper()
	if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", cmd, err, out)
	}
}

func mustAddr(s string) netip.Addr     { return netip.MustParseAddr(s) }
func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// shapes is one valid entry (and a second distinct one) per set type and family.
var shapes = []struct {
	set  Set
	a, b Entry
}{
	{Set{Name: "ip4", Type: HashIP, Family: IPv4}, Entry{IP: mustAddr("10.96.0.10")}, Entry{IP: mustAddr("10.96.0.11")}},
	{Set{Name: "ip6", Type: HashIP, Family: IPv6}, Entry{IP: mustAddr("fd00::10")}, Entry{IP: mustAddr("fd00::11")}},
	{Set{Name: "ipport4", Type: HashIPPort, Family: IPv4},
		Entry{IP: mustAddr("10.96.0.10"), Protocol: "tcp", Port: 80}, Entry{IP: mustAddr("10.96.0.10"), Protocol: "udp", Port: 80}},
	{Set{Name: "ipport6", Type: HashIPPort, Family: IPv6},
		Entry{IP: mustAddr("fd00::10"), Protocol: "sctp", Port: 443}, Entry{IP: mustAddr("fd00::10"), Protocol: "tcp", Port: 443}},
	{Set{Name: "ipportip4", Type: HashIPPortIP, Family: IPv4},
		Entry{IP: mustAddr("10.244.1.5"), Protocol: "tcp", Port: 8080, IP2: mustAddr("10.244.1.5")},
		Entry{IP: mustAddr("10.244.1.5"), Protocol: "tcp", Port: 8080, IP2: mustAddr("10.244.1.6")}},
	{Set{Name: "ipportip6", Type: HashIPPortIP, Family: IPv6},
		Entry{IP: mustAddr("fd00:244::5"), Protocol: "udp", Port: 53, IP2: mustAddr("fd00:244::5")},
		Entry{IP: mustAddr("fd00:244::6"), Protocol: "udp", Port: 53, IP2: mustAddr("fd00:244::6")}},
	{Set{Name: "ipportnet4", Type: HashIPPortNet, Family: IPv4},
		Entry{IP: mustAddr("10.96.0.10"), Protocol: "tcp", Port: 80, Net: mustPrefix("192.0.2.0/24")},
		Entry{IP: mustAddr("10.96.0.10"), Protocol: "tcp", Port: 80, Net: mustPrefix("198.51.100.0/25")}},
	{Set{Name: "ipportnet6", Type: HashIPPortNet, Family: IPv6},
		Entry{IP: mustAddr("fd00::10"), Protocol: "tcp", Port: 80, Net: mustPrefix("2001:db8::/64")},
		Entry{IP: mustAddr("fd00::10"), Protocol: "tcp", Port: 81, Net: mustPrefix("2001:db8::/64")}},
	{Set{Name: "net4", Type: HashNet, Family: IPv4}, Entry{Net: mustPrefix("203.0.113.0/24")}, Entry{Net: mustPrefix("10.0.0.1/32")}},
	{Set{Name: "net6", Type: HashNet, Family: IPv6}, Entry{Net: mustPrefix("2001:db8::/48")}, Entry{Net: mustPrefix("2001:db8:1::1/128")}},
	{Set{Name: "ports", Type: BitmapPort}, Entry{Port: 30080}, Entry{Port: 0}},
}

func create(t *testing.T, ip Interface, sets ...Set) {
	t.Helper()
	for _, s := range sets {
		if err := ip.CreateSet(s); err != nil {
			t.Fatal(err)
		}
	}
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}

func entries(t *testing.T, ip Interface, name string) []string {
	t.Helper()
	es, err := ip.Entries(name)
	if err != nil {
		t.Fatal(err)
	}
	var sets []Set
	if sets, err = ip.Sets(); err != nil {
		t.Fatal(err)
	}
	var typ Type
	for _, s := range sets {
		if s.Name == name {
			typ = s.Type
		}
	}
	out := []string{}
	for _, e := range es {
		out = append(out, e.String(typ))
	}
	sort.Strings(out)
	// EachEntry reads the same members.
	each := []string{}
	if err := ip.EachEntry(name, func(e Entry) { each = append(each, e.String(typ)) }); err != nil {
		t.Fatal(err)
	}
	sort.Strings(each)
	if !reflect.DeepEqual(each, out) {
		t.Fatalf("EachEntry(%s) read %q, Entries %q", name, each, out)
	}
	return out
}

func TestSets(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, b backend)
	}{
		{"create lists every type and family", func(t *testing.T, b backend) {
			var want []Set
			for _, sh := range shapes {
				create(t, b, sh.set)
				// Created without a maxelem, a hash set has the kernel's.
				listed := sh.set
				if listed.Type != BitmapPort {
					listed.MaxElem = DefaultMaxElem
				}
				want = append(want, listed)
			}
			got, err := b.Sets()
			if err != nil {
				t.Fatal(err)
			}
			sort.Slice(got, func(i, j int) bool { return got[i].Name < got[j].Name })
			sort.Slice(want, func(i, j int) bool { return want[i].Name < want[j].Name })
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("Sets() = %v, want %v", got, want)
			}
		}},
		{"bitmap:port drops the family and comments are not read back", func(t *testing.T, b backend) {
			create(t, b, Set{Name: "p", Type: BitmapPort, Family: IPv6, Comment: "node ports"})
			got, err := b.Sets()
			if err != nil {
				t.Fatal(err)
			}
			if want := []Set{{Name: "p", Type: BitmapPort}}; !reflect.DeepEqual(got, want) {
				t.Fatalf("Sets() = %v, want %v", got, want)
			}
		}},
		{"a hash set holds at most maxelem entries", func(t *testing.T, b backend) {
			create(t, b, Set{Name: "small", Type: HashIPPort, Family: IPv4, MaxElem: 4})
			entry := func(i int) Entry {
				return Entry{IP: netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}), Protocol: "tcp", Port: 80}
			}
			for i := 0; i < 4; i++ {
				if err := b.AddEntry("small", entry(i)); err != nil {
					t.Fatalf("add entry %d of 4: %v", i+1, err)
				}
			}
			wantErr(t, "add a fifth entry", b.AddEntry("small", entry(4)), ErrFull)
			// Making room makes the add possible again.
			if err := b.DeleteEntry("small", entry(0)); err != nil {
				t.Fatal(err)
			}
			if err := b.AddEntry("small", entry(4)); err != nil {
				t.Fatalf("add after a delete: %v", err)
			}
			sets, err := b.Sets()
			if err != nil || len(sets) != 1 || sets[0].MaxElem != 4 {
				t.Fatalf("Sets() = %v, %v; want small with maxelem 4", sets, err)
			}
		}},
		{"names are at most 31 bytes", func(t *testing.T, b backend) {
			long := "KUBE-" + strings.Repeat("X", 26)
			create(t, b, Set{Name: long, Type: HashIP, Family: IPv4})
			if err := b.CreateSet(Set{Name: long + "Y", Type: HashIP, Family: IPv4}); err == nil {
				t.Fatal("a 32-byte set name was accepted")
			}
		}},
		{"no sets lists empty", func(t *testing.T, b backend) {
			got, err := b.Sets()
			if err != nil || len(got) != 0 {
				t.Fatalf("Sets() = %v, %v; want none", got, err)
			}
		}},
		{"duplicate create fails", func(t *testing.T, b backend) {
			create(t, b, Set{Name: "s", Type: HashIP, Family: IPv4})
			wantErr(t, "create again", b.CreateSet(Set{Name: "s", Type: HashNet, Family: IPv4}), ErrExists)
		}},
		{"add, list and delete each shape", func(t *testing.T, b backend) {
			for _, sh := range shapes {
				create(t, b, sh.set)
				for _, e := range []Entry{sh.a, sh.b} {
					if err := b.AddEntry(sh.set.Name, e); err != nil {
						t.Fatal(err)
					}
				}
				want := []string{sh.a.String(sh.set.Type), sh.b.String(sh.set.Type)}
				sort.Strings(want)
				if got := entries(t, b, sh.set.Name); !reflect.DeepEqual(got, want) {
					t.Fatalf("%s entries = %q, want %q", sh.set.Name, got, want)
				}
				wantErr(t, "duplicate add to "+sh.set.Name, b.AddEntry(sh.set.Name, sh.a), ErrExists)
				if err := b.DeleteEntry(sh.set.Name, sh.a); err != nil {
					t.Fatal(err)
				}
				want = []string{sh.b.String(sh.set.Type)}
				if got := entries(t, b, sh.set.Name); !reflect.DeepEqual(got, want) {
					t.Fatalf("%s entries after delete = %q, want %q", sh.set.Name, got, want)
				}
				wantErr(t, "delete missing from "+sh.set.Name, b.DeleteEntry(sh.set.Name, sh.a), ErrNotFound)
			}
		}},
		{"a network is stored masked", func(t *testing.T, b backend) {
			create(t, b, Set{Name: "n", Type: HashNet, Family: IPv4})
			if err := b.AddEntry("n", Entry{Net: mustPrefix("192.0.2.77/24")}); err != nil {
				t.Fatal(err)
			}
			if got, want := entries(t, b, "n"), []string{"192.0.2.0/24"}; !reflect.DeepEqual(got, want) {
				t.Fatalf("entries = %q, want %q", got, want)
			}
			wantErr(t, "same network, other host bits", b.AddEntry("n", Entry{Net: mustPrefix("192.0.2.1/24")}), ErrExists)
		}},
		{"missing set", func(t *testing.T, b backend) {
			e := Entry{IP: mustAddr("10.96.0.10")}
			wantErr(t, "add", b.AddEntry("nope", e), ErrNotFound)
			wantErr(t, "delete", b.DeleteEntry("nope", e), ErrNotFound)
			_, err := b.Entries("nope")
			wantErr(t, "entries", err, ErrNotFound)
			wantErr(t, "each entry", b.EachEntry("nope", func(Entry) { t.Error("a member of a missing set") }), ErrNotFound)
			wantErr(t, "destroy", b.DestroySet("nope"), ErrNotFound)
		}},
		{"entries that do not fit", func(t *testing.T, b backend) {
			create(t, b, Set{Name: "ip6", Type: HashIP, Family: IPv6}, Set{Name: "ipport4", Type: HashIPPort, Family: IPv4},
				Set{Name: "ipportnet6", Type: HashIPPortNet, Family: IPv6}, Set{Name: "ports", Type: BitmapPort},
				Set{Name: "net4", Type: HashNet, Family: IPv4})
			for _, c := range []struct {
				set string
				e   Entry
			}{
				{"ip6", Entry{IP: mustAddr("10.96.0.10")}},
				{"ip6", Entry{IP: mustAddr("fd00::1"), Port: 80}},
				{"ipport4", Entry{IP: mustAddr("fd00::1"), Protocol: "tcp", Port: 80}},
				{"ipport4", Entry{IP: mustAddr("10.96.0.10"), Protocol: "icmp", Port: 80}},
				{"ipport4", Entry{IP: mustAddr("10.96.0.10"), Port: 80}},
				{"ipport4", Entry{Protocol: "tcp", Port: 80}},
				{"ipportnet6", Entry{IP: mustAddr("fd00::1"), Protocol: "tcp", Port: 80, Net: mustPrefix("192.0.2.0/24")}},
				{"ports", Entry{IP: mustAddr("10.96.0.10"), Port: 30080}},
				{"ports", Entry{Protocol: "tcp", Port: 30080}},
				{"net4", Entry{Net: mustPrefix("0.0.0.0/0")}},
				{"net4", Entry{IP: mustAddr("192.0.2.1")}},
			} {
				wantErr(t, fmt.Sprintf("add %+v to %s", c.e, c.set), b.AddEntry(c.set, c.e), ErrInvalidEntry)
			}
		}},
		{"entries added together", func(t *testing.T, b backend) {
			// Every shape, each with an entry already present (no error), an
			// entry the set's family refuses, and a set that is missing.
			// b.Interface, not b: the backend wrapper would hide the
			// kernel's batches.
			for _, sh := range shapes {
				create(t, b, sh.set)
				if err := b.AddEntry(sh.set.Name, sh.a); err != nil {
					t.Fatal(err)
				}
				bad := Entry{IP: mustAddr("192.0.2.1"), Protocol: "tcp", Port: 1, IP2: mustAddr("192.0.2.2")}
				if sh.set.Family == IPv4 {
					bad = Entry{IP: mustAddr("2001:db8::1"), Protocol: "tcp", Port: 1, IP2: mustAddr("2001:db8::2")}
				}
				errs := AddEntries(b.Interface, sh.set.Name, []Entry{sh.a, bad, sh.b})
				if errs[0] != nil || errs[2] != nil {
					t.Fatalf("add %s and %s to %s: %v", sh.a.String(sh.set.Type), sh.b.String(sh.set.Type), sh.set.Name, errs)
				}
				wantErr(t, "a wrong entry among others to "+sh.set.Name, errs[1], ErrInvalidEntry)
				want := []string{sh.a.String(sh.set.Type), sh.b.String(sh.set.Type)}
				sort.Strings(want)
				if got := entries(t, b, sh.set.Name); !reflect.DeepEqual(got, want) {
					t.Fatalf("%s entries = %q, want %q", sh.set.Name, got, want)
				}
			}
			for _, err := range AddEntries(b.Interface, "nope", []Entry{{IP: mustAddr("192.0.2.1")}, {IP: mustAddr("192.0.2.2")}}) {
				wantErr(t, "add to a missing set", err, ErrNotFound)
			}
			// More than one batch, into a set that fills up part-way: the
			// entries before the limit are added, those after it refused as
			// full. The kernel counts a hash set's members per region of
			// its table and adds them all up only when one region is at
			// its share of maxelem, so after a resize it may take one or two
			// beyond maxelem (3002 of 3010 in one of eight tries here, 6.18);
			// the fake refuses each one beyond, which the admission's counts
			// never reach.
			create(t, b, Set{Name: "many", Type: HashIPPortIP, Family: IPv4, MaxElem: 3000})
			var es []Entry
			for i := range 3010 {
				a := netip.AddrFrom4([4]byte{198, 51, byte(i >> 8), byte(i)})
				es = append(es, Entry{IP: a, Protocol: "tcp", Port: 8080, IP2: a})
			}
			added, refused := 0, 0
			for i, err := range AddEntries(b.Interface, "many", es) {
				switch {
				case i < 3000 && err != nil:
					t.Fatalf("entry %d of 3000 refused: %v", i+1, err)
				case err == nil:
					added++
				default:
					refused++
					wantErr(t, fmt.Sprintf("entry %d into a set of maxelem 3000", i+1), err, ErrFull)
				}
			}
			t.Logf("%d of 3010 entries added to a set of maxelem 3000", added)
			if refused == 0 {
				t.Fatalf("all 3010 entries added to a set of maxelem 3000")
			}
			if _, fake := b.Interface.(*Fake); fake && added != 3000 {
				t.Fatalf("the fake added %d entries to a set of maxelem 3000", added)
			}
			if got := entries(t, b, "many"); len(got) != added {
				t.Fatalf("%d entries in the set, %d added", len(got), added)
			}
		}},
		{"entries deleted together", func(t *testing.T, b backend) {
			// Every shape: a member present and one absent are deleted (no
			// error for the absent one), one of the wrong family is
			// refused, the member not named stays; a missing set is no
			// error (its members are gone). b.Interface, as above.
			for _, sh := range shapes {
				create(t, b, sh.set)
				if err := b.AddEntry(sh.set.Name, sh.a); err != nil {
					t.Fatal(err)
				}
				if err := b.AddEntry(sh.set.Name, sh.b); err != nil {
					t.Fatal(err)
				}
				bad := Entry{IP: mustAddr("192.0.2.1"), Protocol: "tcp", Port: 1, IP2: mustAddr("192.0.2.2")}
				if sh.set.Family == IPv4 {
					bad = Entry{IP: mustAddr("2001:db8::1"), Protocol: "tcp", Port: 1, IP2: mustAddr("2001:db8::2")}
				}
				absent := shiftAddress(sh.a, 7)
				if sh.set.Type == BitmapPort {
					absent = Entry{Port: 30001}
				}
				errs := DeleteEntries(b.Interface, sh.set.Name, []Entry{absent, sh.a, bad})
				if errs[0] != nil || errs[1] != nil {
					t.Fatalf("delete %s (absent) and %s from %s: %v", absent.String(sh.set.Type), sh.a.String(sh.set.Type), sh.set.Name, errs)
				}
				wantErr(t, "a wrong entry among others from "+sh.set.Name, errs[2], ErrInvalidEntry)
				if got, want := entries(t, b, sh.set.Name), []string{sh.b.String(sh.set.Type)}; !reflect.DeepEqual(got, want) {
					t.Fatalf("%s entries = %q, want %q", sh.set.Name, got, want)
				}
			}
			for _, err := range DeleteEntries(b.Interface, "nope", []Entry{{IP: mustAddr("192.0.2.1")}, {IP: mustAddr("192.0.2.2")}}) {
				if err != nil {
					t.Fatalf("delete from a missing set: %v, want no error", err)
				}
			}
			// More than one batch, ten of them absent: every member goes.
			create(t, b, Set{Name: "many", Type: HashIPPortIP, Family: IPv6})
			var es []Entry
			for i := range 3010 {
				a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 14: byte(i >> 8), 15: byte(i)})
				es = append(es, Entry{IP: a, Protocol: "tcp", Port: 8080, IP2: a})
			}
			for _, err := range AddEntries(b.Interface, "many", es[:3000]) {
				if err != nil {
					t.Fatal(err)
				}
			}
			for i, err := range DeleteEntries(b.Interface, "many", es) {
				if err != nil {
					t.Fatalf("delete entry %d of 3010: %v", i+1, err)
				}
			}
			if got := entries(t, b, "many"); len(got) != 0 {
				t.Fatalf("%d entries left in the set, want none", len(got))
			}
		}},
		{"destroy a referenced set fails until released", func(t *testing.T, b backend) {
			create(t, b, Set{Name: "s", Type: HashIP, Family: IPv4})
			b.reference(t, "s", true)
			wantErr(t, "destroy referenced", b.DestroySet("s"), ErrBusy)
			b.reference(t, "s", false)
			if err := b.DestroySet("s"); err != nil {
				t.Fatal(err)
			}
			wantErr(t, "destroy again", b.DestroySet("s"), ErrNotFound)
		}},
		{"swap exchanges contents", func(t *testing.T, b backend) {
			create(t, b, Set{Name: "live", Type: HashIP, Family: IPv4}, Set{Name: "next", Type: HashIP, Family: IPv4})
			for name, ip := range map[string]string{"live": "10.96.0.1", "next": "10.96.0.2"} {
				if err := b.AddEntry(name, Entry{IP: mustAddr(ip)}); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.SwapSets("live", "next"); err != nil {
				t.Fatal(err)
			}
			if got, want := entries(t, b, "live"), []string{"10.96.0.2"}; !reflect.DeepEqual(got, want) {
				t.Fatalf("live = %q, want %q", got, want)
			}
			if got, want := entries(t, b, "next"), []string{"10.96.0.1"}; !reflect.DeepEqual(got, want) {
				t.Fatalf("next = %q, want %q", got, want)
			}
			wantErr(t, "swap with missing second", b.SwapSets("live", "nope"), ErrNotFound)
			wantErr(t, "swap with missing first", b.SwapSets("nope", "live"), ErrNotFound)
			create(t, b, Set{Name: "v6", Type: HashIP, Family: IPv6}, Set{Name: "nets", Type: HashNet, Family: IPv4})
			wantErr(t, "swap across families", b.SwapSets("live", "v6"), ErrInvalidEntry)
			wantErr(t, "swap across types", b.SwapSets("live", "nets"), ErrInvalidEntry)
		}},
	}
	for implName, newBackend := range backends(t) {
		t.Run(implName, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) { c.run(t, newBackend(t)) })
			}
		})
	}
}

func TestFakeDumpAndWrites(t *testing.T) {
	f := NewFake()
	create(t, f, Set{Name: "b", Type: BitmapPort}, Set{Name: "a", Type: HashIPPort, Family: IPv4})
	for _, e := range []Entry{{IP: mustAddr("10.96.0.10"), Protocol: "udp", Port: 53}, {IP: mustAddr("10.96.0.10"), Protocol: "tcp", Port: 53}} {
		if err := f.AddEntry("a", e); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.AddEntry("b", Entry{Port: 30080}); err != nil {
		t.Fatal(err)
	}
	_ = f.AddEntry("b", Entry{Port: 30080}) // fails, still a write
	want := "set a hash:ip,port inet\n  10.96.0.10,tcp:53\n  10.96.0.10,udp:53\nset b bitmap:port\n  30080\n"
	if got := f.Dump(); got != want {
		t.Fatalf("Dump() =\n%s\nwant\n%s", got, want)
	}
	if got := f.Writes(); got != 6 {
		t.Fatalf("Writes() = %d, want 6", got)
	}
}
