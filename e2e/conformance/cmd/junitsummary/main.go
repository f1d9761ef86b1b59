// Command junitsummary reads the JUnit reports e2e.test wrote (ginkgo's junit_01.xml) and prints
// each failed spec's name, each spec skipped at run time with its reason, and the closing line
// `N passed, N failed, N skipped`. Specs left out by --ginkgo.focus/--ginkgo.skip are counted
// apart ("not selected"): they never ran. It exits 1 when a spec failed or none passed.
//
//	junitsummary e2e/results/conformance-*/*/junit_01.xml
package main

import (
	"encoding/xml"
	"fmt"
	"os"
	"sort"
	"strings"
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

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: junitsummary JUNIT.xml...")
		os.Exit(2)
	}
	var passed, notSelected int
	var failed, skipped []string
	for _, path := range os.Args[1:] {
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
		for _, s := range report.Suites {
			for _, c := range s.Cases {
				// ginkgo names a spec by its node type first: "[It] [sig-network] Services ...".
				c.Name = strings.TrimPrefix(c.Name, "[It] ")
				// Suite-level nodes ([SynchronizedBeforeSuite], [ReportAfterSuite] ...) count only
				// when they fail: then no spec could run.
				// Their names are one bracketed word; a spec's name has spaces.
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
					failed = append(failed, fmt.Sprintf("%s (%.0fs): %s", c.Name, c.Time, firstLine(msg)))
				case suiteNode:
				case c.Skipped != nil || c.Status == "skipped" || c.Status == "pending":
					reason := ""
					if c.Skipped != nil {
						reason = c.Skipped.Message
					}
					// Ginkgo marks a spec that the filters left out with the bare message "skipped";
					// a spec that called Skip carries "skipped - REASON".
					if reason == "" || reason == "skipped" {
						notSelected++
						continue
					}
					skipped = append(skipped, fmt.Sprintf("%s: %s", c.Name, firstLine(strings.TrimPrefix(reason, "skipped - "))))
				default:
					passed++
				}
			}
		}
	}
	sort.Strings(failed)
	sort.Strings(skipped)
	for _, f := range failed {
		fmt.Println("FAIL", f)
	}
	for _, s := range skipped {
		fmt.Println("SKIP", s)
	}
	fmt.Printf("%d passed, %d failed, %d skipped (%d specs not selected by focus/skip)\n",
		passed, len(failed), len(skipped), notSelected)
	if len(failed) > 0 || passed == 0 {
		os.Exit(1)
	}
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
