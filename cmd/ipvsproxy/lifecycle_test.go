package main

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"github.com/ipvsproxy/ipvsproxy/internal/adapters"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/iptables"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/proxier"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// slowIPVS holds the first virtual server write until released, as a busy
// kernel holds a sync in flight.
type slowIPVS struct {
	*ipvs.Fake
	entered chan struct{}
	release chan struct{}
	once    atomic.Bool
}

func (s *slowIPVS) AddVirtualServer(vs ipvs.VirtualServer) error {
	if s.once.CompareAndSwap(false, true) {
		close(s.entered)
		<-s.release
	}
	return s.Fake.AddVirtualServer(vs)
}

func TestStopLetsTheSyncInFlightFinishAndLeavesTheKernelState(t *testing.T) {
	fakeIPVS := &slowIPVS{Fake: ipvs.NewFake(), entered: make(chan struct{}), release: make(chan struct{})}
	links := netif.NewFake(owned.DummyInterface)
	links.SetHostAddresses(netip.MustParseAddr("198.51.100.1"))
	k := adapters.Kernel{
		IPVS: fakeIPVS, Netif: links, IPSet: ipset.NewFake(),
		IPTables:  map[v1.IPFamily]iptables.Interface{v1.IPv4Protocol: iptables.NewFake(iptables.IPv4)},
		Conntrack: conntrack.NewFake(),
	}
	cfg := ipvsproxy.DefaultConfig()
	cfg.Families = []v1.IPFamily{v1.IPv4Protocol}
	cfg.ClusterCIDRs = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}
	p, err := proxier.New(cfg, "node1", k, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.Tracker().SetService(&v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
			Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}},
	})

	ctx, cancel := context.WithCancel(context.Background())
	stopped := startSyncLoop(ctx, p)
	<-fakeIPVS.entered
	cancel() // SIGTERM arrives with the sync in flight
	select {
	case <-stopped:
		t.Fatal("the sync loop returned with a sync in flight; the kernel handles would close under it")
	case <-time.After(100 * time.Millisecond):
	}
	close(fakeIPVS.release)
	<-stopped
	// What the daemon does after: close the handles. Nothing was removed.
	fakeIPVS.Close()
	if dump := fakeIPVS.Dump(); !strings.Contains(dump, "10.96.0.10:80") {
		t.Errorf("after stopping, IPVS holds\n%s\nwant the virtual server 10.96.0.10:80 left in place", dump)
	}
	if addrs, _ := links.DummyAddresses(); len(addrs) != 1 {
		t.Errorf("after stopping, kube-ipvs0 holds %v, want the cluster IP left bound", addrs)
	}
}

func TestBusyBindAddressIsRetriedUnlessHardFail(t *testing.T) {
	squatter, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := squatter.Addr().String()
	var attempts atomic.Int32
	serve := func(ctx context.Context) error {
		attempts.Add(1)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		<-ctx.Done()
		ln.Close()
		return nil
	}

	// Hard fail: the first failure is the daemon's error.
	errs := make(chan error, 1)
	serveRetrying(context.Background(), "healthz", addr, true, serve, errs)
	if err := <-errs; err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("hard fail error = %v, want address already in use", err)
	}

	// Default: logged and retried until the address is free, never fatal.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	attempts.Store(0)
	done := make(chan struct{})
	go func() { serveRetrying(ctx, "healthz", addr, false, serve, errs); close(done) }()
	time.Sleep(50 * time.Millisecond)
	squatter.Close()
	deadline := time.Now().Add(3 * bindRetryInterval)
	for {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			if attempts.Load() >= 2 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("address never served after it was freed (%d attempts)", attempts.Load())
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	<-done
	select {
	case err := <-errs:
		t.Fatalf("a busy address was fatal without --bind-address-hard-fail: %v", err)
	default:
	}
}
