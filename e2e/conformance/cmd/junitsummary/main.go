// Command junitsummary reads the JUnit reports e2e.test wrote (ginkgo's junit_01.xml) and prints
// each failed spec's name, each spec skipped at run time with its reason, and the closing line
// `N passed, N failed, N skipped`. Specs left out by --ginkgo.focus/--ginkgo.skip are counted
// apart ("not selected"): they never ran. It exits 1 when a spec failed or none passed.
//
// A report under a directory named rerun-serial (run.sh's rerun, one process, of what failed
// among parallel ones) decides the specs it holds; one that failed before and passed there is
// counted passed and listed as RERUN, with its first failure, so no flake goes unreported.
// With -failed-focus it prints instead a ginkgo focus matching exactly the failed specs (nothing
// when none failed).
//
//	junitsummary e2e/results/conformance-*/*/junit_01.xml
//	junitsummary -failed-focus e2e/results/conformance-*/*/junit_01.xml
package main

import (
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ipvsproxy/ipvsproxy/e2e/conformance/ledger"
)

type testsuites struct {
	Suites []struct {
		Cases []testcase `xml:"testcase"`
	} `xml:"testsuite"`
}

type testcase struct {
	Name    string  `xml:"name,attr"`
	Status  string  `xml:"status,attr"`
	Time    float64 `xml:"time,attr"`
	Skipped *struct {
		Message string `xml:"message,attr"`
	} `xml:"skipped"`
	Failure *problem `xml:"failure"`
	Error   *problem `xml:"error"`
}

// problem is a <failure> or <error>; ginkgo often leaves message empty and writes the text.
type problem struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

func (p *problem) String() string {
	if p.Message != "" {
		return p.Message
	}
	return p.Text
}

// outcome is one spec's result: passed, failed (with a line why) or skipped (with the reason).
type outcome struct {
	status, detail string
	firstFailure   string // set when a rerun decided a spec that had failed
}

func main() {
	args := os.Args[1:]
	failedFocus := len(args) > 0 && args[0] == "-failed-focus"
	if failedFocus {
		args = args[1:]
	}
	if len(args) < 1 {
		fmt.Fprintln(os.Stderr, "usage: junitsummary [-failed-focus] JUNIT.xml...")
		os.Exit(2)
	}
	outcomes := map[string]*outcome{}
	notSelected := 0
	for _, path := range args {
		data, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "junitsummary: read %s: %v\n", path, err)
			os.Exit(2)
		}
		var report testsuites
		if err := xml.Unmarshal(data, &report); err != nil {
			fmt.Fprintf(os.Stderr, "junitsummary: parse %s: %v\n", path, err)
			os.Exit(2)
		}
		rerun := filepath.Base(filepath.Dir(path)) == "rerun-serial"
		var names []string
		for _, s := range report.Suites {
			for _, c := range s.Cases {
				names = append(names, c.Name)
			}
		}
		labelled := ledger.HasLabelGroups(names)
		for _, s := range report.Suites {
			for _, c := range s.Cases {
				// "[It] TEXT" or, from ginkgo's own reporter, "[It] TEXT [labels]"; focus
				// matches TEXT alone.
				c.Name = ledger.SpecName(c.Name, labelled)
				o := classify(c)
				switch {
				case o == nil:
				case o.status == "not selected":
					if !rerun {
						notSelected++
					}
				case rerun:
					if before := outcomes[c.Name]; before != nil && before.status == "failed" {
						o.firstFailure = before.detail
						outcomes[c.Name] = o
					}
				default:
					outcomes[c.Name] = o
				}
			}
		}
	}
	names := make([]string, 0, len(outcomes))
	for n := range outcomes {
		names = append(names, n)
	}
	sort.Strings(names)
	if failedFocus {
		var failed []string
		for _, n := range names {
			if outcomes[n].status == "failed" {
				failed = append(failed, n)
			}
		}
		if len(failed) > 0 {
			fmt.Println(ledger.Focus(failed))
		}
		return
	}
	passed, failed, skipped := 0, 0, 0
	var lines []string
	for _, n := range names {
		o := outcomes[n]
		switch o.status {
		case "failed":
			failed++
			lines = append(lines, "FAIL "+n+o.detail)
		case "skipped":
			skipped++
			lines = append(lines, "SKIP "+n+": "+o.detail)
		default:
			passed++
			if o.firstFailure != "" {
				lines = append(lines, "RERUN "+n+": passed alone after failing among parallel specs"+o.firstFailure)
			}
		}
	}
	sort.SliceStable(lines, func(i, j int) bool { return order(lines[i]) < order(lines[j]) })
	for _, l := range lines {
		fmt.Println(l)
	}
	fmt.Printf("%d passed, %d failed, %d skipped (%d specs not selected by focus/skip)\n",
		passed, failed, skipped, notSelected)
	if failed > 0 || passed == 0 {
		os.Exit(1)
	}
}

// order lists failures first, then reruns, then skips.
func order(line string) int {
	switch {
	case strings.HasPrefix(line, "FAIL "):
		return 0
	case strings.HasPrefix(line, "RERUN "):
		return 1
	}
	return 2
}

// classify is a test case's outcome; nil for a suite-level node that did not fail.
func classify(c testcase) *outcome {
	// Suite-level nodes ([SynchronizedBeforeSuite], [ReportAfterSuite] ...) count only when they
	// fail: then no spec could run. Their names are one bracketed word; a spec's name has spaces.
	suiteNode := strings.HasPrefix(c.Name, "[") && strings.HasSuffix(c.Name, "]") && !strings.Contains(c.Name, " ")
	switch {
	case c.Failure != nil || c.Error != nil || c.Status == "failed" || c.Status == "panicked" ||
		c.Status == "interrupted" || c.Status == "timedout" || c.Status == "aborted":
		msg := ""
		if c.Failure != nil {
			msg = c.Failure.String()
		} else if c.Error != nil {
			msg = c.Error.String()
		}
		return &outcome{status: "failed", detail: fmt.Sprintf(" (%.0fs): %s", c.Time, firstLine(msg))}
	case suiteNode:
		return nil
	case c.Skipped != nil || c.Status == "skipped" || c.Status == "pending":
		reason := ""
		if c.Skipped != nil {
			reason = c.Skipped.Message
		}
		// Ginkgo marks a spec that the filters left out with the bare message "skipped"; a
		// spec that called Skip carries "skipped - REASON".
		if reason == "" || reason == "skipped" {
			return &outcome{status: "not selected"}
		}
		return &outcome{status: "skipped", detail: firstLine(strings.TrimPrefix(reason, "skipped - "))}
	}
	return &outcome{status: "passed"}
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}
