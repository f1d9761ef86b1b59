package iptables

import "strings"

// SavedRules splits the output of Save into chains: for each chain declared
// in it, the rule lines in order, exactly as printed ("-A CHAIN ..."); a
// declared chain without rules maps to an empty slice, an undeclared chain
// is absent. The proxier compares these lines with the ones it would write
// for the chains it owns to skip a restore when nothing changed; that only
// works for rules written in canonical form (rulefmt.go).
func SavedRules(save []byte) map[string][]string {
	chains := map[string][]string{}
	for _, line := range strings.Split(string(save), "\n") {
		switch {
		case strings.HasPrefix(line, ":"):
			if name, _, ok := strings.Cut(line[1:], " "); ok {
				if _, seen := chains[name]; !seen {
					chains[name] = []string{}
				}
			}
		case strings.HasPrefix(line, "-A "):
			rest := line[len("-A "):]
			name, _, _ := strings.Cut(rest, " ")
			chains[name] = append(chains[name], line)
		}
	}
	return chains
}

// SavedLine is the line iptables-save prints for rule appended to chain,
// when rule is written in the canonical form (rulefmt.go): what to look for
// in SavedRules to know a rule is there without running iptables -C.
func SavedLine(chain string, rule []string) string {
	return "-A " + chain + " " + RuleText(rule)
}

// RuleText is rule in the canonical form, as one iptables-restore line
// after "-A CHAIN " or "-I CHAIN N ".
func RuleText(rule []string) string { return formatRule(rule) }

// JumpsTo reports whether any of a chain's saved lines jumps to target,
// however its matches are written.
func JumpsTo(lines []string, target string) bool {
	for _, line := range lines {
		fields := strings.Fields(line)
		for i := 0; i+1 < len(fields); i++ {
			if (fields[i] == "-j" || fields[i] == "-g") && fields[i+1] == target {
				return true
			}
		}
	}
	return false
}
