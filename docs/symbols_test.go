package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// declared maps each package name of the main module to the exported names
// declared in it: top-level identifiers, and the methods and fields of its
// types (a comment may name either).
func declared(t *testing.T, root string) (map[string]map[string]bool, []*ast.File, *token.FileSet) {
	t.Helper()
	fset := token.NewFileSet()
	names := map[string]map[string]bool{}
	var files []*ast.File
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // another module
				}
			}
			if name := d.Name(); path != root && strings.HasPrefix(name, ".") || name == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		files = append(files, f)
		if strings.HasSuffix(path, "_test.go") {
			return nil
		}
		pkg := names[f.Name.Name]
		if pkg == nil {
			pkg = map[string]bool{}
			names[f.Name.Name] = pkg
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				pkg[n.Name.Name] = true
			case *ast.TypeSpec:
				pkg[n.Name.Name] = true
			case *ast.ValueSpec:
				for _, id := range n.Names {
					pkg[id.Name] = true
				}
			case *ast.Field:
				for _, id := range n.Names {
					pkg[id.Name] = true
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names, files, fset
}

// ourPackage matches a reference in prose to an exported name of one of the
// product's packages: ipvs.RealServerTable, healthcheck.ProxyHealth.CountResponses.
var ourPackage = regexp.MustCompile(`\b(ipvsproxy|ipvs|ipset|netif|iptables|conntrack|nftables|sysctl|listeners|inspect|metrics|healthcheck|proxier|rules|snapshot|owned|adapters|hostsetup|kubeproxyconfig|events|kubeapi|nldump|nodelock|doctable)\.([A-Z][A-Za-z0-9_]*)(?:\.([A-Z][A-Za-z0-9_]*))?`)

// TestCommentsNameExistingDeclarations fails on a comment of the main
// module that names a package's declaration the package does not have: a
// type or function that moved or was renamed leaves such comments behind.
func TestCommentsNameExistingDeclarations(t *testing.T) {
	names, files, fset := declared(t, "..")
	checked := 0
	for _, f := range files {
		for _, group := range f.Comments {
			for _, c := range group.List {
				for _, m := range ourPackage.FindAllStringSubmatch(c.Text, -1) {
					pkg := names[m[1]]
					if pkg == nil {
						continue
					}
					checked++
					if !pkg[m[2]] || m[3] != "" && !pkg[m[3]] {
						t.Errorf("%s: %s names %s, which package %s does not declare", fset.Position(c.Pos()), strings.TrimSpace(c.Text), m[0], m[1])
					}
				}
			}
		}
	}
	if checked < 10 {
		t.Fatalf("checked only %d references", checked)
	}
}
