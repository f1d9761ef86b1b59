// Command ipvsproxy-bench runs the benchmark operations on ipvsproxy's
// Proxier.Sync (benchmarks/ours) with the IPVS, ipset, iptables and
// conntrack Fakes and the real netif adapter on an ifb kube-ipvs0 in a
// private namespace (../../netns), the conditions of kubeproxy-bench.
// Prints one shape.Result as JSON.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"runtime/pprof"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/ipvsproxy/ipvsproxy/benchmarks/harness/netns"
	"github.com/ipvsproxy/ipvsproxy/benchmarks/ours"
	"github.com/ipvsproxy/ipvsproxy/benchmarks/shape"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	vnetns "github.com/vishvananda/netns"
	"k8s.io/klog/v2"
)

func main() {
	services := flag.Int("services", 1000, "Services in the shape")
	endpoints := flag.Int("endpoints", 10, "endpoints per Service")
	mix := flag.Bool("mix", false, "10% UDP, 10% Local policy, dual-stack")
	noServiceCIDR := flag.Bool("no-service-cidr", false, "no Service CIDR: bind every cluster IP on kube-ipvs0, as kube-proxy does")
	fakeLink := flag.Bool("fake-link", false, "kube-ipvs0 and the node's addresses on netif's Fake (no netlink): the proxier-only shape")
	repeats := flag.Int("repeats", 5, "repeats of each operation after the cold sync")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of every operation after the cold sync to this file")
	heapProfile := flag.String("heapprofile", "", "write the live heap right after the cold sync to this file")
	flag.Parse()
	klog.SetLogger(logr.Discard())
	s := shape.Shape{Services: *services, Endpoints: *endpoints, Mix: *mix, NoServiceCIDR: *noServiceCIDR, FakeLink: *fakeLink}
	var links netif.Interface
	if *fakeLink {
		if err := netns.Prepare(shape.NodeIP, ""); err != nil {
			fail(err)
		}
		fake := netif.NewFake(owned.DummyInterface)
		fake.SetHostAddresses(netip.MustParseAddr("127.0.0.1"), shape.NodeIP) // as Prepare binds them on lo
		links = fake
	} else {
		if err := netns.Prepare(shape.NodeIP, owned.DummyInterface); err != nil {
			fail(err)
		}
		var err error
		if links, err = netif.NewOnLink(owned.DummyInterface, "ifb", vnetns.None()); err != nil {
			fail(err)
		}
	}
	var startProfile func()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fail(err)
		}
		startProfile = func() {
			if err := pprof.StartCPUProfile(f); err != nil {
				fail(err)
			}
		}
		defer pprof.StopCPUProfile()
	}
	var liveHeap uint64
	afterCold := func() {
		if *heapProfile != "" {
			runtime.GC()
			// Exact, where the profile's in-use total is sampled.
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			liveHeap = m.HeapAlloc
			f, err := os.Create(*heapProfile)
			if err != nil {
				fail(err)
			}
			if err := pprof.WriteHeapProfile(f); err != nil {
				fail(err)
			}
			f.Close()
		}
		if startProfile != nil {
			startProfile()
		}
	}
	res, err := ours.RunWith(s, ours.FakeKernel(links), *repeats, func(op string) {
		if op == shape.OpCold {
			afterCold()
		}
	})
	if err != nil {
		fail(err)
	}
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	res.PeakRSS = float64(ru.Maxrss) / 1024
	if liveHeap != 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("live heap after the cold sync: %.1f MB (HeapAlloc after a collection)", float64(liveHeap)/1e6))
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "ipvsproxy-bench:", err)
	os.Exit(1)
}
