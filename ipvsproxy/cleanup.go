package ipvsproxy

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/ipvsproxy/ipvsproxy/iptables"
	"github.com/ipvsproxy/ipvsproxy/ipvs"
	"github.com/ipvsproxy/ipvsproxy/netif"
	"k8s.io/klog/v2"
)

// Cleanup removes everything the proxier installs: its virtual servers,
// its jump rules and chains, its ipsets and kube-ipvs0. It goes on past
// failures and returns them all; what it does not own stays.
func Cleanup(k Kernel, cfg Config) error {
	var errs []error
	fail := func(err error) {
		klog.ErrorS(err, "Cleanup step failed")
		errs = append(errs, err)
	}

	bound, err := k.Netif.DummyAddresses()
	if err != nil && !errors.Is(err, netif.ErrNotFound) {
		fail(fmt.Errorf("list addresses of %s: %w", DummyInterface, err))
	}
	onDummy := map[netip.Addr]bool{}
	for _, a := range bound {
		onDummy[a.Unmap()] = true
	}
	host, err := k.Netif.HostAddresses()
	if err != nil {
		fail(fmt.Errorf("list node addresses: %w", err))
	}
	// The members of KUBE-IPVS-SERVICES record the virtual servers on node
	// addresses that Services use (ownership.owns); the sets go last.
	services := map[string]map[ipset.Entry]bool{}
	for _, f := range cfg.Families {
		name := setName(setIPVSServices, f)
		entries, err := k.IPSet.Entries(name)
		if err != nil {
			continue // no set, nothing recorded
		}
		services[name] = map[ipset.Entry]bool{}
		for _, e := range entries {
			services[name][e] = true
		}
	}
	owner := newOwnership(cfg, onDummy, host, services)
	if all, err := k.IPVS.VirtualServers(); err != nil && !errors.Is(err, ipvs.ErrUnsupported) {
		fail(fmt.Errorf("list virtual servers: %w", err))
	} else {
		for _, vs := range all {
			if !owner.owns(vs.VirtualServerKey) {
				continue
			}
			if err := k.IPVS.DeleteVirtualServer(vs.VirtualServerKey); err != nil && !errors.Is(err, ipvs.ErrNotFound) {
				fail(fmt.Errorf("delete virtual server %s: %w", vs.VirtualServerKey, err))
			}
		}
	}

	for _, family := range cfg.Families {
		ipt := k.IPTables[family]
		if ipt == nil {
			continue
		}
		for _, table := range ownedTables {
			save, err := ipt.Save(table)
			if err != nil {
				fail(fmt.Errorf("read %s %s table: %w", family, table, err))
				continue
			}
			present := iptables.SavedRules(save)
			// Jumps first; a jump to a chain that is gone cannot even be
			// looked up (iptables: "Couldn't load target").
			for _, j := range jumpRules() {
				if _, ok := present[j.rule[len(j.rule)-1]]; !ok || j.table != table {
					continue
				}
				if err := ipt.DeleteRule(j.table, j.chain, j.rule...); err != nil {
					fail(fmt.Errorf("delete %s jump from %s %s: %w", family, j.table, j.chain, err))
				}
			}
			var flush, remove strings.Builder
			for _, c := range ownedChains[table] {
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

	sets, err := k.IPSet.Sets()
	if err != nil && !errors.Is(err, ipset.ErrUnsupported) {
		fail(fmt.Errorf("list ipsets: %w", err))
	}
	owned := map[string]bool{}
	for _, s := range ownedSets(cfg.Families) {
		owned[s.Name] = true
	}
	for _, s := range sets {
		if owned[s.Name] {
			if err := k.IPSet.DestroySet(s.Name); err != nil && !errors.Is(err, ipset.ErrNotFound) {
				fail(fmt.Errorf("destroy ipset %s: %w", s.Name, err))
			}
		}
	}

	if err := k.Netif.DeleteDummy(); err != nil && !errors.Is(err, netif.ErrNotFound) {
		fail(fmt.Errorf("delete %s: %w", DummyInterface, err))
	}
	return errors.Join(errs...)
}
