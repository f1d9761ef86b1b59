package ipset

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"github.com/mdlayher/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// TestKernelAddsEntriesInManyBatches sends small batches, several per send,
// and reads the set back with the ipset tool: an encoding mistake that the
// package's own parser shared would show here.
func TestKernelAddsEntriesInManyBatches(t *testing.T) {
	k, ns := kernelWithIPsetTool(t)
	var want []string
	for _, sh := range shapes {
		create(t, k, sh.set)
		var es []Entry
		switch sh.set.Type {
		case BitmapPort:
			for i := range 40 {
				es = append(es, Entry{Port: uint16(30000 + i)})
			}
		default:
			for i := range 40 {
				e := sh.a
				e.Port += uint16(i)
				if sh.set.Type == HashIP || sh.set.Type == HashNet {
					e = shiftAddress(sh.a, i)
				}
				es = append(es, e)
			}
		}
		es = append(es, es[3]) // one twice: no error
		// About three entries a message, two messages a send.
		for i, err := range k.addEntries(sh.set.Name, es, 120, 2) {
			if err != nil {
				t.Fatalf("add %s to %s: %v", es[i].String(sh.set.Type), sh.set.Name, err)
			}
		}
		for _, e := range es[:40] {
			want = append(want, "add "+sh.set.Name+" "+e.String(sh.set.Type))
		}
	}
	if n := k.refusedBatches.Load(); n != 0 {
		t.Fatalf("the kernel refused %d batch messages (their members went one at a time)", n)
	}
	wantSaved(t, ns, want)
}

// TestKernelDeletesEntriesInManyBatches deletes most of each set's members,
// and some it never had, in small batches, several per send, and reads the
// sets back with the ipset tool.
func TestKernelDeletesEntriesInManyBatches(t *testing.T) {
	k, ns := kernelWithIPsetTool(t)
	var want []string
	for _, sh := range shapes {
		create(t, k, sh.set)
		var es []Entry
		for i := range 45 {
			e := sh.a
			switch sh.set.Type {
			case BitmapPort:
				e = Entry{Port: uint16(30000 + i)}
			case HashIP, HashNet:
				e = shiftAddress(sh.a, i)
			default:
				e.Port += uint16(i)
			}
			es = append(es, e)
		}
		for i, err := range k.addEntries(sh.set.Name, es[:40], 120, 2) {
			if err != nil {
				t.Fatalf("add %s to %s: %v", es[i].String(sh.set.Type), sh.set.Name, err)
			}
		}
		// The first 30 and the five never added, about three a message.
		gone := append(es[:30:30], es[40:]...)
		for i, err := range k.deleteEntries(sh.set.Name, gone, 120, 2) {
			if err != nil {
				t.Fatalf("delete %s from %s: %v", gone[i].String(sh.set.Type), sh.set.Name, err)
			}
		}
		for _, e := range es[30:40] {
			want = append(want, "add "+sh.set.Name+" "+e.String(sh.set.Type))
		}
	}
	if n := k.refusedBatches.Load(); n != 0 {
		t.Fatalf("the kernel refused %d batch messages (their members went one at a time)", n)
	}
	wantSaved(t, ns, want)
}

// TestKernelAddsEntriesBeyondASmallSendBuffer (and deletes them): on a socket whose send
// buffer is smaller than a send of batches (a node with a small
// net.core.wmem_default) the kernel refuses the send (EMSGSIZE); the
// members then go one at a time, each answered.
func TestKernelAddsEntriesBeyondASmallSendBuffer(t *testing.T) {
	k, _ := kernelInNamespace(t)
	if err := k.dump.conn.SetWriteBuffer(4096); err != nil {
		t.Fatal(err)
	}
	create(t, k, Set{Name: "s", Type: HashIPPort, Family: IPv4})
	es := ipPortEntries(2000)
	for i, err := range k.AddEntries("s", es) {
		if err != nil {
			t.Fatalf("add %s: %v", es[i].String(HashIPPort), err)
		}
	}
	if got := entries(t, k, "s"); len(got) != len(es) {
		t.Fatalf("%d members in the set, want %d", len(got), len(es))
	}
	if k.refusedBatches.Load() == 0 {
		t.Fatal("no send was refused: the buffer did not shrink, and the test tests nothing")
	}
	// Deleted the same way.
	refused := k.refusedBatches.Load()
	for i, err := range k.DeleteEntries("s", es) {
		if err != nil {
			t.Fatalf("delete %s: %v", es[i].String(HashIPPort), err)
		}
	}
	if got := entries(t, k, "s"); len(got) != 0 {
		t.Fatalf("%d members left in the set, want none", len(got))
	}
	if k.refusedBatches.Load() == refused {
		t.Fatal("no send of deletions was refused: the test tests nothing")
	}
}

// With a send buffer too small for four messages but large enough for one,
// the batches go one message per send: no member is added on its own.
func TestKernelAddsEntriesOneMessagePerSendInAMiddlingBuffer(t *testing.T) {
	k, _ := kernelInNamespace(t)
	if err := k.dump.conn.SetWriteBuffer(16 << 10); err != nil { // 32 KiB: the kernel doubles it
		t.Fatal(err)
	}
	create(t, k, Set{Name: "s", Type: HashIPPort, Family: IPv4})
	es := ipPortEntries(2000)
	// The buffer refuses a full send (else the test would test nothing).
	if _, err := k.dump.exchange([]netlink.Message{
		k.dump.adtRequest(nl.IPSET_CMD_ADD, "s", make([]byte, 12<<10)), k.dump.adtRequest(nl.IPSET_CMD_ADD, "s", make([]byte, 12<<10)),
		k.dump.adtRequest(nl.IPSET_CMD_ADD, "s", make([]byte, 12<<10)),
	}); !errors.Is(err, unix.EMSGSIZE) {
		t.Fatalf("a send of three 12 KiB messages: %v, want EMSGSIZE", err)
	}
	for i, err := range k.AddEntries("s", es) {
		if err != nil {
			t.Fatalf("add %s: %v", es[i].String(HashIPPort), err)
		}
	}
	if got := entries(t, k, "s"); len(got) != len(es) {
		t.Fatalf("%d members in the set, want %d", len(got), len(es))
	}
	if n := k.refusedBatches.Load(); n != 0 {
		t.Fatalf("%d batch messages went one member at a time, want none", n)
	}
}

// ipPortEntries returns n distinct hash:ip,port members.
func ipPortEntries(n int) []Entry {
	es := make([]Entry, n)
	for i := range es {
		es[i] = Entry{IP: netip.AddrFrom4([4]byte{198, 51, 100, byte(i)}), Protocol: "tcp", Port: uint16(1000 + i)}
	}
	return es
}

// shiftAddress returns e with its address i further on; a network becomes
// the network of two addresses 2i further on (the ipset tool prints a host
// network without its length).
func shiftAddress(e Entry, i int) Entry {
	shift := func(a netip.Addr) netip.Addr {
		for range i {
			a = a.Next()
		}
		return a
	}
	if e.Net.IsValid() {
		a := shift(shift(e.Net.Masked().Addr()))
		e.Net = netip.PrefixFrom(a, a.BitLen()-1)
		return e
	}
	e.IP = shift(e.IP)
	return e
}

// BenchmarkKernelEntryAdds: what one entry costs added with a message each
// (AddEntry) and in batches (AddEntries), 1,000 hash:ip,port entries a set.
func BenchmarkKernelEntryAdds(b *testing.B) {
	if testing.Short() {
		b.Skip("kernel benchmark")
	}
	k, _ := kernelInNamespace(b)
	const n = 1000
	es := ipPortEntries(n)
	run := func(b *testing.B, add func(name string)) {
		for i := range b.N {
			name := fmt.Sprintf("bench-%d", i)
			if err := k.CreateSet(Set{Name: name, Type: HashIPPort, Family: IPv4}); err != nil {
				b.Fatal(err)
			}
			add(name)
			b.StopTimer()
			if err := k.DestroySet(name); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
	}
	b.Run("one-message-each", func(b *testing.B) {
		run(b, func(name string) {
			for _, e := range es {
				if err := k.AddEntry(name, e); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("one-batch-each", func(b *testing.B) {
		run(b, func(name string) {
			for i := range es {
				if err := k.AddEntries(name, es[i:i+1])[0]; err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("batched", func(b *testing.B) {
		run(b, func(name string) {
			for _, err := range k.AddEntries(name, es) {
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

// BenchmarkKernelEntryDeletes: what one entry costs deleted with a message
// each (DeleteEntry) and in batches (DeleteEntries), 1,000 hash:ip,port
// entries from a set that holds them.
func BenchmarkKernelEntryDeletes(b *testing.B) {
	if testing.Short() {
		b.Skip("kernel benchmark")
	}
	k, _ := kernelInNamespace(b)
	const n = 1000
	es := ipPortEntries(n)
	if err := k.CreateSet(Set{Name: "bench", Type: HashIPPort, Family: IPv4}); err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B, del func()) {
		for range b.N {
			b.StopTimer()
			for _, err := range k.AddEntries("bench", es) {
				if err != nil {
					b.Fatal(err)
				}
			}
			b.StartTimer()
			del()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
	}
	b.Run("one-message-each", func(b *testing.B) {
		run(b, func() {
			for _, e := range es {
				if err := k.DeleteEntry("bench", e); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("batched", func(b *testing.B) {
		run(b, func() {
			for _, err := range k.DeleteEntries("bench", es) {
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}
