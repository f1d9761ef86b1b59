package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A report shaped like ginkgo v2's junit_01.xml: a suite node, a pass, a failure, an interrupted spec whose
// text is in the body, a spec that called Skip, and one the focus left out.
const report = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="5" disabled="0" errors="0" failures="1" time="30">
  <testsuite name="Kubernetes e2e suite" package="/x" tests="5" skipped="2" failures="1" errors="0" time="30">
    <testcase name="[SynchronizedBeforeSuite]" classname="Kubernetes e2e suite" status="passed" time="1"></testcase>
    <testcase name="[sig-network] Services should serve a basic endpoint from pods [Conformance]" classname="Kubernetes e2e suite" status="passed" time="20"></testcase>
    <testcase name="[sig-network] Services should have session affinity work for NodePort service [LinuxOnly] [Conformance]" classname="Kubernetes e2e suite" status="failed" time="9">
      <failure message="[FAILED] affinity broke&#xA;second line" type="failed">...</failure>
    </testcase>
    <testcase name="[It] [sig-network] Services should serve multiport endpoints from pods [Conformance]" classname="Kubernetes e2e suite" status="interrupted" time="12">
      <error message="" type="interrupted">[INTERRUPTED] Interrupted by User&#xA;In [It] at: service.go:803</error>
    </testcase>
    <testcase name="[sig-network] Services should work after restarting kube-proxy" classname="Kubernetes e2e suite" status="skipped" time="0.1">
      <skipped message="skipped - Requires at least 2 nodes (not 1)"></skipped>
    </testcase>
    <testcase name="[sig-storage] something else" classname="Kubernetes e2e suite" status="skipped" time="0">
      <skipped message="skipped"></skipped>
    </testcase>
  </testsuite>
</testsuites>`

func TestSummaryCountsAndNames(t *testing.T) {
	if os.Getenv("JUNITSUMMARY_MAIN") == "1" {
		os.Args = []string{"junitsummary", os.Getenv("JUNITSUMMARY_FILE")}
		main()
		return
	}
	file := filepath.Join(t.TempDir(), "junit_01.xml")
	if err := os.WriteFile(file, []byte(report), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=TestSummaryCountsAndNames")
	cmd.Env = append(os.Environ(), "JUNITSUMMARY_MAIN=1", "JUNITSUMMARY_FILE="+file)
	out, err := cmd.Output()
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 1 {
		t.Errorf("exit: got %v, want status 1 (a spec failed)", err)
	}
	want := strings.Join([]string{
		"FAIL [sig-network] Services should have session affinity work for NodePort service [LinuxOnly] [Conformance] (9s): [FAILED] affinity broke",
		"FAIL [sig-network] Services should serve multiport endpoints from pods [Conformance] (12s): [INTERRUPTED] Interrupted by User",
		"SKIP [sig-network] Services should work after restarting kube-proxy: Requires at least 2 nodes (not 1)",
		"1 passed, 2 failed, 1 skipped (1 specs not selected by focus/skip)",
		"",
	}, "\n")
	if string(out) != want {
		t.Errorf("output:\n%s\nwant:\n%s", out, want)
	}
}

// The names as ginkgo v2 writes them: the node type first, the spec's labels last.
const parallelReport = `<testsuites><testsuite name="Kubernetes e2e suite">
    <testcase name="[It] [sig-network] Services should fallback to terminating endpoints (a) [sig-network]" status="failed" time="368">
      <failure message="[FAILED] curl: exit code 7" type="failed"></failure>
    </testcase>
    <testcase name="[It] [sig-network] Conntrack should drop INVALID conntrack entries [Privileged] [sig-network, Privileged]" status="failed" time="40">
      <failure message="[FAILED] boom" type="failed"></failure>
    </testcase>
    <testcase name="[It] [sig-network] Services should release NodePorts on delete" status="passed" time="30"></testcase>
</testsuite></testsuites>`

const rerunReport = `<testsuites><testsuite name="Kubernetes e2e suite">
    <testcase name="[It] [sig-network] Services should fallback to terminating endpoints (a) [sig-network]" status="passed" time="200"></testcase>
    <testcase name="[It] [sig-network] Conntrack should drop INVALID conntrack entries [Privileged] [sig-network, Privileged]" status="failed" time="41">
      <failure message="[FAILED] boom again" type="failed"></failure>
    </testcase>
    <testcase name="[It] [sig-network] Services should release NodePorts on delete" status="skipped" time="0">
      <skipped message="skipped"></skipped>
    </testcase>
</testsuite></testsuites>`

// run.sh reruns alone what failed among parallel specs: the focus names exactly those, and the
// rerun decides them, a pass there being listed with the failure it replaced.
func TestRerunDecidesWhatFailedInParallel(t *testing.T) {
	if os.Getenv("JUNITSUMMARY_MAIN") == "1" {
		os.Args = append([]string{"junitsummary"}, strings.Fields(os.Getenv("JUNITSUMMARY_ARGS"))...)
		main()
		os.Exit(0) // not the test binary's PASS line
	}
	dir := t.TempDir()
	parallel := filepath.Join(dir, "proxy", "junit_01.xml")
	rerun := filepath.Join(dir, "rerun-serial", "junit_01.xml")
	for path, body := range map[string]string{parallel: parallelReport, rerun: rerunReport} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	summary := func(args ...string) (string, int) {
		cmd := exec.Command(os.Args[0], "-test.run=TestRerunDecidesWhatFailedInParallel")
		cmd.Env = append(os.Environ(), "JUNITSUMMARY_MAIN=1", "JUNITSUMMARY_ARGS="+strings.Join(args, " "))
		out, err := cmd.Output()
		code := 0
		if exit, ok := err.(*exec.ExitError); ok {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	// The focus must select the failed specs as ginkgo matches them: the suite's description and
	// the spec's text, without the labels (a focus with them selected nothing: the rerun ran none).
	focus, _ := summary("-failed-focus", parallel)
	re, err := regexp.Compile(strings.TrimSpace(focus))
	if err != nil {
		t.Fatalf("-failed-focus %q: %v", focus, err)
	}
	for text, want := range map[string]bool{
		"[sig-network] Conntrack should drop INVALID conntrack entries [Privileged]": true,
		"[sig-network] Services should fallback to terminating endpoints (a)":        true,
		"[sig-network] Services should release NodePorts on delete":                  false,
	} {
		if got := re.MatchString("Kubernetes e2e suite " + text); got != want {
			t.Errorf("-failed-focus %q selects %q: %v, want %v", focus, text, got, want)
		}
	}
	out, code := summary(parallel, rerun)
	want := strings.Join([]string{
		"FAIL [sig-network] Conntrack should drop INVALID conntrack entries [Privileged] (41s): [FAILED] boom again",
		"RERUN [sig-network] Services should fallback to terminating endpoints (a): passed alone after failing among parallel specs (368s): [FAILED] curl: exit code 7",
		"2 passed, 1 failed, 0 skipped (0 specs not selected by focus/skip)",
		"",
	}, "\n")
	if out != want || code != 1 {
		t.Errorf("summary (exit %d):\n%s\nwant (exit 1):\n%s", code, out, want)
	}
}
