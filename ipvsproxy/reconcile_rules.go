package ipvsproxy

import (
	"fmt"

	"github.com/ipvsproxy/ipvsproxy/iptables"
	v1 "k8s.io/api/core/v1"
)

// syncRules restores a family's iptables tables when they differ from what
// is wanted: on a full sync by reading them back, otherwise only when the
// wanted text changed (it depends on the configuration alone) or a table's
// retry is due. applied remembers, per family, the text last written whole.
func (r *reconciler) syncRules(applied map[v1.IPFamily]string) {
	for _, family := range r.cfg.Families {
		ipt := r.k.IPTables[family]
		text := r.rulesText(family)
		if !r.full && applied[family] == text && !r.rulesDue(family) {
			continue
		}
		ok := true
		for _, table := range ownedTables {
			id := namedID(ObjectRules, fmt.Sprintf("%s %s", family, table))
			want := tableText(text, table)
			if save, err := ipt.Save(table); err == nil && rulesMatch(save, want, table) {
				r.status.done(id)
				continue
			}
			r.writes++
			if err := ipt.Restore([]byte(want)); err != nil {
				r.failIn(family, id, fmt.Errorf("restore %s %s rules: %w", family, table, err))
				ok = false
				continue
			}
			r.status.done(id)
		}
		for _, j := range jumpRules() {
			id := namedID(ObjectRules, fmt.Sprintf("%s %s %s jump", family, j.table, j.chain))
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

// rulesDue reports whether a rules object of family waits for a retry.
func (r *reconciler) rulesDue(family v1.IPFamily) bool {
	for id, st := range r.status.objects {
		if id.kind == ObjectRules && len(id.name) > len(family) && id.name[:len(family)] == string(family) && !r.now.Before(st.nextRetry) {
			return true
		}
	}
	return false
}
