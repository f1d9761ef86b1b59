package ipvsproxy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ipvsproxy/ipvsproxy/iptables"
	v1 "k8s.io/api/core/v1"
)

// syncRules restores a family's iptables tables when they differ from what
// is wanted: on a full sync by reading them back, otherwise only when the
// wanted text changed (it depends on the configuration alone) or a table's
// retry is due. applied remembers, per family, the text last written whole.
//
// The three tables are read with one iptables-save, and the jumps from the
// built-in chains are checked in that text: one that is there as written
// costs no process, and one whose chain jumps nowhere to its target is
// inserted first by the table's restore (issue 9: on the VM a full sync
// started 18 iptables processes, 9 with nothing to write; now 4 and 1).
// Any other case, or a restore that fails, goes through EnsureRule
// (iptables -C, then -I), which never adds a second jump.
func (r *reconciler) syncRules(applied map[v1.IPFamily]string) {
	jumps := jumpRules()
	for _, family := range r.cfg.Families {
		ipt := r.k.IPTables[family]
		text := r.rulesText(family)
		if !r.full && applied[family] == text && !r.rulesDue(family) {
			continue
		}
		ok := true
		jumped := make([]bool, len(jumps))
		// One iptables-save for the three tables.
		saves, err := ipt.SaveTables(ownedTables...)
		for _, table := range ownedTables {
			id := namedID(ObjectRules, fmt.Sprintf("%s %s", family, table))
			want := tableText(text, table)
			var matched bool
			var inserts []int
			if err == nil {
				saved := iptables.SavedRules(saves[table])
				matched = savedMatch(saved, want, table)
				for i, j := range jumps {
					switch {
					case j.table != table:
					case slices.Contains(saved[j.chain], iptables.SavedLine(j.chain, j.rule)):
						jumped[i] = true
					case !iptables.JumpsTo(saved[j.chain], j.rule[len(j.rule)-1]):
						inserts = append(inserts, i)
					}
				}
			}
			if matched && len(inserts) == 0 {
				r.status.done(id)
				continue
			}
			payload := want
			if matched {
				payload = "*" + string(table) + "\nCOMMIT\n"
			} else {
				r.writes++
			}
			if len(inserts) > 0 && ipt.Restore([]byte(withJumps(payload, jumps, inserts))) == nil {
				r.writes += len(inserts)
				for _, i := range inserts {
					jumped[i] = true
				}
				r.status.done(id)
				continue
			}
			if matched {
				r.status.done(id)
				continue // the jumps are left to EnsureRule below
			}
			if err := ipt.Restore([]byte(want)); err != nil {
				r.failIn(family, id, fmt.Errorf("restore %s %s rules: %w", family, table, err))
				ok = false
				continue
			}
			r.status.done(id)
		}
		for i, j := range jumps {
			id := namedID(ObjectRules, fmt.Sprintf("%s %s %s jump", family, j.table, j.chain))
			if jumped[i] {
				r.status.done(id)
				continue
			}
			existed, err := ipt.EnsureRule(iptables.Prepend, j.table, j.chain, j.rule...)
			if err != nil {
				r.failIn(family, id, fmt.Errorf("ensure %s jump from %s %s to %s: %w", family, j.table, j.chain, j.rule[len(j.rule)-1], err))
				ok = false
				continue
			}
			r.status.done(id)
			if !existed {
				r.writes++
			}
		}
		if ok {
			applied[family] = text
		} else {
			delete(applied, family)
		}
	}
}

// withJumps adds to a table's restore text, before its COMMIT, the jumps
// inserts names, each as the first rule of its chain.
func withJumps(table string, jumps []jumpRule, inserts []int) string {
	var b strings.Builder
	b.WriteString(strings.TrimSuffix(table, "COMMIT\n"))
	for _, i := range inserts {
		j := jumps[i]
		b.WriteString("-I " + j.chain + " 1 " + iptables.RuleText(j.rule) + "\n")
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// rulesDue reports whether a rules object of family waits for a retry.
func (r *reconciler) rulesDue(family v1.IPFamily) bool {
	for id, st := range r.status.objects {
		if id.kind == ObjectRules && len(id.name) > len(family) && id.name[:len(family)] == string(family) && !r.now.Before(st.nextRetry) {
			return true
		}
	}
	return false
}
