package iptables

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/kerneltest"
)

// subject is one implementation under test: the Fake, or the kernel through
// one back end inside a fresh network namespace.
type subject struct {
	name    string
	backend Backend // "" for the Fake
}

var subjects = []subject{{name: "fake"}, {name: "legacy", backend: BackendLegacy}, {name: "nft", backend: BackendNFT}}

// testEnv is what a case gets: the iptables under test and a way to create
// the ipsets its rules name (a no-op for the Fake, which does not model sets).
type testEnv struct {
	ipt       Interface
	createSet func(name, typ string)
}

// open returns a fresh environment, skipping when the kernel side cannot
// run here.
func (s subject) open(t *testing.T, family Family) testEnv {
	t.Helper()
	if s.backend == "" {
		return testEnv{ipt: NewFake(family), createSet: func(string, string) {}}
	}
	requireRoot(t)
	nsPath := newTestNetNS(t)
	ipt, err := New(family, InNetNS(nsPath), WithBackend(s.backend))
	if errors.Is(err, ErrUnsupported) {
		kerneltest.Skip(t, kerneltest.NoTool, "%s back end not installed: %v", s.backend, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	// A kernel without this back end's modules fails the simplest restore.
	probe := "*filter\n:IPVSPROXY-PROBE - [0:0]\n-X IPVSPROXY-PROBE\nCOMMIT\n"
	if err := ipt.Restore([]byte(probe)); err != nil {
		kerneltest.Skip(t, kerneltest.NoKernelFeature, "kernel refuses %s %s iptables: %v", s.backend, family, err)
	}
	return testEnv{ipt: ipt, createSet: func(name, typ string) { createIPSet(t, nsPath, family, name, typ) }}
}

// restoreKube creates the ipsets of the representative rule set and restores it.
func restoreKube(t *testing.T, env testEnv) kubeRuleSet {
	t.Helper()
	k := kubeRuleSet{family: env.ipt.Family()}
	for name, typ := range k.sets() {
		env.createSet(name, typ)
	}
	if err := env.ipt.Restore(k.restore()); err != nil {
		t.Fatalf("restore representative rules: %v", err)
	}
	return k
}

func save(t *testing.T, ipt Interface, table Table) string {
	t.Helper()
	out, err := ipt.Save(table)
	if err != nil {
		t.Fatalf("save %s: %v", table, err)
	}
	return string(out)
}

// saveAll is nat and filter, to check that a failure changed nothing.
func saveAll(t *testing.T, ipt Interface) string {
	t.Helper()
	return save(t, ipt, TableNAT) + save(t, ipt, TableFilter)
}

func wantSave(t *testing.T, ipt Interface, table Table, want string) {
	t.Helper()
	if got := save(t, ipt, table); got != want {
		t.Errorf("Save(%s) =\n%s\nwant\n%s", table, got, want)
	}
}

// wantRestoreFails restores data, expects ErrInvalid and no change at all.
func wantRestoreFails(t *testing.T, ipt Interface, data string) {
	t.Helper()
	before := saveAll(t, ipt)
	err := ipt.Restore([]byte(data))
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("Restore(%q) = %v, want ErrInvalid", data, err)
	}
	if after := saveAll(t, ipt); after != before {
		t.Errorf("failed Restore changed the tables:\nbefore\n%s\nafter\n%s", before, after)
	}
}

func withoutLine(s, line string) string {
	if !strings.Contains(s, line+"\n") {
		panic(fmt.Sprintf("golden text has no line %q", line))
	}
	return strings.Replace(s, line+"\n", "", 1)
}

// adapterCases run against every subject, IPv4 and IPv6. Each passing for
// the Fake and for the kernel is what makes the Fake trustworthy.
var adapterCases = []struct {
	name string
	run  func(t *testing.T, env testEnv)
}{
	{"restore creates chains and rules as iptables-save prints them", func(t *testing.T, env testEnv) {
		// The same golden text for the Fake and both kernel back ends: the
		// Fake's Save equals the kernel's for the same input.
		k := restoreKube(t, env)
		wantSave(t, env.ipt, TableNAT, k.savedNAT())
		wantSave(t, env.ipt, TableFilter, k.savedFilter())
	}},
	{"re-applying the same restore is idempotent", func(t *testing.T, env testEnv) {
		k := restoreKube(t, env)
		before := saveAll(t, env.ipt)
		if err := env.ipt.Restore(k.restore()); err != nil {
			t.Fatalf("second restore: %v", err)
		}
		if after := saveAll(t, env.ipt); after != before {
			t.Errorf("second restore changed the tables:\nbefore\n%s\nafter\n%s", before, after)
		}
	}},
	{"a declared chain is flushed and undeclared chains are kept", func(t *testing.T, env testEnv) {
		k := restoreKube(t, env)
		if err := env.ipt.Restore([]byte("*nat\n:KUBE-LOAD-BALANCER - [0:0]\nCOMMIT\n")); err != nil {
			t.Fatal(err)
		}
		wantSave(t, env.ipt, TableNAT, withoutLine(k.savedNAT(), "-A KUBE-LOAD-BALANCER -j KUBE-MARK-MASQ"))
		wantSave(t, env.ipt, TableFilter, k.savedFilter())
	}},
	{"declaring a built-in chain sets its policy and keeps its rules", func(t *testing.T, env testEnv) {
		if err := env.ipt.Restore([]byte("*filter\n-A FORWARD -j ACCEPT\nCOMMIT\n")); err != nil {
			t.Fatal(err)
		}
		if err := env.ipt.Restore([]byte("*filter\n:FORWARD DROP [0:0]\nCOMMIT\n")); err != nil {
			t.Fatal(err)
		}
		wantSave(t, env.ipt, TableFilter, "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n-A FORWARD -j ACCEPT\nCOMMIT\n")
	}},
	{"a jump to a missing chain fails and changes nothing", func(t *testing.T, env testEnv) {
		restoreKube(t, env)
		// KUBE-SERVICES would be flushed if the block were applied.
		wantRestoreFails(t, env.ipt, "*nat\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -j KUBE-SVC-MISSING\nCOMMIT\n")
	}},
	{"deleting a referenced chain fails", func(t *testing.T, env testEnv) {
		restoreKube(t, env)
		wantRestoreFails(t, env.ipt, "*nat\n:KUBE-MARK-MASQ - [0:0]\n-X KUBE-MARK-MASQ\nCOMMIT\n")
	}},
	{"deleting a missing chain fails", func(t *testing.T, env testEnv) {
		restoreKube(t, env)
		wantRestoreFails(t, env.ipt, "*nat\n-X KUBE-SVC-MISSING\nCOMMIT\n")
	}},
	{"deleting a chain with rules fails, flushing it first works", func(t *testing.T, env testEnv) {
		if err := env.ipt.Restore([]byte("*nat\n:KUBE-SVC-OLD - [0:0]\n-A KUBE-SVC-OLD -j RETURN\nCOMMIT\n")); err != nil {
			t.Fatal(err)
		}
		wantRestoreFails(t, env.ipt, "*nat\n-X KUBE-SVC-OLD\nCOMMIT\n")
		// kube-proxy's way to delete a chain: declare (flush) it, then -X.
		if err := env.ipt.Restore([]byte("*nat\n:KUBE-SVC-OLD - [0:0]\n-X KUBE-SVC-OLD\nCOMMIT\n")); err != nil {
			t.Fatalf("flush and delete: %v", err)
		}
		wantSave(t, env.ipt, TableNAT, newFakeTable(TableNAT).save())
	}},
	{"a table without COMMIT fails and changes nothing", func(t *testing.T, env testEnv) {
		restoreKube(t, env)
		wantRestoreFails(t, env.ipt, "*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-NEW - [0:0]\n")
	}},
	{"DROP in the nat table fails", func(t *testing.T, env testEnv) {
		wantRestoreFails(t, env.ipt, "*nat\n:KUBE-X - [0:0]\n-A KUBE-X -j DROP\nCOMMIT\n")
	}},
	{"MASQUERADE outside the nat table fails", func(t *testing.T, env testEnv) {
		wantRestoreFails(t, env.ipt, "*filter\n:KUBE-X - [0:0]\n-A KUBE-X -j MASQUERADE\nCOMMIT\n")
	}},
	{"a failing table block leaves earlier blocks applied", func(t *testing.T, env testEnv) {
		// iptables-restore commits each block at its COMMIT line.
		err := env.ipt.Restore([]byte("*nat\n:KUBE-A - [0:0]\nCOMMIT\n*filter\n:KUBE-B - [0:0]\n-A KUBE-B -j KUBE-MISSING\nCOMMIT\n"))
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("Restore = %v, want ErrInvalid", err)
		}
		nat := newFakeTable(TableNAT)
		nat.chains["KUBE-A"] = &fakeChain{}
		wantSave(t, env.ipt, TableNAT, nat.save())
		wantSave(t, env.ipt, TableFilter, newFakeTable(TableFilter).save())
	}},
	{"insert and delete by position and by rule", func(t *testing.T, env testEnv) {
		data := "*filter\n:KUBE-X - [0:0]\n-A KUBE-X -j RETURN\n-I KUBE-X 2 -j ACCEPT\n-I KUBE-X -j DROP\n-I KUBE-X 1 -p tcp -j RETURN\nCOMMIT\n"
		if err := env.ipt.Restore([]byte(data)); err != nil {
			t.Fatal(err)
		}
		if err := env.ipt.Restore([]byte("*filter\n-D KUBE-X -j DROP\n-D KUBE-X 2\nCOMMIT\n")); err != nil {
			t.Fatal(err)
		}
		wantSave(t, env.ipt, TableFilter, "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:KUBE-X - [0:0]\n-A KUBE-X -p tcp -j RETURN\n-A KUBE-X -j ACCEPT\nCOMMIT\n")
		wantRestoreFails(t, env.ipt, "*filter\n-I KUBE-X 4 -j ACCEPT\nCOMMIT\n")
		wantRestoreFails(t, env.ipt, "*filter\n-D KUBE-X -j DROP\nCOMMIT\n")
	}},
	{"comments are quoted the way iptables-save quotes them", func(t *testing.T, env testEnv) {
		data := `*nat
:KUBE-X - [0:0]
-A KUBE-X -m comment --comment "plain_word-1" -j RETURN
-A KUBE-X -m comment --comment "ns/svc:port" -j RETURN
-A KUBE-X -m comment --comment "a\"b\\c" -j RETURN
-A KUBE-X -m comment --comment "" -j RETURN
COMMIT
`
		if err := env.ipt.Restore([]byte(data)); err != nil {
			t.Fatal(err)
		}
		want := `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-X - [0:0]
-A KUBE-X -m comment --comment plain_word-1 -j RETURN
-A KUBE-X -m comment --comment "ns/svc:port" -j RETURN
-A KUBE-X -m comment --comment "a\"b\\c" -j RETURN
-A KUBE-X -m comment --comment "" -j RETURN
COMMIT
`
		wantSave(t, env.ipt, TableNAT, want)
	}},
	{"EnsureRule twice adds one rule", func(t *testing.T, env testEnv) {
		k := restoreKube(t, env)
		rule := []string{"-m", "comment", "--comment", "kubernetes postrouting rules", "-j", "KUBE-POSTROUTING"}
		for i, wantExisted := range []bool{false, true} {
			existed, err := env.ipt.EnsureRule(Append, TableNAT, "POSTROUTING", rule...)
			if err != nil || existed != wantExisted {
				t.Fatalf("EnsureRule #%d = %v, %v; want %v, nil", i+1, existed, err, wantExisted)
			}
		}
		want := strings.Replace(k.savedNAT(), "-A KUBE-LOAD-BALANCER",
			"-A POSTROUTING -m comment --comment \"kubernetes postrouting rules\" -j KUBE-POSTROUTING\n-A KUBE-LOAD-BALANCER", 1)
		wantSave(t, env.ipt, TableNAT, want)
	}},
	{"EnsureRule Prepend goes before rules already there and is not moved again", func(t *testing.T, env testEnv) {
		// A host firewall's rule (RHEL ends INPUT with a REJECT) was there first.
		if err := env.ipt.Restore([]byte("*filter\n-A INPUT -j DROP\nCOMMIT\n")); err != nil {
			t.Fatal(err)
		}
		if err := env.ipt.Restore([]byte("*filter\n:KUBE-IPVS-FILTER - [0:0]\nCOMMIT\n")); err != nil {
			t.Fatal(err)
		}
		jump := []string{"-m", "comment", "--comment", "kubernetes ipvs access filter", "-j", "KUBE-IPVS-FILTER"}
		for i, wantExisted := range []bool{false, true} {
			existed, err := env.ipt.EnsureRule(Prepend, TableFilter, "INPUT", jump...)
			if err != nil || existed != wantExisted {
				t.Fatalf("EnsureRule #%d = %v, %v; want %v, nil", i+1, existed, err, wantExisted)
			}
		}
		save, err := env.ipt.Save(TableFilter)
		if err != nil {
			t.Fatal(err)
		}
		rules := SavedRules(save)["INPUT"]
		want := []string{`-A INPUT -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-FILTER`, "-A INPUT -j DROP"}
		if strings.Join(rules, "\n") != strings.Join(want, "\n") {
			t.Fatalf("INPUT holds\n%s\nwant\n%s", strings.Join(rules, "\n"), strings.Join(want, "\n"))
		}
	}},
	{"a restore inserts a jump first, and Save prints it as SavedLine", func(t *testing.T, env testEnv) {
		if err := env.ipt.Restore([]byte("*filter\n-A INPUT -j DROP\nCOMMIT\n")); err != nil {
			t.Fatal(err)
		}
		jump := []string{"-m", "comment", "--comment", "kubernetes ipvs access filter", "-j", "KUBE-IPVS-FILTER"}
		restore := "*filter\n:KUBE-IPVS-FILTER - [0:0]\n-I INPUT 1 " + RuleText(jump) + "\nCOMMIT\n"
		if err := env.ipt.Restore([]byte(restore)); err != nil {
			t.Fatal(err)
		}
		save, err := env.ipt.Save(TableFilter)
		if err != nil {
			t.Fatal(err)
		}
		rules := SavedRules(save)["INPUT"]
		want := []string{SavedLine("INPUT", jump), "-A INPUT -j DROP"}
		if strings.Join(rules, "\n") != strings.Join(want, "\n") || !JumpsTo(rules, "KUBE-IPVS-FILTER") || JumpsTo(rules, "KUBE-FORWARD") {
			t.Fatalf("INPUT holds\n%s\nwant\n%s", strings.Join(rules, "\n"), strings.Join(want, "\n"))
		}
		if existed, err := env.ipt.EnsureRule(Prepend, TableFilter, "INPUT", jump...); err != nil || !existed {
			t.Fatalf("EnsureRule after the restore = %v, %v; want it there", existed, err)
		}
	}},
	{"EnsureRule into a missing chain is ErrNotFound", func(t *testing.T, env testEnv) {
		_, err := env.ipt.EnsureRule(Append, TableNAT, "KUBE-MISSING", "-j", "RETURN")
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("EnsureRule = %v, want ErrNotFound", err)
		}
	}},
	{"EnsureRule jumping to a missing chain is ErrInvalid", func(t *testing.T, env testEnv) {
		_, err := env.ipt.EnsureRule(Append, TableNAT, "PREROUTING", "-j", "KUBE-MISSING")
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("EnsureRule = %v, want ErrInvalid", err)
		}
	}},
	{"SaveTables reads each table as Save does, a table never set up too", func(t *testing.T, env testEnv) {
		restoreKube(t, env)
		// Before any Save: on the kernel, mangle and raw are not set up
		// yet in a fresh namespace, so one save of every table lacks them.
		tables := []Table{TableNAT, TableFilter, TableMangle, "raw"}
		got, err := env.ipt.SaveTables(tables...)
		if err != nil {
			t.Fatal(err)
		}
		for _, table := range tables {
			if want := save(t, env.ipt, table); string(got[table]) != want {
				t.Errorf("SaveTables: %s is\n%s\nwant, as Save prints it,\n%s", table, got[table], want)
			}
		}
		if _, err := env.ipt.SaveTables(TableNAT, "bogus"); !errors.Is(err, ErrInvalid) {
			t.Errorf("SaveTables of a table that does not exist: %v, want ErrInvalid", err)
		}
	}},
	{"DeleteRule deletes once and an absent rule is fine", func(t *testing.T, env testEnv) {
		k := restoreKube(t, env)
		rule := []string{"-m", "comment", "--comment", "kubernetes service portals", "-j", "KUBE-SERVICES"}
		if _, err := env.ipt.EnsureRule(Append, TableNAT, "PREROUTING", rule...); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			if err := env.ipt.DeleteRule(TableNAT, "PREROUTING", rule...); err != nil {
				t.Fatalf("DeleteRule #%d: %v", i+1, err)
			}
		}
		if err := env.ipt.DeleteRule(TableNAT, "KUBE-MISSING", "-j", "RETURN"); err != nil {
			t.Fatalf("DeleteRule in a missing chain: %v", err)
		}
		wantSave(t, env.ipt, TableNAT, k.savedNAT())
	}},
}

func TestAdapter(t *testing.T) {
	for _, family := range []Family{IPv4, IPv6} {
		for _, s := range subjects {
			t.Run(fmt.Sprintf("%s/%s", family, s.name), func(t *testing.T) {
				for _, c := range adapterCases {
					t.Run(c.name, func(t *testing.T) {
						c.run(t, s.open(t, family))
					})
				}
			})
		}
	}
}
