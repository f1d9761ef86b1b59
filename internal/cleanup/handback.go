package cleanup

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ipvsproxy/ipvsproxy/internal/adapters"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/iptables"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	v1 "k8s.io/api/core/v1"
)

// ErrKubeProxyNotRunning is AfterKubeProxyIPVS's refusal: the rules
// in the chains ipvsproxy shares by name with kube-proxy's IPVS mode are
// still ipvsproxy's, so kube-proxy has not taken the node over yet.
var ErrKubeProxyNotRunning = errors.New("kube-proxy's IPVS mode has not taken over this node yet")

// AfterKubeProxyIPVS is `ipvsproxy cleanup --after-kube-proxy-ipvs`, the
// last step of a rollback to kube-proxy's
// IPVS mode, run once kube-proxy serves the node. kube-proxy adopts the
// virtual servers ipvsproxy left, binds its addresses on kube-ipvs0 and
// rewrites the chains and sets whose names it shares with ipvsproxy; what
// it does not know would stay and keep acting: the mangle OUTPUT jump to
// KUBE-IPVS-OUT-FILTER (it drops the node's own traffic to source-ranged
// load-balancer IPs), ipvsproxy's own sets, among them the ownership record
// (a later `ipvsproxy cleanup` would delete the virtual servers it names,
// kube-proxy's by then), and the Service CIDR routes on kube-ipvs0. This
// removes exactly those; the virtual servers, kube-ipvs0 and every name
// kube-proxy uses stay. It refuses, changing nothing, while ipvsproxy's
// rules still name its own sets (kube-proxy has not synced yet). It
// returns what it removed; a second run removes nothing.
func AfterKubeProxyIPVS(k adapters.Kernel, families []v1.IPFamily) ([]string, error) {
	oursAlone := oursAloneSets(families)
	// Refuse first, for every family, before changing anything.
	for _, family := range families {
		ipt := k.IPTables[family]
		if ipt == nil {
			continue
		}
		for _, table := range []iptables.Table{iptables.TableNAT, iptables.TableFilter} {
			save, err := ipt.Save(table)
			if err != nil {
				return nil, fmt.Errorf("read %s %s table: %w", family, table, err)
			}
			for _, line := range strings.Split(string(save), "\n") {
				if strings.HasPrefix(line, "-A ") && referencesAny(line, oursAlone) {
					return nil, fmt.Errorf("%w: %s %s still holds ipvsproxy's rule %q; start kube-proxy (--proxy-mode=ipvs, %s) on the node, wait for its first sync, then run this again (nothing was removed)",
						ErrKubeProxyNotRunning, family, table, line, family)
				}
			}
		}
	}

	var removed []string
	var errs []error
	for _, family := range families {
		ipt := k.IPTables[family]
		if ipt == nil {
			continue
		}
		save, err := ipt.Save(iptables.TableMangle)
		if err != nil {
			errs = append(errs, fmt.Errorf("read %s mangle table: %w", family, err))
			continue
		}
		present := iptables.SavedRules(save)
		if _, ok := present[owned.ChainIPVSOutFilter]; !ok {
			continue
		}
		for _, j := range owned.JumpRules() {
			if j.Table != iptables.TableMangle {
				continue
			}
			if err := ipt.DeleteRule(j.Table, j.Chain, j.Rule...); err != nil && !errors.Is(err, iptables.ErrNotFound) {
				errs = append(errs, fmt.Errorf("delete %s jump from mangle %s: %w", family, j.Chain, err))
			}
		}
		text := fmt.Sprintf("*mangle\n:%[1]s - [0:0]\n-X %[1]s\nCOMMIT\n", owned.ChainIPVSOutFilter)
		if err := ipt.Restore([]byte(text)); err != nil {
			errs = append(errs, fmt.Errorf("delete %s mangle %s: %w", family, owned.ChainIPVSOutFilter, err))
			continue
		}
		removed = append(removed, fmt.Sprintf("%s iptables mangle %s and its OUTPUT jump", family, owned.ChainIPVSOutFilter))
	}

	sets, err := k.IPSet.Sets()
	if err != nil && !errors.Is(err, ipset.ErrUnsupported) {
		errs = append(errs, fmt.Errorf("list ipsets: %w", err))
	}
	// The ownership record goes last: a run that failed before it can be
	// run again and still knows which virtual servers were ipvsproxy's.
	slices.SortStableFunc(sets, recordLast)
	for _, s := range sets {
		if !oursAlone[s.Name] {
			continue
		}
		if err := k.IPSet.DestroySet(s.Name); err != nil && !errors.Is(err, ipset.ErrNotFound) {
			errs = append(errs, fmt.Errorf("destroy ipset %s: %w", s.Name, err))
			continue
		}
		removed = append(removed, "ipset "+s.Name)
	}

	routes, err := k.ServiceRoutes()
	if err != nil {
		errs = append(errs, err)
	}
	for _, r := range routes {
		if err := k.Netif.DeleteServiceRoute(r); err != nil && !errors.Is(err, netif.ErrNotFound) {
			errs = append(errs, fmt.Errorf("delete service route %s: %w", r, err))
			continue
		}
		removed = append(removed, fmt.Sprintf("route local %s dev %s", r, owned.DummyInterface))
	}
	return removed, errors.Join(errs...)
}
