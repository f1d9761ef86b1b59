package proxier

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"

	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	v1 "k8s.io/api/core/v1"
)

var errHashFull = errors.New("hash is full") // IPSET_ERR_HASH_FULL

// One object that keeps failing costs its own retries and nothing else
// (one bad Service must not stall the node): syncs stay partial, other Services are programmed, the
// UDP "gained endpoints" flush still works for them, the failure is an
// Event on its Service and a status with backoff, and the sync counts as
// completed for health.
func TestOneFailingObjectIsRetriedAloneAndNothingElseSuffers(t *testing.T) {
	fk := newFakeKernel()
	f := &faults{}
	adds := 0
	f.set(func(op, object string) error {
		if op == "ipset-add" && strings.HasPrefix(object, "KUBE-LOAD-BALANCER-FW 203.0.113.140") {
			adds++
			return errHashFull
		}
		return nil
	})
	rec := newRecorder()
	p, err := New(testConfig(), servicetest.ThisNode, fk.faultyKernel(f), rec)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	p.now = func() time.Time { return now }
	lb := servicetest.Service("lb", "10.96.0.20", servicetest.LoadBalancer(30090, "203.0.113.140"), func(s *v1.Service) {
		s.Spec.LoadBalancerSourceRanges = []string{"198.51.100.0/24"}
	})
	dns := servicetest.Service("dns", "10.96.0.53", servicetest.Protocol(v1.ProtocolUDP))
	for _, s := range []*v1.Service{lb, dns} {
		p.Tracker().SetService(s)
	}
	p.Tracker().SetEndpointSlice(servicetest.Slice(lb, "lb-a", 8080, "10.244.1.5@node1"))
	res := p.Sync()
	if !res.Completed || res.WriteErrors[string(snapshot.ObjectSetEntry)] != 1 || res.FailingObjects[string(snapshot.ObjectSetEntry)] != 1 {
		t.Fatalf("first sync: completed=%v errors=%v failing=%v", res.Completed, res.WriteErrors, res.FailingObjects)
	}
	if ev := drainEvents(rec); !strings.Contains(ev, "Warning SyncFailed writing ipset KUBE-LOAD-BALANCER-FW member 203.0.113.140,tcp:80 to the kernel failed") {
		t.Fatalf("events: %q", ev)
	}
	st := p.ReconcileStatus()
	if len(st.Objects) != 1 || st.Objects[0].Services[0] != "default/lb" || !strings.Contains(st.Objects[0].LastError, "hash is full") {
		t.Fatalf("status: %v", st.Objects)
	}
	// The rest of the Service works.
	if got := realServers(t, fk, webVSFor("203.0.113.140")); len(got) != 1 {
		t.Fatalf("LB real servers %v", got)
	}

	// dns gains an endpoint: a partial sync, and its stale flow goes.
	vip := netip.MustParseAddrPort("10.96.0.53:80")
	src := netip.MustParseAddrPort("10.244.3.8:40000")
	fk.conntrack.AddFlow(conntrack.Flow{Protocol: conntrack.UDP, OrigSrc: src, OrigDst: vip, ReplySrc: vip, ReplyDst: src})
	p.Tracker().SetEndpointSlice(servicetest.Slice(dns, "dns-a", 53, "10.244.1.5@node1"))
	res = p.Sync()
	if res.Full || res.ConntrackDeleted != 1 {
		t.Fatalf("dns sync: full=%v conntrack deleted=%d", res.Full, res.ConntrackDeleted)
	}
	if adds != 1 {
		t.Fatalf("retried before the backoff ended: %d adds", adds)
	}
	// Retries back off: 1 s, 2 s, 4 s after each failure; no sync is full.
	for i, wait := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		now = now.Add(wait - time.Millisecond)
		p.Sync()
		if adds != i+1 {
			t.Fatalf("retry %d came early", i+1)
		}
		now = now.Add(time.Millisecond)
		if res := p.Sync(); res.Full || adds != i+2 || !res.Completed {
			t.Fatalf("retry %d: full=%v adds=%d", i+1, res.Full, adds)
		}
	}
	if ev := drainEvents(rec); ev != "" {
		t.Fatalf("a retry that fails the same way reported again: %q", ev)
	}
	// The set gets room: the next retry succeeds and the status is clean.
	f.set(nil)
	now = now.Add(8 * time.Second)
	if res := p.Sync(); res.Err() != nil || res.Full {
		t.Fatalf("repair: %v full=%v", res.Err(), res.Full)
	}
	if dump := fk.ipset.Dump(); !strings.Contains(after(dump, "set KUBE-LOAD-BALANCER-FW "), "203.0.113.140,tcp:80") {
		t.Fatalf("member missing:\n%s", dump)
	}
	if st := p.ReconcileStatus(); len(st.Objects) != 0 {
		t.Fatalf("status after repair: %v", st.Objects)
	}
}

// The same, with only what the proxier had before per-object status: a
// failing object makes no sync full and switches no flush off.
func TestFailingObjectKeepsSyncsPartialAndUDPFlushOn(t *testing.T) {
	fk := newFakeKernel()
	f := &faults{}
	f.set(func(op, object string) error {
		if op == "ipset-add" && strings.HasPrefix(object, "KUBE-LOAD-BALANCER-FW 203.0.113.140") {
			return errHashFull
		}
		return nil
	})
	p, err := New(testConfig(), servicetest.ThisNode, fk.faultyKernel(f), nil)
	if err != nil {
		t.Fatal(err)
	}
	lb := servicetest.Service("lb", "10.96.0.20", servicetest.LoadBalancer(30090, "203.0.113.140"), func(s *v1.Service) {
		s.Spec.LoadBalancerSourceRanges = []string{"198.51.100.0/24"}
	})
	dns := servicetest.Service("dns", "10.96.0.53", servicetest.Protocol(v1.ProtocolUDP))
	p.Tracker().SetService(lb)
	p.Tracker().SetService(dns)
	p.Tracker().SetEndpointSlice(servicetest.Slice(lb, "lb-a", 8080, "10.244.1.5@node1"))
	p.Sync()
	vip := netip.MustParseAddrPort("10.96.0.53:80")
	src := netip.MustParseAddrPort("10.244.3.8:40000")
	fk.conntrack.AddFlow(conntrack.Flow{Protocol: conntrack.UDP, OrigSrc: src, OrigDst: vip, ReplySrc: vip, ReplyDst: src})
	p.Tracker().SetEndpointSlice(servicetest.Slice(dns, "dns-a", 53, "10.244.1.5@node1"))
	if res := p.Sync(); res.Full || res.ConntrackDeleted != 1 {
		t.Fatalf("another Service's change: full=%v conntrack deleted=%d, want a partial sync that flushes its flow", res.Full, res.ConntrackDeleted)
	}
}

// A failed conntrack delete is kept and retried: a UDP client is not left
// talking to a gone endpoint.
func TestFailedConntrackDeleteIsRetried(t *testing.T) {
	fk := newFakeKernel()
	f := &faults{}
	p, err := New(testConfig(), servicetest.ThisNode, fk.faultyKernel(f), nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	p.now = func() time.Time { return now }
	svc := servicetest.Service("dns", "10.96.0.53", servicetest.Protocol(v1.ProtocolUDP))
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "dns-a", 53, "10.244.1.5@node1", "10.244.2.7@node2"))
	mustSync(t, p)
	stale := conntrack.Flow{Protocol: conntrack.UDP, OrigSrc: netip.MustParseAddrPort("10.244.3.9:40000"), OrigDst: netip.MustParseAddrPort("10.96.0.53:80"),
		ReplySrc: netip.MustParseAddrPort("10.244.2.7:53"), ReplyDst: netip.MustParseAddrPort("10.244.3.9:40000")}
	fk.conntrack.AddFlow(stale)
	f.set(func(op, _ string) error {
		if op == "conntrack-delete" {
			return errors.New("netlink: no buffer space")
		}
		return nil
	})
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "dns-a", 53, "10.244.1.5@node1"))
	// Both the event-driven delete and the reconcile that follows a
	// failure are refused.
	if res := p.Sync(); res.WriteErrors[string(snapshot.ObjectConntrack)] != 2 {
		t.Fatalf("want two conntrack failures: %v", res.WriteErrors)
	}
	f.set(nil)
	now = now.Add(retryMin)
	if res := p.Sync(); res.ConntrackDeleted != 1 || res.Err() != nil {
		t.Fatalf("retry deleted %d: %v", res.ConntrackDeleted, res.Err())
	}
}

// An iptables restore that fails is retried on its own backoff in partial
// syncs.
func TestFailedRulesRestoreIsRetried(t *testing.T) {
	fk := newFakeKernel()
	f := &faults{}
	f.set(func(op, _ string) error {
		if op == "iptables-restore" {
			return errors.New("iptables-restore: line 3 failed")
		}
		return nil
	})
	p, err := New(testConfig(), servicetest.ThisNode, fk.faultyKernel(f), nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	p.now = func() time.Time { return now }
	svc := servicetest.Service("web", "10.96.0.10")
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1"))
	// Three tables, and the six jumps to chains that are not there.
	if res := p.Sync(); res.WriteErrors[string(snapshot.ObjectRules)] != 9 || !res.Completed {
		t.Fatalf("want three failed tables and six jumps: %v", res.WriteErrors)
	}
	if got := realServers(t, fk, webVS); len(got) != 1 {
		t.Fatalf("the Service must be programmed anyway: %v", got)
	}
	f.set(nil)
	now = now.Add(retryMin)
	if res := p.Sync(); res.Full || res.Err() != nil {
		t.Fatalf("retry: full=%v %v", res.Full, res.Err())
	}
	if !strings.Contains(fk.ipt4.Dump(), "-A KUBE-SERVICES") {
		t.Fatalf("rules missing:\n%s", fk.ipt4.Dump())
	}
}

// A set of ours with the wrong type that iptables references is replaced
// without a window: our rules move to a temporary set of
// the right type, the old one is destroyed and made again, the rules move
// back. The kernel refuses to destroy a referenced set; the wrapper below
// does the same from the iptables fake's rules. Every restore must find
// the hairpin member in the set its rules reference.
func TestWrongTypeSetReferencedByIPTablesIsReplacedWithoutAWindow(t *testing.T) {
	fk := newFakeKernel()
	// An older layout: KUBE-LOOP-BACK as hash:ip, referenced by our rules.
	fk.ipset.CreateSet(ipset.Set{Name: owned.SetLoopBack, Type: ipset.HashIP, Family: ipset.IPv4})
	fk.ipt4.Restore([]byte("*nat\n:KUBE-POSTROUTING - [0:0]\n-A KUBE-POSTROUTING -m set --match-set KUBE-LOOP-BACK dst -j MASQUERADE\nCOMMIT\n"))
	f := &faults{}
	var windows []string
	hairpin := ipset.Entry{IP: netip.MustParseAddr("10.244.1.5"), Protocol: "tcp", Port: 8080, IP2: netip.MustParseAddr("10.244.1.5")}
	f.set(func(op, object string) error {
		switch op {
		case "ipset-destroy":
			if strings.Contains(fk.ipt4.Dump(), " "+object+" ") {
				return ipset.ErrBusy
			}
		}
		return nil
	})
	k := fk.faultyKernel(f)
	k.IPTables[v1.IPv4Protocol] = restoreWatcher{k.IPTables[v1.IPv4Protocol], func(data []byte) {
		for _, name := range []string{owned.SetLoopBack, owned.SetLoopBack + "-T"} {
			if !strings.Contains(string(data), "--match-set "+name+" dst,dst,src") {
				continue
			}
			entries, err := fk.ipset.Entries(name)
			if err != nil || len(entries) != 1 || entries[0] != hairpin {
				windows = append(windows, name+": "+strings.TrimSpace(after(fk.ipset.Dump(), "set "+name+" ")))
			}
		}
	}}
	p, err := New(testConfig(), servicetest.ThisNode, k, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc := servicetest.Service("web", "10.96.0.10")
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1"))
	mustSync(t, p)
	if len(windows) > 0 {
		t.Fatalf("rules referenced a set without the member: %v", windows)
	}
	dump := fk.ipset.Dump()
	if !strings.Contains(dump, "set KUBE-LOOP-BACK hash:ip,port,ip inet\n  10.244.1.5,tcp:8080,10.244.1.5\n") || strings.Contains(dump, owned.SetLoopBack+"-T") {
		t.Fatalf("sets:\n%s", dump)
	}
	if !strings.Contains(fk.ipt4.Dump(), "--match-set KUBE-LOOP-BACK dst,dst,src -j MASQUERADE") {
		t.Fatalf("rules:\n%s", fk.ipt4.Dump())
	}
	// And a restart after it writes nothing.
	writes := fk.writes()
	p2, _ := New(testConfig(), servicetest.ThisNode, k, nil)
	p2.Tracker().SetService(svc)
	p2.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1"))
	if res := mustSync(t, p2); res.Writes != 0 || fk.writes() != writes {
		t.Fatalf("restart wrote %d", fk.writes()-writes)
	}
}

// restoreWatcher calls seen with each restore's input after it applied.
type restoreWatcher struct {
	iptablesInterface
	seen func([]byte)
}

func (w restoreWatcher) Restore(data []byte) error {
	err := w.iptablesInterface.Restore(data)
	if err == nil {
		w.seen(data)
	}
	return err
}

// A create that reached the kernel but reported an error (a netlink
// timeout, say) leaves a recorded virtual server the view does not know:
// the retry takes it back as ours, not as foreign.
func TestCreateThatFailedLateIsAdoptedOnRetry(t *testing.T) {
	fk := newFakeKernel()
	f := &faults{}
	k := fk.faultyKernel(f)
	once := true
	k.IPVS = lateFailingIPVS{k.IPVS, &once}
	p, err := New(testConfig(), servicetest.ThisNode, k, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	p.now = func() time.Time { return now }
	mustSync(t, p)
	svc := servicetest.Service("web", "10.96.0.10")
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1"))
	if res := p.Sync(); res.Err() == nil {
		t.Fatal("want the late failure")
	}
	now = now.Add(retryMin)
	if res := p.Sync(); res.Err() != nil {
		t.Fatalf("retry: %v", res.Err())
	}
	if got := realServers(t, fk, webVS); len(got) != 1 {
		t.Fatalf("real servers %v", got)
	}
	if st := p.ReconcileStatus(); len(st.Objects) != 0 {
		t.Fatalf("status %v", st.Objects)
	}
}

// lateFailingIPVS applies the first AddVirtualServer and then reports a
// failure.
type lateFailingIPVS struct {
	ipvs.Interface
	once *bool
}

func (w lateFailingIPVS) AddVirtualServer(vs ipvs.VirtualServer) error {
	err := w.Interface.AddVirtualServer(vs)
	if err == nil && *w.once {
		*w.once = false
		return errors.New("netlink: timeout waiting for the answer")
	}
	return err
}
