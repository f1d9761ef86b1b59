package ledger

import (
	"encoding/xml"
	"fmt"
	"os"
	"strings"
)

// Result is one test case of a JUnit report: a spec (or a suite node that failed), its outcome
// and, for a failure or a skip, the first lines of why.
type Result struct {
	Spec    string  // the spec's text as ginkgo's focus matches it (see SpecName)
	Outcome string  // Passed, Failed or Skipped
	Seconds float64 // the run time ginkgo measured
	Detail  string  // a failure's message or a skip's reason, on one line; empty for a pass
}

// Outcomes of a result; Cause is the ledger's own kind of line, never a test's.
const (
	Passed  = "passed"
	Failed  = "failed"
	Skipped = "skipped"
	Cause   = "cause"
)

type junitSuites struct {
	Suites []struct {
		Cases []junitCase `xml:"testcase"`
	} `xml:"testsuite"`
}

type junitCase struct {
	Name    string  `xml:"name,attr"`
	Status  string  `xml:"status,attr"`
	Time    float64 `xml:"time,attr"`
	Skipped *struct {
		Message string `xml:"message,attr"`
	} `xml:"skipped"`
	Failure *junitProblem `xml:"failure"`
	Error   *junitProblem `xml:"error"`
}

// junitProblem is a <failure> or <error>; ginkgo often leaves message empty and writes the text.
type junitProblem struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

func (p *junitProblem) String() string {
	if strings.TrimSpace(p.Message) != "" {
		return p.Message
	}
	return p.Text
}

// ReadJUnit parses one ginkgo JUnit report. Specs that focus and skip left out (ginkgo's bare
// "skipped") and suite nodes that did not fail are not results: they never ran.
func ReadJUnit(path string) ([]Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read JUnit report: %w", err)
	}
	var report junitSuites
	if err := xml.Unmarshal(data, &report); err != nil {
		return nil, fmt.Errorf("parse JUnit report %s: %w", path, err)
	}
	var names []string
	for _, s := range report.Suites {
		for _, c := range s.Cases {
			names = append(names, c.Name)
		}
	}
	labelled := HasLabelGroups(names)
	var results []Result
	for _, s := range report.Suites {
		for _, c := range s.Cases {
			if r, ok := classify(c, labelled); ok {
				results = append(results, r)
			}
		}
	}
	return results, nil
}

// Selected is the names of the specs a dry run (--ginkgo.dry-run) selected: there every
// selected spec "passes" and every other one is skipped with the bare message.
func Selected(path string) ([]string, error) {
	results, err := ReadJUnit(path)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, r := range results {
		if r.Outcome == Passed && !isSuiteNode(r.Spec) {
			names = append(names, r.Spec)
		}
	}
	return names, nil
}

func classify(c junitCase, labelled bool) (Result, bool) {
	r := Result{Spec: SpecName(c.Name, labelled), Seconds: c.Time}
	switch {
	case c.Failure != nil || c.Error != nil || c.Status == "failed" || c.Status == "panicked" ||
		c.Status == "interrupted" || c.Status == "timedout" || c.Status == "aborted":
		r.Outcome = Failed
		msg := ""
		if c.Failure != nil {
			msg = c.Failure.String()
		} else if c.Error != nil {
			msg = c.Error.String()
		}
		if c.Status != "" && c.Status != "failed" {
			msg = c.Status + ": " + msg
		}
		r.Detail = Excerpt(msg)
		return r, true
	case isSuiteNode(r.Spec):
		// [SynchronizedBeforeSuite] and the like count only when they fail: then nothing ran.
		return r, false
	case c.Skipped != nil || c.Status == "skipped" || c.Status == "pending":
		reason := ""
		if c.Skipped != nil {
			reason = c.Skipped.Message
		}
		// Ginkgo marks a spec the filters left out with the bare message "skipped"; a spec that
		// called Skip carries "skipped - REASON".
		if reason == "" || reason == "skipped" {
			return r, false
		}
		r.Outcome = Skipped
		r.Detail = Excerpt(strings.TrimPrefix(reason, "skipped - "))
		return r, true
	}
	r.Outcome = Passed
	return r, true
}

// isSuiteNode: suite-level nodes are named by one bracketed word; a spec's name has spaces.
func isSuiteNode(name string) bool {
	return strings.HasPrefix(name, "[") && strings.HasSuffix(name, "]") && !strings.Contains(name, " ")
}

// SpecName is a JUnit test case's name as ginkgo's --focus sees the spec. Ginkgo's own JUnit
// reporter (a dry run's report) names a case "[It] TEXT [label, label]": the node type first and
// the spec's labels last; the Kubernetes framework's report of a run omits the labels
// (OmitSpecLabels). The focus matches TEXT only, so a focus built from the whole name selects
// nothing. labelled says which kind of report the name is from (HasLabelGroups). The framework
// puts every label into TEXT as well ("[sig-network] ... [Serial]", labels sig-network and
// Serial), so even then the trailing group is dropped only when each of its labels is in TEXT as
// "[label]"; a text that merely ends in brackets keeps them.
func SpecName(junitName string, labelled bool) string {
	name := strings.TrimPrefix(junitName, "[It] ")
	if !labelled {
		return name
	}
	if text, ok := splitLabelGroup(name); ok {
		return text
	}
	return name
}

// splitLabelGroup: name less its trailing "[label, label]" when each label is in the rest as
// "[label]".
func splitLabelGroup(name string) (string, bool) {
	if !strings.HasSuffix(name, "]") {
		return name, false
	}
	open := strings.LastIndex(name, " [")
	if open < 0 {
		return name, false
	}
	text, group := name[:open], name[open+2:len(name)-1]
	for _, label := range strings.Split(group, ", ") {
		if label == "" || !strings.Contains(text, "["+label+"]") {
			return name, false
		}
	}
	return text, true
}

// HasLabelGroups says whether a report's case names end in ginkgo's label groups. One name
// cannot tell: "... Secondary IP Family [LinuxOnly] should ... http [LinuxOnly]" from a run's
// report looks like a group of one label, LinuxOnly, already in the text. A report can: with
// labels every Kubernetes spec has at least its SIG's, so most of its specs' names end in such a
// group; without them only the few whose text repeats its last tag do.
func HasLabelGroups(junitNames []string) bool {
	specs, grouped := 0, 0
	for _, n := range junitNames {
		if !strings.HasPrefix(n, "[It] ") {
			continue
		}
		specs++
		if _, ok := splitLabelGroup(strings.TrimPrefix(n, "[It] ")); ok {
			grouped++
		}
	}
	return 2*grouped > specs
}

// Excerpt is the start of a failure message on one line: tabs and line breaks become spaces
// (the ledger is tab-separated, one line a result) and it stops at 300 characters.
func Excerpt(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		cut := 300
		for cut > 0 && (s[cut]&0xC0) == 0x80 { // do not split a UTF-8 sequence
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}
