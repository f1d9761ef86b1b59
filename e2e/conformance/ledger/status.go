package ledger

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// SpecStatus is one spec's standing on one cluster.
type SpecStatus struct {
	Spec, Cluster string
	Latest        Line // its last result (a cause is not a result)
	Failed        int  // how many of its results are failures
	Unexplained   int  // failures after which no cause was noted
}

// Status is what `conformanceledger status` prints.
type Status struct {
	Cluster     string       // the cluster the coverage questions are asked for
	Selected    int          // the specs the run selects today
	Specs       []SpecStatus // every spec with a result, by spec then cluster
	Missing     []string     // selected specs with no result on Cluster at the current version
	Current     map[string]string
	Unexplained []Line   // failures (any cluster) with no later cause for their spec and cluster
	Unselected  []string // specs with results, on a cluster of the same selection, that the run no longer selects
}

// Compute the status of the ledger's lines for the selected specs. atCurrentVersion says
// whether a commit is of the code's current minor version. A failure is explained only by a
// cause line after it for the same spec and cluster; a later pass does not explain it.
func Compute(lines []Line, selected []string, cluster string, atCurrentVersion func(commit string) bool) Status {
	st := Status{Cluster: cluster, Selected: len(selected), Current: map[string]string{}}
	type key struct{ spec, cluster string }
	byKey := map[key]*SpecStatus{}
	pending := map[key][]Line{} // failures not yet explained
	for _, l := range lines {
		k := key{l.Spec, l.Cluster}
		if l.Outcome == Cause {
			pending[k] = nil
			continue
		}
		s := byKey[k]
		if s == nil {
			s = &SpecStatus{Spec: l.Spec, Cluster: l.Cluster}
			byKey[k] = s
		}
		s.Latest = l
		if l.Outcome == Failed {
			s.Failed++
			pending[k] = append(pending[k], l)
		}
		if l.Cluster == cluster && atCurrentVersion(l.Commit) {
			st.Current[l.Spec] = l.Outcome
		}
	}
	for k, s := range byKey {
		s.Unexplained = len(pending[k])
		st.Specs = append(st.Specs, *s)
		st.Unexplained = append(st.Unexplained, pending[k]...)
	}
	sort.Slice(st.Specs, func(i, j int) bool {
		a, b := st.Specs[i], st.Specs[j]
		if a.Spec != b.Spec {
			return a.Spec < b.Spec
		}
		return a.Cluster < b.Cluster
	})
	sort.SliceStable(st.Unexplained, func(i, j int) bool {
		a, b := st.Unexplained[i], st.Unexplained[j]
		if a.Spec != b.Spec {
			return a.Spec < b.Spec
		}
		return a.Date < b.Date
	})
	isSelected := map[string]bool{}
	for _, n := range selected {
		isSelected[n] = true
		if _, ok := st.Current[n]; !ok {
			st.Missing = append(st.Missing, n)
		}
	}
	sort.Strings(st.Missing)
	seen := map[string]bool{}
	for _, s := range st.Specs {
		if !isSelected[s.Spec] && !seen[s.Spec] && len(selected) > 0 && SameSelection(s.Cluster, cluster) {
			seen[s.Spec] = true
			st.Unselected = append(st.Unselected, s.Spec)
		}
	}
	return st
}

// Write the status as text; version names the current minor version in the headings.
func (st Status) Write(w io.Writer, version string) {
	fmt.Fprintf(w, "%-7s  %-18s  %-20s  %-19s  %s\n", "LATEST", "COMMIT", "DATE", "CLUSTER NODES", "SPEC")
	for _, s := range st.Specs {
		extra := ""
		if s.Failed > 0 {
			extra = fmt.Sprintf("  (failed %d time(s)", s.Failed)
			if s.Unexplained > 0 {
				extra += fmt.Sprintf(", %d with no cause noted", s.Unexplained)
			}
			extra += ")"
		}
		fmt.Fprintf(w, "%-7s  %-18s  %-20s  %-15s %3s  %s%s\n", s.Latest.Outcome, s.Latest.Commit, s.Latest.Date,
			s.Cluster, s.Latest.Nodes, s.Spec, extra)
	}
	counts := map[string]int{}
	for _, o := range st.Current {
		counts[o]++
	}
	fmt.Fprintf(w, "\nSelected specs with no result at %s on cluster %s: %d of %d\n", version, st.Cluster, len(st.Missing), st.Selected)
	for _, n := range st.Missing {
		fmt.Fprintf(w, "  %s\n", n)
	}
	fmt.Fprintf(w, "\nFailures with no cause noted after them: %d\n", len(st.Unexplained))
	for _, l := range st.Unexplained {
		fmt.Fprintf(w, "  %s %s %s %s [%s]: %s\n", l.Date, l.Commit, l.Cluster, l.Spec, l.Pass, l.Note)
	}
	if len(st.Unselected) > 0 {
		fmt.Fprintf(w, "\nSpecs in the ledger that the run no longer selects: %d\n  %s\n", len(st.Unselected),
			strings.Join(st.Unselected, "\n  "))
	}
	fmt.Fprintf(w, "\n%d selected; at %s on %s: %d passed, %d failed, %d skipped (latest each), %d without a result; %d failure(s) without a cause\n",
		st.Selected, version, st.Cluster, counts[Passed], counts[Failed], counts[Skipped], len(st.Missing), len(st.Unexplained))
}

// CommitIn says whether a ledger commit (an abbreviated hash, perhaps "+dirty") is one of the
// full hashes given (git rev-list of the current version's range).
func CommitIn(fullHashes []string) func(string) bool {
	return func(commit string) bool {
		short := strings.TrimSuffix(commit, "+dirty")
		if len(short) < 7 {
			return false
		}
		for _, h := range fullHashes {
			if strings.HasPrefix(h, short) {
				return true
			}
		}
		return false
	}
}
