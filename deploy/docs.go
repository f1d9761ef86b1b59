package deploy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ipvsproxy/ipvsproxy/internal/doctable"
	rbacv1 "k8s.io/api/rbac/v1"
)

// RBACRule is one (API group, resource, verb) triple of a ClusterRole; "" is
// the core group.
type RBACRule struct {
	APIGroup, Resource, Verb string
}

func (r RBACRule) String() string {
	return fmt.Sprintf("(apiGroup %q, resource %s, verb %s)", r.APIGroup, r.Resource, r.Verb)
}

// ExpandRules flattens a ClusterRole into triples. Wildcards, resourceNames
// and nonResourceURLs are refused: a least-privilege role has none, and the
// docs table could not state a reason for them row by row.
func ExpandRules(role *rbacv1.ClusterRole) ([]RBACRule, error) {
	var out []RBACRule
	for i, rule := range role.Rules {
		if len(rule.ResourceNames) > 0 || len(rule.NonResourceURLs) > 0 {
			return nil, fmt.Errorf("ClusterRole %s rule %d: resourceNames and nonResourceURLs are not expected", role.Name, i)
		}
		for _, g := range rule.APIGroups {
			for _, res := range rule.Resources {
				for _, v := range rule.Verbs {
					if g == "*" || res == "*" || v == "*" {
						return nil, fmt.Errorf("ClusterRole %s rule %d: wildcard in %q/%q/%q", role.Name, i, g, res, v)
					}
					out = append(out, RBACRule{APIGroup: g, Resource: res, Verb: v})
				}
			}
		}
	}
	return out, nil
}

// ruleOfRow is the rule of a row of docs/rbac.md's tables, where the core
// group is written `""`.
func ruleOfRow(row map[string]string) RBACRule {
	group := row["apiGroup"]
	if group == `""` {
		group = ""
	}
	return RBACRule{APIGroup: group, Resource: row["resource"], Verb: row["verb"]}
}

// DocumentedRBAC reads the rules table of docs/rbac.md (columns apiGroup,
// resource, verb, reason) and returns each rule with its reason. A row
// without a reason, or a rule listed twice, is an error.
func DocumentedRBAC(path string) (map[RBACRule]string, error) {
	rows, err := readTable(path, "apiGroup", "resource", "verb", "reason")
	if err != nil {
		return nil, err
	}
	out := map[RBACRule]string{}
	for _, row := range rows {
		rule := ruleOfRow(row)
		if rule.Resource == "" || rule.Verb == "" {
			return nil, fmt.Errorf("%s: row %v has no resource or verb", path, row)
		}
		if row["reason"] == "" {
			return nil, fmt.Errorf("%s: %s has no reason", path, rule)
		}
		if _, dup := out[rule]; dup {
			return nil, fmt.Errorf("%s: %s listed twice", path, rule)
		}
		out[rule] = row["reason"]
	}
	return out, nil
}

// CompareRBAC reports every rule granted without a documented reason and
// every documented rule that is not granted.
func CompareRBAC(granted []RBACRule, documented map[RBACRule]string) error {
	var problems []string
	seen := map[RBACRule]bool{}
	for _, r := range granted {
		seen[r] = true
		if _, ok := documented[r]; !ok {
			problems = append(problems, fmt.Sprintf("granted without a reason in docs/rbac.md: %s", r))
		}
	}
	for r := range documented {
		if !seen[r] {
			problems = append(problems, fmt.Sprintf("documented but not granted: %s", r))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	slices.Sort(problems)
	return fmt.Errorf("ClusterRole and docs/rbac.md disagree:\n  %s", strings.Join(problems, "\n  "))
}

// EnvVarForFlag is the environment variable every flag of ipvsproxy also
// reads: --ipvs-sync-period -> IPVSPROXY_IPVS_SYNC_PERIOD.
func EnvVarForFlag(flag string) string {
	name := strings.TrimPrefix(flag, "--")
	return "IPVSPROXY_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// DocumentedFlags reads the flag table of docs/migrate-from-kube-proxy.md
// (columns "kube-proxy flag", "ipvsproxy flag", "environment variable",
// "notes") and returns each ipvsproxy flag with its environment variable. A
// variable that does not follow EnvVarForFlag is an error, so the table
// cannot promise a name the CLI does not read.
func DocumentedFlags(path string) (map[string]string, error) {
	rows, err := readTable(path, "kube-proxy flag", "ipvsproxy flag", "environment variable", "notes")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, row := range rows {
		flag, env := row["ipvsproxy flag"], row["environment variable"]
		if !strings.HasPrefix(flag, "--") {
			return nil, fmt.Errorf("%s: %q is not a flag", path, flag)
		}
		if want := EnvVarForFlag(flag); env != want {
			return nil, fmt.Errorf("%s: flag %s documents variable %q, the CLI reads %q", path, flag, env, want)
		}
		if _, dup := out[flag]; dup {
			return nil, fmt.Errorf("%s: flag %s listed twice", path, flag)
		}
		out[flag] = env
	}
	return out, nil
}

// readTable returns the rows of the one Markdown table in path whose header
// is exactly columns, each row keyed by column, with the cells' code
// backticks removed.
// readTable reads the docs table with these columns, its cells without
// backticks.
func readTable(path string, columns ...string) ([]map[string]string, error) {
	rows, err := doctable.Read(path, columns...)
	for _, row := range rows {
		for c, cell := range row {
			row[c] = strings.Trim(cell, "`")
		}
	}
	return rows, err
}
