package ledger

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// SuiteDescription is what ginkgo puts in front of every spec's text before it matches --focus
// (internal/focus.go: description + " " + spec.Text()); e2e.test's suite is "Kubernetes e2e suite".
// The focus of a shard anchors on it so that no name matches inside a longer one.
const SuiteDescription = "Kubernetes e2e suite"

// Shard is "K/N": the K-th of N shards, 1 <= K <= N.
type Shard struct{ K, N int }

// ParseShard reads "K/N".
func ParseShard(s string) (Shard, error) {
	ks, ns, ok := strings.Cut(s, "/")
	k, errK := strconv.Atoi(ks)
	n, errN := strconv.Atoi(ns)
	if !ok || errK != nil || errN != nil || n < 1 || k < 1 || k > n {
		return Shard{}, fmt.Errorf("shard %q: want K/N with 1 <= K <= N, e.g. 3/30", s)
	}
	return Shard{K: k, N: n}, nil
}

func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.K, s.N) }

// ParseShards reads "K/N" or "K,K,.../N": several shards of one split, run in one cluster start
// (the cluster's start-up costs more than a small shard's tests under emulation).
func ParseShards(s string) ([]Shard, error) {
	ks, n, ok := strings.Cut(s, "/")
	if !ok {
		return nil, fmt.Errorf("shard %q: want K/N or K,K,.../N, e.g. 3/30 or 3,4/30", s)
	}
	var shards []Shard
	seen := map[int]bool{}
	for _, k := range strings.Split(ks, ",") {
		one, err := ParseShard(k + "/" + n)
		if err != nil {
			return nil, err
		}
		if seen[one.K] {
			return nil, fmt.Errorf("shard %q: %d is named twice", s, one.K)
		}
		seen[one.K] = true
		shards = append(shards, one)
	}
	return shards, nil
}

// SpecsOf several shards: their specs together, sorted.
func SpecsOf(shards []Shard, names []string) []string {
	var out []string
	for _, s := range shards {
		out = append(out, s.Specs(names)...)
	}
	sort.Strings(out)
	return out
}

// Specs of the shard: the names sorted, without duplicates, and every N-th one from the K-th.
// Dealt round-robin, not cut into runs, because the slow specs sort together (the
// session-affinity family, the terminating-endpoint fallbacks): dealt, they spread over the shards.
// The same names in any order give the same shards; every name is in exactly one of the N.
func (s Shard) Specs(names []string) []string {
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	sorted = dedupe(sorted)
	var out []string
	for i := s.K - 1; i < len(sorted); i += s.N {
		out = append(out, sorted[i])
	}
	return out
}

func dedupe(sorted []string) []string {
	out := sorted[:0]
	for i, n := range sorted {
		if i == 0 || n != sorted[i-1] {
			out = append(out, n)
		}
	}
	return out
}

// Focus is the ginkgo --focus regexp that selects exactly the given specs: each name quoted,
// the whole anchored on the suite description and the end of the text.
func Focus(specs []string) string {
	if len(specs) == 0 {
		return ""
	}
	quoted := make([]string, len(specs))
	for i, n := range specs {
		quoted[i] = regexp.QuoteMeta(n)
	}
	return "^" + regexp.QuoteMeta(SuiteDescription) + " (?:" + strings.Join(quoted, "|") + ")$"
}
