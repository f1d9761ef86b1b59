package iptables

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// builtinChains are the chains the kernel creates with each table, in the
// order iptables-save prints them.
var builtinChains = map[Table][]string{
	TableFilter: {"INPUT", "FORWARD", "OUTPUT"},
	TableNAT:    {"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"},
	TableMangle: {"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"},
	"raw":       {"PREROUTING", "OUTPUT"},
}

// knownTargets are the target extensions the Fake accepts after -j. Anything
// else must name a user chain of the same table.
var knownTargets = map[string]bool{
	"ACCEPT": true, "DROP": true, "RETURN": true, "REJECT": true,
	"MARK": true, "CONNMARK": true, "MASQUERADE": true, "SNAT": true,
	"DNAT": true, "REDIRECT": true, "LOG": true, "NOTRACK": true, "CT": true,
}

// tableOnlyTargets are targets the kernel accepts in one table only: the NAT
// targets register for "nat", REJECT for "filter", and iptables refuses DROP
// in nat ("The nat table is not intended for filtering").
var tableOnlyTargets = map[string]Table{
	"MASQUERADE": TableNAT, "SNAT": TableNAT, "DNAT": TableNAT, "REDIRECT": TableNAT,
	"REJECT": TableFilter,
}

// maxChainName is the longest chain name the kernel takes
// (XT_EXTENSION_MAXNAMELEN - 1).
const maxChainName = 28

// Fake is an in-memory iptables for one family. It parses the
// iptables-restore format and fails where the kernel does:
//
//   - a -j or -g to something that is neither a known target nor a user
//     chain of the table declared on an earlier line (legacy requires the
//     declaration first; nft does not, the Fake is the stricter of the two);
//   - -X of a missing chain, a built-in chain, a chain still referenced by a
//     rule, or a chain with rules (declare it first to flush it);
//   - -D of a rule that is not there, -F of a missing chain, -I past the end;
//   - a table block without COMMIT, an unknown table, a policy on a user
//     chain, a chain name longer than 28 characters;
//   - DROP or REJECT in nat, MASQUERADE/SNAT/DNAT/REDIRECT outside nat.
//
// Like iptables-restore, each table block is applied atomically at its
// COMMIT: an error discards the block it is in and every later one, but
// blocks committed earlier in the same call stay applied.
//
// Not modelled: hook restrictions of targets (MASQUERADE reachable from
// PREROUTING), ipsets named by -m set (the kernel refuses a missing set),
// match option syntax, and the canonical rewriting iptables-save does (see
// rulefmt.go): rules are stored and compared exactly as given.
type Fake struct {
	mu     sync.Mutex
	family Family
	tables map[Table]*fakeTable

	// Writes counts calls that wrote to the kernel: every Restore (even one
	// that failed), every EnsureRule that added a rule and every DeleteRule
	// that deleted.
	Writes int
}

type fakeTable struct {
	name   Table
	chains map[string]*fakeChain
}

type fakeChain struct {
	builtin bool
	policy  string
	rules   [][]string
}

var _ Interface = (*Fake)(nil)

// NewFake returns an empty Fake for family: every table holds only its
// built-in chains, with policy ACCEPT.
func NewFake(family Family) *Fake {
	return &Fake{family: family, tables: map[Table]*fakeTable{}}
}

// Family implements Interface.
func (f *Fake) Family() Family { return f.family }

// table returns the table, or a new one holding only its built-in chains
// (the kernel loads a table on first use) that the caller stores once it
// writes to it; nil for an unknown table.
func (f *Fake) table(name Table) *fakeTable {
	if t, ok := f.tables[name]; ok {
		return t
	}
	return newFakeTable(name)
}

func newFakeTable(name Table) *fakeTable {
	builtins, ok := builtinChains[name]
	if !ok {
		return nil
	}
	t := &fakeTable{name: name, chains: map[string]*fakeChain{}}
	for _, c := range builtins {
		t.chains[c] = &fakeChain{builtin: true, policy: "ACCEPT"}
	}
	return t
}

func (t *fakeTable) clone() *fakeTable {
	c := &fakeTable{name: t.name, chains: make(map[string]*fakeChain, len(t.chains))}
	for name, ch := range t.chains {
		rules := make([][]string, len(ch.rules))
		for i, r := range ch.rules {
			rules[i] = slices.Clone(r)
		}
		c.chains[name] = &fakeChain{builtin: ch.builtin, policy: ch.policy, rules: rules}
	}
	return c
}

// Restore implements Interface.
func (f *Fake) Restore(data []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Writes++
	if err := f.restore(string(data)); err != nil {
		return fmt.Errorf("restore %s rules: %w", f.family, err)
	}
	return nil
}

func (f *Fake) restore(data string) error {
	var pending *fakeTable // the table block being parsed, applied at COMMIT
	for i, line := range strings.Split(data, "\n") {
		lineNo := i + 1
		line = strings.TrimSpace(line)
		fail := func(format string, a ...any) error {
			return fmt.Errorf("line %d %q: %s: %w", lineNo, line, fmt.Sprintf(format, a...), ErrInvalid)
		}
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
			continue
		case strings.HasPrefix(line, "*"):
			if pending != nil {
				return fail("COMMIT expected before next table")
			}
			name := Table(line[1:])
			t := f.table(name)
			if t == nil {
				return fail("table %q does not exist", name)
			}
			pending = t.clone()
		case line == "COMMIT":
			if pending == nil {
				return fail("COMMIT outside a table")
			}
			f.tables[pending.name] = pending
			pending = nil
		case pending == nil:
			return fail("no table given with *TABLE")
		case strings.HasPrefix(line, ":"):
			if err := pending.declare(line[1:]); err != nil {
				return fail("%v", err)
			}
		default:
			args, err := splitRuleLine(line)
			if err != nil {
				return fail("%v", err)
			}
			if err := pending.command(args); err != nil {
				return fail("%v", err)
			}
		}
	}
	if pending != nil {
		return fmt.Errorf("table %s: COMMIT expected at end of input: %w", pending.name, ErrInvalid)
	}
	return nil
}

// declare handles ":NAME POLICY [packets:bytes]". With --noflush a user chain
// is created or flushed; a built-in chain keeps its rules and takes the
// policy.
func (t *fakeTable) declare(decl string) error {
	fields := strings.Fields(decl)
	if len(fields) < 2 {
		return fmt.Errorf("chain declaration needs a name and a policy")
	}
	name, policy := fields[0], fields[1]
	if ch, ok := t.chains[name]; ok && ch.builtin {
		if policy != "ACCEPT" && policy != "DROP" {
			return fmt.Errorf("bad policy %q for built-in chain %s", policy, name)
		}
		ch.policy = policy
		return nil
	}
	if policy != "-" {
		// iptables-legacy-restore: "Can't set policy on NAME: Bad built-in
		// chain name" (nft accepts and ignores it).
		return fmt.Errorf("cannot set policy %q on user chain %s", policy, name)
	}
	if err := validChainName(name); err != nil {
		return err
	}
	t.chains[name] = &fakeChain{}
	return nil
}

func validChainName(name string) error {
	switch {
	case name == "" || name[0] == '-' || name[0] == '!':
		return fmt.Errorf("invalid chain name %q", name)
	case len(name) > maxChainName:
		return fmt.Errorf("invalid chain name %q (%d chars max)", name, maxChainName)
	case knownTargets[name]:
		return fmt.Errorf("chain name %q is a target name", name)
	}
	return nil
}

// command applies one of -A -I -D -F -X -N to the pending table.
func (t *fakeTable) command(args []string) error {
	if len(args) == 0 {
		return nil
	}
	op, rest := args[0], args[1:]
	if op == "-F" && len(rest) == 0 {
		for _, ch := range t.chains {
			ch.rules = nil
		}
		return nil
	}
	if len(rest) == 0 {
		return fmt.Errorf("%s needs a chain name (the Fake does not support -X without one)", op)
	}
	chainName, rule := rest[0], rest[1:]
	if op == "-N" {
		if _, ok := t.chains[chainName]; ok {
			return fmt.Errorf("chain %s already exists", chainName)
		}
		if err := validChainName(chainName); err != nil {
			return err
		}
		t.chains[chainName] = &fakeChain{}
		return nil
	}
	ch, ok := t.chains[chainName]
	if !ok {
		return fmt.Errorf("chain %s does not exist", chainName)
	}
	switch op {
	case "-A":
		if err := t.validTarget(rule); err != nil {
			return err
		}
		ch.rules = append(ch.rules, slices.Clone(rule))
	case "-I":
		pos := 1
		if len(rule) > 0 {
			if n, err := strconv.Atoi(rule[0]); err == nil {
				pos, rule = n, rule[1:]
			}
		}
		if pos < 1 || pos > len(ch.rules)+1 {
			return fmt.Errorf("index of insertion %d too big for chain %s", pos, chainName)
		}
		if err := t.validTarget(rule); err != nil {
			return err
		}
		ch.rules = slices.Insert(ch.rules, pos-1, slices.Clone(rule))
	case "-D":
		if len(rule) == 1 {
			if n, err := strconv.Atoi(rule[0]); err == nil {
				if n < 1 || n > len(ch.rules) {
					return fmt.Errorf("index of deletion %d too big for chain %s", n, chainName)
				}
				ch.rules = slices.Delete(ch.rules, n-1, n)
				return nil
			}
		}
		if err := t.validTarget(rule); err != nil {
			return err
		}
		i := ch.find(rule)
		if i < 0 {
			return fmt.Errorf("bad rule (does a matching rule exist in chain %s?)", chainName)
		}
		ch.rules = slices.Delete(ch.rules, i, i+1)
	case "-F":
		ch.rules = nil
	case "-X":
		switch {
		case ch.builtin:
			return fmt.Errorf("cannot delete built-in chain %s", chainName)
		case len(ch.rules) > 0:
			return fmt.Errorf("chain %s is not empty", chainName)
		case t.referenced(chainName):
			return fmt.Errorf("chain %s is still referenced", chainName)
		}
		delete(t.chains, chainName)
	default:
		return fmt.Errorf("command %s not supported", op)
	}
	return nil
}

// ruleTarget returns the argument after -j/-g (or their long forms), or "".
func ruleTarget(rule []string) string {
	for i := 0; i+1 < len(rule); i++ {
		switch rule[i] {
		case "-j", "--jump", "-g", "--goto":
			return rule[i+1]
		}
	}
	return ""
}

// validTarget fails the way iptables does for a target that does not exist
// or is not allowed in this table.
func (t *fakeTable) validTarget(rule []string) error {
	target := ruleTarget(rule)
	if target == "" {
		return nil
	}
	if knownTargets[target] {
		if only, ok := tableOnlyTargets[target]; ok && only != t.name {
			return fmt.Errorf("target %s is not valid in table %s", target, t.name)
		}
		if target == "DROP" && t.name == TableNAT {
			return fmt.Errorf("the nat table is not intended for filtering, DROP is inhibited")
		}
		return nil
	}
	ch, ok := t.chains[target]
	if !ok {
		return fmt.Errorf("chain %s does not exist (jump target)", target)
	}
	if ch.builtin {
		return fmt.Errorf("cannot jump to built-in chain %s", target)
	}
	return nil
}

func (t *fakeTable) referenced(chain string) bool {
	for _, ch := range t.chains {
		for _, r := range ch.rules {
			if ruleTarget(r) == chain {
				return true
			}
		}
	}
	return false
}

func (ch *fakeChain) find(rule []string) int {
	return slices.IndexFunc(ch.rules, func(r []string) bool { return slices.Equal(r, rule) })
}

// Save implements Interface.
func (f *Fake) Save(table Table) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.table(table)
	if t == nil {
		return nil, fmt.Errorf("save %s table %s: table does not exist: %w", f.family, table, ErrInvalid)
	}
	return []byte(t.save()), nil
}

// SaveTables implements Interface: each table as Save prints it.
func (f *Fake) SaveTables(tables ...Table) (map[Table][]byte, error) {
	out := make(map[Table][]byte, len(tables))
	for _, t := range tables {
		text, err := f.Save(t)
		if err != nil {
			return nil, err
		}
		out[t] = text
	}
	return out, nil
}

// save prints the table as iptables-save does without counters and comments.
func (t *fakeTable) save() string {
	order := t.chainOrder()
	var b strings.Builder
	fmt.Fprintf(&b, "*%s\n", t.name)
	for _, name := range order {
		policy := t.chains[name].policy
		if policy == "" {
			policy = "-"
		}
		fmt.Fprintf(&b, ":%s %s [0:0]\n", name, policy)
	}
	for _, name := range order {
		for _, r := range t.chains[name].rules {
			if len(r) == 0 {
				fmt.Fprintf(&b, "-A %s\n", name)
				continue
			}
			fmt.Fprintf(&b, "-A %s %s\n", name, formatRule(r))
		}
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// chainOrder is built-in chains in kernel order, then user chains sorted.
func (t *fakeTable) chainOrder() []string {
	order := slices.Clone(builtinChains[t.name])
	var user []string
	for name, ch := range t.chains {
		if !ch.builtin {
			user = append(user, name)
		}
	}
	sort.Strings(user)
	return append(order, user...)
}

// Dump returns every table that has been written, sorted by name,
// in Save format.
func (f *Fake) Dump() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	names := make([]string, 0, len(f.tables))
	for name := range f.tables {
		names = append(names, string(name))
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		b.WriteString(f.tables[Table(name)].save())
	}
	return b.String()
}

// EnsureRule implements Interface.
func (f *Fake) EnsureRule(position Position, table Table, chain string, rule ...string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	what := fmt.Sprintf("%s rule %q in %s chain %s", f.family, formatRule(rule), table, chain)
	t := f.table(table)
	if t == nil {
		return false, fmt.Errorf("ensure %s: table does not exist: %w", what, ErrInvalid)
	}
	if err := t.validTarget(rule); err != nil {
		return false, fmt.Errorf("ensure %s: %v: %w", what, err, ErrInvalid)
	}
	ch, ok := t.chains[chain]
	if !ok {
		return false, fmt.Errorf("ensure %s: chain %w", what, ErrNotFound)
	}
	if ch.find(rule) >= 0 {
		return true, nil
	}
	f.Writes++
	if position == Prepend {
		ch.rules = slices.Insert(ch.rules, 0, slices.Clone(rule))
	} else {
		ch.rules = append(ch.rules, slices.Clone(rule))
	}
	f.tables[table] = t
	return false, nil
}

// DeleteRule implements Interface.
func (f *Fake) DeleteRule(table Table, chain string, rule ...string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	what := fmt.Sprintf("%s rule %q in %s chain %s", f.family, formatRule(rule), table, chain)
	t := f.table(table)
	if t == nil {
		return fmt.Errorf("delete %s: table does not exist: %w", what, ErrInvalid)
	}
	if err := t.validTarget(rule); err != nil {
		return fmt.Errorf("delete %s: %v: %w", what, err, ErrInvalid)
	}
	ch, ok := t.chains[chain]
	if !ok {
		return nil // a rule in a missing chain is not there either
	}
	if i := ch.find(rule); i >= 0 {
		f.Writes++
		ch.rules = slices.Delete(ch.rules, i, i+1)
	}
	return nil
}
