package ledger

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const (
	basicSpec    = "[sig-network] Services should serve a basic endpoint from pods [Conformance]"
	fallbackSpec = "[sig-network] Services should fallback to local terminating endpoints when there are no ready endpoints with externalTrafficPolicy=Local"
	threeSpec    = "[sig-network] Services should implement NodePort and HealthCheckNodePort correctly when ExternalTrafficPolicy changes"
	neverSpec    = "[sig-network] Services should be able to up and down services"
)

// A shard's report as ginkgo v2 writes it: a suite node, a pass, a failure whose message runs
// over lines and holds a tab, a spec that skipped itself, and one the focus left out.
const firstRun = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites><testsuite name="Kubernetes e2e suite">
  <testcase name="[SynchronizedBeforeSuite]" classname="Kubernetes e2e suite" status="passed" time="0.1"></testcase>
  <testcase name="[It] [sig-network] Services should serve a basic endpoint from pods [Conformance] [sig-network, Conformance]" status="passed" time="61.25"></testcase>
  <testcase name="[It] [sig-network] Services should fallback to local terminating endpoints when there are no ready endpoints with externalTrafficPolicy=Local [sig-network]" status="failed" time="368">
    <failure message="[FAILED] error running curl:&#xA;command terminated with exit code 7&#x9;(after 100 s)" type="failed">[FAILED] long text</failure>
  </testcase>
  <testcase name="[It] [sig-network] Services should implement NodePort and HealthCheckNodePort correctly when ExternalTrafficPolicy changes [sig-network]" status="skipped" time="0.2">
    <skipped message="skipped - Requires at least 3 nodes (not 2)"></skipped>
  </testcase>
  <testcase name="[It] [sig-storage] something else [sig-storage]" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>
</testsuite></testsuites>`

// The failed spec run again alone, and it passes.
const rerun = `<testsuites><testsuite name="Kubernetes e2e suite">
  <testcase name="[It] [sig-network] Services should fallback to local terminating endpoints when there are no ready endpoints with externalTrafficPolicy=Local [sig-network]" status="passed" time="176"></testcase>
</testsuite></testsuites>`

func writeReport(t *testing.T, dir, pass, body string) string {
	t.Helper()
	path := filepath.Join(dir, pass, "junit_01.xml")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestSpecName(t *testing.T) {
	for in, want := range map[string]string{
		"[It] [sig-network] Services should x [Conformance] [sig-network, Conformance]":     "[sig-network] Services should x [Conformance]",
		"[It] [sig-network] Networking should y [LinuxOnly] [Serial] [sig-network, Serial]": "[sig-network] Networking should y [LinuxOnly] [Serial]",
		"[It] [sig-network] Services should z [sig-network]":                                "[sig-network] Services should z",
		// No labels: a text ending in brackets keeps them.
		"[It] [sig-network] Conntrack should w [Privileged]": "[sig-network] Conntrack should w [Privileged]",
		"[sig-network] Services plain":                       "[sig-network] Services plain",
		"[SynchronizedBeforeSuite]":                          "[SynchronizedBeforeSuite]",
	} {
		if got := SpecName(in, true); got != want {
			t.Errorf("SpecName(%q, true) = %q, want %q", in, got, want)
		}
	}
	// A run's report has no label groups: nothing is dropped.
	const repeated = "[sig-network] X [LinuxOnly] should y [LinuxOnly]"
	if got := SpecName("[It] "+repeated, false); got != repeated {
		t.Errorf("SpecName(%q, false) = %q", repeated, got)
	}
}

// A run's report (the Kubernetes framework writes it with OmitSpecLabels) has no label groups:
// a name ending in a tag that its text also holds earlier keeps it. The dual-stack specs are
// "... Secondary IP Family [LinuxOnly] should function for client IP based session affinity:
// http [LinuxOnly]": read as a label group, the ledger lost the last "[LinuxOnly]" and the
// status never matched the dry run's name.
func TestReadJUnitKeepsARepeatedTagOfAReportWithoutLabels(t *testing.T) {
	const affinity = "[sig-network] [Feature:IPv6DualStack] Granular Checks: Services Secondary IP Family [LinuxOnly] should function for client IP based session affinity: http [LinuxOnly]"
	dir := t.TempDir()
	run := writeReport(t, dir, "run", `<testsuites><testsuite name="Kubernetes e2e suite">
  <testcase name="[SynchronizedBeforeSuite]" status="passed" time="0"></testcase>
  <testcase name="[It] `+affinity+`" status="skipped" time="34.5"><skipped message="skipped - Requires at least 2 nodes (not 1)"></skipped></testcase>
  <testcase name="[It] [sig-network] [Feature:IPv6DualStack] should have at least one dual-stack node" status="passed" time="0.1"></testcase>
  <testcase name="[It] [sig-network] Services should x [Conformance]" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>
</testsuite></testsuites>`)
	got, err := ReadJUnit(run)
	if err != nil || len(got) != 2 || got[0].Spec != affinity {
		t.Errorf("ReadJUnit(run) = %+v, %v; want the first spec %q", got, err, affinity)
	}
	dry := writeReport(t, dir, "dry", `<testsuites><testsuite name="Kubernetes e2e suite">
  <testcase name="[It] `+affinity+` [sig-network, Feature:IPv6DualStack]" status="passed" time="0"></testcase>
  <testcase name="[It] [sig-network] [Feature:IPv6DualStack] should have at least one dual-stack node [sig-network, Feature:IPv6DualStack]" status="passed" time="0"></testcase>
  <testcase name="[It] [sig-network] Services should x [Conformance] [sig-network, Conformance]" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>
</testsuite></testsuites>`)
	names, err := Selected(dry)
	if err != nil || len(names) != 2 || names[0] != affinity {
		t.Errorf("Selected(dry) = %q, %v; want the first spec %q", names, err, affinity)
	}
}

func TestSelectedFromADryRun(t *testing.T) {
	path := writeReport(t, t.TempDir(), "dry", `<testsuites><testsuite name="Kubernetes e2e suite">
  <testcase name="[SynchronizedBeforeSuite]" status="passed" time="0"></testcase>
  <testcase name="[It] [sig-network] Services should z [sig-network]" status="passed" time="0"></testcase>
  <testcase name="[It] [sig-network] LoadBalancers x [Feature:LoadBalancer] [sig-network, Feature:LoadBalancer]" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>
</testsuite></testsuites>`)
	got, err := Selected(path)
	if err != nil || !reflect.DeepEqual(got, []string{"[sig-network] Services should z"}) {
		t.Errorf("Selected = %q, %v", got, err)
	}
}

func TestAppendKeepsAFailureWhenTheSpecLaterPasses(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ledger.tsv")
	run := Run{Date: "2026-12-02T18:00:00Z", Commit: "0123456789ab", Cluster: "ipv4", Nodes: "2", Shard: "3/30"}
	first, err := ReadJUnit(writeReport(t, dir, "shard", firstRun))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := Append(path, run.Lines("shard", first)); err != nil || n != 3 {
		t.Fatalf("Append of the first run: %d lines, %v; want 3 (a pass, a failure, a skip)", n, err)
	}
	// The same report again (run.sh interrupted and rerun by hand) adds nothing.
	if n, err := Append(path, run.Lines("shard", first)); err != nil || n != 0 {
		t.Fatalf("Append of the same report again: %d lines, %v; want 0", n, err)
	}
	second, err := ReadJUnit(writeReport(t, dir, "rerun-serial", rerun))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := Append(path, run.Lines("rerun-serial", second)); err != nil || n != 1 {
		t.Fatalf("Append of the rerun: %d lines, %v; want 1", n, err)
	}

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := Header + "\n" +
		"2026-12-02T18:00:00Z\t0123456789ab\tipv4\t2\t3/30\tshard\t" + basicSpec + "\tpassed\t61.2\t\n" +
		"2026-12-02T18:00:00Z\t0123456789ab\tipv4\t2\t3/30\tshard\t" + fallbackSpec + "\tfailed\t368.0\t[FAILED] error running curl: command terminated with exit code 7 (after 100 s)\n" +
		"2026-12-02T18:00:00Z\t0123456789ab\tipv4\t2\t3/30\tshard\t" + threeSpec + "\tskipped\t0.2\tRequires at least 3 nodes (not 2)\n" +
		"2026-12-02T18:00:00Z\t0123456789ab\tipv4\t2\t3/30\trerun-serial\t" + fallbackSpec + "\tpassed\t176.0\t\n"
	if string(data) != want {
		t.Errorf("ledger:\n%s\nwant:\n%s", data, want)
	}
	lines, err := Read(path)
	if err != nil || len(lines) != 4 {
		t.Fatalf("Read: %d lines, %v", len(lines), err)
	}
}

func TestAppendRefusesWhatWouldBreakTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.tsv")
	good := Line{Date: "d", Commit: "c", Cluster: "ipv4", Nodes: "2", Shard: "1/1", Pass: "p", Spec: "s", Outcome: Passed}
	for name, mutate := range map[string]func(*Line){
		"tab in spec":     func(l *Line) { l.Spec = "a\tb" },
		"unknown cluster": func(l *Line) { l.Cluster = "ipv6" },
		"unknown result":  func(l *Line) { l.Outcome = "flaky" },
		"empty cause":     func(l *Line) { l.Outcome = Cause; l.Note = " " },
		"no commit":       func(l *Line) { l.Commit = "" },
	} {
		l := good
		mutate(&l)
		if _, err := Append(path, []Line{good, l}); err == nil {
			t.Errorf("%s: appended", name)
		}
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("a refused batch wrote the ledger (stat: %v)", err)
	}
	if err := os.WriteFile(path, []byte("spec\tresult\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Append(path, []Line{good}); err == nil || !strings.Contains(err.Error(), "header") {
		t.Errorf("Append to a file that is not a ledger: %v", err)
	}
}

func TestStatus(t *testing.T) {
	old := Run{Date: "2026-11-30T10:00:00Z", Commit: "aaaaaaaaaaaa", Cluster: "ipv4", Nodes: "2", Shard: "all"}
	now := Run{Date: "2026-12-02T18:00:00Z", Commit: "bbbbbbbbbbbb+dirty", Cluster: "ipv4", Nodes: "2", Shard: "3/30"}
	var lines []Line
	lines = append(lines, old.Lines("proxy", []Result{{Spec: neverSpec, Outcome: Passed, Seconds: 1719}})...)
	lines = append(lines, now.Lines("shard", []Result{
		{Spec: basicSpec, Outcome: Passed, Seconds: 61},
		{Spec: fallbackSpec, Outcome: Failed, Seconds: 368, Detail: "curl exit 7"},
		{Spec: threeSpec, Outcome: Skipped, Detail: "Requires at least 3 nodes"},
	})...)
	lines = append(lines, now.Lines("rerun-serial", []Result{{Spec: fallbackSpec, Outcome: Passed, Seconds: 176}})...)
	selected := []string{basicSpec, fallbackSpec, threeSpec, neverSpec}
	current := CommitIn([]string{"bbbbbbbbbbbb0000000000000000000000000000"}) // aaaa... is of an older version

	st := Compute(lines, selected, "ipv4", current)
	byName := map[string]SpecStatus{}
	for _, s := range st.Specs {
		byName[s.Spec] = s
	}
	if s := byName[fallbackSpec]; s.Latest.Outcome != Passed || s.Failed != 1 || s.Unexplained != 1 {
		t.Errorf("the spec that failed, then passed alone: %+v; want latest passed, 1 failure, 1 with no cause", s)
	}
	if !reflect.DeepEqual(st.Missing, []string{neverSpec}) {
		t.Errorf("Missing = %q, want only the spec whose one result is of an older version", st.Missing)
	}
	if len(st.Unexplained) != 1 || st.Unexplained[0].Note != "curl exit 7" {
		t.Errorf("Unexplained = %+v, want the failure", st.Unexplained)
	}
	var out bytes.Buffer
	st.Write(&out, "v0.0")
	for _, want := range []string{
		"passed   bbbbbbbbbbbb+dirty  2026-12-02T18:00:00Z  ipv4              2  " + fallbackSpec + "  (failed 1 time(s), 1 with no cause noted)",
		"Selected specs with no result at v0.0 on cluster ipv4: 1 of 4\n  " + neverSpec,
		"Failures with no cause noted after them: 1",
		"4 selected; at v0.0 on ipv4: 2 passed, 0 failed, 1 skipped (latest each), 1 without a result; 1 failure(s) without a cause",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}

	// A cause noted after the failure explains it; a failure after the cause needs its own.
	explained := append(append([]Line(nil), lines...), Line{Date: "2026-12-02T19:00:00Z", Commit: "bbbbbbbbbbbb",
		Cluster: "ipv4", Nodes: "-", Shard: "-", Pass: "-", Spec: fallbackSpec, Outcome: Cause, Note: "the test bed: 100 s grace period against kubectl exec"})
	if st := Compute(explained, selected, "ipv4", current); len(st.Unexplained) != 0 {
		t.Errorf("after the cause: Unexplained = %+v, want none", st.Unexplained)
	}
	again := append(explained, now.Lines("later", []Result{{Spec: fallbackSpec, Outcome: Failed, Detail: "again"}})...)
	if st := Compute(again, selected, "ipv4", current); len(st.Unexplained) != 1 || st.Unexplained[0].Note != "again" {
		t.Errorf("a failure after the cause: Unexplained = %+v, want it", st.Unexplained)
	}
	// A cause for another cluster explains nothing here.
	other := append(append([]Line(nil), lines...), Line{Date: "x", Commit: "c", Cluster: "kube-proxy-ipvs", Spec: fallbackSpec, Outcome: Cause, Note: "n"})
	if st := Compute(other, selected, "ipv4", current); len(st.Unexplained) != 1 {
		t.Errorf("a cause on another cluster: Unexplained = %+v, want the ipv4 failure", st.Unexplained)
	}
}

// The dual-stack cluster selects other specs than the IPv4 clusters: its results are not "specs
// the run no longer selects" when the status is asked for ipv4, nor theirs for dual-stack.
func TestStatusUnselectedIsPerSelection(t *testing.T) {
	const dualSpec = "[sig-network] [Feature:IPv6DualStack] should have at least one dual-stack node"
	v4 := Run{Date: "2026-12-02T18:00:00Z", Commit: "bbbbbbbbbbbb", Cluster: "ipv4", Nodes: "1", Shard: "1/4"}
	ref := Run{Date: "2026-12-02T18:00:00Z", Commit: "bbbbbbbbbbbb", Cluster: "kube-proxy-ipvs", Nodes: "1", Shard: "1/4"}
	dual := Run{Date: "2026-12-03T09:00:00Z", Commit: "bbbbbbbbbbbb", Cluster: "dual-stack", Nodes: "1", Shard: "1/4"}
	var lines []Line
	lines = append(lines, v4.Lines("shard", []Result{{Spec: basicSpec, Outcome: Passed}, {Spec: neverSpec, Outcome: Passed}})...)
	lines = append(lines, ref.Lines("shard", []Result{{Spec: fallbackSpec, Outcome: Passed}})...)
	lines = append(lines, dual.Lines("shard", []Result{{Spec: dualSpec, Outcome: Passed}})...)
	current := CommitIn([]string{"bbbbbbbbbbbb0000000000000000000000000000"})
	// neverSpec is no longer selected on ipv4; fallbackSpec (kube-proxy-ipvs) is not selected either.
	if st := Compute(lines, []string{basicSpec}, "ipv4", current); !reflect.DeepEqual(st.Unselected, []string{neverSpec, fallbackSpec}) &&
		!reflect.DeepEqual(st.Unselected, []string{fallbackSpec, neverSpec}) {
		t.Errorf("ipv4: Unselected = %q, want the two IPv4 selection's specs only", st.Unselected)
	}
	if st := Compute(lines, []string{dualSpec}, "dual-stack", current); len(st.Unselected) != 0 {
		t.Errorf("dual-stack: Unselected = %q, want none", st.Unselected)
	}
}

func TestCommitIn(t *testing.T) {
	in := CommitIn([]string{"0123456789abcdef0123456789abcdef01234567"})
	for commit, want := range map[string]bool{"0123456789ab": true, "0123456789ab+dirty": true, "0123457": false, "0123": false, "": false} {
		if got := in(commit); got != want {
			t.Errorf("CommitIn(%q) = %v, want %v", commit, got, want)
		}
	}
}
