package ledger

import (
	"fmt"
	"math/rand"
	"reflect"
	"regexp"
	"sort"
	"testing"
)

// specNames is a list shaped like the run's: brackets, regexp metacharacters, and one name that
// is the start of another and one that is the end of another (a focus that is not anchored at
// both ends selects both).
func specNames() []string {
	names := []string{
		"[sig-network] Services should serve a basic endpoint from pods [Conformance]",
		"[sig-network] Services should serve a basic endpoint from pods [Conformance] twice",
		"[sig-network] Conntrack should drop INVALID conntrack entries [Privileged]",
		"[sig-network] Services should fallback to terminating endpoints (a+b)*?",
		"[sig-network] Networking Granular Checks: Services should update endpoints: http",
		"[sig-network] Networking Granular Checks: Services should update endpoints: udp",
		"Granular Checks: Services should update endpoints: udp",
	}
	for i := 0; i < 84; i++ {
		names = append(names, fmt.Sprintf("[sig-network] Services spec %02d", i))
	}
	return names
}

func TestShardsHoldEverySpecExactlyOnce(t *testing.T) {
	names := specNames()
	for n := 1; n <= 12; n++ {
		seen := map[string]int{}
		min, max := len(names), 0
		for k := 1; k <= n; k++ {
			got := Shard{K: k, N: n}.Specs(names)
			for _, s := range got {
				seen[s]++
			}
			min, max = minInt(min, len(got)), maxInt(max, len(got))
		}
		for _, s := range names {
			if seen[s] != 1 {
				t.Errorf("N=%d: %q is in %d shards, want 1", n, s, seen[s])
			}
		}
		if len(seen) != len(names) {
			t.Errorf("N=%d: the shards hold %d specs, want %d", n, len(seen), len(names))
		}
		if max-min > 1 {
			t.Errorf("N=%d: shard sizes from %d to %d, want within one", n, min, max)
		}
	}
}

func TestShardsDoNotDependOnTheInputOrder(t *testing.T) {
	names := specNames()
	shuffled := append([]string(nil), names...)
	rand.New(rand.NewSource(1)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	// A report may list a spec twice (two passes); it is one spec.
	shuffled = append(shuffled, names[3])
	for _, n := range []int{1, 3, 7, 30} {
		for k := 1; k <= n; k++ {
			a, b := Shard{K: k, N: n}.Specs(names), Shard{K: k, N: n}.Specs(shuffled)
			if !reflect.DeepEqual(a, b) {
				t.Errorf("shard %d/%d: %q from the sorted list, %q from the shuffled one", k, n, a, b)
			}
		}
	}
}

// The focus is matched by ginkgo as a Go regexp against "DESCRIPTION TEXT": the same engine.
func TestFocusSelectsExactlyTheShard(t *testing.T) {
	names := specNames()
	for _, n := range []int{1, 2, 5, 30} {
		for k := 1; k <= n; k++ {
			mine := Shard{K: k, N: n}.Specs(names)
			in := map[string]bool{}
			for _, s := range mine {
				in[s] = true
			}
			re := regexp.MustCompile(Focus(mine))
			for _, s := range names {
				if got := re.MatchString(SuiteDescription + " " + s); got != in[s] {
					t.Errorf("shard %d/%d: focus selects %q: %v, want %v", k, n, s, got, in[s])
				}
			}
		}
	}
}

func TestParseShard(t *testing.T) {
	if s, err := ParseShard("3/30"); err != nil || s != (Shard{K: 3, N: 30}) {
		t.Errorf("ParseShard(3/30) = %v, %v", s, err)
	}
	for _, bad := range []string{"", "3", "0/3", "4/3", "a/3", "1/0", "-1/2", "1/2/3"} {
		if _, err := ParseShard(bad); err == nil {
			t.Errorf("ParseShard(%q): no error", bad)
		}
	}
}

func TestSeveralShardsInOneRun(t *testing.T) {
	names := specNames()
	shards, err := ParseShards("7,2/30")
	if err != nil {
		t.Fatal(err)
	}
	got := SpecsOf(shards, names)
	want := append(Shard{K: 2, N: 30}.Specs(names), Shard{K: 7, N: 30}.Specs(names)...)
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("shards 7,2/30: %q, want %q", got, want)
	}
	for _, bad := range []string{"7,7/30", "7,31/30", "7,/30", "7,2", ""} {
		if _, err := ParseShards(bad); err == nil {
			t.Errorf("ParseShards(%q): no error", bad)
		}
	}
}

func minInt(a, b int) int {
	if a < b {
		return a
	}
	return b
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}
