package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// The rule for where an algorithm's arithmetic is written. A unit is a Go
// function, the methods of one Go type together (a state type may compute
// in one method and compare in another), or a whole Lua script. A unit
// writes algorithm A's arithmetic when both hold:
//
//   - it is A's: a Lua script named after A (gcra.lua), or a Go function
//     whose name names A, or a type whose name, methods' names or the first
//     sentence of whose doc comment names A, as algorithm names are matched
//     elsewhere in this command (slidingWindow; "windowState is
//     fixed_window, or sliding_window's two counters"). Other doc text does
//     not count: it often mentions algorithms the code only passes on;
//   - it decides: its code, comments aside, both computes (+ - * / %) and
//     compares (< <= > >=), the shape of every admission test, such as
//     units+cost > rate or (cur+cost)·P + prev·(P−e) ≤ R·P.
//
// A file counts once per algorithm however many of its units do. The rule
// is about what a reader must change to change an algorithm's formula: a
// table entry or a switch that only dispatches on an algorithm does not
// compute, and a helper that computes for no named algorithm is shared.

// arithmeticAt is one algorithm and the files its arithmetic is written in.
type arithmeticAt struct {
	algorithm limiter.Algorithm
	files     []string
}

// arithmeticPlaces applies the rule to the Go and Lua files, one entry per
// algorithm in the table's order.
func arithmeticPlaces(goFiles, luaFiles []sourceFile) ([]arithmeticAt, error) {
	by := map[limiter.Algorithm]map[string]bool{}
	add := func(a limiter.Algorithm, file string) {
		if by[a] == nil {
			by[a] = map[string]bool{}
		}
		by[a][file] = true
	}
	for _, f := range goFiles {
		algs, err := goArithmetic(f)
		if err != nil {
			return nil, err
		}
		for _, a := range algs {
			add(a, f.path)
		}
	}
	for _, f := range luaFiles {
		a, ok := luaAlgorithm(f.path)
		if ok && luaDecides(f.content) {
			add(a, f.path)
		}
	}
	var out []arithmeticAt
	for _, a := range limiter.AllAlgorithms() {
		at := arithmeticAt{algorithm: a}
		for file := range by[a] {
			at.files = append(at.files, file)
		}
		sort.Strings(at.files)
		out = append(out, at)
	}
	return out, nil
}

// algorithmsNamed lists the algorithms that text names.
func algorithmsNamed(text string) []limiter.Algorithm {
	n := normalise(text)
	var out []limiter.Algorithm
	for _, a := range limiter.AllAlgorithms() {
		if strings.Contains(n, normalise(string(a))) {
			out = append(out, a)
		}
	}
	return out
}

// goArithmetic lists the algorithms whose arithmetic some function of the
// Go file writes.
func goArithmetic(f sourceFile) ([]limiter.Algorithm, error) {
	fset := token.NewFileSet()
	parsed, err := parser.ParseFile(fset, f.path, f.content, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	typeDoc := map[string]string{}
	for _, d := range parsed.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.TYPE {
			continue
		}
		for _, s := range g.Specs {
			ts := s.(*ast.TypeSpec)
			doc := ts.Doc
			if doc == nil && len(g.Specs) == 1 {
				doc = g.Doc
			}
			typeDoc[ts.Name.Name] = ts.Name.Name + " " + firstSentence(doc.Text())
		}
	}
	// A type's methods are one unit: a state type may compute in one
	// method and compare in another.
	type unit struct {
		names              string
		computes, compares bool
	}
	units := map[string]*unit{}
	for i, d := range parsed.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		id, names := fmt.Sprint("func ", i), fn.Name.Name
		if fn.Recv != nil && len(fn.Recv.List) == 1 {
			recv := receiverName(fn.Recv.List[0].Type)
			id, names = "type "+recv, typeDoc[recv]
		}
		u := units[id]
		if u == nil {
			u = &unit{}
			units[id] = u
		}
		u.names += " " + names + " " + fn.Name.Name
		c, k := arithmeticIn(fn.Body)
		u.computes, u.compares = u.computes || c, u.compares || k
	}
	found := map[limiter.Algorithm]bool{}
	for _, u := range units {
		if u.computes && u.compares {
			for _, a := range algorithmsNamed(u.names) {
				found[a] = true
			}
		}
	}
	var out []limiter.Algorithm
	for _, a := range limiter.AllAlgorithms() {
		if found[a] {
			out = append(out, a)
		}
	}
	return out, nil
}

// firstSentence is text up to its first full stop followed by a space or
// the end.
func firstSentence(text string) string {
	text = strings.Join(strings.Fields(text), " ")
	if i := strings.Index(text+" ", ". "); i >= 0 {
		return text[:i]
	}
	return text
}

// receiverName is the name of a receiver's type: T for T, *T, T[P] and *T[P].
func receiverName(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}

// arithmeticIn reports whether the body computes (+ - * / %) and whether
// it compares (< <= > >=).
func arithmeticIn(body *ast.BlockStmt) (computes, compares bool) {
	ast.Inspect(body, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.BinaryExpr:
			switch x.Op {
			case token.ADD, token.SUB, token.MUL, token.QUO, token.REM:
				computes = true
			case token.LSS, token.LEQ, token.GTR, token.GEQ:
				compares = true
			}
		case *ast.AssignStmt:
			switch x.Tok {
			case token.ADD_ASSIGN, token.SUB_ASSIGN, token.MUL_ASSIGN, token.QUO_ASSIGN, token.REM_ASSIGN:
				computes = true
			}
		}
		return !(computes && compares)
	})
	return computes, compares
}

// luaAlgorithm is the algorithm a Lua script is named after.
func luaAlgorithm(file string) (limiter.Algorithm, bool) {
	base := strings.TrimSuffix(path.Base(file), ".lua")
	for _, a := range limiter.AllAlgorithms() {
		if string(a) == base {
			return a, true
		}
	}
	return "", false
}

var (
	luaComputes = regexp.MustCompile(`[\w)\]]\s*[-+*/%]\s*[\w(]`)
	luaCompares = regexp.MustCompile(`[<>]`)
)

// luaDecides reports whether a Lua script's code, comments aside, both
// computes and compares.
func luaDecides(src []byte) bool {
	code := luaComment.ReplaceAll(src, nil)
	return luaComputes.Match(code) && luaCompares.Match(code)
}
