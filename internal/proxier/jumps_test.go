package proxier

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/iptables"
	"github.com/ipvsproxy/ipvsproxy/internal/kerneltest"
	"github.com/ipvsproxy/ipvsproxy/internal/netnstest"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	v1 "k8s.io/api/core/v1"
)

// countingIPTables counts the calls that each start an iptables process on
// a node.
type countingIPTables struct {
	iptables.Interface
	saves, restores, ensures int
}

func (c *countingIPTables) Save(t iptables.Table) ([]byte, error) {
	c.saves++
	return c.Interface.Save(t)
}

func (c *countingIPTables) SaveTables(t ...iptables.Table) (map[iptables.Table][]byte, error) {
	c.saves++
	return c.Interface.SaveTables(t...)
}

func (c *countingIPTables) Restore(data []byte) error {
	c.restores++
	return c.Interface.Restore(data)
}

func (c *countingIPTables) EnsureRule(p iptables.Position, t iptables.Table, chain string, rule ...string) (bool, error) {
	c.ensures++
	return c.Interface.EnsureRule(p, t, chain, rule...)
}

func (c *countingIPTables) reset() { c.saves, c.restores, c.ensures = 0, 0, 0 }

// The jumps from the built-in chains are read from the tables' save and
// inserted by their restores: a cold sync starts one save of the three
// tables and one restore of all three, a full sync of an unchanged node only
// the save, and a jump deleted by hand comes back once, first in its chain. A jump to our chain
// written another way is left to iptables -C, so nothing is ever doubled.
// On the Fake and on this kernel's iptables (legacy and nft) in a namespace.
func TestJumpsAreCheckedInTheSaveAndInsertedByTheRestore(t *testing.T) {
	// Each back end gives the iptables to use, and the real ipsets its
	// rules name (nil: the Fake's).
	backEnds := map[string]func(t *testing.T) (iptables.Interface, ipset.Interface){
		"fake": func(t *testing.T) (iptables.Interface, ipset.Interface) { return iptables.NewFake(iptables.IPv4), nil },
	}
	if os.Geteuid() == 0 {
		for _, b := range []iptables.Backend{iptables.BackendLegacy, iptables.BackendNFT} {
			backEnds[string(b)] = func(t *testing.T) (iptables.Interface, ipset.Interface) {
				ns, path := netnstest.NewNamed(t, "ipvsproxy-j-")
				sets, err := ipset.NewInNamespace(ns)
				if err != nil {
					t.Fatal(err)
				}
				ipt, err := iptables.New(iptables.IPv4, iptables.InNetNS(path), iptables.WithBackend(b))
				if errors.Is(err, iptables.ErrUnsupported) {
					kerneltest.Skip(t, kerneltest.NoTool, "no iptables %s: %v", b, err)
				}
				if err != nil {
					t.Fatal(err)
				}
				return ipt, sets
			}
		}
	}
	for name, newIPT := range backEnds {
		t.Run(name, func(t *testing.T) {
			fk := newFakeKernel()
			real, sets := newIPT(t)
			ipt := &countingIPTables{Interface: real}
			k := fk.kernel()
			if sets != nil {
				k.IPSet = sets
			}
			k.IPTables = map[v1.IPFamily]iptables.Interface{v1.IPv4Protocol: ipt}
			// A host firewall was there first.
			if err := ipt.Restore([]byte("*filter\n-A INPUT -j DROP\nCOMMIT\n")); err != nil {
				t.Fatal(err)
			}
			ipt.reset()
			p, err := New(testConfig(), servicetest.ThisNode, k, nil)
			if err != nil {
				t.Fatal(err)
			}
			p.Tracker().SetService(servicetest.Service("web", "10.96.0.10", servicetest.NodePort(30080)))
			mustSync(t, p)
			if ipt.saves != 1 || ipt.restores != 1 || ipt.ensures != 0 {
				t.Errorf("cold sync: %d saves, %d restores, %d iptables -C; want 1, 1, 0", ipt.saves, ipt.restores, ipt.ensures)
			}
			checkJumpsOnce(t, ipt)
			if rules := savedChain(t, ipt, iptables.TableFilter, "INPUT"); rules[len(rules)-1] != "-A INPUT -j DROP" {
				t.Errorf("INPUT is %q: the host's DROP is no longer last", rules)
			}

			ipt.reset()
			p.RequestFullSync()
			if res := mustSync(t, p); res.Writes != 0 || ipt.restores != 0 || ipt.ensures != 0 || ipt.saves != 1 {
				t.Errorf("full sync of an unchanged node: %d writes, %d saves, %d restores, %d iptables -C; want 0, 1, 0, 0", res.Writes, ipt.saves, ipt.restores, ipt.ensures)
			}

			// Someone deletes two jumps and writes one to our chain
			// without our comment where the second was.
			for _, j := range owned.JumpRules()[:2] {
				if err := ipt.DeleteRule(j.Table, j.Chain, j.Rule...); err != nil {
					t.Fatal(err)
				}
			}
			if err := ipt.Restore([]byte("*nat\n-A OUTPUT -j KUBE-SERVICES\nCOMMIT\n")); err != nil {
				t.Fatal(err)
			}
			ipt.reset()
			p.RequestFullSync()
			if res := mustSync(t, p); res.Writes != 2 || ipt.restores != 1 || ipt.ensures != 1 {
				t.Errorf("repair: %d writes, %d restores, %d iptables -C; want 2 (PREROUTING's by the restore, OUTPUT's, beside another jump to KUBE-SERVICES, by iptables -C and -I), 1, 1", res.Writes, ipt.restores, ipt.ensures)
			}
			ipt.reset()
			p.RequestFullSync()
			if res := mustSync(t, p); res.Writes != 0 || ipt.restores != 0 || ipt.ensures != 0 {
				t.Errorf("after the repair: %d writes, %d restores, %d iptables -C; want none", res.Writes, ipt.restores, ipt.ensures)
			}
			checkJumpsOnce(t, ipt)
			if output := savedChain(t, ipt, iptables.TableNAT, "OUTPUT"); !slices.Contains(output, "-A OUTPUT -j KUBE-SERVICES") || len(output) != 2 {
				t.Errorf("nat OUTPUT is %q: want our jump and the other one", output)
			}
		})
	}
}

// refusingTable makes every restore that names one table fail, as a kernel
// without that table would; like iptables-legacy-restore, which commits
// each table at its COMMIT, the tables before it are written.
type refusingTable struct {
	iptables.Interface
	table iptables.Table
}

func (r refusingTable) Restore(data []byte) error {
	before, _, refused := strings.Cut(string(data), "*"+string(r.table)+"\n")
	if !refused {
		return r.Interface.Restore(data)
	}
	if before != "" {
		if err := r.Interface.Restore([]byte(before)); err != nil {
			return err
		}
	}
	return errors.New("iptables-restore: line 2 failed")
}

// When the one restore of several tables fails, each is restored on its
// own: the others are written and only the failing table is reported. On a
// dual-stack node, per family: the other family's one restore goes through.
func TestTablesAreRestoredApartWhenTheirOneRestoreFails(t *testing.T) {
	for _, family := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
		t.Run(string(family), func(t *testing.T) {
			fk := newFakeKernel()
			fakes := map[v1.IPFamily]*iptables.Fake{v1.IPv4Protocol: fk.ipt4, v1.IPv6Protocol: fk.ipt6}
			other := v1.IPv6Protocol
			if family == v1.IPv6Protocol {
				other = v1.IPv4Protocol
			}
			ipt := &countingIPTables{Interface: refusingTable{Interface: fakes[family], table: iptables.TableMangle}}
			otherIPT := &countingIPTables{Interface: fakes[other]}
			k := fk.kernel()
			k.IPTables = map[v1.IPFamily]iptables.Interface{family: ipt, other: otherIPT}
			cfg := testConfig()
			cfg.Families = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
			p, err := New(cfg, servicetest.ThisNode, k, nil)
			if err != nil {
				t.Fatal(err)
			}
			p.Tracker().SetService(servicetest.Service("web", "10.96.0.10", servicetest.NodePort(30080)))
			res := p.Sync()
			// nat and filter were committed before mangle failed: read again,
			// only mangle is left, tried with its jump and then alone.
			if ipt.saves != 2 || ipt.restores != 3 {
				t.Errorf("%d saves, %d restores; want 2 and 3: all three tables, a save, mangle with its jump and mangle alone", ipt.saves, ipt.restores)
			}
			if otherIPT.saves != 1 || otherIPT.restores != 1 {
				t.Errorf("%s: %d saves, %d restores; want 1 and 1", other, otherIPT.saves, otherIPT.restores)
			}
			var failed []string
			for _, o := range p.ReconcileStatus().Objects {
				if o.Kind == snapshot.ObjectRules && o.LastError != "" {
					failed = append(failed, o.Object)
				}
			}
			if len(failed) == 0 || slices.ContainsFunc(failed, func(o string) bool { return !strings.Contains(o, string(family)+" mangle") }) {
				t.Errorf("failed rules objects %q (%v); want the %s mangle table (and its jump) only", failed, res.WriteErrors, family)
			}
			// nat and filter were committed by the failed restore: restored
			// again, their jumps must not be inserted twice.
			for _, j := range owned.JumpRules() {
				if j.Table == iptables.TableMangle {
					continue
				}
				line := iptables.SavedLine(j.Chain, j.Rule)
				if n := strings.Count(strings.Join(savedChain(t, fakes[family], j.Table, j.Chain), "\n")+"\n", line+"\n"); n != 1 {
					t.Errorf("%s %s holds the jump %d times", j.Table, j.Chain, n)
				}
			}
			for table, chain := range map[iptables.Table]string{iptables.TableNAT: owned.ChainServices, iptables.TableFilter: owned.ChainIPVSFilter} {
				saved, err := fakes[family].Save(table)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(saved), ":"+chain+" ") {
					t.Errorf("%s has no chain %s after the restore of each table:\n%s", table, chain, saved)
				}
			}
		})
	}
}

func savedChain(t *testing.T, ipt iptables.Interface, table iptables.Table, chain string) []string {
	t.Helper()
	save, err := ipt.Save(table)
	if err != nil {
		t.Fatal(err)
	}
	return iptables.SavedRules(save)[chain]
}

// checkJumpsOnce: each jump is in its chain exactly once, before any rule
// that is not ours.
func checkJumpsOnce(t *testing.T, ipt iptables.Interface) {
	t.Helper()
	for _, j := range owned.JumpRules() {
		rules := savedChain(t, ipt, j.Table, j.Chain)
		line := iptables.SavedLine(j.Chain, j.Rule)
		if n := strings.Count(strings.Join(rules, "\n")+"\n", line+"\n"); n != 1 || !strings.HasPrefix(rules[0], "-A "+j.Chain+" -m comment --comment \"kubernetes") {
			t.Errorf("%s %s holds the jump %d times, first %q:\n%s", j.Table, j.Chain, n, rules[0], strings.Join(rules, "\n"))
		}
	}
}
