package ipvsproxy

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The model (this package), the names it takes from internal/owned, the
// iptables rules with their tracer (internal/rules) and the snapshot they
// trace (internal/snapshot) make no kernel call: the writer,
// internal/proxier, is the only one. This test
// says so from the source itself, without the go tool, so it runs in the VM
// with the other test binaries too.

const module = "github.com/ipvsproxy/ipvsproxy/"

// pureDirs are the packages held pure, relative to this directory, and
// pureImports the same packages as the model imports them.
var (
	pureDirs    = []string{".", "../internal/owned", "../internal/rules", "../internal/snapshot"}
	pureImports = []string{"ipvsproxy", "internal/owned", "internal/rules", "internal/snapshot"}
)

// valueTypePackages are the kernel adapters whose value types and constants
// the model uses (a virtual server key, an ipset entry, a conntrack filter);
// anything else of theirs may reach the kernel (an Interface, a
// constructor, a Fake), except the pure functions and read-only variables
// listed.
var valueTypePackages = map[string][]string{
	"internal/kernel/ipvs":      {"ParseSchedulerFlags", "StockSchedulers"},
	"ipset":                     {"NewEntryMap", "EntriesNotIn"},
	"internal/kernel/iptables":  {"SavedRules"},
	"conntrack":                 nil,
	"internal/kernel/listeners": nil,
}

// allowedExternal are the modules outside the standard library the model may
// import: Kubernetes types and the informer cache's tombstone type.
var allowedExternal = []string{"k8s.io/api/", "k8s.io/apimachinery/", "k8s.io/client-go/tools/cache", "k8s.io/klog/v2"}

// forbiddenStd are the standard packages that reach the kernel, a process
// or the network.
var forbiddenStd = []string{"os", "os/exec", "os/signal", "os/user", "syscall", "net", "net/http", "unsafe", "runtime", "runtime/cgo", "plugin"}

func TestModelMakesNoKernelCalls(t *testing.T) {
	for _, dir := range pureDirs {
		for _, problem := range kernelReach(t, dir) {
			t.Error(problem)
		}
	}
}

// kernelReach lists what in the non-test files of dir could reach the
// kernel: a forbidden import, or a name of an adapter that is no value type,
// constant or listed pure function.
func kernelReach(t *testing.T, dir string) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := parseDir(fset, dir)
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	adapters := map[string]map[string]bool{} // package -> its names the model may use
	for _, f := range files {
		name := fset.Position(f.Pos()).Filename
		local := map[string]string{} // import name in this file -> adapter package
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			rel, ours := strings.CutPrefix(path, module)
			switch {
			case ours && slices.Contains(pureImports, rel):
			case ours && hasKey(valueTypePackages, rel):
				if adapters[rel] == nil {
					adapters[rel] = valueNames(t, filepath.Join(dir, moduleRoot(t, dir), rel), valueTypePackages[rel])
				}
				as := rel[strings.LastIndex(rel, "/")+1:]
				if imp.Name != nil {
					as = imp.Name.Name
				}
				local[as] = rel
			case ours:
				problems = append(problems, name+": imports "+path+", which is neither pure nor a kernel adapter's value types")
			case !strings.Contains(strings.Split(path, "/")[0], "."):
				if slices.Contains(forbiddenStd, path) {
					problems = append(problems, name+": imports "+path)
				}
			case !slices.ContainsFunc(allowedExternal, func(p string) bool { return strings.HasPrefix(path, p) }):
				problems = append(problems, name+": imports "+path)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			x, ok := sel.X.(*ast.Ident)
			if !ok || x.Obj != nil { // x.Obj set: a local name, not a package
				return true
			}
			if pkg, ok := local[x.Name]; ok && !adapters[pkg][sel.Sel.Name] {
				problems = append(problems, fset.Position(sel.Pos()).String()+": uses "+pkg+"."+sel.Sel.Name+", which is no value type, constant or pure function of the adapter")
			}
			return true
		})
	}
	return problems
}

func hasKey(m map[string][]string, k string) bool { _, ok := m[k]; return ok }

// valueNames lists the names of the adapter in dir that the model may use:
// its constants, its types that are not interfaces or fakes, and the
// functions and variables listed as pure.
func valueNames(t *testing.T, dir string, pure []string) map[string]bool {
	t.Helper()
	fset := token.NewFileSet()
	files, err := parseDir(fset, dir)
	if err != nil {
		t.Fatal(err)
	}
	ok := map[string]bool{}
	for _, name := range pure {
		ok[name] = true
	}
	for _, f := range files {
		for _, d := range f.Decls {
			g, isGen := d.(*ast.GenDecl)
			if !isGen {
				continue
			}
			for _, s := range g.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					_, isInterface := s.Type.(*ast.InterfaceType)
					if !isInterface && !strings.HasPrefix(s.Name.Name, "Fake") {
						ok[s.Name.Name] = true
					}
				case *ast.ValueSpec:
					if g.Tok == token.CONST {
						for _, n := range s.Names {
							ok[n.Name] = true
						}
					}
				}
			}
		}
	}
	return ok
}

// parseDir parses the non-test Go files of dir.
func parseDir(fset *token.FileSet, dir string) ([]*ast.File, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// moduleRoot is the path from dir to the module's root.
func moduleRoot(t *testing.T, dir string) string {
	t.Helper()
	up := "."
	for range 5 {
		if _, err := os.Stat(filepath.Join(dir, up, "go.mod")); err == nil {
			return up
		}
		up = filepath.Join(up, "..")
	}
	t.Fatalf("no go.mod above %s", dir)
	return ""
}
