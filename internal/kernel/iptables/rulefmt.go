package iptables

import (
	"fmt"
	"strings"
)

// Canonical rule form.
//
// iptables-save does not print a rule the way it was written; it prints what
// the kernel holds, rendered by each extension. The proxier compares the text
// it wants with what Save returns to skip a write when nothing changed, so
// callers must write rules in the form iptables-save prints. Found by
// experiment with iptables v1.8.9, identical for the legacy and the nft back
// end (TestAdapter's first case holds the Fake and both back ends to one
// golden text):
//
//   - The address and interface part comes first, in this order, each with
//     its "!" before the option: "! -s CIDR", "! -d CIDR", "-i IF", "-o IF",
//     "-p PROTO". Matches ("-m ...") follow in the order written, then "-j"
//     or "-g" and the target's options.
//   - Addresses carry a prefix length and are masked: "-d 192.0.2.1" prints
//     "-d 192.0.2.1/32", "-s 10.1.2.3/8" prints "-s 10.0.0.0/8", IPv6
//     "-d 2001:db8::1/128"; "-s 0.0.0.0/0" disappears.
//   - "-p 6" prints "-p tcp"; "-p tcp --dport 80" prints "-p tcp -m tcp
//     --dport 80" (the implicit match is named).
//   - "--comment TEXT" is printed bare when TEXT is non-empty and only
//     [A-Za-z0-9_-], otherwise in double quotes with '"', '\' and '\''
//     escaped by a backslash (libxtables xtables_save_string). "-m comment"
//     may repeat.
//   - "-m set --match-set NAME dst,dst", "-m mark --mark 0x4000/0x4000",
//     "-m mark ! --mark 0x4000/0x4000", "-m addrtype --dst-type LOCAL",
//     "-m conntrack --ctstate NEW" (several states: "RELATED,ESTABLISHED"
//     in the order written), "-j MASQUERADE --random-fully" print as written.
//   - "-j MARK --or-mark 0x4000" prints "-j MARK --set-xmark 0x4000/0x4000";
//     "--xor-mark 0x4000" prints "--set-xmark 0x4000/0x0"; "--set-mark 0x4000"
//     prints "--set-xmark 0x4000/0xffffffff".
//   - "-j REJECT" prints "-j REJECT --reject-with icmp-port-unreachable"
//     (IPv6: "icmp6-port-unreachable").
//   - "-m statistic --probability 0.5" prints "--probability 0.50000000000".
//
// Chains: built-in chains first in the kernel's order, then user chains
// sorted by name; rules grouped by chain in the same order, in rule order.
//
// An ipset named by "-m set" must exist in the kernel or the whole table
// block is refused; the Fake does not check sets.
//
// The Fake stores rules exactly as given and does none of these rewrites, so
// code that writes the canonical form sees the same Save output from the Fake
// and from the kernel.

// splitRuleLine splits one iptables-restore line into arguments the way
// iptables-restore does (xtables add_param_to_argv): blanks separate
// arguments, double quotes group, and inside quotes a backslash takes the
// next character literally. Single quotes are ordinary characters.
func splitRuleLine(line string) ([]string, error) {
	var (
		args     []string
		cur      strings.Builder
		inArg    bool
		inQuote  bool
		escaping bool
	)
	for _, c := range line {
		switch {
		case inQuote && escaping:
			cur.WriteRune(c)
			escaping = false
		case inQuote && c == '\\':
			escaping = true
		case inQuote && c == '"':
			// The closing quote ends the argument, even an empty one.
			inQuote = false
			args = append(args, cur.String())
			cur.Reset()
			inArg = false
		case inQuote:
			cur.WriteRune(c)
		case c == '"':
			inQuote, inArg = true, true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			if inArg {
				args = append(args, cur.String())
				cur.Reset()
				inArg = false
			}
		default:
			cur.WriteRune(c)
			inArg = true
		}
	}
	if inQuote {
		return nil, fmt.Errorf("unterminated quote")
	}
	if inArg {
		args = append(args, cur.String())
	}
	return args, nil
}

// formatRule renders rule arguments as iptables-save prints them: free text
// after --comment or --log-prefix through xtables_save_string, anything else
// bare unless it would not survive splitRuleLine.
func formatRule(args []string) string {
	var b strings.Builder
	for i, a := range args {
		if i > 0 {
			b.WriteByte(' ')
		}
		freeText := i > 0 && (args[i-1] == "--comment" || args[i-1] == "--log-prefix")
		if freeText && !bareSaveString(a) || !freeText && needsQuotes(a) {
			b.WriteString(quoteSaveString(a))
		} else {
			b.WriteString(a)
		}
	}
	return b.String()
}

// bareSaveString reports whether xtables_save_string prints s unquoted.
func bareSaveString(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func needsQuotes(s string) bool {
	return s == "" || strings.ContainsAny(s, " \t\n\r\"\\")
}

func quoteSaveString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range s {
		if c == '"' || c == '\\' || c == '\'' {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	b.WriteByte('"')
	return b.String()
}
