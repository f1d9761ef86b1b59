package proxier

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// writeCost is what one kernel write takes in these tests' clock: about
// what a netlink write takes under emulation.
const writeCost = 10 * time.Millisecond

// widePorts are the ports of the large Service: a legal Service whose
// writes (a set member and a virtual server each) take a minute at
// writeCost.
const widePorts = 3000

func wideService() *v1.Service {
	return servicetest.Service("wide", "10.96.0.30", func(s *v1.Service) {
		s.Spec.Ports = nil
		for i := range widePorts {
			s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "p" + strconv.Itoa(i), Port: int32(1 + i), Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)})
		}
	})
}

// A Service made while a large one is being written waits for about one
// write slice, not for the large one's every write: the sync writing it
// yields to the newer change, the next writes that change first, and the
// rest follows. Whether the large Service stays or is deleted before it is
// all written, the kernel ends as a sync that never yielded leaves it.
func TestALargeServiceYieldsTheWriterToANewerChange(t *testing.T) {
	for _, deleteWide := range []bool{false, true} {
		name := "the large Service stays"
		if deleteWide {
			name = "the large Service is deleted half-written"
		}
		t.Run(name, func(t *testing.T) {
			w := newPaidWrites(t, func(p *Proxier) {
				if deleteWide {
					p.Tracker().DeleteService("default", "wide")
				}
			})
			p := w.p
			p.Tracker().SetService(wideService())
			syncs, yielded := 0, 0
			for {
				res := p.Sync()
				syncs++
				if res.Yielded {
					yielded++
				}
				if services, endpoints, _ := p.tracker.Pending(); !res.Yielded && services+endpoints == 0 {
					break
				}
				if syncs > 50 {
					t.Fatalf("still yielding after %d syncs", syncs)
				}
			}
			w.checkWait(t, "the large", fmt.Sprintf("%d syncs, %d yielded", syncs, yielded))
			if yielded == 0 {
				t.Errorf("no sync yielded in %d", syncs)
			}
			w.checkAsOneSync(t, "yielded", func(rp *Proxier) {
				if !deleteWide {
					rp.Tracker().SetService(wideService())
				}
			})
		})
	}
}

// slowWrites charges each virtual server it creates to a test's clock and
// calls onWrite after it.
type slowWrites struct {
	ipvs.Interface
	onWrite func()
}

func (s slowWrites) AddVirtualServer(vs ipvs.VirtualServer) error {
	err := s.Interface.AddVirtualServer(vs)
	s.onWrite()
	return err
}

func (s slowWrites) EachRealServerList(fn func(ipvs.VirtualServerKey, []ipvs.RealServer) error) error {
	return s.Interface.(ipvs.RealServerTable).EachRealServerList(fn)
}

// A re-check whose read began after a sync yielded, and ran while the next
// wrote what it carried, takes those writes from the view the syncs kept,
// as it takes the syncs' own: the large Service's virtual servers, written
// after the read passed them, are not taken for someone else's, and the
// re-check's sync has nothing left to write.
func TestRecheckTakesWhatAYieldedSyncCarried(t *testing.T) {
	fk := newFakeKernel()
	gate := newReadGate()
	var mu sync.Mutex
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	writes := 0
	var p *Proxier
	after := servicetest.Service("after", "10.96.0.31")
	onWrite := func() {
		mu.Lock()
		now = now.Add(writeCost)
		writes++
		n := writes
		mu.Unlock()
		if n == 200 {
			p.Tracker().SetService(after)
		}
	}
	p = recheckProxier(t, fk, 2, func(i ipvs.Interface) ipvs.Interface {
		return gatedTable{Interface: slowWrites{Interface: i, onWrite: onWrite}, gate: gate}
	})
	p.now = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	mu.Lock()
	writes = 0
	mu.Unlock()
	p.Tracker().SetService(wideService())
	if res := mustSync(t, p); res.Full || !res.Yielded {
		t.Fatalf("the sync of the large Service: full=%v yielded=%v", res.Full, res.Yielded)
	}
	res := runRecheck(t, p, gate, func() {
		if res := mustSync(t, p); res.Full || res.Yielded {
			t.Fatalf("the next sync during the read: full=%v yielded=%v", res.Full, res.Yielded)
		}
	})
	for k := range p.view.foreign {
		t.Errorf("%s was taken for someone else's", k)
	}
	for _, st := range p.desired.Services {
		for _, pr := range st.Problems {
			t.Errorf("problem after the re-check: %s", pr.Message)
		}
	}
	if res.Writes != 0 {
		t.Errorf("the re-check wrote %d times after partial syncs had written everything", res.Writes)
	}
	for i := range widePorts {
		k := ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: netip.MustParseAddr("10.96.0.30"), Port: uint16(1 + i)}
		if _, err := fk.ipvs.RealServers(k); err != nil {
			t.Fatalf("the large Service's %s after the re-check: %v", k, err)
		}
	}
}

// deepEndpoints are the endpoints of the deep Service: one virtual server
// whose real servers take 30 s to write at writeCost.
const deepEndpoints = 3000

// deepService is a Service of one port with deepEndpoints endpoints, in
// slices of 100.
func deepService() (*v1.Service, []*discovery.EndpointSlice) {
	svc := servicetest.Service("deep", "10.96.0.40")
	var slices []*discovery.EndpointSlice
	for s := range deepEndpoints / 100 {
		eps := make([]string, 100)
		for i := range eps {
			n := s*100 + i
			eps[i] = "10.244." + strconv.Itoa(n/250) + "." + strconv.Itoa(1+n%250) + "@node2"
		}
		slices = append(slices, servicetest.Slice(svc, "deep-"+strconv.Itoa(s), 8080, eps...))
	}
	return svc, slices
}

// A Service made while the real servers of a Service of many endpoints
// are being written waits for about one write slice: the rest of that
// virtual server's real servers is deferred to the syncs after the one
// that writes the newer change, whether a partial sync or a full one
// (the re-check's, or a Node change's) was writing them. The kernel ends
// as a sync that never deferred leaves it.
func TestAServiceOfManyEndpointsYieldsTheWriterToANewerChange(t *testing.T) {
	for _, full := range []bool{false, true} {
		name := "in a partial sync"
		if full {
			name = "in a full sync"
		}
		t.Run(name, func(t *testing.T) {
			setDeep := func(p *Proxier) {
				deep, slices := deepService()
				p.Tracker().SetService(deep)
				for _, s := range slices {
					p.Tracker().SetEndpointSlice(s)
				}
			}
			w := newPaidWrites(t, func(*Proxier) {})
			p := w.p
			setDeep(p)
			p.needFull = full
			syncs, deferred := 0, 0
			for {
				res := p.Sync()
				if syncs == 0 && res.Full != full {
					t.Fatalf("the sync of the deep Service: full=%v, want %v", res.Full, full)
				}
				syncs++
				deferred += res.Deferred
				if services, endpoints, _ := p.tracker.Pending(); res.Carried == 0 && services+endpoints == 0 {
					break
				}
				if syncs > 50 {
					t.Fatalf("still deferring after %d syncs", syncs)
				}
			}
			w.checkWait(t, "the deep", fmt.Sprintf("%d syncs, %d deferred", syncs, deferred))
			if deferred == 0 {
				t.Errorf("no sync deferred the deep Service's real servers in %d", syncs)
			}
			w.checkAsOneSync(t, "deferred", setDeep)
		})
	}
}

// paidWrites is a proxier on the fakes, past its first full sync, whose
// every kernel write (but iptables-restore) costs writeCost of its clock.
// At the 200th such write, 2 s into a large Service's writes, the Service
// after (10.96.0.31) is made and meanwhile runs; programmed is when after's
// virtual server was created.
type paidWrites struct {
	p                   *Proxier
	fk                  *fakeKernel
	after               *v1.Service
	arrived, programmed time.Time
}

func newPaidWrites(t *testing.T, meanwhile func(*Proxier)) *paidWrites {
	t.Helper()
	w := &paidWrites{fk: newFakeKernel(), after: servicetest.Service("after", "10.96.0.31")}
	f := &faults{}
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	w.p = proxierAt(t, w.fk.faultyKernel(f), &now)
	if res := w.p.Sync(); !res.Full || !res.Completed {
		t.Fatalf("first sync: full=%v completed=%v", res.Full, res.Completed)
	}
	writes := 0
	f.set(func(op, object string) error {
		if op == "iptables-restore" {
			return nil
		}
		now = now.Add(writeCost)
		writes++
		if writes == 200 {
			w.p.Tracker().SetService(w.after)
			w.arrived = now
			meanwhile(w.p)
		}
		if op == "ipvs-add" && strings.HasPrefix(object, "TCP 10.96.0.31:80") {
			w.programmed = now
		}
		return nil
	})
	return w
}

// checkWait: the Service after was programmed within twice the write slice
// of writes after it was made during what's writes.
func (w *paidWrites) checkWait(t *testing.T, what, syncs string) {
	t.Helper()
	if w.programmed.IsZero() {
		t.Fatalf("the Service made during %s one's writes was never programmed", what)
	}
	if waited := w.programmed.Sub(w.arrived); waited > 2*writeSlice {
		t.Errorf("the Service made during %s one's writes waited %s of writes (%s), more than twice the write slice (%s)", what, waited, syncs, writeSlice)
	}
	t.Logf("waited %s of writes; %s", w.programmed.Sub(w.arrived), syncs)
}

// checkAsOneSync: the kernel is what one sync that never stopped leaves of
// the objects set makes, with the Service after.
func (w *paidWrites) checkAsOneSync(t *testing.T, stopped string, set func(*Proxier)) {
	t.Helper()
	ref := newFakeKernel()
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	rp := proxierAt(t, ref.kernel(), &now)
	set(rp)
	rp.Tracker().SetService(w.after)
	rp.Sync()
	if got, want := w.fk.node.Dump(), ref.node.Dump(); got != want {
		t.Errorf("after the syncs that %s the kernel is not what one sync leaves:\n%s", stopped, lineDiff(want, got))
	}
}
