package netif

import (
	"errors"
	"github.com/ipvsproxy/ipvsproxy/internal/netnstest"
	"net/netip"
	"slices"
	"testing"
)

// One table of cases, run against Fake always and against the kernel in a
// fresh network namespace when possible: the kernel half is what proves the
// fake faithful.

var (
	svc4a = netip.MustParseAddr("192.0.2.10")
	svc4b = netip.MustParseAddr("198.51.100.20")
	svc6  = netip.MustParseAddr("2001:db8::10")
	node4 = netip.MustParseAddr("203.0.113.9")
	node6 = netip.MustParseAddr("2001:db8:ffff::9")
)

// env is what a case may do to the namespace besides using Interface.
type env struct {
	// addHostAddress binds addr to an interface other than the dummy.
	addHostAddress func(t *testing.T, addr netip.Addr)
}

type adapterCase struct {
	name string
	run  func(t *testing.T, a Interface, e env)
}

var adapterCases = []adapterCase{
	{"before EnsureDummy the link is missing", func(t *testing.T, a Interface, _ env) {
		_, err := a.DummyAddresses()
		wantErr(t, err, ErrNotFound)
		wantErr(t, a.AddDummyAddress(svc4a), ErrNotFound)
		wantErr(t, a.DeleteDummyAddress(svc4a), ErrNotFound)
		wantErr(t, a.DeleteDummy(), ErrNotFound)
		for _, err := range AddDummyAddresses(a, []netip.Addr{svc4a, svc6}) {
			wantErr(t, err, ErrNotFound)
		}
		for _, err := range DeleteDummyAddresses(a, []netip.Addr{svc4a, svc6}) {
			wantErr(t, err, ErrNotFound)
		}
	}},
	{"EnsureDummy is idempotent and binds nothing", func(t *testing.T, a Interface, _ env) {
		ok(t, a.EnsureDummy())
		ok(t, a.EnsureDummy())
		got, err := a.DummyAddresses()
		ok(t, err)
		if got == nil || len(got) != 0 {
			t.Fatalf("DummyAddresses() = %v, want empty non-nil slice", got)
		}
	}},
	{"bind, list and unbind addresses of both families", func(t *testing.T, a Interface, _ env) {
		ok(t, a.EnsureDummy())
		ok(t, a.AddDummyAddress(svc6))
		ok(t, a.AddDummyAddress(svc4b))
		ok(t, a.AddDummyAddress(svc4a))
		wantDummy(t, a, svc4a, svc4b, svc6)
		ok(t, a.DeleteDummyAddress(svc4b))
		ok(t, a.DeleteDummyAddress(svc6))
		wantDummy(t, a, svc4a)
	}},
	{"addresses bound and unbound together", func(t *testing.T, a Interface, _ env) {
		ok(t, a.EnsureDummy())
		ok(t, a.AddDummyAddress(svc4a))
		errs := AddDummyAddresses(a, []netip.Addr{svc6, svc4a, {}, svc4b})
		ok(t, errs[0])
		wantErr(t, errs[1], ErrExists)
		if errs[2] == nil {
			t.Fatal("an invalid address among others was bound")
		}
		ok(t, errs[3])
		wantDummy(t, a, svc4a, svc4b, svc6)
		errs = DeleteDummyAddresses(a, []netip.Addr{svc4b, node4, svc6})
		ok(t, errs[0])
		wantErr(t, errs[1], ErrNotFound)
		ok(t, errs[2])
		wantDummy(t, a, svc4a)
		// More than one send's worth, both families.
		var many []netip.Addr
		for i := range 150 {
			many = append(many, netip.AddrFrom4([4]byte{198, 51, 100, byte(i)}), netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 7, 15: byte(i)}))
		}
		for i, err := range AddDummyAddresses(a, many) {
			if err != nil {
				t.Fatalf("bind %s: %v", many[i], err)
			}
		}
		got, err := a.DummyAddresses()
		ok(t, err)
		if len(got) != len(many)+1 {
			t.Fatalf("%d addresses bound, want %d", len(got), len(many)+1)
		}
		for i, err := range DeleteDummyAddresses(a, many) {
			if err != nil {
				t.Fatalf("unbind %s: %v", many[i], err)
			}
		}
		wantDummy(t, a, svc4a)
	}},
	{"binding a bound address fails with ErrExists", func(t *testing.T, a Interface, _ env) {
		ok(t, a.EnsureDummy())
		ok(t, a.AddDummyAddress(svc4a))
		ok(t, a.AddDummyAddress(svc6))
		wantErr(t, a.AddDummyAddress(svc4a), ErrExists)
		wantErr(t, a.AddDummyAddress(svc6), ErrExists)
		// An IPv4-mapped IPv6 address is bound as IPv4.
		wantErr(t, a.AddDummyAddress(netip.AddrFrom16(svc4a.As16())), ErrExists)
		wantDummy(t, a, svc4a, svc6)
	}},
	{"unbinding an unbound address fails with ErrNotFound", func(t *testing.T, a Interface, _ env) {
		ok(t, a.EnsureDummy())
		ok(t, a.AddDummyAddress(svc4a))
		wantErr(t, a.DeleteDummyAddress(svc4b), ErrNotFound)
		wantErr(t, a.DeleteDummyAddress(svc6), ErrNotFound)
		wantDummy(t, a, svc4a)
	}},
	{"DeleteDummy removes the link and its addresses", func(t *testing.T, a Interface, _ env) {
		ok(t, a.EnsureDummy())
		ok(t, a.AddDummyAddress(svc4a))
		ok(t, a.AddDummyAddress(svc6))
		ok(t, a.DeleteDummy())
		_, err := a.DummyAddresses()
		wantErr(t, err, ErrNotFound)
		ok(t, a.EnsureDummy())
		wantDummy(t, a)
	}},
	{"HostAddresses lists other interfaces and never the dummy", func(t *testing.T, a Interface, e env) {
		e.addHostAddress(t, node4)
		e.addHostAddress(t, node6)
		ok(t, a.EnsureDummy())
		ok(t, a.AddDummyAddress(svc4a))
		ok(t, a.AddDummyAddress(svc6))
		got, err := a.HostAddresses()
		ok(t, err)
		for _, want := range []netip.Addr{node4, node6} {
			if !slices.Contains(got, want) {
				t.Errorf("HostAddresses() = %v, missing %s", got, want)
			}
		}
		for _, dummy := range []netip.Addr{svc4a, svc6} {
			if slices.Contains(got, dummy) {
				t.Errorf("HostAddresses() = %v, includes dummy address %s", got, dummy)
			}
		}
		if !slices.IsSortedFunc(got, netip.Addr.Compare) {
			t.Errorf("HostAddresses() = %v, not sorted", got)
		}
	}},
	{"Addresses reads the dummy's and the host's addresses as the two lists do", func(t *testing.T, a Interface, e env) {
		e.addHostAddress(t, node4)
		dummy, host, err := a.Addresses()
		ok(t, err)
		if len(dummy) != 0 || !slices.Contains(host, node4) {
			t.Fatalf("before EnsureDummy: Addresses() = %v, %v; want no dummy address and %s among the host's", dummy, host, node4)
		}
		ok(t, a.EnsureDummy())
		ok(t, a.AddDummyAddress(svc6))
		ok(t, a.AddDummyAddress(svc4a))
		dummy, host, err = a.Addresses()
		ok(t, err)
		wantDummy(t, a, dummy...)
		hostAlone, err := a.HostAddresses()
		ok(t, err)
		if !slices.Equal(host, hostAlone) {
			t.Fatalf("Addresses() host = %v, HostAddresses() = %v", host, hostAlone)
		}
		if !slices.Equal(dummy, []netip.Addr{svc4a, svc6}) {
			t.Fatalf("Addresses() dummy = %v, want [%s %s]", dummy, svc4a, svc6)
		}
	}},
	{"invalid address is refused", func(t *testing.T, a Interface, _ env) {
		ok(t, a.EnsureDummy())
		if err := a.AddDummyAddress(netip.Addr{}); err == nil {
			t.Fatal("AddDummyAddress(invalid) succeeded")
		}
		wantDummy(t, a)
	}},
}

func TestAdapter(t *testing.T) {
	t.Run("fake", func(t *testing.T) {
		for _, c := range adapterCases {
			t.Run(c.name, func(t *testing.T) {
				f := NewFake(testDummy)
				var host []netip.Addr
				c.run(t, f, env{addHostAddress: func(t *testing.T, addr netip.Addr) {
					host = append(host, addr)
					f.SetHostAddresses(host...)
				}})
			})
		}
	})
	t.Run("kernel", func(t *testing.T) {
		skipUnlessKernel(t)
		for _, c := range adapterCases {
			t.Run(c.name, func(t *testing.T) {
				a, ns := kernelInFreshNamespace(t)
				c.run(t, a, env{addHostAddress: func(t *testing.T, addr netip.Addr) { netnstest.LoopbackUp(t, ns, addr) }})
			})
		}
	})
}

func ok(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

func wantErr(t *testing.T, err, sentinel error) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("error = %v, want %v", err, sentinel)
	}
}

func wantDummy(t testing.TB, a Interface, want ...netip.Addr) {
	t.Helper()
	got, err := a.DummyAddresses()
	ok(t, err)
	if !slices.Equal(got, want) {
		t.Fatalf("DummyAddresses() = %v, want %v", got, want)
	}
}
