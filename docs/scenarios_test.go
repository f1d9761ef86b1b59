package docs

import (
	"regexp"
	"testing"
)

// formerScenarioNumbers match a reference to an e2e scenario by a number
// ("scenario" or "e2e" and a number, an IPv6 verdict's number and v6, the
// numbers with a letter or a kube-proxy mode): every scenario is named by
// the behaviour it checks (testing.md, "The e2e scenarios"). Each pattern
// and example is split so that this file does not match itself.
var formerScenarioNumbers = []*regexp.Regexp{
	regexp.MustCompile(`(?i)\bscenarios? ` + `[0-9]`),
	regexp.MustCompile(`(?i)\be2e ` + `[0-9]+[a-z0-9]*\b`),
	regexp.MustCompile(`\b[0-9]{1,2}` + `v6\b`),
	regexp.MustCompile(`\b(39` + `[ab]|44(rollback|iptables|nftables|rbiptables|rbnftables))\b`),
}

// numbersNotScenarios are counts of e2e verdicts ("e2e 75 passed"), a time
// ("scenarios 94 s") and a file descriptor after make's e2e target ("e2e 2>&1").
var numbersNotScenarios = regexp.MustCompile(`(?i)e2e [0-9]+ (passed|failed)|scenarios? [0-9]+ ?s\b|e2e [0-9]+>`)

// scenarioNumbersKept are the files that may name the former numbers: the
// changelog's history, and the table that still takes them in a selection.
var scenarioNumbersKept = map[string]bool{
	"CHANGELOG.md":                  true,
	"e2e/suite/formernames_test.go": true,
}

func TestFormerScenarioNumbersMatcher(t *testing.T) {
	for _, text := range []string{
		"e2e scen" + "arios 47, 64 and 65", "(e2e " + "44roll" + "back in the VM)", "verdict " + "18" + "v6",
		"run " + "39" + "a and " + "39" + "b", "e2e\n" + "43: the label", "(e2e " + "9)",
	} {
		if len(linesMatching(text, formerScenarioNumbers, numbersNotScenarios)) == 0 {
			t.Errorf("not matched: %q", text)
		}
	}
	for _, text := range []string{
		"(VM tests 222 passed, e2e " + "75 passed)", `make -C "$repo" e2e ` + "2>&1", "e2e `migrate-node-by-node`",
		"2001:db8:96::/112", "the v6 cluster IP", "the scenario's own Services", "scenarios " + "94 s",
	} {
		if hits := linesMatching(text, formerScenarioNumbers, numbersNotScenarios); len(hits) != 0 {
			t.Errorf("matched: %q", text)
		}
	}
}

// TestScenariosNamedNotNumbered fails on a tracked file that names an e2e
// scenario by a number: name it by the behaviour it checks.
func TestScenariosNamedNotNumbered(t *testing.T) {
	for name, text := range trackedTextFiles(t) {
		if scenarioNumbersKept[name] {
			continue
		}
		for _, hit := range linesMatching(text, formerScenarioNumbers, numbersNotScenarios) {
			t.Errorf("%s:%s", name, hit)
		}
	}
}
