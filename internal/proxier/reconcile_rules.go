package proxier

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ipvsproxy/ipvsproxy/internal/rules"
	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/iptables"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
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
// inserted first by the table's restore; the tables to write go in one
// restore. Each process costs its start (on the VM a full sync once started
// 18, 9 with nothing to write; now a cold node starts 2 per family and an
// unchanged one 1).
// Any other case, or a restore that fails, goes through EnsureRule
// (iptables -C, then -I), which never adds a second jump.
func (r *reconciler) syncRules() {
	applied := r.appliedRules
	jumps := owned.JumpRules()
	for _, family := range r.cfg.Families {
		ipt := r.k.IPTables[family]
		text := r.rulesText(family)
		if !r.full && applied[family] == text && !r.retries.rulesDue(family) {
			continue
		}
		ok := true
		jumped := make([]bool, len(jumps))
		pending := r.tablesToWrite(ipt, family, text, jumps, jumped)
		// Several tables to write go in one iptables-restore: a cold node
		// writes all three, and each process costs its start (on the VM
		// about 140 ms). Only when that fails is each table restored on
		// its own, so that the failing one is named and retried apart;
		// the tables are read again first, because iptables-restore may
		// have committed those before the failing one, and inserting their
		// jumps again would double them.
		if len(pending) > 1 {
			var all strings.Builder
			for _, w := range pending {
				all.WriteString(w.payload(jumps))
			}
			if ipt.Restore([]byte(all.String())) == nil {
				for _, w := range pending {
					r.wrote(w, jumped)
				}
				pending = nil
			} else {
				clear(jumped)
				pending = r.tablesToWrite(ipt, family, text, jumps, jumped)
			}
		}
		for _, w := range pending {
			if len(w.inserts) > 0 && ipt.Restore([]byte(w.payload(jumps))) == nil {
				r.wrote(w, jumped)
				continue
			}
			if w.matched {
				r.settle(w.id, nil)
				continue // the jumps are left to EnsureRule below
			}
			if err := ipt.Restore([]byte(w.want)); err != nil {
				r.failIn(family, w.id, fmt.Errorf("restore %s %s rules: %w", family, w.table, err))
				ok = false
				continue
			}
			r.writes++
			r.settle(w.id, nil)
		}
		for i, j := range jumps {
			id := namedID(snapshot.ObjectRules, fmt.Sprintf("%s %s %s jump", family, j.Table, j.Chain))
			if jumped[i] {
				r.settle(id, nil)
				continue
			}
			existed, err := ipt.EnsureRule(iptables.Prepend, j.Table, j.Chain, j.Rule...)
			if err != nil {
				r.failIn(family, id, fmt.Errorf("ensure %s jump from %s %s to %s: %w", family, j.Table, j.Chain, j.Rule[len(j.Rule)-1], err))
				ok = false
				continue
			}
			r.settle(id, nil)
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

// tablesToWrite reads the three tables with one iptables-save and returns
// those whose text or jumps differ from text; the others are done, and the
// jumps found as written are marked in jumped. A failed save leaves every
// table to write whole.
func (r *reconciler) tablesToWrite(ipt iptables.Interface, family v1.IPFamily, text string, jumps []owned.JumpRule, jumped []bool) []tableWrite {
	saves, err := ipt.SaveTables(owned.Tables...)
	var pending []tableWrite
	for _, table := range owned.Tables {
		w := tableWrite{id: namedID(snapshot.ObjectRules, fmt.Sprintf("%s %s", family, table)), want: rules.TableText(text, table), table: table}
		if err == nil {
			saved := iptables.SavedRules(saves[table])
			w.matched = rules.SavedMatch(saved, w.want, table)
			for i, j := range jumps {
				switch {
				case j.Table != table:
				case slices.Contains(saved[j.Chain], iptables.SavedLine(j.Chain, j.Rule)):
					jumped[i] = true
				case !iptables.JumpsTo(saved[j.Chain], j.Rule[len(j.Rule)-1]):
					w.inserts = append(w.inserts, i)
				}
			}
		}
		if w.matched && len(w.inserts) == 0 {
			r.settle(w.id, nil)
			continue
		}
		pending = append(pending, w)
	}
	return pending
}

// tableWrite is what one table needs: its text restored (when it differs
// from the save), jumps inserted, or both.
type tableWrite struct {
	id      objectID
	table   iptables.Table
	want    string
	matched bool  // the save holds want
	inserts []int // the jumps (jumpRules' indexes) missing from their chains
}

// payload is the table's restore text: want (or only the table's header,
// when the save holds it) with the missing jumps inserted.
func (w tableWrite) payload(jumps []owned.JumpRule) string {
	text := w.want
	if w.matched {
		text = "*" + string(w.table) + "\nCOMMIT\n"
	}
	if len(w.inserts) == 0 {
		return text
	}
	return withJumps(text, jumps, w.inserts)
}

// wrote counts a table's successful restore: its text when it differed,
// and each jump it inserted.
func (r *reconciler) wrote(w tableWrite, jumped []bool) {
	if !w.matched {
		r.writes++
	}
	r.writes += len(w.inserts)
	for _, i := range w.inserts {
		jumped[i] = true
	}
	r.settle(w.id, nil)
}

// withJumps adds to a table's restore text, before its COMMIT, the jumps
// inserts names, each as the first rule of its chain.
func withJumps(table string, jumps []owned.JumpRule, inserts []int) string {
	var b strings.Builder
	b.WriteString(strings.TrimSuffix(table, "COMMIT\n"))
	for _, i := range inserts {
		j := jumps[i]
		b.WriteString("-I " + j.Chain + " 1 " + iptables.RuleText(j.Rule) + "\n")
	}
	b.WriteString("COMMIT\n")
	return b.String()
}
