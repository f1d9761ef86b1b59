package proxier

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/iptables"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"

	"github.com/go-logr/logr"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/klog/v2"
)

// FuzzSync drives whole syncs: a random sequence of
// Service, EndpointSlice and node changes, periodic full syncs (some as the
// re-check that reads beside the loop, recheck.go, synced after the partial
// syncs of the ops that follow its read), restarts, clock steps and
// injected kernel failures (persistent or flaky, per kind of write) against
// the fakes. Invariants:
//   - after every sync, nothing foreign changed: someone else's virtual
//     servers, one inside --ipvs-exclude-cidrs with its address, someone
//     else's set and iptables rule;
//   - once the faults stop, retries converge: within a few backoffs
//     nothing is pending or failing;
//   - a partial sync ends where a full sync would: a full sync then writes
//     nothing;
//   - the kernel then holds exactly what a fresh proxier on a fresh node
//     programs for the same world, so every Service not in conflict is
//     fully programmed and losers hold nothing.
func FuzzSync(f *testing.F) {
	f.Add([]byte{0, 0, 7, 2, 0, 15, 0, 1, 3, 4, 1, 0, 0, 2, 1, 6, 9, 0, 5, 0, 0, 6, 40, 0})
	f.Add([]byte{0, 1, 0x1a, 0, 2, 0x22, 2, 1, 5, 2, 2, 9, 4, 0, 1, 9, 0, 0, 8, 0, 0, 1, 1, 0, 6, 63, 0})
	f.Add([]byte{4, 2, 0, 0, 0, 0x31, 0, 3, 0x11, 2, 0, 3, 2, 3, 12, 7, 0, 0, 4, 5, 1, 3, 0, 0, 5, 0, 0})
	f.Add([]byte{0, 0, 0x0b, 0, 1, 0x0b, 2, 0, 1, 2, 1, 2, 4, 3, 1, 9, 0, 0, 1, 0, 0, 6, 9, 0})
	// Services in the way of the foreign virtual servers.
	f.Add([]byte{0, 0, 0x20, 0, 1, 0x01, 2, 0, 3, 2, 1, 12, 7, 0, 0, 4, 5, 0, 0, 2, 0x61, 6, 8, 0, 9, 0, 0})
	// A UDP Service on an excluded external IP turns TCP: its UDP virtual
	// server stays (clean-up never touches that range).
	f.Add([]byte{0, 0, 0x38, 0, 0, 0x30})
	// A re-check read, then changes, a fault and a new Service before it
	// is synced.
	f.Add([]byte{0, 0, 0x11, 2, 0, 3, 7, 1, 0, 2, 0, 0x0c, 4, 1, 0, 0, 1, 0x21, 2, 1, 5, 5, 0, 0, 7, 3, 0, 2, 2, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		klog.SetLogger(logr.Discard())
		if len(data) > 300 {
			data = data[:300]
		}
		runSyncSequence(t, data)
	})
}

// The pools the fuzzer picks from: few enough that Services collide.
var (
	fuzzExternalIPs = []string{"203.0.113.5", "203.0.113.6", "203.0.113.201"}
	fuzzEndpoints   = []string{"10.244.1.5@node1", "10.244.1.6@node1", "10.244.2.7@node2", "10.244.2.8@node2"}
	fuzzFaultOps    = []string{"ipvs-add", "ipvs-add-rs", "ipvs-delete-rs", "ipvs-delete", "ipvs-update", "ipset-add", "ipset-del", "ipset-create", "addr-add", "addr-del", "iptables-restore", "conntrack-delete"}
	// Someone else's: one in the way of external IP 203.0.113.6, one on
	// a node address in the NodePort range, one excluded on kube-ipvs0.
	fuzzForeign = []ipvs.VirtualServerKey{
		{Protocol: ipvs.TCP, Address: netip.MustParseAddr("203.0.113.6"), Port: 80},
		{Protocol: ipvs.TCP, Address: servicetest.Node1IP, Port: 30001},
		{Protocol: ipvs.TCP, Address: netip.MustParseAddr("203.0.113.201"), Port: 80},
	}
	fuzzOtherNodeIP = netip.MustParseAddr("198.51.100.11")
)

func fuzzConfig() ipvsproxy.Config {
	cfg := testConfig()
	cfg.ExcludeCIDRs = []netip.Prefix{netip.MustParsePrefix("203.0.113.200/29")}
	return cfg
}

// fuzzWorld is the API's state: what a fresh proxier would be given.
type fuzzWorld struct {
	services map[string]*v1.Service
	slices   map[string]*discovery.EndpointSlice
	hostIP   netip.Addr
}

func (w *fuzzWorld) feed(p *Proxier) {
	for _, s := range w.services {
		p.Tracker().SetService(s)
	}
	for _, s := range w.slices {
		p.Tracker().SetEndpointSlice(s)
	}
}

// newFuzzNode is a node with the foreign objects in place.
func newFuzzNode(t *testing.T, hostIP netip.Addr) *fakeKernel {
	fk := newFakeKernel()
	fk.netif.SetHostAddresses(netip.MustParseAddr("127.0.0.1"), hostIP)
	for _, k := range fuzzForeign {
		addForeign(t, fk, k)
	}
	fk.netif.EnsureDummy()
	fk.netif.AddDummyAddress(fuzzForeign[2].Address)
	if err := fk.ipset.CreateSet(ipset.Set{Name: "OTHER-ALLOW", Type: ipset.HashIP, Family: ipset.IPv4}); err != nil {
		t.Fatal(err)
	}
	fk.ipset.AddEntry("OTHER-ALLOW", ipset.Entry{IP: netip.MustParseAddr("192.0.2.1")})
	if _, err := fk.ipt4.EnsureRule(iptables.Append, "filter", "INPUT", "-s", "192.0.2.1/32", "-j", "ACCEPT"); err != nil {
		t.Fatal(err)
	}
	return fk
}

// foreignState is what must never change.
func foreignState(fk *fakeKernel) string {
	var b strings.Builder
	for _, k := range fuzzForeign {
		b.WriteString(vsDump(fk, k) + "\n")
	}
	addrs, _ := fk.netif.DummyAddresses()
	b.WriteString(fmt.Sprintln(containsAddr(addrs, fuzzForeign[2].Address)))
	b.WriteString(after(fk.ipset.Dump(), "set OTHER-ALLOW "))
	b.WriteString(fmt.Sprintln(strings.Contains(fk.ipt4.Dump(), "-A INPUT -s 192.0.2.1/32 -j ACCEPT")))
	return b.String()
}

// noMembersForForeign: a Service that loses a key to a foreign virtual
// server programs nothing for it (its members would apply to the other
// owner's traffic), checked apart
// from the code under test: no owned set names the foreign keys.
func noMembersForForeign(fk *fakeKernel, hostIP netip.Addr) error {
	dump := fk.ipset.Dump()
	for _, set := range []string{"KUBE-IPVS-SERVICES", "KUBE-EXTERNAL-IP", "KUBE-LOAD-BALANCER", "KUBE-CLUSTER-IP", "KUBE-LOAD-BALANCER-FW", "KUBE-IPVS-OWNED"} {
		if strings.Contains(after(dump, "set "+set+" ")+"\n", "  203.0.113.6,tcp:80\n") {
			return fmt.Errorf("%s holds the foreign key 203.0.113.6,tcp:80:\n%s", set, dump)
		}
	}
	if hostIP == servicetest.Node1IP && strings.Contains(after(dump, "set KUBE-NODE-PORT-TCP ")+"\n", "  30001\n") {
		return fmt.Errorf("KUBE-NODE-PORT-TCP holds 30001, whose only virtual server is foreign:\n%s", dump)
	}
	return nil
}

func containsAddr(list []netip.Addr, a netip.Addr) bool {
	for _, x := range list {
		if x == a {
			return true
		}
	}
	return false
}

func kernelDump(fk *fakeKernel) string {
	return fk.ipvs.Dump() + "---\n" + fk.netif.Dump() + "---\n" + fk.ipset.Dump() + "---\n" + fk.ipt4.Dump()
}

func runSyncSequence(t *testing.T, data []byte) {
	world := &fuzzWorld{services: map[string]*v1.Service{}, slices: map[string]*discovery.EndpointSlice{}, hostIP: servicetest.Node1IP}
	fk := newFuzzNode(t, world.hostIP)
	foreign := foreignState(fk)
	f := &faults{}
	// deletesFail: the kernel refuses set deletions now; deletesPending:
	// it did, and a refused deletion still waits for its backoff.
	deletesFail, deletesPending := false, false
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	newProxier := func() *Proxier {
		p, err := New(fuzzConfig(), servicetest.ThisNode, fk.faultyKernel(f), nil)
		if err != nil {
			t.Fatal(err)
		}
		p.Tracker().SetService(apiServerService())
		p.now = func() time.Time { return now }
		world.feed(p)
		return p
	}
	p := newProxier()
	var log []string
	for i := 0; i+2 < len(data); i += 3 {
		op, a, b := data[i]%10, data[i+1], data[i+2]
		name := fmt.Sprintf("s%d", a%4)
		switch op {
		case 0:
			svc := fuzzService(name, int(a%4), b)
			world.services[name] = svc
			p.Tracker().SetService(svc)
			log = append(log, fmt.Sprintf("set %s %#x", name, b))
		case 1:
			delete(world.services, name)
			p.Tracker().DeleteService("default", name)
			log = append(log, "delete "+name)
		case 2:
			var eps []string
			for j, e := range fuzzEndpoints {
				if b&(1<<j) != 0 {
					if b&0x10 != 0 && j == 0 {
						e += "/terminating"
					}
					eps = append(eps, e)
				}
			}
			svc := world.services[name]
			if svc == nil {
				svc = fuzzService(name, int(a%4), 0)
			}
			s := servicetest.Slice(svc, name+"-a", 8080, eps...)
			world.slices[name] = s
			p.Tracker().SetEndpointSlice(s)
			log = append(log, fmt.Sprintf("endpoints %s %v", name, eps))
		case 3:
			if s := world.slices[name]; s != nil {
				delete(world.slices, name)
				p.Tracker().DeleteEndpointSlice(s)
			}
			log = append(log, "delete slice "+name)
		case 4:
			kind, flaky := fuzzFaultOps[int(a)%len(fuzzFaultOps)], b&1 != 0
			n := 0
			f.set(func(op, _ string) error {
				if op != kind {
					return nil
				}
				n++
				if flaky && n%2 == 0 {
					return nil
				}
				return errors.New("injected failure")
			})
			log = append(log, fmt.Sprintf("fail %s flaky=%v", kind, flaky))
			deletesPending = deletesPending || deletesFail
			deletesFail = kind == "ipset-del"
		case 5:
			f.set(nil)
			deletesPending = deletesPending || deletesFail
			deletesFail = false
			log = append(log, "faults off")
		case 6:
			now = now.Add(time.Duration(a%64) * 250 * time.Millisecond)
			log = append(log, fmt.Sprintf("clock +%v", time.Duration(a%64)*250*time.Millisecond))
		case 7:
			switch {
			case a&1 == 0:
				p.needFull = true
				log = append(log, "periodic full sync")
			case p.recheck == nil:
				// The period's re-check reads beside the loop; its
				// read ends here, and the partial syncs of the ops
				// that follow write after it, until it is synced.
				if p.startRecheck() {
					<-p.recheckDone()
				}
				log = append(log, "re-check read")
			default:
				p.finishRecheck()
				log = append(log, "re-check synced")
			}
		case 8:
			// The node is re-addressed; the periodic full sync sees it.
			world.hostIP = map[bool]netip.Addr{true: fuzzOtherNodeIP, false: servicetest.Node1IP}[world.hostIP == servicetest.Node1IP]
			fk.netif.SetHostAddresses(netip.MustParseAddr("127.0.0.1"), world.hostIP)
			p.needFull = true
			log = append(log, "node address "+world.hostIP.String())
		case 9:
			p = newProxier()
			log = append(log, "restart")
		}
		p.Sync()
		if got := foreignState(fk); got != foreign {
			t.Fatalf("a foreign object changed after %v:\n%s\nwas\n%s", log, got, foreign)
		}
		// A member that must go stays while the kernel refuses set
		// deletions, and until the refused deletion's retry is due:
		// checked once nothing waits for a retry (the fuzzer found the
		// check made right after the faults stopped, before the backoff).
		if deletesPending && len(p.ReconcileStatus().Objects) == 0 {
			deletesPending = false
		}
		if err := noMembersForForeign(fk, world.hostIP); err != nil && !deletesFail && !deletesPending {
			t.Fatalf("after %v: %v", log, err)
		}
	}

	// The faults stop: retries converge within a few backoffs.
	f.set(nil)
	if p.recheck != nil {
		p.finishRecheck()
		log = append(log, "re-check synced")
	}
	converged := false
	for i := 0; i < 12 && !converged; i++ {
		now = now.Add(retryMax)
		res := p.Sync()
		converged = res.Err() == nil && len(p.ReconcileStatus().Objects) == 0
	}
	if !converged {
		t.Fatalf("no convergence after %v: %v", log, p.ReconcileStatus().Objects)
	}
	if err := noMembersForForeign(fk, world.hostIP); err != nil {
		t.Fatalf("after %v and the faults: %v", log, err)
	}
	// A partial sync ended where a full sync would.
	before := kernelDump(fk)
	p.needFull = true
	if res := p.Sync(); res.Writes != 0 || res.Err() != nil {
		t.Fatalf("a full sync after %v wrote %d (err %v):\n%s", log, res.Writes, res.Err(), kernelDump(fk))
	}
	if after := kernelDump(fk); after != before {
		t.Fatalf("a full sync after %v changed the kernel:\n%s\nwas\n%s", log, after, before)
	}
	// And where a fresh proxier on a fresh node would.
	fresh := newFuzzNode(t, world.hostIP)
	pf, err := New(fuzzConfig(), servicetest.ThisNode, fresh.kernel(), nil)
	if err != nil {
		t.Fatal(err)
	}
	pf.Tracker().SetService(apiServerService())
	world.feed(pf)
	if res := pf.Sync(); res.Err() != nil {
		t.Fatalf("fresh node: %v", res.Err())
	}
	want := kernelDump(fresh)
	if got := withoutExcludedLeftovers(kernelDump(fk), want, fuzzConfig()); got != want {
		t.Fatalf("after %v the kernel differs from a fresh node's:\n%s\nwant\n%s", log, got, want)
	}
}

// withoutExcludedLeftovers drops from the dump got what lies in
// --ipvs-exclude-cidrs and want lacks: one of our virtual servers there
// (with its real servers), its ownership record, its kube-ipvs0 address.
// No Service wants them any more, and clean-up never touches that range
// (Config.excluded, as kube-proxy's cleanLegacyService), so a node that
// once programmed them keeps them where a fresh node has none.
func withoutExcludedLeftovers(got, want string, cfg ipvsproxy.Config) string {
	left := map[string]int{}
	for _, l := range strings.Split(want, "\n") {
		left[l]++
	}
	var out []string
	section, droppingRealServers := "", false
	for _, l := range strings.Split(got, "\n") {
		if droppingRealServers && strings.HasPrefix(l, "  -> ") {
			continue
		}
		droppingRealServers = false
		if !strings.HasPrefix(l, " ") {
			section = l
		}
		if left[l] > 0 {
			left[l]--
			out = append(out, l)
			continue
		}
		field := strings.TrimSpace(l)
		var addr netip.Addr
		var err error
		switch {
		case strings.HasPrefix(l, "TCP ") || strings.HasPrefix(l, "UDP ") || strings.HasPrefix(l, "SCTP "):
			var ap netip.AddrPort
			ap, err = netip.ParseAddrPort(strings.Fields(l)[1])
			addr, droppingRealServers = ap.Addr(), true
		case strings.HasPrefix(section, "set "+owned.SetOwned+" ") && l != section:
			addr, err = netip.ParseAddr(strings.Split(field, ",")[0])
		case strings.HasPrefix(section, "dummy ") && l != section:
			var pfx netip.Prefix
			pfx, err = netip.ParsePrefix(field)
			addr = pfx.Addr()
		default:
			err = errors.New("not a leftover")
		}
		if err == nil && cfg.Excluded(addr) {
			continue
		}
		droppingRealServers = false
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

// fuzzService is Service name (index i) shaped by b: type (bits 0-1),
// Local external policy (2), UDP (3), an external IP (4-5), source ranges
// (6), session affinity (7).
func fuzzService(name string, i int, b byte) *v1.Service {
	opts := []servicetest.Option{servicetest.CreatedAt(servicetest.Created.Add(time.Duration(i) * time.Minute))}
	switch b & 3 {
	case 1:
		opts = append(opts, servicetest.NodePort(int32(30000+i)))
	case 2:
		opts = append(opts, servicetest.LoadBalancer(int32(30000+i), "203.0.113.140"))
	}
	if b&4 != 0 && b&3 != 0 {
		opts = append(opts, func(s *v1.Service) { s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal })
	}
	if b&8 != 0 {
		opts = append(opts, servicetest.Protocol(v1.ProtocolUDP))
	}
	if x := int(b>>4) & 3; x > 0 {
		opts = append(opts, func(s *v1.Service) { s.Spec.ExternalIPs = []string{fuzzExternalIPs[x-1]} })
	}
	if b&0x40 != 0 {
		opts = append(opts, func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"198.51.100.0/24"} })
	}
	if b&0x80 != 0 {
		opts = append(opts, func(s *v1.Service) { s.Spec.SessionAffinity = v1.ServiceAffinityClientIP })
	}
	return servicetest.Service(name, fmt.Sprintf("10.96.0.%d", 10+i), opts...)
}
