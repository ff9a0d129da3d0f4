package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path"
	"sort"
	"strconv"
	"strings"
)

// importedNames lists, sorted, the distinct exported names that the
// non-test files of package dir (and the packages under it) use from any
// package whose import path ends in "/"+from: what dir would lose if it
// stopped importing from.
func importedNames(files []sourceFile, dir, from string) ([]string, error) {
	seen := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		if path.Dir(f.path) != dir && !strings.HasPrefix(f.path, dir+"/") {
			continue
		}
		parsed, err := parser.ParseFile(fset, f.path, f.content, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, imp := range parsed.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil || !strings.HasSuffix(p, "/"+from) {
				continue
			}
			name := importName(parsed, p)
			ast.Inspect(parsed, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == name && name != "" {
					seen[sel.Sel.Name] = true
				}
				return true
			})
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}
