package limiter_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"testing"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// Every Status the package declares is either StatusCanceled, counted apart, or in AllStatuses
// with an Index of its own: a status added without its place in the list would be counted
// nowhere.
func TestEveryDeclaredStatusHasItsOwnIndex(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "record.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var declared []limiter.Status
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Values) == 0 {
			return true
		}
		for i, name := range vs.Names {
			if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING && len(name.Name) > 6 && name.Name[:6] == "Status" {
				declared = append(declared, limiter.Status(lit.Value[1:len(lit.Value)-1]))
			}
		}
		return true
	})
	if len(declared) != limiter.NumStatuses+1 {
		t.Errorf("record.go declares %d statuses %v, want NumStatuses (%d) and canceled", len(declared), declared, limiter.NumStatuses)
	}
	seen := map[int]limiter.Status{}
	for _, s := range declared {
		i, ok := s.Index()
		if s == limiter.StatusCanceled {
			if ok {
				t.Errorf("canceled has index %d; it is counted apart", i)
			}
			continue
		}
		if !ok || i < 0 || i >= limiter.NumStatuses {
			t.Errorf("status %s has no index below NumStatuses (got %d, %v)", s, i, ok)
			continue
		}
		if other, dup := seen[i]; dup {
			t.Errorf("statuses %s and %s share index %d", s, other, i)
		}
		seen[i] = s
		if limiter.AllStatuses()[i] != s {
			t.Errorf("AllStatuses()[%d] = %s, want %s", i, limiter.AllStatuses()[i], s)
		}
	}
	if _, ok := limiter.Status("nope").Index(); ok {
		t.Error("an unknown status has an index")
	}
}
