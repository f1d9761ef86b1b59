package proxier

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ipvsproxy/ipvsproxy/internal/adapters"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/ipvsproxy/ipvsproxy/iptables"
	"github.com/ipvsproxy/ipvsproxy/ipvs"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	"github.com/ipvsproxy/ipvsproxy/netif"
	"k8s.io/klog/v2"
)

// Cleanup removes everything the proxier installs: its virtual servers,
// its jump rules and chains, its ipsets, its Service CIDR routes and
// kube-ipvs0. It goes on past failures and returns them all; what it does
// not own stays.
func Cleanup(k adapters.Kernel, cfg ipvsproxy.Config) error {
	var errs []error
	fail := func(err error) {
		klog.ErrorS(err, "Cleanup step failed")
		errs = append(errs, err)
	}

	// Which virtual servers are ours is the one rule of ownership.go.
	sets, err := k.IPSet.Sets()
	if err != nil && !errors.Is(err, ipset.ErrUnsupported) {
		fail(fmt.Errorf("list ipsets: %w", err))
	}
	members := map[string]*ipset.EntryMap[struct{}]{}
	for _, s := range sets {
		if owned.BaseName(s.Name) != owned.SetOwned || s.Type != ipset.HashIPPort {
			continue
		}
		entries, err := k.IPSet.Entries(s.Name)
		if err != nil {
			fail(fmt.Errorf("list ipset %s: %w", s.Name, err))
			continue
		}
		members[s.Name] = entryMapOf(entries)
	}
	routes, err := ownRoutes(k)
	if err != nil {
		fail(err)
	}
	vsFailed := false
	// The addresses matter only to the legacy rule (no record set).
	addrs, addrErr := readAddresses(k)
	owner := readOwnership(cfg, sets, members, nil, addrs, nil, nil)
	if addrErr != nil && owner.legacy {
		fail(addrErr)
		vsFailed = true
	} else if all, err := k.IPVS.VirtualServers(); err != nil && !errors.Is(err, ipvs.ErrUnsupported) {
		fail(fmt.Errorf("list virtual servers: %w", err))
		vsFailed = true
	} else {
		for _, vs := range all {
			if !owner.owns(vs.VirtualServerKey, cfg) {
				continue
			}
			if err := k.IPVS.DeleteVirtualServer(vs.VirtualServerKey); err != nil && !errors.Is(err, ipvs.ErrNotFound) {
				fail(fmt.Errorf("delete virtual server %s: %w", vs.VirtualServerKey, err))
				vsFailed = true
			}
		}
	}

	for _, family := range cfg.Families {
		ipt := k.IPTables[family]
		if ipt == nil {
			continue
		}
		for _, table := range owned.Tables {
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

	ours := map[string]bool{}
	for _, s := range owned.Sets(cfg.Families, cfg.IPSetMaxElements) {
		// The record goes last, and only once every virtual server it
		// names is gone: a cleanup that failed can be run again.
		ours[s.Name] = owned.BaseName(s.Name) != owned.SetOwned || !vsFailed
		ours[tempSetName(s.Name)] = true
	}
	for _, s := range sets {
		if ours[s.Name] && owned.BaseName(s.Name) != owned.SetOwned {
			if err := k.IPSet.DestroySet(s.Name); err != nil && !errors.Is(err, ipset.ErrNotFound) {
				fail(fmt.Errorf("destroy ipset %s: %w", s.Name, err))
			}
		}
	}
	for _, s := range sets {
		if ours[s.Name] && owned.BaseName(s.Name) == owned.SetOwned {
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
	if err := k.Netif.DeleteDummy(); err != nil && !errors.Is(err, netif.ErrNotFound) {
		fail(fmt.Errorf("delete %s: %w", owned.DummyInterface, err))
	}
	return errors.Join(errs...)
}
