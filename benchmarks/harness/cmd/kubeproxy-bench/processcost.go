package main

import (
	"bytes"
	"fmt"
	"net/netip"
	"os/exec"
	"time"

	"github.com/ipvsproxy/ipvsproxy/benchmarks/harness/netns"
	"github.com/ipvsproxy/ipvsproxy/benchmarks/shape"
	ipvsproxyipset "github.com/ipvsproxy/ipvsproxy/ipset"
	utilipset "k8s.io/kubernetes/pkg/proxy/ipvs/ipset"
)

// ProcessCost is what one ipset entry costs kube-proxy's way (a process
// each, through its own ipset runner, as its sync adds every entry), a
// netlink message each (ipvsproxy's ipset adapter, AddEntry), in batches
// (AddEntries, as ipvsproxy's sync adds a set's members) and in one `ipset restore` (the kernel's and the
// tool's work without a process per entry). Measured in the VM and on a host with a real CPU,
// the figures say whether emulation slows one way more than the other,
// that is whether the real kernel's ratios under emulation hold on a
// real CPU.
type ProcessCost struct {
	Entries           int     `json:"entries"`
	PerProcessMillis  float64 `json:"per_process_ms"`
	PerNetlinkMillis  float64 `json:"per_netlink_entry_ms"`
	PerBatchedMillis  float64 `json:"per_batched_entry_ms,omitempty"`
	PerRestoredMillis float64 `json:"per_restored_entry_ms"`
}

// measureProcessCost adds n entries of kube-proxy's cluster-IP set type
// (hash:ip,port) one process each, the same n into a second set over
// netlink one message each, into a third in batches, and into a fourth in
// one restore, in the private namespace the harness started it in.
func measureProcessCost(n int) (ProcessCost, error) {
	res := ProcessCost{Entries: n}
	if err := netns.Prepare(shape.NodeIP, ""); err != nil {
		return res, err
	}
	h := utilipset.New()
	set := func(name string) *utilipset.IPSet {
		return &utilipset.IPSet{Name: name, SetType: utilipset.HashIPPort, HashFamily: utilipset.ProtocolFamilyIPV4, HashSize: 1024, MaxElem: 65536}
	}
	entry := func(i int) string { return fmt.Sprintf("198.51.100.%d,tcp:%d", i%250+1, 10000+i) }
	one, viaNetlink, batched, all := set("PROCESS-COST-EACH"), set("PROCESS-COST-NETLINK"), set("PROCESS-COST-BATCHED"), set("PROCESS-COST-RESTORE")
	for _, s := range []*utilipset.IPSet{one, viaNetlink, batched, all} {
		if err := h.CreateSet(s, false); err != nil {
			return res, err
		}
	}
	start := time.Now()
	for i := range n {
		if err := h.AddEntry(entry(i), one, true); err != nil {
			return res, err
		}
	}
	res.PerProcessMillis = float64(time.Since(start).Microseconds()) / 1000 / float64(n)
	nl, err := ipvsproxyipset.New()
	if err != nil {
		return res, err
	}
	defer nl.Close()
	es := make([]ipvsproxyipset.Entry, n)
	for i := range n {
		es[i] = ipvsproxyipset.Entry{IP: netip.AddrFrom4([4]byte{198, 51, 100, byte(i%250 + 1)}), Protocol: "tcp", Port: uint16(10000 + i)}
	}
	start = time.Now()
	for _, e := range es {
		if err := nl.AddEntry(viaNetlink.Name, e); err != nil {
			return res, err
		}
	}
	res.PerNetlinkMillis = float64(time.Since(start).Microseconds()) / 1000 / float64(n)
	start = time.Now()
	for _, err := range nl.AddEntries(batched.Name, es) {
		if err != nil {
			return res, err
		}
	}
	res.PerBatchedMillis = float64(time.Since(start).Microseconds()) / 1000 / float64(n)
	var lines bytes.Buffer
	for i := range n {
		fmt.Fprintf(&lines, "add %s %s\n", all.Name, entry(i))
	}
	restore := exec.Command(utilipset.IPSetCmd, "restore")
	restore.Stdin = &lines
	start = time.Now()
	if out, err := restore.CombinedOutput(); err != nil {
		return res, fmt.Errorf("ipset restore: %v (%s)", err, out)
	}
	res.PerRestoredMillis = float64(time.Since(start).Microseconds()) / 1000 / float64(n)
	if got, err := h.ListEntries(one.Name); err != nil || len(got) != n {
		return res, fmt.Errorf("%s holds %d entries, want %d (%v)", one.Name, len(got), n, err)
	}
	for _, s := range []*utilipset.IPSet{viaNetlink, batched, all} {
		if got, err := h.ListEntries(s.Name); err != nil || len(got) != n {
			return res, fmt.Errorf("%s holds %d entries, want %d (%v)", s.Name, len(got), n, err)
		}
	}
	return res, nil
}
