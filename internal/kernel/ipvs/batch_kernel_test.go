package ipvs

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	mobyipvs "github.com/moby/ipvs"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/nldump"
	"github.com/ipvsproxy/ipvsproxy/internal/netnstest"
	"golang.org/x/sys/unix"
)

// More writes than one send takes go in several sends, each answered.
// (The adapter table checks the outcomes on the fake and the kernel.)
func TestKernelWritesMoreRealServersThanOneSend(t *testing.T) {
	skipUnlessKernel(t)
	a := newKernelInFreshNamespace(t)
	ok(t, a.AddVirtualServer(VirtualServer{VirtualServerKey: tcp80, Scheduler: "rr"}))
	var ws []RealServerWrite
	var want []RealServer
	for i := range nldump.MaxExchange*2 + 3 {
		r := rs(rip4a, uint16(1000+i), 1)
		ws = append(ws, RealServerWrite{Op: AddReal, VirtualServer: tcp80, RealServer: r})
		want = append(want, r)
	}
	ws = append(ws, RealServerWrite{Op: AddReal, VirtualServer: tcp80, RealServer: want[0]}) // the last one fails
	got := WriteRealServers(a, ws)
	for i, err := range got[:len(got)-1] {
		if err != nil {
			t.Fatalf("%v: %v", ws[i], err)
		}
	}
	wantErr(t, got[len(got)-1], ErrExists)
	wantRealServers(t, a, tcp80, want...)
}

// On a socket whose send buffer is smaller than a full send (a node with a
// small net.core.wmem_default) the kernel refuses the send (EMSGSIZE); the
// writes then go one per send, each answered.
func TestKernelWritesRealServersBeyondASmallSendBuffer(t *testing.T) {
	skipUnlessKernel(t)
	a := newKernelInFreshNamespace(t)
	k := a.(*kernel)
	if err := k.dump.conn.SetWriteBuffer(1024); err != nil {
		t.Fatal(err)
	}
	ok(t, a.AddVirtualServer(VirtualServer{VirtualServerKey: tcp80, Scheduler: "rr"}))
	var ws []RealServerWrite
	var want []RealServer
	for i := range nldump.MaxExchange {
		r := rs(rip4a, uint16(1000+i), 1)
		ws = append(ws, RealServerWrite{Op: AddReal, VirtualServer: tcp80, RealServer: r})
		want = append(want, r)
	}
	// The buffer is small enough that a full send is refused (else the
	// test would test nothing); a refused send adds nothing.
	if _, err := k.dump.writeRealServers(ws, nldump.MaxExchange); !errors.Is(err, unix.EMSGSIZE) {
		t.Fatalf("a send of %d writes: %v, want EMSGSIZE", len(ws), err)
	}
	for i, err := range WriteRealServers(a, ws) {
		if err != nil {
			t.Fatalf("%v: %v", ws[i], err)
		}
	}
	wantRealServers(t, a, tcp80, want...)
}

// What one real-server write costs: through moby/ipvs (a call each, as the
// reconciler writes), and a given number per send. Each iteration adds ten
// real servers to each of 64 virtual servers and deletes them again.
func BenchmarkKernelRealServerWrites(b *testing.B) {
	a, k := benchKernel(b)
	var ws []RealServerWrite
	for v := range 64 {
		key := VirtualServerKey{Protocol: TCP, Address: netip.AddrFrom4([4]byte{192, 0, 2, byte(v + 1)}), Port: 80}
		if err := a.AddVirtualServer(VirtualServer{VirtualServerKey: key, Scheduler: "rr"}); err != nil {
			b.Fatal(err)
		}
		for r := range 10 {
			ws = append(ws, RealServerWrite{Op: AddReal, VirtualServer: key, RealServer: rs(netip.AddrFrom4([4]byte{198, 51, 100, byte(r + 1)}), 8080, 1)})
		}
	}
	dels := make([]RealServerWrite, len(ws))
	for i, w := range ws {
		w.Op = DeleteReal
		dels[i] = w
	}
	check := func(errs []error, err error) {
		if err != nil {
			b.Fatal(err)
		}
		for i, e := range errs {
			if e != nil {
				b.Fatalf("write %d: %v", i, e)
			}
		}
	}
	b.Run("moby-one-call-each", func(b *testing.B) {
		for range b.N {
			for _, w := range ws {
				if err := a.AddRealServer(w.VirtualServer, w.RealServer); err != nil {
					b.Fatal(err)
				}
			}
			for _, w := range dels {
				if err := a.DeleteRealServer(w.VirtualServer, w.RealServer.RealServerKey); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*2*len(ws)), "ns/write")
	})
	for _, perSend := range []int{1, 10, 64} {
		b.Run(fmt.Sprintf("per-send=%d", perSend), func(b *testing.B) {
			for range b.N {
				check(k.dump.writeRealServers(ws, perSend))
				check(k.dump.writeRealServers(dels, perSend))
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*2*len(ws)), "ns/write")
		})
	}
}

// A virtual server created in a batch is the one moby/ipvs creates: the
// same flags, timeout, netmask and scheduler as read back by moby/ipvs,
// for every family, persistence and scheduler flags.
func TestKernelBatchCreatesWhatMobyIPVSCreates(t *testing.T) {
	skipUnlessKernel(t)
	a := newKernelInFreshNamespace(t)
	k := a.(*kernel)
	flags, err := ParseSchedulerFlags("sh", "sh-fallback,sh-port")
	ok(t, err)
	shapes := []VirtualServer{
		{VirtualServerKey: tcp80, Scheduler: "rr"},
		{VirtualServerKey: udp80, Scheduler: "wrr", PersistenceTimeout: 3 * time.Hour},
		{VirtualServerKey: sctp, Scheduler: "rr"},
		{VirtualServerKey: tcp6, Scheduler: "sh", SchedulerFlags: flags},
		{VirtualServerKey: udp6, Scheduler: "rr", PersistenceTimeout: 10 * time.Second},
	}
	// Each shape twice: by moby/ipvs on its own port, in a batch on the
	// next one.
	var batch []VirtualServer
	for _, vs := range shapes {
		ok(t, a.AddVirtualServer(vs))
		vs.Port++
		batch = append(batch, vs)
	}
	for i, err := range k.AddVirtualServers(batch) {
		if err != nil {
			t.Fatalf("%s: %v", batch[i].VirtualServerKey, err)
		}
	}
	read, err := k.handle.GetServices()
	ok(t, err)
	byKey := map[VirtualServerKey]*mobyipvs.Service{}
	for _, s := range read {
		addr, _ := netip.AddrFromSlice(s.Address)
		byKey[VirtualServerKey{Protocol: Protocol(s.Protocol), Address: addr.Unmap(), Port: s.Port}] = s
	}
	for i, vs := range shapes {
		single, batched := byKey[vs.VirtualServerKey], byKey[batch[i].VirtualServerKey]
		if single == nil || batched == nil {
			t.Fatalf("%s or its batched twin missing from %d services read", vs.VirtualServerKey, len(read))
		}
		if single.Flags != batched.Flags || single.Timeout != batched.Timeout || single.Netmask != batched.Netmask ||
			single.SchedName != batched.SchedName || single.AddressFamily != batched.AddressFamily || single.PEName != batched.PEName {
			t.Errorf("%s created by moby/ipvs as %+v, in a batch as %+v", vs.VirtualServerKey, *single, *batched)
		}
	}
}

// BenchmarkKernelVirtualServerAdds: what creating one virtual server costs
// a call each through moby/ipvs and 64 per send, 500 of them (deleted
// again between rounds, untimed).
func BenchmarkKernelVirtualServerAdds(b *testing.B) {
	a, k := benchKernel(b)
	var vss []VirtualServer
	for i := range 500 {
		vss = append(vss, VirtualServer{VirtualServerKey: VirtualServerKey{Protocol: TCP, Address: netip.AddrFrom4([4]byte{192, 0, 2, byte(i % 250)}), Port: uint16(80 + i/250)}, Scheduler: "rr"})
	}
	run := func(b *testing.B, add func() []error) {
		for range b.N {
			for i, err := range add() {
				if err != nil {
					b.Fatalf("%s: %v", vss[i].VirtualServerKey, err)
				}
			}
			b.StopTimer()
			for _, vs := range vss {
				ok(b, a.DeleteVirtualServer(vs.VirtualServerKey))
			}
			b.StartTimer()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(vss)), "ns/create")
	}
	b.Run("moby-one-call-each", func(b *testing.B) {
		run(b, func() []error {
			out := make([]error, len(vss))
			for i, vs := range vss {
				out[i] = a.AddVirtualServer(vs)
			}
			return out
		})
	})
	b.Run("per-send=64", func(b *testing.B) { run(b, func() []error { return k.AddVirtualServers(vss) }) })
}

// benchKernel is the kernel's IPVS table in a fresh namespace for a kernel
// benchmark, which is skipped where there is no IPVS (this host) or under
// -short.
func benchKernel(b *testing.B) (Interface, *kernel) {
	b.Helper()
	if testing.Short() {
		b.Skip("kernel benchmark")
	}
	ns := netnstest.New(b)
	netnstest.LoopbackUp(b, ns)
	a, err := NewInNamespace(ns)
	if err != nil {
		b.Skipf("no IPVS here: %v", err)
	}
	b.Cleanup(func() { a.Close() })
	return a, a.(*kernel)
}
