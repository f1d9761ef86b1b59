package cleanup

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ipvsproxy/ipvsproxy/internal/adapters"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/iptables"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// Installed is `ipvsproxy cleanup`: it removes everything the proxier
// installs, for the families: its virtual servers, its jump rules and
// chains, its ipsets, its Service CIDR routes and kube-ipvs0. It goes on
// past failures and returns them all; what it does not own stays. A virtual
// server goes only when the ownership record names it (and no rule of
// internal/proxier's ownership.go adopting others applies here: without its
// record a virtual server may be kube-proxy's); the chains, sets and
// kube-ipvs0 whose names kube-proxy's IPVS mode shares go only when
// ipvsproxy's state is on the node (installedHere): on a node handed back
// to kube-proxy's IPVS mode they are kube-proxy's.
func Installed(k adapters.Kernel, families []v1.IPFamily) error {
	var errs []error
	fail := func(err error) {
		klog.ErrorS(err, "Cleanup step failed")
		errs = append(errs, err)
	}

	sets, err := k.IPSet.Sets()
	if err != nil && !errors.Is(err, ipset.ErrUnsupported) {
		fail(fmt.Errorf("list ipsets: %w", err))
	}
	ours := installedHere(sets)
	if !ours && err == nil {
		klog.InfoS("No set only ipvsproxy makes is on this node (no ownership record " + owned.SetOwned + "): the virtual servers, " + owned.DummyInterface +
			" and the chains and sets whose names kube-proxy's IPVS mode uses are not ipvsproxy's and stay (kube-proxy --cleanup removes kube-proxy's)")
	}
	// The members of each family's record set, with those of its
	// temporary twin (a replace cut short): both name what ipvsproxy made.
	records := map[string]*ipset.EntryMap[struct{}]{}
	for _, s := range sets {
		name := strings.TrimSuffix(s.Name, owned.TempSetSuffix)
		if owned.BaseName(name) != owned.SetOwned || s.Type != ipset.HashIPPort {
			continue
		}
		entries, err := k.IPSet.Entries(s.Name)
		if err != nil {
			fail(fmt.Errorf("list ipset %s: %w", s.Name, err))
			continue
		}
		if records[name] == nil {
			records[name] = ipset.NewEntryMap[struct{}](len(entries))
		}
		for _, e := range entries {
			records[name].Put(e, struct{}{})
		}
	}
	routes, err := k.ServiceRoutes()
	if err != nil {
		fail(err)
	}
	if len(records) > 0 {
		all, err := k.IPVS.VirtualServers()
		if err != nil && !errors.Is(err, ipvs.ErrUnsupported) {
			fail(fmt.Errorf("list virtual servers: %w", err))
		}
		for _, vs := range all {
			if set, e := owned.Record(vs.VirtualServerKey); !records[set].Has(e) {
				continue
			}
			if err := k.IPVS.DeleteVirtualServer(vs.VirtualServerKey); err != nil && !errors.Is(err, ipvs.ErrNotFound) {
				fail(fmt.Errorf("delete virtual server %s: %w", vs.VirtualServerKey, err))
			}
		}
	}

	for _, family := range families {
		ipt := k.IPTables[family]
		if ipt == nil {
			continue
		}
		for _, table := range owned.Tables {
			// nat's and filter's chains have kube-proxy's IPVS-mode names;
			// mangle's KUBE-IPVS-OUT-FILTER is ipvsproxy's alone
			// (kube-proxy's chain of that name is in filter).
			if !ours && table != iptables.TableMangle {
				continue
			}
			save, err := ipt.Save(table)
			if err != nil {
				fail(fmt.Errorf("read %s %s table: %w", family, table, err))
				continue
			}
			present := iptables.SavedRules(save)
			// Jumps first; a jump to a chain that is gone cannot even be
			// looked up (iptables: "Couldn't load target").
			for _, j := range owned.JumpRules() {
				if _, ok := present[j.Rule[len(j.Rule)-1]]; !ok || j.Table != table {
					continue
				}
				if err := ipt.DeleteRule(j.Table, j.Chain, j.Rule...); err != nil {
					fail(fmt.Errorf("delete %s jump from %s %s: %w", family, j.Table, j.Chain, err))
				}
			}
			var flush, remove strings.Builder
			for _, c := range owned.Chains[table] {
				if _, ok := present[c]; ok {
					fmt.Fprintf(&flush, ":%s - [0:0]\n", c)
					fmt.Fprintf(&remove, "-X %s\n", c)
				}
			}
			if flush.Len() == 0 {
				continue
			}
			// Flush all first: the chains jump to one another.
			text := "*" + string(table) + "\n" + flush.String() + remove.String() + "COMMIT\n"
			if err := ipt.Restore([]byte(text)); err != nil {
				fail(fmt.Errorf("delete %s %s chains: %w", family, table, err))
			}
		}
	}

	// The sets once the rules naming them are gone; the record sets last,
	// below.
	owns := map[string]bool{}
	for _, s := range owned.Sets(families, 0) {
		owns[s.Name], owns[owned.TempSetName(s.Name)] = true, true
	}
	var recordSets []string
	for _, s := range sets {
		switch {
		case !owns[s.Name] || !ours:
		case owned.BaseName(strings.TrimSuffix(s.Name, owned.TempSetSuffix)) == owned.SetOwned:
			recordSets = append(recordSets, s.Name)
		default:
			if err := k.IPSet.DestroySet(s.Name); err != nil && !errors.Is(err, ipset.ErrNotFound) {
				fail(fmt.Errorf("destroy ipset %s: %w", s.Name, err))
			}
		}
	}

	// Deleting the link takes its routes with it; deleting ours first also
	// cleans up when the link is not ours to delete.
	for _, r := range routes {
		if err := k.Netif.DeleteServiceRoute(r); err != nil && !errors.Is(err, netif.ErrNotFound) {
			fail(fmt.Errorf("delete service route %s: %w", r, err))
		}
	}
	if ours {
		if err := k.Netif.DeleteDummy(); err != nil && !errors.Is(err, netif.ErrNotFound) {
			fail(fmt.Errorf("delete %s: %w", owned.DummyInterface, err))
		}
	}

	// The record goes last, and only when everything else went: it is what
	// makes the node's state ipvsproxy's (installedHere), so a clean-up that
	// failed part-way, run again, still removes the rest.
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, name := range recordSets {
		if err := k.IPSet.DestroySet(name); err != nil && !errors.Is(err, ipset.ErrNotFound) {
			fail(fmt.Errorf("destroy ipset %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}
