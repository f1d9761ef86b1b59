//go:build e2e

package suite

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The tests of the scenario table run on the host (`make unit`: go test
// -tags e2e -run TestScenarioTable); the scenarios themselves only in the VM.

var verdictName = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// allVerdicts maps every verdict of the table to its scenario.
func allVerdicts(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, sc := range slices.Concat(scenarios, byName) {
		if len(sc.verdicts) == 0 || sc.verdicts[0] != sc.name {
			t.Errorf("scenario %s: its first verdict must be its name (a selection names it so), not %v", sc.name, sc.verdicts)
		}
		for _, v := range sc.verdicts {
			if other, ok := out[v]; ok {
				t.Errorf("verdict %s is in scenarios %s and %s", v, other, sc.name)
			}
			out[v] = sc.name
		}
	}
	return out
}

// Every verdict is named by its behaviour in kebab case, once; an IPv6 half
// (NAME-ipv6, DualStep's) belongs to the scenario of its IPv4 half; every
// former name is taken for a verdict that exists.
func TestScenarioTableNames(t *testing.T) {
	verdicts := allVerdicts(t)
	for v, sc := range verdicts {
		if !verdictName.MatchString(v) {
			t.Errorf("verdict %q of %s: not a kebab-case name", v, sc)
		}
		if base, ok := strings.CutSuffix(v, "-ipv6"); ok && verdicts[base] != "" && verdicts[base] != sc {
			t.Errorf("verdict %s is in scenario %s, its IPv4 half %s in %s", v, sc, base, verdicts[base])
		}
	}
	for n, v := range formerNames {
		if verdicts[v] == "" {
			t.Errorf("former name %s stands for %q, no verdict of the table", n, v)
		}
	}
	last := scenarios[len(scenarios)-2:]
	if last[0].name != "restart-under-load" || last[1].name != "cleanup-leaves-nothing" {
		t.Errorf("the default order ends with %s, %s: restart-under-load and cleanup-leaves-nothing must end it (they stop the proxiers)", last[0].name, last[1].name)
	}
}

// Each Step and DualStep call names a verdict of its scenario's row: a
// string literal is checked here, a computed one when it runs (Step).
func TestScenarioTableHasEveryStep(t *testing.T) {
	verdicts := allVerdicts(t)
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	seen := 0
	for _, file := range files {
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Step" && sel.Sel.Name != "DualStep" {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			name, _ := strconv.Unquote(lit.Value)
			seen++
			want := []string{name}
			if sel.Sel.Name == "DualStep" {
				want = append(want, name+"-ipv6")
			}
			for _, v := range want {
				if verdicts[v] == "" {
					t.Errorf("%s: %s(%q): no verdict %s in scenarios_test.go", fset.Position(call.Pos()), sel.Sel.Name, name, v)
				}
			}
			return true
		})
	}
	if seen < len(scenarios) {
		t.Errorf("found %d Step calls with a literal name, fewer than the %d scenarios", seen, len(scenarios))
	}
}

// docs/testing.md's table of the e2e scenarios names every verdict of the
// table, and nothing else, in its first column.
func TestScenarioTableInTestingDoc(t *testing.T) {
	verdicts := allVerdicts(t)
	doc, err := os.ReadFile("../../docs/testing.md")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	inTable := false
	for _, line := range strings.Split(string(doc), "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			inTable = line == "## The e2e scenarios"
		case inTable && strings.HasPrefix(line, "| `"):
			first := strings.Split(line, "|")[1]
			for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(first, -1) {
				listed[m[1]] = true
			}
		}
	}
	if len(listed) == 0 {
		t.Fatal(`docs/testing.md has no table of scenarios under "## The e2e scenarios"`)
	}
	for v, sc := range verdicts {
		if !listed[v] {
			t.Errorf("docs/testing.md's scenario table lacks verdict %s (scenario %s)", v, sc)
		}
	}
	for v := range listed {
		if verdicts[v] == "" {
			t.Errorf("docs/testing.md's scenario table lists %s, no verdict of e2e/suite/scenarios_test.go", v)
		}
	}
}
