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

func ok(t *testing.T, err error) {
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

func wantDummy(t *testing.T, a Interface, want ...netip.Addr) {
	t.Helper()
	got, err := a.DummyAddresses()
	ok(t, err)
	if !slices.Equal(got, want) {
		t.Fatalf("DummyAddresses() = %v, want %v", got, want)
	}
}
