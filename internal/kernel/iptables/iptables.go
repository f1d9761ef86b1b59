package iptables

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
)

// lockWait is how long a command waits for the xtables lock ("-w 5") before
// failing, as kube-proxy does; the next sync retries.
const lockWait = "5"

// String names the family in errors and logs.
func (f Family) String() string {
	switch f {
	case IPv4:
		return "IPv4"
	case IPv6:
		return "IPv6"
	}
	return fmt.Sprintf("Family(%d)", int(f))
}

// Option configures New and Detect.
type Option func(*options)

type options struct {
	netnsPath string
	backend   Backend
}

// InNetNS runs every command inside the network namespace at path (e.g.
// /run/netns/NAME). The daemon works in the host namespace and never uses
// it; tests use it to program a namespace they created and will remove.
// Nothing but the kernel is needed: commands are forked from a thread that
// has joined the namespace.
func InNetNS(path string) Option {
	return func(o *options) { o.netnsPath = path }
}

// WithBackend uses back end b instead of detecting it.
func WithBackend(b Backend) Option {
	return func(o *options) { o.backend = b }
}

// runner is the real Interface: it runs the iptables binaries of one back end.
type runner struct {
	family  Family
	backend Backend
	cmd     commandRunner
	// Paths of iptables, iptables-save and iptables-restore (or the
	// ip6tables ones) of the back end.
	ruleBin, saveBin, restoreBin string
}

var _ Interface = (*runner)(nil)

// New returns the real iptables for family, using the back end the host
// already uses (see Detect) unless WithBackend says otherwise. It fails with
// ErrUnsupported when neither iptables-legacy nor iptables-nft is installed.
// A caller creating both families should call Detect once and pass its
// answer to both with WithBackend, so that they cannot disagree.
func New(family Family, opts ...Option) (Interface, error) {
	if family != IPv4 && family != IPv6 {
		return nil, fmt.Errorf("iptables for %s: unknown family: %w", family, ErrUnsupported)
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.backend == "" {
		b, err := Detect(opts...)
		if err != nil {
			return nil, err
		}
		o.backend = b
	}
	if o.backend != BackendLegacy && o.backend != BackendNFT {
		return nil, fmt.Errorf("iptables for %s: unknown back end %q: %w", family, o.backend, ErrUnsupported)
	}
	r := &runner{family: family, backend: o.backend, cmd: commandRunner{netnsPath: o.netnsPath}}
	prefix := "iptables-"
	if family == IPv6 {
		prefix = "ip6tables-"
	}
	for _, bin := range []struct {
		path   *string
		suffix string
	}{{&r.ruleBin, ""}, {&r.saveBin, "-save"}, {&r.restoreBin, "-restore"}} {
		path, err := lookBinary(prefix + string(o.backend) + bin.suffix)
		if err != nil {
			return nil, fmt.Errorf("iptables for %s: %w", family, err)
		}
		*bin.path = path
	}
	return r, nil
}

// Detect returns the back end the host (or the InNetNS namespace) uses:
// chooseBackend over what iptables-legacy-save and iptables-nft-save print
// for both families. If only one back end is installed it is the answer.
func Detect(opts ...Option) (Backend, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	_, legacyErr := lookBinary("iptables-legacy-save")
	_, nftErr := lookBinary("iptables-nft-save")
	switch {
	case legacyErr != nil && nftErr != nil:
		return "", fmt.Errorf("detect iptables back end: neither iptables-legacy-save nor iptables-nft-save found: %w", ErrUnsupported)
	case legacyErr != nil:
		return BackendNFT, nil
	case nftErr != nil:
		return BackendLegacy, nil
	}
	cmd := commandRunner{netnsPath: o.netnsPath}
	// Failures count as "no rules", as in the wrapper: a back end whose
	// kernel side is missing has nothing to offer.
	saveAll := func(binaries ...string) []byte {
		var out []byte
		for _, bin := range binaries {
			path, err := lookBinary(bin)
			if err != nil {
				continue
			}
			res, err := cmd.run(nil, path)
			if err == nil && res.exitCode == 0 {
				out = append(out, res.stdout...)
			}
		}
		return out
	}
	legacy := saveAll("iptables-legacy-save", "ip6tables-legacy-save")
	nft := saveAll("iptables-nft-save", "ip6tables-nft-save")
	return chooseBackend(legacy, nft), nil
}

// lookBinary finds an iptables command in PATH or, since a daemon's PATH
// often lacks them, in /usr/sbin and /sbin.
func lookBinary(name string) (string, error) {
	if path, err := exec.LookPath(name); err == nil {
		return path, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin"} {
		if path, err := exec.LookPath(dir + "/" + name); err == nil {
			return path, nil
		}
	}
	return "", fmt.Errorf("%s not found in PATH, /usr/sbin or /sbin: %w", name, ErrUnsupported)
}

// Family implements Interface.
func (r *runner) Family() Family { return r.family }

// Restore implements Interface. iptables-restore commits each table block at
// its COMMIT line (both back ends), so a failure in a later block leaves the
// earlier ones applied; see Interface.Restore.
func (r *runner) Restore(data []byte) error {
	res, err := r.cmd.run(data, r.restoreBin, "--noflush", "-w", lockWait)
	if err != nil {
		return fmt.Errorf("restore %s rules with %s: %w", r.family, r.restoreBin, err)
	}
	if res.exitCode != 0 {
		return fmt.Errorf("restore %s rules with %s: %s: %w", r.family, r.restoreBin, res.stderr, ErrInvalid)
	}
	return nil
}

// Save implements Interface.
func (r *runner) Save(table Table) ([]byte, error) {
	if _, ok := builtinChains[table]; !ok {
		return nil, fmt.Errorf("save %s table %s: table does not exist: %w", r.family, table, ErrInvalid)
	}
	res, err := r.cmd.run(nil, r.saveBin, "-t", string(table))
	if err != nil {
		return nil, fmt.Errorf("save %s table %s: %w", r.family, table, err)
	}
	if res.exitCode != 0 {
		return nil, fmt.Errorf("save %s table %s: %s", r.family, table, res.stderr)
	}
	return stableSave(res.stdout), nil
}

// SaveTables implements Interface.
func (r *runner) SaveTables(tables ...Table) (map[Table][]byte, error) {
	for _, t := range tables {
		if _, ok := builtinChains[t]; !ok {
			return nil, fmt.Errorf("save %s table %s: table does not exist: %w", r.family, t, ErrInvalid)
		}
	}
	res, err := r.cmd.run(nil, r.saveBin)
	if err != nil {
		return nil, fmt.Errorf("save %s tables: %w", r.family, err)
	}
	if res.exitCode != 0 {
		return nil, fmt.Errorf("save %s tables: %s", r.family, res.stderr)
	}
	all := splitSave(stableSave(res.stdout))
	out := make(map[Table][]byte, len(tables))
	for _, t := range tables {
		if text, ok := all[t]; ok {
			out[t] = text
		} else {
			out[t] = []byte(emptyTable(t))
		}
	}
	return out, nil
}

// splitSave cuts a save of several tables into one text per table, each
// from its "*table" line to its COMMIT.
func splitSave(save []byte) map[Table][]byte {
	out := map[Table][]byte{}
	var table Table
	start := -1
	for i := 0; i < len(save); {
		end := bytes.IndexByte(save[i:], '\n')
		if end < 0 {
			end = len(save)
		} else {
			end += i + 1
		}
		line := save[i:end]
		switch {
		case len(line) > 1 && line[0] == '*':
			table, start = Table(bytes.TrimSpace(line[1:])), i
		case start >= 0 && string(bytes.TrimSpace(line)) == "COMMIT":
			out[table] = save[start:end]
			start = -1
		}
		i = end
	}
	return out
}

// emptyTable is how iptables-save -t prints a table the kernel has not set
// up (both back ends): its built-in chains, empty, policy ACCEPT.
func emptyTable(t Table) string {
	var b strings.Builder
	b.WriteString("*" + string(t) + "\n")
	for _, c := range builtinChains[t] {
		b.WriteString(":" + c + " ACCEPT [0:0]\n")
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

var chainCounters = regexp.MustCompile(`\[\d+:\d+\]$`)

// stableSave drops comment lines ("# Generated by ...", and iptables-nft's
// "# Warning: iptables-legacy tables present") and zeroes the chain
// counters, so that two saves of the same rules are byte-equal.
func stableSave(out []byte) []byte {
	var b bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
			continue
		case strings.HasPrefix(line, ":"):
			line = chainCounters.ReplaceAllString(line, "[0:0]")
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// ruleCommand runs the back end's iptables with one command ("-C", "-A",
// "-D") on a rule.
func (r *runner) ruleCommand(op string, table Table, chain string, rule []string) (commandResult, error) {
	args := append([]string{"-w", lockWait, "-t", string(table), op, chain}, rule...)
	return r.cmd.run(nil, r.ruleBin, args...)
}

// Exit codes of the iptables command (xtables.h): 1 is "other problem",
// which -C uses for "no such rule" (and for a missing chain); 2 is a
// parameter problem, e.g. a jump to a target or chain that does not exist.
const (
	exitOtherProblem     = 1
	exitParameterProblem = 2
)

// EnsureRule implements Interface.
func (r *runner) EnsureRule(position Position, table Table, chain string, rule ...string) (bool, error) {
	what := fmt.Sprintf("%s rule %q in %s chain %s", r.family, formatRule(rule), table, chain)
	res, err := r.ruleCommand("-C", table, chain, rule)
	switch {
	case err != nil:
		return false, fmt.Errorf("ensure %s: %w", what, err)
	case res.exitCode == 0:
		return true, nil
	case res.exitCode == exitParameterProblem:
		return false, fmt.Errorf("ensure %s: %s: %w", what, res.stderr, ErrInvalid)
	case res.exitCode != exitOtherProblem:
		return false, fmt.Errorf("ensure %s: check: %s", what, res.stderr)
	}
	if position == Prepend {
		res, err = r.ruleCommand("-I", table, chain, append([]string{"1"}, rule...))
	} else {
		res, err = r.ruleCommand("-A", table, chain, rule)
	}
	switch {
	case err != nil:
		return false, fmt.Errorf("ensure %s: %w", what, err)
	case res.exitCode == 0:
		return false, nil
	}
	// "-A" says "No chain/target/match by that name" both for a missing
	// chain and a missing match; the table listing tells them apart.
	if exists, err := r.chainExists(table, chain); err == nil && !exists {
		return false, fmt.Errorf("ensure %s: chain %w", what, ErrNotFound)
	}
	return false, fmt.Errorf("ensure %s: %s: %w", what, res.stderr, ErrInvalid)
}

// DeleteRule implements Interface.
func (r *runner) DeleteRule(table Table, chain string, rule ...string) error {
	what := fmt.Sprintf("%s rule %q in %s chain %s", r.family, formatRule(rule), table, chain)
	res, err := r.ruleCommand("-C", table, chain, rule)
	switch {
	case err != nil:
		return fmt.Errorf("delete %s: %w", what, err)
	case res.exitCode == exitOtherProblem:
		return nil // not there (or no such chain): nothing to delete
	case res.exitCode == exitParameterProblem:
		return fmt.Errorf("delete %s: %s: %w", what, res.stderr, ErrInvalid)
	case res.exitCode != 0:
		return fmt.Errorf("delete %s: check: %s", what, res.stderr)
	}
	res, err = r.ruleCommand("-D", table, chain, rule)
	switch {
	case err != nil:
		return fmt.Errorf("delete %s: %w", what, err)
	case res.exitCode != 0:
		return fmt.Errorf("delete %s: %s", what, res.stderr)
	}
	return nil
}

func (r *runner) chainExists(table Table, chain string) (bool, error) {
	save, err := r.Save(table)
	if err != nil {
		return false, err
	}
	return bytes.Contains(save, []byte("\n:"+chain+" ")), nil
}
