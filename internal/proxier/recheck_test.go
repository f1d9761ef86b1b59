package proxier

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	v1 "k8s.io/api/core/v1"
)

// readGate holds a full read at one of its steps until released: a re-check
// read that takes as long as it likes, at the point the test chooses.
type readGate struct {
	mu      sync.Mutex
	armed   bool
	entered chan struct{}
	release chan struct{}
}

func newReadGate() *readGate {
	return &readGate{entered: make(chan struct{}), release: make(chan struct{})}
}

func (g *readGate) arm() {
	g.mu.Lock()
	g.armed = true
	g.mu.Unlock()
}

// pass blocks the first caller after arm until open.
func (g *readGate) pass() {
	g.mu.Lock()
	armed := g.armed
	g.armed = false
	g.mu.Unlock()
	if armed {
		close(g.entered)
		<-g.release
	}
}

func (g *readGate) open() {
	select {
	case <-g.release:
	default:
		close(g.release)
	}
}

// waitEntered fails the test unless a read reached the gate within d.
func (g *readGate) waitEntered(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(d):
		t.Fatalf("no full read reached the gate within %v", d)
	}
}

// gatedListing holds the full read at its listing of the virtual servers
// (before any real server is read); gatedTable after the real-server
// table, when every object has been read. Partial syncs list neither.
type gatedListing struct {
	ipvs.Interface
	gate *readGate
}

func (g gatedListing) VirtualServers() ([]ipvs.VirtualServer, error) {
	g.gate.pass()
	return g.Interface.VirtualServers()
}

func (g gatedListing) EachRealServerList(fn func(ipvs.VirtualServerKey, []ipvs.RealServer) error) error {
	return g.Interface.(ipvs.RealServerTable).EachRealServerList(fn)
}

type gatedTable struct {
	ipvs.Interface
	gate *readGate
}

func (g gatedTable) EachRealServerList(fn func(ipvs.VirtualServerKey, []ipvs.RealServer) error) error {
	err := g.Interface.(ipvs.RealServerTable).EachRealServerList(fn)
	g.gate.pass()
	return err
}

// webService is a Service with two endpoints on another node, and its slice.
func webService(i int) (*v1.Service, ipvs.VirtualServerKey) {
	ip := netip.AddrFrom4([4]byte{10, 96, 7, byte(i)})
	svc := servicetest.Service(fmt.Sprintf("web%d", i), ip.String())
	return svc, ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: ip, Port: 80}
}

func hasRealServer(t *testing.T, fk *fakeKernel, vs ipvs.VirtualServerKey, addr string) bool {
	t.Helper()
	rss, err := fk.ipvs.RealServers(vs)
	if err != nil {
		return false
	}
	for _, rs := range rss {
		if rs.Address == netip.MustParseAddr(addr) {
			return true
		}
	}
	return false
}

// An endpoint change that arrives while the periodic re-check reads the
// kernel is written by a partial sync while the read goes on, not after
// it: at 20,000 Services and more a re-check's read takes tens of seconds,
// and every change met one within about a period. The read here waits at
// its listing of the virtual servers until the change is in the kernel.
func TestChangeDuringRecheckIsWrittenBeforeTheReadEnds(t *testing.T) {
	fk := newFakeKernel()
	gate := newReadGate()
	k := fk.kernel()
	k.IPVS = gatedListing{Interface: fk.ipvs, gate: gate}
	cfg := testConfig()
	cfg.SyncPeriod, cfg.MinSyncPeriod = 50*time.Millisecond, 0
	p, err := New(cfg, servicetest.ThisNode, k, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.Tracker().SetService(apiServerService())
	svc, vs := webService(1)
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web1-a", 8080, "10.244.1.1@node2", "10.244.1.2@node2"))
	fulls := make(chan SyncResult, 16)
	p.OnSync = func(r SyncResult) {
		if r.Full {
			fulls <- r
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { p.Run(ctx); close(stopped) }()
	t.Cleanup(func() { gate.open(); cancel(); <-stopped })
	<-fulls // the first sync

	gate.arm()
	gate.waitEntered(t, 5*time.Second)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web1-a", 8080, "10.244.1.1@node2", "10.244.1.2@node2", "10.244.1.3@node2"))
	deadline := time.Now().Add(3 * time.Second)
	for !hasRealServer(t, fk, vs, "10.244.1.3") {
		if time.Now().After(deadline) {
			t.Fatalf("the new endpoint was not written within 3 s while the re-check read:\n%s", fk.ipvs.Dump())
		}
		time.Sleep(5 * time.Millisecond)
	}
	gate.open()
	select {
	case r := <-fulls:
		if err := r.Err(); err != nil {
			t.Fatalf("the re-check's sync failed: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the re-check did not finish once its read could")
	}
	if !hasRealServer(t, fk, vs, "10.244.1.3") {
		t.Fatalf("the re-check undid the change written during its read:\n%s", fk.ipvs.Dump())
	}
}

// recheckProxier is a synced proxier on fk whose re-check reads through k,
// with n web Services.
func recheckProxier(t *testing.T, fk *fakeKernel, n int, wrap func(ipvs.Interface) ipvs.Interface) *Proxier {
	t.Helper()
	k := fk.kernel()
	k.IPVS = wrap(fk.ipvs)
	p, err := New(testConfig(), servicetest.ThisNode, k, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.Tracker().SetService(apiServerService())
	for i := 1; i <= n; i++ {
		svc, _ := webService(i)
		p.Tracker().SetService(svc)
		p.Tracker().SetEndpointSlice(servicetest.Slice(svc, svc.Name+"-a", 8080, fmt.Sprintf("10.244.%d.1@node2", i), fmt.Sprintf("10.244.%d.2@node2", i)))
	}
	if res := mustSync(t, p); !res.Full {
		t.Fatal("first sync not full")
	}
	return p
}

// runRecheck starts the period's re-check, lets during run while its read
// waits at the gate, and syncs what it read.
func runRecheck(t *testing.T, p *Proxier, gate *readGate, during func()) SyncResult {
	t.Helper()
	gate.arm()
	if !p.startRecheck() {
		t.Fatal("the period's re-check did not start beside the loop")
	}
	gate.waitEntered(t, 5*time.Second)
	during()
	gate.open()
	res, ok := p.finishRecheck()
	if !ok || !res.Full {
		t.Fatalf("the re-check's sync: ok=%v full=%v", ok, res.Full)
	}
	if err := res.Err(); err != nil {
		t.Fatalf("the re-check's sync failed: %v", err)
	}
	return res
}

// The re-check that reads beside the loop still repairs what changed
// behind the proxier's back before its read: a real server deleted, a
// virtual server deleted, one real server added by someone else, a
// cluster IP's set member removed; and a change synced during its read
// stays.
func TestRecheckBesideTheLoopRepairsWhatChangedBehindItsBack(t *testing.T) {
	fk := newFakeKernel()
	gate := newReadGate()
	p := recheckProxier(t, fk, 5, func(i ipvs.Interface) ipvs.Interface { return gatedListing{Interface: i, gate: gate} })
	_, lostRS := webService(1)
	_, lostVS := webService(2)
	_, stray := webService(3)
	svc4, changed := webService(4)
	if err := fk.ipvs.DeleteRealServer(lostRS, ipvs.RealServerKey{Address: netip.MustParseAddr("10.244.1.1"), Port: 8080}); err != nil {
		t.Fatal(err)
	}
	if err := fk.ipvs.DeleteVirtualServer(lostVS); err != nil {
		t.Fatal(err)
	}
	if err := fk.ipvs.AddRealServer(stray, ipvs.RealServer{RealServerKey: ipvs.RealServerKey{Address: netip.MustParseAddr("192.0.2.9"), Port: 8080}, Weight: 1}); err != nil {
		t.Fatal(err)
	}
	_, member := webService(5)
	entry := ipset.Entry{IP: member.Address, Protocol: "tcp", Port: 80}
	if err := fk.ipset.DeleteEntry(owned.SetClusterIP, entry); err != nil {
		t.Fatal(err)
	}

	runRecheck(t, p, gate, func() {
		p.Tracker().SetEndpointSlice(servicetest.Slice(svc4, "web4-a", 8080, "10.244.4.1@node2", "10.244.4.9@node2"))
		if res := mustSync(t, p); res.Full {
			t.Fatal("the sync during the re-check's read was full")
		}
	})

	for _, c := range []struct {
		vs   ipvs.VirtualServerKey
		addr string
		want bool
	}{
		{lostRS, "10.244.1.1", true}, {lostVS, "10.244.2.1", true}, {lostVS, "10.244.2.2", true},
		{stray, "192.0.2.9", false}, {changed, "10.244.4.9", true}, {changed, "10.244.4.2", false},
	} {
		if got := hasRealServer(t, fk, c.vs, c.addr); got != c.want {
			t.Errorf("%s has %s: %v, want %v", c.vs, c.addr, got, c.want)
		}
	}
	if members, err := fk.ipset.Entries(owned.SetClusterIP); err != nil || !slices.Contains(members, entry) {
		t.Errorf("%s member %v not added back: %v", owned.SetClusterIP, entry, err)
	}
	if t.Failed() {
		t.Logf("kernel:\n%s", fk.ipvs.Dump())
	}
}

// What partial syncs wrote after the read had passed it is taken from the
// view they kept, not from the read: a Service created during the read,
// its virtual server, record and set members written after they were
// read, is not taken for someone else's (its Service would lose its
// cluster IP), and an endpoint removed after its virtual server was read
// is not written back.
func TestRecheckTakesWhatPartialSyncsWroteAfterItsRead(t *testing.T) {
	fk := newFakeKernel()
	gate := newReadGate()
	p := recheckProxier(t, fk, 2, func(i ipvs.Interface) ipvs.Interface { return gatedTable{Interface: i, gate: gate} })
	svc1, vs1 := webService(1)
	svc3, vs3 := webService(3)
	var conflicts []string
	res := runRecheck(t, p, gate, func() {
		p.Tracker().SetEndpointSlice(servicetest.Slice(svc1, "web1-a", 8080, "10.244.1.1@node2"))
		p.Tracker().SetService(svc3)
		p.Tracker().SetEndpointSlice(servicetest.Slice(svc3, "web3-a", 8080, "10.244.3.1@node2"))
		if res := mustSync(t, p); res.Full || res.Writes == 0 {
			t.Fatalf("the sync during the re-check's read: full=%v writes=%d", res.Full, res.Writes)
		}
	})
	if res.Writes != 0 {
		t.Errorf("the re-check wrote %d times after a read the partial sync had outdated, want none", res.Writes)
	}
	if p.view.foreign[vs3] {
		t.Errorf("%s, created during the read, was taken for someone else's", vs3)
	}
	for _, st := range p.desired.Services {
		for _, pr := range st.Problems {
			conflicts = append(conflicts, pr.Message)
		}
	}
	if len(conflicts) > 0 {
		t.Errorf("problems after the re-check: %v", conflicts)
	}
	if hasRealServer(t, fk, vs1, "10.244.1.2") || !hasRealServer(t, fk, vs1, "10.244.1.1") || !hasRealServer(t, fk, vs3, "10.244.3.1") {
		t.Errorf("kernel after the re-check:\n%s", fk.ipvs.Dump())
	}
}

// slowTable lists the real servers slowly, a virtual server at a time, so
// that the re-check's read looks each up in the desired state while partial
// syncs change it (run with -race).
type slowTable struct {
	ipvs.Interface
}

func (s slowTable) EachRealServerList(fn func(ipvs.VirtualServerKey, []ipvs.RealServer) error) error {
	return s.Interface.(ipvs.RealServerTable).EachRealServerList(func(k ipvs.VirtualServerKey, rss []ipvs.RealServer) error {
		time.Sleep(time.Millisecond)
		return fn(k, rss)
	})
}

// Partial syncs that add, change and delete Services while a re-check reads
// run beside its read (no data race, no deadlock), and the re-check's sync
// then finds the kernel as a fresh full sync would: it writes nothing.
func TestPartialSyncsBesideARecheckRead(t *testing.T) {
	fk := newFakeKernel()
	p := recheckProxier(t, fk, 60, func(i ipvs.Interface) ipvs.Interface { return slowTable{i} })
	if !p.startRecheck() {
		t.Fatal("the period's re-check did not start beside the loop")
	}
	for round := 0; ; round++ {
		select {
		case <-p.recheckDone():
		default:
			i := 1 + round%70
			svc, _ := webService(i)
			switch round % 3 {
			case 0:
				p.Tracker().SetService(svc)
				p.Tracker().SetEndpointSlice(servicetest.Slice(svc, svc.Name+"-a", 8080, fmt.Sprintf("10.244.%d.%d@node2", i, 3+round%5)))
			case 1:
				p.Tracker().SetEndpointSlice(servicetest.Slice(svc, svc.Name+"-a", 8080, fmt.Sprintf("10.244.%d.1@node2", i)))
			default:
				p.Tracker().DeleteService("default", svc.Name)
			}
			if res := mustSync(t, p); res.Full {
				t.Fatal("a sync during the re-check's read was full")
			}
			continue
		}
		break
	}
	if res, ok := p.finishRecheck(); !ok || !res.Full || res.Err() != nil {
		t.Fatalf("the re-check's sync: ok=%v full=%v err=%v", ok, res.Full, res.Err())
	}
	before := kernelDump(fk)
	p.RequestFullSync()
	if res := mustSync(t, p); res.Writes != 0 {
		t.Errorf("a full sync after the re-check wrote %d times:\n%s\nwas\n%s", res.Writes, kernelDump(fk), before)
	}
}
