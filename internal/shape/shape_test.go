// Package shape holds a test of the product's code shape: no function in
// the product's packages longer than a reader can hold in mind.
package shape

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// Limits for functions in the product's packages (not their tests).
const (
	maxLines      = 60 // from the func line to the closing brace
	maxComplexity = 20 // gocyclo's count: 1 + if, for, range, case, &&, ||
)

// tooling lists directories (from the module root) held to no limit: the
// chaos suite, benchmarks, simulations and test helpers read as scripts.
var tooling = []string{
	"cmd/ringbench", "cmd/ringchaos", "internal/chaos", "internal/testutil",
	"internal/ring/ringsim", "internal/election/electsim", "internal/store/storetest",
	"internal/shape",
}

// complexity is gocyclo's cyclomatic complexity of fn.
func complexity(fn *ast.FuncDecl) int {
	c := 1
	ast.Inspect(fn, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt:
			c++
		case *ast.CaseClause:
			if n.List != nil {
				c++
			}
		case *ast.CommClause:
			if n.Comm != nil {
				c++
			}
		case *ast.BinaryExpr:
			if n.Op == token.LAND || n.Op == token.LOR {
				c++
			}
		}
		return true
	})
	return c
}

func TestFunctionsStaySmall(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var over []string
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			for _, skip := range tooling {
				if rel == skip {
					return filepath.SkipDir
				}
			}
			if strings.HasPrefix(d.Name(), ".") && rel != "." {
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
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			lines := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			cc := complexity(fn)
			if lines > maxLines || cc > maxComplexity {
				over = append(over, fmt.Sprintf("%s:%d %s: %d lines, complexity %d",
					rel, fset.Position(fn.Pos()).Line, fn.Name.Name, lines, cc))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range over {
		t.Error(o)
	}
	if len(over) > 0 {
		t.Logf("%d functions over %d lines or complexity %d: split them", len(over), maxLines, maxComplexity)
	}
}
