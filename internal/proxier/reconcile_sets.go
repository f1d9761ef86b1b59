package proxier

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ipvsproxy/ipvsproxy/internal/rules"
	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"

	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	v1 "k8s.io/api/core/v1"
)

// setOps create the owned sets that are missing. One present with the
// wrong type (an older layout) is picked for later and replaced
// (replaceSet) once the missing ones are there. Owned sets are never
// deleted while the proxier runs; `ipvsproxy cleanup` removes them.
func (r *reconciler) setOps(defs map[string]ownedSet) operations[string] {
	return operations[string]{
		id:     func(name string) objectID { return namedID(snapshot.ObjectSetEntry, name) },
		wanted: func(string) bool { return true },
		update: func(name string) error { return r.ensureSet(defs[name]) },
		delete: func(string) error { return nil },
		later:  func(err error) bool { return errors.As(err, new(wrongTypeError)) },
	}
}

// ownedSet is one owned set of one family.
type ownedSet struct {
	family v1.IPFamily
	ipset.Set
}

// ownedSets are the owned sets by name, and their names in the order they
// are created: per family the ownership record first, and the others only
// once it is there. Owned sets without a record set are what a version that
// kept no record leaves, and a restart adopts by the older rule there
// (ownership.go: legacy), which could take someone else's virtual server on
// a node address. A record set that failed to be created must not leave
// that picture behind.
func (r *reconciler) ownedSets() (map[string]ownedSet, []string) {
	defs := map[string]ownedSet{}
	var order []string
	for _, family := range r.cfg.Families {
		sets := owned.Sets([]v1.IPFamily{family}, r.cfg.IPSetMaxElements)
		slices.SortStableFunc(sets, func(a, b ipset.Set) int { return cmp.Compare(recordFirst(a), recordFirst(b)) })
		for _, s := range sets {
			defs[s.Name] = ownedSet{family, s}
			order = append(order, s.Name)
		}
	}
	return defs, order
}

// wrongTypeError is the outcome of an owned set present with another type
// or family: it is replaced after the pass.
type wrongTypeError struct {
	family     v1.IPFamily
	have, want ipset.Set
}

func (e wrongTypeError) Error() string {
	return fmt.Sprintf("ipset %s has type %s, want %s", e.want.Name, e.have.Type, e.want.Type)
}

// ensureSet creates the owned set want unless the view has it.
func (r *reconciler) ensureSet(want ownedSet) error {
	if _, ok := r.view.sets[want.Name]; ok {
		return nil
	}
	if have, ok := r.view.wrongSets[want.Name]; ok {
		return wrongTypeError{want.family, have, want.Set}
	}
	recordName := owned.SetName(owned.SetOwned, want.family)
	_, recorded := r.view.sets[recordName]
	if _, wrong := r.view.wrongSets[recordName]; want.Name != recordName && !recorded && !wrong {
		return pendingError{fmt.Errorf("ipset %s waits for the ownership record set %s", want.Name, recordName)}
	}
	r.writes++
	if err := r.k.IPSet.CreateSet(want.Set); err != nil {
		return err
	}
	r.view.sets[want.Name] = ipset.NewEntryMap[struct{}](r.setSizes[want.Name])
	return nil
}

// replaceSet gives an owned set the right type. A set nothing references is
// destroyed and created again. One that iptables references cannot be
// destroyed (EBUSY), renamed (the kernel refuses a referenced set) or
// swapped (only sets of one type swap), so the references move instead, and
// traffic always sees a set with the right members: a temporary set of the
// right type is filled, the family's rules are restored pointing at it, the
// old set is destroyed and created with the right type and filled, the
// rules point back, and the temporary set goes.
func (r *reconciler) replaceSet(w wrongTypeError) error {
	family, have, want := w.family, w.have, w.want
	r.writes++
	err := r.k.IPSet.DestroySet(want.Name)
	switch {
	case err == nil:
		return r.createFilled(want)
	case !errors.Is(err, ipset.ErrBusy):
		return fmt.Errorf("destroy ipset %s of type %s (want %s): %w", want.Name, have.Type, want.Type, err)
	}
	tmp := want
	tmp.Name = owned.TempSetName(want.Name)
	r.writes++
	if err := r.k.IPSet.DestroySet(tmp.Name); err != nil && !errors.Is(err, ipset.ErrNotFound) {
		return fmt.Errorf("destroy leftover ipset %s: %w", tmp.Name, err)
	}
	if err := r.createFilled(tmp); err != nil {
		return err
	}
	delete(r.view.sets, tmp.Name) // not a set the view tracks
	text := r.rulesText(family)
	if err := r.restoreRules(family, renameSet(text, want.Name, tmp.Name)); err != nil {
		return fmt.Errorf("point %s rules at ipset %s: %w", family, tmp.Name, err)
	}
	r.writes++
	if err := r.k.IPSet.DestroySet(want.Name); err != nil {
		// Someone else's rule references it too; ours use the temporary
		// set meanwhile, with the right members.
		return fmt.Errorf("destroy ipset %s of type %s (want %s) after moving our rules off it: %w", want.Name, have.Type, want.Type, err)
	}
	delete(r.view.wrongSets, want.Name)
	if err := r.createFilled(want); err != nil {
		return err
	}
	if err := r.restoreRules(family, text); err != nil {
		return fmt.Errorf("point %s rules back at ipset %s: %w", family, want.Name, err)
	}
	r.writes++
	if err := r.k.IPSet.DestroySet(tmp.Name); err != nil {
		return fmt.Errorf("destroy temporary ipset %s: %w", tmp.Name, err)
	}
	return nil
}

// createFilled creates s and adds the members the desired state wants in
// the set of that name (the temporary set gets its original's).
func (r *reconciler) createFilled(s ipset.Set) error {
	r.writes++
	if err := r.k.IPSet.CreateSet(s); err != nil {
		return err
	}
	members := ipset.NewEntryMap[struct{}](0)
	r.view.sets[s.Name] = members
	delete(r.view.wrongSets, s.Name)
	name := strings.TrimSuffix(s.Name, owned.TempSetSuffix)
	var es []ipset.Entry
	for k, n := range r.desired.SetEntries() {
		if k.Set == name && n > 0 {
			es = append(es, k.Entry)
		}
	}
	r.writes += len(es)
	var first error
	refused := 0
	for i, err := range ipset.AddEntries(r.k.IPSet, s.Name, es) {
		if err != nil {
			first = cmp.Or(first, err)
			refused++
			continue
		}
		members.Put(es[i], struct{}{})
	}
	if refused > 0 {
		return fmt.Errorf("fill ipset %s: %d of %d members refused, the first: %w", s.Name, refused, len(es), first)
	}
	return nil
}

// restoreRules writes both tables of one family's rules text.
func (r *reconciler) restoreRules(family v1.IPFamily, text string) error {
	ipt := r.k.IPTables[family]
	for _, table := range owned.Tables {
		r.writes++
		if err := ipt.Restore([]byte(rules.TableText(text, table))); err != nil {
			return fmt.Errorf("restore %s %s rules: %w", family, table, err)
		}
	}
	return nil
}

// renameSet points every rule of text that matches set old at set new.
func renameSet(text, old, new string) string {
	return strings.ReplaceAll(text, " "+old+" ", " "+new+" ")
}

// recordFirst orders the ownership record set before the other owned sets.
func recordFirst(s ipset.Set) int {
	if owned.BaseName(s.Name) == owned.SetOwned {
		return 0
	}
	return 1
}
