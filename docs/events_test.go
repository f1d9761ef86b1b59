package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/doctable"
)

// eventReason is what an Event's reason looks like: one CamelCase word.
var eventReason = regexp.MustCompile(`^[A-Z][A-Za-z]*[a-z][A-Za-z]*$`)

// emittedReasons reads the product's Go source (the main module, tests
// left out) and returns every Event reason it can post, with where each is
// defined. Reasons are constants named Reason… or Event…; a call of
// Event/Eventf whose reason argument is neither such a constant nor a
// problem's Reason field (which only those constants fill) is reported, so a
// reason cannot hide in a string literal.
func emittedReasons(t *testing.T) map[string]string {
	t.Helper()
	root := ".."
	fset := token.NewFileSet()
	reasons := map[string]string{}
	var files []*ast.File
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root {
				// Other modules (e2e, benchmarks) post no Event of the daemon.
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir
				}
			}
			if name := d.Name(); strings.HasPrefix(name, ".") && path != root || name == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		files = append(files, f)
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !strings.HasPrefix(name.Name, "Reason") && !strings.HasPrefix(name.Name, "Event") || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					v, _ := strconv.Unquote(lit.Value)
					if eventReason.MatchString(v) {
						reasons[v] = fset.Position(name.Pos()).String()
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Every Event posted names its reason through one of those constants.
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "Event" && sel.Sel.Name != "Eventf") || len(call.Args) < 3 {
				return true
			}
			if !strings.Contains(exprText(call.Args[1]), "EventType") {
				return true // not a Kubernetes Event call
			}
			switch arg := call.Args[2].(type) {
			case *ast.Ident:
				if !strings.HasPrefix(arg.Name, "Reason") && !strings.HasPrefix(arg.Name, "Event") {
					t.Errorf("%s: Event reason %s is not a Reason… or Event… constant", fset.Position(arg.Pos()), arg.Name)
				}
			case *ast.SelectorExpr:
				if arg.Sel.Name != "Reason" && !strings.HasPrefix(arg.Sel.Name, "Reason") && !strings.HasPrefix(arg.Sel.Name, "Event") {
					t.Errorf("%s: Event reason %s is not a Reason… or Event… constant", fset.Position(arg.Pos()), exprText(arg))
				}
			default:
				t.Errorf("%s: Event reason %s is not a named constant", fset.Position(call.Args[2].Pos()), exprText(call.Args[2]))
			}
			return true
		})
	}
	return reasons
}

func exprText(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return exprText(e.X) + "." + e.Sel.Name
	case *ast.BasicLit:
		return e.Value
	}
	return "an expression"
}

// TestEventsDocListsEveryReason holds docs/events.md's table to the reasons
// the code can post: each one has a row, and each row is a reason the code
// posts.
func TestEventsDocListsEveryReason(t *testing.T) {
	emitted := emittedReasons(t)
	if len(emitted) < 5 {
		t.Fatalf("found only %d Event reasons in the source: %v", len(emitted), emitted)
	}
	rows, err := doctable.Read("events.md", "reason", "object", "posted by", "when", "what to do")
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, row := range rows {
		names := doctable.Code(row["reason"])
		if len(names) != 1 {
			t.Fatalf("events.md: row %q names %d reasons, want one in backticks", row["reason"], len(names))
		}
		if row["when"] == "" || row["what to do"] == "" {
			t.Errorf("events.md: %s has an empty cell", names[0])
		}
		documented = append(documented, names[0])
		if _, ok := emitted[names[0]]; !ok {
			t.Errorf("events.md lists %s, which no code posts", names[0])
		}
	}
	var missing []string
	for reason, where := range emitted {
		if !slices.Contains(documented, reason) {
			missing = append(missing, reason+" ("+where+")")
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("Event reason %s has no row in docs/events.md", m)
	}
}
