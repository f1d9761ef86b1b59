package main

import (
	"bytes"
	"fmt"
	"os/exec"
	"time"

	"github.com/ipvsproxy/ipvsproxy/benchmarks/harness/netns"
	"github.com/ipvsproxy/ipvsproxy/benchmarks/shape"
	utilipset "k8s.io/kubernetes/pkg/proxy/ipvs/ipset"
)

// ProcessCost is what one ipset entry costs kube-proxy's way (a process
// each, through its own ipset runner, as its sync adds every entry) and
// the kernel's way alone (the same entries in one `ipset restore`): the
// difference is starting a process, which emulation makes far dearer
// than a real CPU does. Measured in the same boot or on the same host as
// a benchmark, it says how much of kube-proxy's cold sync is that.
type ProcessCost struct {
	Entries           int     `json:"entries"`
	PerProcessMillis  float64 `json:"per_process_ms"`
	PerRestoredMillis float64 `json:"per_restored_entry_ms"`
}

// measureProcessCost adds n entries of kube-proxy's cluster-IP set type
// (hash:ip,port) one process each, then n others in one restore, in the
// private namespace the harness started it in.
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
	one, all := set("PROCESS-COST-EACH"), set("PROCESS-COST-RESTORE")
	for _, s := range []*utilipset.IPSet{one, all} {
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
	if got, err := h.ListEntries(all.Name); err != nil || len(got) != n {
		return res, fmt.Errorf("%s holds %d entries, want %d (%v)", all.Name, len(got), n, err)
	}
	return res, nil
}
