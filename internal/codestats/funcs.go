package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"sort"
)

// function is one function or method declaration and its length in lines,
// from the func keyword to the closing brace.
type function struct {
	name  string
	file  string
	line  int
	lines int
}

// longFunctions lists the declared functions longer than maxLines, longest
// first.
func longFunctions(files []sourceFile, maxLines int) ([]function, error) {
	fset := token.NewFileSet()
	var out []function
	for _, f := range files {
		parsed, err := parser.ParseFile(fset, f.path, f.content, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, decl := range parsed.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			start, end := fset.Position(fn.Pos()).Line, fset.Position(fn.End()).Line
			if n := end - start + 1; n > maxLines {
				out = append(out, function{name: funcName(fn), file: f.path, line: start, lines: n})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].lines > out[j].lines })
	return out, nil
}

// funcName is Name for a function and Type.Name for a method.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
			continue
		case *ast.IndexExpr:
			t = x.X
			continue
		case *ast.IndexListExpr:
			t = x.X
			continue
		case *ast.Ident:
			return x.Name + "." + fn.Name.Name
		}
		return fn.Name.Name
	}
}
