package ledger

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// Header is the ledger's first line; the columns of every line after it, tab-separated.
const Header = "date\tcommit\tcluster\tnodes\tshard\tpass\tspec\tresult\tseconds\tnote"

// Clusters a run can be made on: the IPv4 cluster with ipvsproxy, the dual-stack one, and the
// same IPv4 cluster with kube-proxy in IPVS mode instead (to tell our failures from the bed's).
var Clusters = []string{"ipv4", "dual-stack", "kube-proxy-ipvs"}

// SameSelection says whether two clusters run the same specs (selection.sh's select_cluster):
// ipv4 and kube-proxy-ipvs do; dual-stack runs upstream's dual-stack specs alone.
func SameSelection(a, b string) bool {
	return (a == "dual-stack") == (b == "dual-stack")
}

// Line is one line of the ledger: one spec's result in one pass of one run, or a cause noted
// for the failures of a spec before it.
type Line struct {
	Date    string  // when the run began, UTC, RFC 3339
	Commit  string  // the code's commit, "+dirty" when the tree differed from it
	Cluster string  // one of Clusters
	Nodes   string  // how many nodes the cluster had ("-" for a cause)
	Shard   string  // "K/N", "all" for a whole run, "-" for a cause
	Pass    string  // the pass of run.sh that ran it (shard, services-conformance, proxy, dual-stack, rerun-serial)
	Spec    string  // the spec's text as ginkgo's focus matches it
	Outcome string  // Passed, Failed, Skipped or Cause
	Seconds float64 // the spec's run time
	Note    string  // a failure's excerpt, a skip's reason or the cause
}

func (l Line) String() string {
	return strings.Join([]string{l.Date, l.Commit, l.Cluster, l.Nodes, l.Shard, l.Pass, l.Spec, l.Outcome,
		strconv.FormatFloat(l.Seconds, 'f', 1, 64), l.Note}, "\t")
}

// key identifies a line's event; appending the same report twice adds nothing.
func (l Line) key() string {
	return strings.Join([]string{l.Date, l.Commit, l.Cluster, l.Nodes, l.Shard, l.Pass, l.Spec, l.Outcome, l.Note}, "\t")
}

func (l Line) validate() error {
	if l.Date == "" || l.Commit == "" || l.Spec == "" {
		return fmt.Errorf("ledger line for %q: date, commit and spec are required", l.Spec)
	}
	known := false
	for _, c := range Clusters {
		known = known || c == l.Cluster
	}
	if !known {
		return fmt.Errorf("ledger line for %q: cluster %q is none of %s", l.Spec, l.Cluster, strings.Join(Clusters, ", "))
	}
	switch l.Outcome {
	case Passed, Failed, Skipped, Cause:
	default:
		return fmt.Errorf("ledger line for %q: result %q is none of passed, failed, skipped, cause", l.Spec, l.Outcome)
	}
	for _, f := range []string{l.Date, l.Commit, l.Cluster, l.Nodes, l.Shard, l.Pass, l.Spec, l.Note} {
		if strings.ContainsAny(f, "\t\n\r") {
			return fmt.Errorf("ledger line for %q: a field holds a tab or line break", l.Spec)
		}
	}
	if l.Outcome == Cause && strings.TrimSpace(l.Note) == "" {
		return fmt.Errorf("cause for %q: the cause's text is empty", l.Spec)
	}
	return nil
}

// Run is what every line of one run shares.
type Run struct {
	Date, Commit, Cluster, Nodes, Shard string
}

// Lines of one pass's results.
func (r Run) Lines(pass string, results []Result) []Line {
	lines := make([]Line, 0, len(results))
	for _, res := range results {
		lines = append(lines, Line{Date: r.Date, Commit: r.Commit, Cluster: r.Cluster, Nodes: r.Nodes, Shard: r.Shard,
			Pass: pass, Spec: res.Spec, Outcome: res.Outcome, Seconds: res.Seconds, Note: res.Detail})
	}
	return lines
}

// Read the ledger's lines in file order, which is the order they were appended in. A missing
// file is an empty ledger.
func Read(path string) ([]Line, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	defer f.Close()
	var lines []Line
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; scanner.Scan(); n++ {
		text := scanner.Text()
		if n == 1 {
			if text != Header {
				return nil, fmt.Errorf("ledger %s: first line is not the header %q", path, Header)
			}
			continue
		}
		if strings.TrimSpace(text) == "" {
			continue
		}
		fields := strings.Split(text, "\t")
		if len(fields) != 10 {
			return nil, fmt.Errorf("ledger %s line %d: %d columns, want 10", path, n, len(fields))
		}
		seconds, err := strconv.ParseFloat(fields[8], 64)
		if err != nil {
			return nil, fmt.Errorf("ledger %s line %d: seconds %q: %w", path, n, fields[8], err)
		}
		l := Line{Date: fields[0], Commit: fields[1], Cluster: fields[2], Nodes: fields[3], Shard: fields[4],
			Pass: fields[5], Spec: fields[6], Outcome: fields[7], Seconds: seconds, Note: fields[9]}
		if err := l.validate(); err != nil {
			return nil, fmt.Errorf("ledger %s line %d: %w", path, n, err)
		}
		lines = append(lines, l)
	}
	if err := scanner.Err(); err != nil {
		return nil, fmt.Errorf("read ledger %s: %w", path, err)
	}
	return lines, nil
}

// Append adds lines at the end of the ledger (created with its header when missing) and
// returns how many it added. It never rewrites a line: a failure stays when the same spec later
// passes. A line already in the ledger (the same run's report appended twice) is left out.
func Append(path string, lines []Line) (int, error) {
	existing, err := Read(path)
	if err != nil {
		return 0, err
	}
	seen := map[string]bool{}
	for _, l := range existing {
		seen[l.key()] = true
	}
	var b strings.Builder
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		b.WriteString(Header + "\n")
	}
	added := 0
	for _, l := range lines {
		if err := l.validate(); err != nil {
			return 0, err
		}
		if seen[l.key()] {
			continue
		}
		seen[l.key()] = true
		b.WriteString(l.String() + "\n")
		added++
	}
	if b.Len() == 0 {
		return 0, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return 0, fmt.Errorf("open ledger for append: %w", err)
	}
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		return 0, fmt.Errorf("append to ledger %s: %w", path, err)
	}
	return added, f.Close()
}
