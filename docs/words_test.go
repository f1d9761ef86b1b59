// Package docs holds the tests that keep the repository's prose about the
// product: what it does and how to use, test or change it.
package docs

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// processWords match text that tells how the code was written (work
// periods, tracker numbers, who wrote it) instead of what it does. Each
// pattern is split so that this file does not match itself.
var processWords = []*regexp.Regexp{
	// an ordinal work period, a tracker number, a writer's role.
	regexp.MustCompile(`(?i)\bsess` + `ions?\b`),
	regexp.MustCompile(`(?i)\biss` + `ues? #?[0-9]+\b`),
	regexp.MustCompile(`(?i)\bit` + `ems? [0-9]+\b`),
	regexp.MustCompile(`(?i)\ba hel` + `pers?\b`),
	regexp.MustCompile(`(?i)\bage` + `nts\b`),
	regexp.MustCompile(`(?i)\bthe le` + `ad('s)?\b`),
}

// allowedAround are the product's own uses of a matched word: Kubernetes'
// session affinity, and TCP/UDP sessions of the kernel.
var allowedAround = regexp.MustCompile(`(?i)(sess` + `ion[ -]?affinity|(tcp|udp|tls|ssh) sess` + `ions?)`)

// rawResults are committed measurement output: printed by tools, kept as
// they were written, and not prose of the repository.
var rawResults = []*regexp.Regexp{
	regexp.MustCompile(`^benchmarks/results/.*\.(json|log|txt|csv)$`),
	regexp.MustCompile(`(^|/)ledger\.tsv$`),
}

// lineLead is what begins a line without being prose: indentation and a
// comment marker.
var lineLead = regexp.MustCompile(`^\s*(?://+|#+|\*+|--|;+)?\s*`)

// processHits returns each line of text with a process word, as
// "line: text".
func processHits(text string) []string {
	return linesMatching(text, processWords, allowedAround)
}

// linesMatching returns each line of text that one of patterns matches
// outside what allowed matches, as "line: text". Lines are read as one run
// of prose, comment markers left out, so that a phrase broken over two lines
// is found too.
func linesMatching(text string, patterns []*regexp.Regexp, allowed *regexp.Regexp) []string {
	lines := strings.Split(text, "\n")
	starts := make([]int, len(lines))
	var b strings.Builder
	for i, line := range lines {
		starts[i] = b.Len()
		b.WriteString(strings.TrimRight(lineLead.ReplaceAllString(line, ""), " \t\r"))
		b.WriteByte(' ')
	}
	joined := b.String()
	spans := allowed.FindAllStringIndex(joined, -1)
	hit := map[int]bool{}
	for _, re := range patterns {
		for _, m := range re.FindAllStringIndex(joined, -1) {
			if !inside(m, spans) {
				hit[sort.SearchInts(starts, m[0]+1)-1] = true
			}
		}
	}
	var hits []string
	for n, line := range lines {
		if hit[n] {
			hits = append(hits, fmt.Sprintf("%d: %s", n+1, strings.TrimSpace(line)))
		}
	}
	return hits
}

func inside(m []int, spans [][]int) bool {
	for _, s := range spans {
		if m[0] >= s[0] && m[1] <= s[1] {
			return true
		}
	}
	return false
}

func TestProcessWordsMatcher(t *testing.T) {
	for _, text := range []string{
		"medians of the thirtieth " + "sess" + "ion",
		"this " + "sess" + "ion's code",
		"(twenty-first " + "sess" + "ion, " + "iss" + "ue" + " 26 " + "it" + "em" + " 4)",
		"started fine on the second try (" + "iss" + "ue" + " 12).",
		"Iss" + "ue" + " 9: the benchmark harness",
		"a " + "hel" + "per" + "'s CPU profiles ran beside it",
		"shared by eight " + "age" + "nts",
		"the daemon benchmark is the " + "le" + "ad" + "'s to run",
		"see the-ipv4-shards-2026-12-03-twelfth-" + "sess" + "ion",
		"client IP based " + "sess" + "ion" + " affinity, then a " + "sess" + "ion" + " later",
	} {
		if len(processHits(text)) == 0 {
			t.Errorf("not matched: %q", text)
		}
	}
	for _, text := range []string{
		"client IP based " + "sess" + "ion" + " affinity: http",
		"sess" + "ionAffinity: ClientIP",
		"IPVS idle timeout of TCP " + "sess" + "ions",
		"another agent could add the same key",
		"kubernetes/kubernetes#119656",
		"a test helper builds the Service",
		"the leader election lease",
		"each agent takes its configuration from the servers",
	} {
		if hits := processHits(text); len(hits) != 0 {
			t.Errorf("matched the product's own words: %q", text)
		}
	}
}

// TestTrackedFilesSpeakOfTheProduct fails on any tracked file (docs,
// manifests, CHANGELOG, Makefile, scripts, code, test names) that names the
// process that made the code. Say the reason or the behaviour instead.
func TestTrackedFilesSpeakOfTheProduct(t *testing.T) {
	for name, text := range trackedTextFiles(t) {
		for _, hit := range processHits(text) {
			t.Errorf("%s:%s", name, hit)
		}
	}
}

// trackedTextFiles maps each tracked text file of the repository (but the
// raw results) to its content.
func trackedTextFiles(t *testing.T) map[string]string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files in %s: %v (the check reads the tracked files of a git checkout)", root, err)
	}
	files := map[string]string{}
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if skipped(name) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, name))
		if os.IsNotExist(err) {
			continue // deleted in the work tree, not yet in the index
		}
		if err != nil {
			t.Fatal(err)
		}
		if !isBinary(data) {
			files[name] = string(data)
		}
	}
	if len(files) < 100 {
		t.Fatalf("read only %d tracked text files under %s", len(files), root)
	}
	return files
}

func skipped(name string) bool {
	for _, re := range rawResults {
		if re.MatchString(name) {
			return true
		}
	}
	return false
}

// isBinary is grep's test: a NUL byte in the first 8,000 bytes.
func isBinary(data []byte) bool {
	return bytes.IndexByte(data[:min(len(data), 8000)], 0) >= 0
}
