package netif

import (
	"net/netip"
	"testing"
)

// What only Fake offers: knobs for tests elsewhere and its Dump.

func TestFakeDummyUnsupported(t *testing.T) {
	f := NewFake(testDummy)
	f.SetDummyUnsupported()
	wantErr(t, f.EnsureDummy(), ErrUnsupported)
	wantErr(t, f.AddDummyAddress(svc4a), ErrNotFound)
}

func TestFakeWritesSkipNoOps(t *testing.T) {
	f := NewFake(testDummy)
	ok(t, f.EnsureDummy())
	ok(t, f.AddDummyAddress(svc4a))
	wantErr(t, f.AddDummyAddress(svc4a), ErrExists)
	if got := f.Writes(); got != 3 {
		t.Fatalf("Writes() after create, bind, failed bind = %d, want 3", got)
	}
	ok(t, f.EnsureDummy())
	if _, err := f.DummyAddresses(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.HostAddresses(); err != nil {
		t.Fatal(err)
	}
	if got := f.Writes(); got != 3 {
		t.Fatalf("Writes() after EnsureDummy on an existing link and reads = %d, want 3", got)
	}
}

func TestFakeDump(t *testing.T) {
	f := NewFake("kube-ipvs0")
	f.SetHostAddresses(node6, netip.MustParseAddr("127.0.0.1"), node4)
	if got, want := f.Dump(), "dummy kube-ipvs0 absent\nhost 127.0.0.1\nhost 203.0.113.9\nhost 2001:db8:ffff::9\n"; got != want {
		t.Fatalf("Dump() =\n%s\nwant\n%s", got, want)
	}
	ok(t, f.EnsureDummy())
	ok(t, f.AddDummyAddress(svc6))
	ok(t, f.AddDummyAddress(svc4a))
	f.SetHostAddresses()
	ok(t, f.AddServiceRoute(range6))
	ok(t, f.AddServiceRoute(range4))
	want := "dummy kube-ipvs0\n  192.0.2.10/32\n  2001:db8::10/128\n  route local 198.51.100.0/24\n  route local 2001:db8:96::/112\n"
	if got := f.Dump(); got != want {
		t.Fatalf("Dump() =\n%s\nwant\n%s", got, want)
	}
}
