// Command kernel-bench is tier 2 of the benchmarks, run inside the
// end-to-end VM (a kernel with IPVS and the dummy driver) by
// e2e/vm/bench-vm.sh, each mode in a fresh network namespace:
//
//	-mode ours   the operations of benchmarks/ours on the real adapters:
//	             IPVS, kube-ipvs0 (routes), ipset, iptables, conntrack
//	-mode floor  the same kernel objects created with the adapters' bare
//	             calls and no proxier logic: what a cold sync cannot beat
//
// The objects of the floor are those a cold sync of the shape leaves in the
// Fakes, so both create exactly the same set. Prints one shape.Result.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/ipvsproxy/ipvsproxy/benchmarks/harness/callclock"
	"github.com/ipvsproxy/ipvsproxy/benchmarks/harness/netns"
	"github.com/ipvsproxy/ipvsproxy/benchmarks/ours"
	"github.com/ipvsproxy/ipvsproxy/benchmarks/shape"
	"github.com/ipvsproxy/ipvsproxy/internal/adapters"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/iptables"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/nldump"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/sysctl"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/proxier"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

func main() {
	services := flag.Int("services", 1000, "Services in the shape")
	endpoints := flag.Int("endpoints", 10, "endpoints per Service")
	repeats := flag.Int("repeats", 3, "repeats of each operation after the cold sync")
	mode := flag.String("mode", "ours", "ours or floor")
	noServiceCIDR := flag.Bool("no-service-cidr", false, "no Service CIDR: bind every cluster IP on kube-ipvs0, as kube-proxy does (both sides)")
	floorOrder := flag.String("floor-order", "grouped", "the floor's order of the IPVS writes: grouped (every virtual server 64 per send, then all real servers 64 per send) or interleaved (64 virtual servers in one send, then each one's real servers in one send, as the proxier writes them)")
	flag.Parse()
	klog.SetLogger(logr.Discard())
	s := shape.Shape{Services: *services, Endpoints: *endpoints, NoServiceCIDR: *noServiceCIDR}
	check(netns.Prepare(shape.NodeIP, ""))
	k, err := realKernel()
	check(err)
	var res shape.Result
	c := callclock.New()
	var cold map[string]shape.CallTime
	switch *mode {
	case "ours":
		opCalls := map[string]map[string]shape.CallTime{}
		res, err = ours.RunWith(s, timed(k, c), *repeats, func(op string) {
			calls := c.Reset()
			if op != "" {
				opCalls[op] = callclock.Add(opCalls[op], calls)
			}
		})
		res.Side = "ipvsproxy (kernel)"
		cold, res.OpCalls = opCalls[shape.OpCold], opCalls
	case "floor":
		res, err = floor(s, timed(k, c), *floorOrder == "interleaved")
		cold = c.Reset()
	default:
		err = fmt.Errorf("unknown mode %q", *mode)
	}
	check(err)
	res.ColdCalls = cold
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	res.PeakRSS = float64(ru.Maxrss) / 1024
	fmt.Fprintf(os.Stderr, "%s %s: cold sync %.0f ms, %d kernel writes; peak RSS %.0f MB\n",
		res.Side, res.Shape, res.Millis[shape.OpCold][0], res.Writes[shape.OpCold], res.PeakRSS)
	printColdCalls(res)
	if full := res.OpCalls[shape.OpFullResync]; full != nil {
		fmt.Fprintf(os.Stderr, "%s %s: %d full re-checks, in kernel calls %.0f ms\n", res.Side, res.Shape, len(res.Millis[shape.OpFullResync]), callclock.Total(full))
		printCalls(full)
	}
	check(json.NewEncoder(os.Stdout).Encode(res))
}

// realKernel is the daemon's adapters for IPv4, but for the sysctls, which
// the benchmark leaves to the namespace as it is, and the node guard's
// socket reads, which it does not measure.
func realKernel() (adapters.Kernel, error) {
	k, _, err := adapters.Open(adapters.Options{Families: []v1.IPFamily{v1.IPv4Protocol}})
	k.Sysctl, k.Listeners = sysctl.NewFake(nil), nil
	return k, err
}

// floor creates, with the adapters' bare calls, what a cold sync of s
// leaves in the Fakes: one call per object, but the real servers as many
// per netlink send as the IPVS adapter takes and each set's members as
// many per message as the ipset adapter puts in one.
func floor(s shape.Shape, k adapters.Kernel, interleaved bool) (shape.Result, error) {
	res := shape.Result{Side: "floor (kernel)", Shape: s.Name(), Services: s.Services, Millis: map[string][]float64{}, Writes: map[string]int{}}
	links := netif.NewFake(owned.DummyInterface)
	links.SetHostAddresses(shape.NodeIP) // as in the namespace: NodePorts on it
	fk := ours.FakeKernel(links)
	p, err := proxier.New(ours.Config(s), shape.NodeName, fk, nil)
	if err != nil {
		return res, err
	}
	for i := 0; i < s.Services; i++ {
		p.Tracker().SetService(s.Service(i))
		for _, sl := range s.Slices(i, s.Endpoints, 0) {
			p.Tracker().SetEndpointSlice(sl)
		}
	}
	if r := p.Sync(); r.Err() != nil {
		return res, r.Err()
	}
	// What to create, read from the Fakes before the clock starts.
	routes, _ := links.ServiceRoutes()
	addrs, _ := links.DummyAddresses()
	sets, _ := fk.IPSet.Sets()
	entries := map[string][]ipset.Entry{}
	for _, set := range sets {
		entries[set.Name], _ = fk.IPSet.Entries(set.Name)
	}
	vss, _ := fk.IPVS.VirtualServers()
	rss := map[ipvs.VirtualServerKey][]ipvs.RealServer{}
	for _, vs := range vss {
		rss[vs.VirtualServerKey], _ = fk.IPVS.RealServers(vs.VirtualServerKey)
	}
	// The three tables in one iptables-restore: one process, the fewest
	// the rules allow (the proxier restores each table on its own, so that
	// one table's failure is reported and retried apart).
	var rules []byte
	for _, table := range []iptables.Table{iptables.TableNAT, iptables.TableFilter, iptables.TableMangle} {
		text, err := fk.IPTables[v1.IPv4Protocol].Save(table)
		if err != nil {
			return res, err
		}
		rules = append(rules, text...)
	}

	writes := 0
	do := func(err error) error { writes++; return err }
	start := time.Now()
	err = func() error {
		if err := do(k.Netif.EnsureDummy()); err != nil {
			return err
		}
		writes += len(addrs)
		for i, err := range netif.AddDummyAddresses(k.Netif, addrs) {
			if err != nil {
				return fmt.Errorf("bind %s: %w", addrs[i], err)
			}
		}
		for _, r := range routes {
			if err := do(k.Netif.AddServiceRoute(r)); err != nil {
				return err
			}
		}
		for _, set := range sets {
			if err := do(k.IPSet.CreateSet(set)); err != nil {
				return err
			}
			writes += len(entries[set.Name])
			for i, err := range ipset.AddEntries(k.IPSet, set.Name, entries[set.Name]) {
				if err != nil {
					return fmt.Errorf("add %s to %s: %w", entries[set.Name][i].String(set.Type), set.Name, err)
				}
			}
		}
		// The virtual servers 64 per send (ipvs.AddVirtualServers), as the
		// proxier's full sync creates them; the real servers of all of
		// them together, as many per send as the adapter takes (grouped),
		// or each virtual server's in one send after its group, as the
		// proxier does (interleaved).
		var ws []ipvs.RealServerWrite
		send := func() error {
			writes += len(ws)
			for i, err := range ipvs.WriteRealServers(k.IPVS, ws) {
				if err != nil {
					return fmt.Errorf("%v: %w", ws[i], err)
				}
			}
			ws = ws[:0]
			return nil
		}
		for start := 0; start < len(vss); start += nldump.MaxExchange {
			group := vss[start:min(start+nldump.MaxExchange, len(vss))]
			writes += len(group)
			for i, err := range ipvs.AddVirtualServers(k.IPVS, group) {
				if err != nil {
					return fmt.Errorf("add %s: %w", group[i].VirtualServerKey, err)
				}
			}
			for _, vs := range group {
				for _, rs := range rss[vs.VirtualServerKey] {
					ws = append(ws, ipvs.RealServerWrite{Op: ipvs.AddReal, VirtualServer: vs.VirtualServerKey, RealServer: rs})
				}
				if interleaved {
					if err := send(); err != nil {
						return err
					}
				}
			}
		}
		if err := send(); err != nil {
			return err
		}
		return do(k.IPTables[v1.IPv4Protocol].Restore(rules))
	}()
	res.Millis[shape.OpCold] = []float64{float64(time.Since(start).Microseconds()) / 1000}
	res.Writes[shape.OpCold] = writes
	return res, err
}

// printColdCalls splits the cold sync into its kernel calls and the rest.
func printColdCalls(res shape.Result) {
	kernel := callclock.Total(res.ColdCalls)
	fmt.Fprintf(os.Stderr, "  in kernel calls %.0f ms, the rest %.0f ms\n", kernel, res.Millis[shape.OpCold][0]-kernel)
	printCalls(res.ColdCalls)
}

// printCalls lists the time in each kind of kernel call, the longest first.
func printCalls(calls map[string]shape.CallTime) {
	for _, n := range callclock.Names(calls) {
		fmt.Fprintf(os.Stderr, "  %-30s %8.1f ms %6d calls\n", n, calls[n].Millis, calls[n].Calls)
	}
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "kernel-bench:", err)
		os.Exit(1)
	}
}
