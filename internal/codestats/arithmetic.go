package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
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
//     compares (< <= > >=, or clamps with min and max), the shape of every
//     admission test and settle, such as units+cost > rate,
//     (cur+cost)·P + prev·(P−e) ≤ R·P or min(units+delta, 2·rate).
//
// Settles are often written for every algorithm at once, so two more units
// count: a case of a Go switch naming algorithms (default: those no other
// case names) that also assigns, as memShard.adjust's (a case that only
// checks, as a test's expectation, moves no state); and a Lua script named
// after none whose leading comment's first sentence names some
// ("token_bucket's and leaky_bucket's settle"). A script is A's when its
// name contains A's (gcra_settle.lua).
//
// A file counts once per algorithm however many of its units do. The rule
// is about what a reader must change to change an algorithm's formula: a
// table entry or a switch that only dispatches on an algorithm does not
// compute, and a helper that computes for no named algorithm is shared.

// DefaultArithmeticAside are the files whose arithmetic of an algorithm is
// listed apart, each with why (AsideWhy): limiter/calendar.go finds where a
// calendar's windows start and end in a zone's dates, which both stores
// share (Lua knows no zones, so the Redis scripts are given the starts); it
// is fixed_window's boundaries, not its count, which is written in its own
// two files. rlqs/filtersim/stream.go is Envoy's token bucket, not ours: the
// test client of the quota service enforces its assignments as Envoy's
// filter does (whole seconds, the old bucket's share of tokens carried into
// a new one), which rl-exporter's token_bucket must not.
var DefaultArithmeticAside = []string{"limiter/calendar.go", "rlqs/filtersim/stream.go"}

// AsideWhy says, per file of DefaultArithmeticAside, why it is listed apart.
var AsideWhy = map[string]string{
	"limiter/calendar.go":      "calendar boundaries, shared by both stores",
	"rlqs/filtersim/stream.go": "Envoy's token bucket, simulated by the quota service's test client",
}

// arithmeticAt is one algorithm and the files its arithmetic is written
// in, those set aside apart.
type arithmeticAt struct {
	algorithm limiter.Algorithm
	files     []string
	aside     []string
}

// arithmeticPlaces applies the rule to the Go and Lua files, one entry per
// algorithm in the table's order; a file of aside is listed in aside.
func arithmeticPlaces(goFiles, luaFiles []sourceFile, aside []string) ([]arithmeticAt, error) {
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
		if !luaDecides(f.content) {
			continue
		}
		for _, a := range luaAlgorithms(f) {
			add(a, f.path)
		}
	}
	var out []arithmeticAt
	for _, a := range limiter.AllAlgorithms() {
		at := arithmeticAt{algorithm: a}
		for file := range by[a] {
			if slices.Contains(aside, file) {
				at.aside = append(at.aside, file)
			} else {
				at.files = append(at.files, file)
			}
		}
		sort.Strings(at.files)
		sort.Strings(at.aside)
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
	for _, a := range casesArithmetic(parsed) {
		found[a] = true
	}
	var out []limiter.Algorithm
	for _, a := range limiter.AllAlgorithms() {
		if found[a] {
			out = append(out, a)
		}
	}
	return out, nil
}

// casesArithmetic lists the algorithms whose arithmetic a case of a switch
// on the algorithm in the file writes (see the rule above).
func casesArithmetic(file *ast.File) []limiter.Algorithm {
	var out []limiter.Algorithm
	ast.Inspect(file, func(n ast.Node) bool {
		sw, ok := n.(*ast.SwitchStmt)
		if !ok {
			return true
		}
		named := map[limiter.Algorithm]bool{}
		var dflt *ast.CaseClause
		var clauses []*ast.CaseClause
		for _, st := range sw.Body.List {
			cc := st.(*ast.CaseClause)
			if cc.List == nil {
				dflt = cc
				continue
			}
			clauses = append(clauses, cc)
			for _, a := range algorithmsNamed(caseNames(cc)) {
				named[a] = true
			}
		}
		if len(named) == 0 {
			return true
		}
		decides := func(cc *ast.CaseClause) bool {
			body := &ast.BlockStmt{List: cc.Body}
			c, k := arithmeticIn(body)
			return c && k && assigns(body)
		}
		for _, cc := range clauses {
			if decides(cc) {
				out = append(out, algorithmsNamed(caseNames(cc))...)
			}
		}
		if dflt != nil && decides(dflt) {
			for _, a := range limiter.AllAlgorithms() {
				if !named[a] {
					out = append(out, a)
				}
			}
		}
		return true
	})
	return out
}

// assigns reports whether a body assigns anything: it moves state.
func assigns(body *ast.BlockStmt) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		switch n.(type) {
		case *ast.AssignStmt, *ast.IncDecStmt:
			found = true
		}
		return !found
	})
	return found
}

// caseNames is the identifiers and strings of a case's expressions.
func caseNames(cc *ast.CaseClause) string {
	var b strings.Builder
	for _, e := range cc.List {
		ast.Inspect(e, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.Ident:
				b.WriteString(x.Name + " ")
			case *ast.BasicLit:
				if v, err := strconv.Unquote(x.Value); err == nil && x.Kind == token.STRING {
					b.WriteString(v + " ")
				}
			}
			return true
		})
	}
	return b.String()
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
		case *ast.CallExpr:
			if clamps(x.Fun) {
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

// clamps reports whether a call is min, max, math.Min or math.Max.
func clamps(fun ast.Expr) bool {
	switch f := fun.(type) {
	case *ast.Ident:
		return f.Name == "min" || f.Name == "max"
	case *ast.SelectorExpr:
		x, ok := f.X.(*ast.Ident)
		return ok && x.Name == "math" && (f.Sel.Name == "Min" || f.Sel.Name == "Max")
	}
	return false
}

// luaAlgorithms is the algorithms a Lua script is of: those its name
// names (gcra.lua, gcra_settle.lua), else those the first sentence of its
// leading comment names (bucket_settle.lua).
func luaAlgorithms(f sourceFile) []limiter.Algorithm {
	if named := algorithmsNamed(strings.TrimSuffix(path.Base(f.path), ".lua")); len(named) > 0 {
		return named
	}
	var lead []string
	for _, line := range strings.Split(string(f.content), "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "--")
		if !ok {
			break
		}
		lead = append(lead, rest)
	}
	return algorithmsNamed(firstSentence(strings.Join(lead, " ")))
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
