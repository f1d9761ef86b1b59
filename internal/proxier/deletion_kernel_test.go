package proxier

import (
	"fmt"
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/ipvsproxy/ipvsproxy/internal/adapters"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/ipset"
)

// manyServices adds n Services (one in four a NodePort), one endpoint
// each, to p's tracker and returns them.
func manyServices(p *Proxier, n int) []*v1.Service {
	var svcs []*v1.Service
	for i := range n {
		var opts []servicetest.Option
		if i%4 == 0 {
			opts = append(opts, servicetest.NodePort(int32(30000+i)))
		}
		svc := servicetest.Service(fmt.Sprintf("svc-%d", i), netip.AddrFrom4([4]byte{10, 96, byte(1 + i/250), byte(1 + i%250)}).String(), opts...)
		p.Tracker().SetService(svc)
		p.Tracker().SetEndpointSlice(servicetest.Slice(svc, svc.Name+"-a", 8080, "10.244.1.5@node1"))
		svcs = append(svcs, svc)
	}
	return svcs
}

// refusedBatches is how many batch messages the kernel refused k's ipset
// adapter.
func refusedBatches(t testing.TB, k adapters.Kernel) int64 {
	t.Helper()
	kernel, ok := k.IPSet.(*ipset.Kernel)
	if !ok {
		t.Fatalf("the ipset adapter is a %T, not the kernel's", k.IPSet)
	}
	return kernel.RefusedBatches()
}

// TestDeletingManyServicesOnRealKernel: one sync deletes 299 of 300
// Services (a namespace deleted): their virtual servers, set members and
// ownership records go, in batches the kernel takes, the survivor's stay,
// and a restart finds nothing to write.
func TestDeletingManyServicesOnRealKernel(t *testing.T) {
	k := realKernelInNamespace(t)
	cfg := testConfig()
	p, _ := newRealProxier(t, k, cfg)
	svcs := manyServices(p, 300)
	mustSync(t, p)
	for _, svc := range svcs[1:] {
		p.Tracker().DeleteService(svc.Namespace, svc.Name)
	}
	if res := p.Sync(); res.Err() != nil || res.Writes == 0 {
		t.Fatalf("deleting sync: writes=%d err=%v", res.Writes, res.Err())
	}
	vss, err := k.IPVS.VirtualServers()
	if err != nil {
		t.Fatal(err)
	}
	// svc-0's cluster IP and its node port on the node's address.
	if len(vss) != 2 {
		t.Fatalf("%d virtual servers left, want svc-0's two: %v", len(vss), vss)
	}
	for set, want := range map[string]int{owned.SetClusterIP: 1, owned.SetNodePortTCP: 1, owned.SetOwned: len(vss)} {
		es, err := k.IPSet.Entries(set)
		if err != nil || len(es) != want {
			t.Fatalf("%s holds %v (%v), want %d members", set, es, err, want)
		}
	}
	if n := refusedBatches(t, k); n != 0 {
		t.Fatalf("the kernel refused %d batch messages", n)
	}
	p2, _ := newRealProxier(t, k, cfg)
	manyServices(p2, 1)
	if res := p2.Sync(); res.Err() != nil || res.Writes != 0 {
		t.Fatalf("restart: writes=%d err=%v", res.Writes, res.Err())
	}
}

// BenchmarkDeletingServicesOnRealKernel times the sync that deletes 500
// Services at once (a namespace deleted), after one that created them:
// with the set members and records deleted in batches, and one message
// each (the kernel's adapter behind a wrapper that hides its batches),
// alternately in the same boot.
func BenchmarkDeletingServicesOnRealKernel(b *testing.B) {
	const n = 500
	run := func(b *testing.B, hideBatches bool) {
		k := realKernelInNamespace(b)
		if hideBatches {
			k.IPSet = oneMessageEach{k.IPSet}
		}
		p, _ := newRealProxier(b, k, testConfig())
		for range b.N {
			b.StopTimer()
			svcs := manyServices(p, n)
			if res := p.Sync(); res.Err() != nil {
				b.Fatal(res.Err())
			}
			for _, svc := range svcs {
				p.Tracker().DeleteService(svc.Namespace, svc.Name)
			}
			b.StartTimer()
			if res := p.Sync(); res.Err() != nil {
				b.Fatal(res.Err())
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/Service")
		if !hideBatches {
			if n := refusedBatches(b, k); n != 0 {
				b.Fatalf("the kernel refused %d batch messages", n)
			}
		}
	}
	for range 3 {
		b.Run("one-message-each", func(b *testing.B) { run(b, true) })
		b.Run("batched", func(b *testing.B) { run(b, false) })
	}
}

// oneMessageEach is an ipset adapter without its batches: ipset.AddEntries
// and DeleteEntries write through it one member a message.
type oneMessageEach struct{ ipset.Interface }
