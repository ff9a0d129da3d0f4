package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path"
	"sort"
	"strconv"
)

// sleepCount is the number of time.Sleep calls in one package's tests.
type sleepCount struct {
	pkg   string
	calls int
}

// testSleeps counts the calls of time.Sleep (under whatever name the file
// imports package time) in test files, per package (directory), most
// first.
func testSleeps(tests []sourceFile) ([]sleepCount, error) {
	by := map[string]int{}
	fset := token.NewFileSet()
	for _, f := range tests {
		parsed, err := parser.ParseFile(fset, f.path, f.content, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		name := importName(parsed, "time")
		if name == "" {
			continue
		}
		ast.Inspect(parsed, func(n ast.Node) bool {
			if isCall(n, name, "Sleep") {
				by[path.Dir(f.path)]++
			}
			return true
		})
	}
	var out []sleepCount
	for pkg, n := range by {
		out = append(out, sleepCount{pkg, n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].calls != out[j].calls {
			return out[i].calls > out[j].calls
		}
		return out[i].pkg < out[j].pkg
	})
	return out, nil
}

// importName is the name the file refers to the package imported from
// importPath by, or "" when it does not import it (or imports it blank or
// into the file's scope).
func importName(f *ast.File, importPath string) string {
	for _, imp := range f.Imports {
		p, err := strconv.Unquote(imp.Path.Value)
		if err != nil || p != importPath {
			continue
		}
		if imp.Name == nil {
			return path.Base(p)
		}
		if imp.Name.Name == "_" || imp.Name.Name == "." {
			return ""
		}
		return imp.Name.Name
	}
	return ""
}

// isCall reports whether n is a call of pkg.fn.
func isCall(n ast.Node, pkg, fn string) bool {
	call, ok := n.(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != fn {
		return false
	}
	x, ok := sel.X.(*ast.Ident)
	return ok && x.Name == pkg
}
