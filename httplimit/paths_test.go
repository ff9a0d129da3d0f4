package httplimit

import (
	"errors"
	"net/http"
	"net/url"
	"testing"

	"github.com/rl-exporter/rl-exporter/limiter"
)

func TestAPathIsReadInTheFormTheUpstreamReads(t *testing.T) {
	for _, c := range []struct {
		escaped, paths, want string // want "" : refused
	}{
		{"/a/b", "", "/a/b"},
		{"/", "", "/"},
		{"//a///b//", "", "/a/b/"},
		{"/a/./b/../c", "", "/a/c"},
		{"/a/b/..", "", "/a/"},
		{"/a/b/.", "", "/a/b/"},
		{"/../../a", "", "/a"},
		{"/a/..", "", "/"},
		{"/a/.b/..c/...", "", "/a/.b/..c/..."},
		{"/%2e%2E/a/%2e/b", "", "/a/b"},
		{"/%61%7E%2D/%c3%a9", "", "/a~-/%C3%A9"},
		{"/a%20b/%25", "", "/a%20b/%25"},
		{"/a%2Fb", "", ""},
		{"/a%5cb", "", ""},
		{"/a%2fb/..%2F..%2Fc", PathsDecode, "/c"},
		{"/a%5Cb", PathsDecode, "/a/b"},
		{"/a%2fb/../c", PathsKeep, "/c"},
		{"/x/..%2Fadmin/y", PathsKeep, "/x/..%2Fadmin/y"},
	} {
		ps := Paths{EscapedSlashes: c.paths}.WithDefaults()
		u, err := url.ParseRequestURI(c.escaped)
		if err != nil {
			t.Fatal(err)
		}
		err = ps.normalize(u)
		switch {
		case c.want == "":
			if !errors.Is(err, ErrEscapedSlash) {
				t.Errorf("%s (%s): %v, want ErrEscapedSlash", c.escaped, ps.EscapedSlashes, err)
			}
		case err != nil || u.EscapedPath() != c.want:
			t.Errorf("%s (%s): %q (%v), want %q", c.escaped, ps.EscapedSlashes, u.EscapedPath(), err, c.want)
		}
	}
}

func TestANormalPathIsLeftAloneWithoutAllocating(t *testing.T) {
	ps := Paths{}.WithDefaults()
	r, _ := http.NewRequest("GET", "http://x/api/v1/orders/42.json", nil)
	if n := testing.AllocsPerRun(100, func() {
		if got, err := ps.request(r); got != r || err != nil {
			t.Fatalf("request %v, %v: want r itself", got, err)
		}
	}); n != 0 {
		t.Errorf("%v allocations for a normal path, want 0", n)
	}
}

// A trailing slash matches what the path without it matches unless a pattern names the path
// with its slash; subtree patterns and {$} keep their meaning.
func TestATrailingSlashMatchesThePathWithoutItUnlessAPatternNamesIt(t *testing.T) {
	policy := func(paths Paths) *Policy {
		lim := map[string]limiter.Limit{"default": limiter.PerMinute(limiter.GCRA, 5)}
		p, err := NewPolicy(PolicyConfig{
			Store: limiter.NewMemoryStore(limiter.MemoryConfig{}),
			Classes: []Class{
				{Name: "exact", Routes: []string{"/a/b", "GET /Users/{ID}"}, Limits: lim},
				{Name: "tree", Routes: []string{"/a/", "/d/e/"}, Limits: lim},
				{Name: "dollar", Routes: []string{"/c/{$}"}, Limits: lim},
				{Name: "default", Limits: lim},
			},
			DefaultClass: "default",
			Paths:        paths,
		})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	ignore, strict, folded := policy(Paths{}), policy(Paths{TrailingSlash: PathsStrict}), policy(Paths{Case: PathsInsensitive})
	for _, c := range []struct {
		p          *Policy
		path, want string
	}{
		{ignore, "/a/b/", "/a/b"},
		{strict, "/a/b/", "/a/"},
		{ignore, "/a/", "/a/"},
		{ignore, "/a/x/", "/a/"},
		{ignore, "/c/", "/c/{$}"},
		{ignore, "/c/x/", CatchAll},
		{ignore, "/d/e/", "/d/e/"},
		{ignore, "/d/e/f/", "/d/e/"},
		{ignore, "/", CatchAll},
		{ignore, "/users/7", CatchAll},
		{folded, "/users/7", "GET /Users/{ID}"},
		{folded, "/USERS/7/", "GET /Users/{ID}"},
		{folded, "/A/B", "/a/b"},
	} {
		r, _ := http.NewRequest("GET", "http://x"+c.path, nil)
		if got := c.p.match(r); got.pattern != c.want {
			t.Errorf("%s (%s, %s): %q, want %q", c.path, c.p.paths.TrailingSlash, c.p.paths.Case, got.pattern, c.want)
		}
	}
}

func TestRoutesThatDifferOnlyInCaseConflictWhenCaseIsIgnored(t *testing.T) {
	lim := map[string]limiter.Limit{"default": limiter.PerMinute(limiter.GCRA, 5)}
	_, err := NewPolicy(PolicyConfig{
		Store:   limiter.NewMemoryStore(limiter.MemoryConfig{}),
		Classes: []Class{{Name: "a", Routes: []string{"/Orders"}, Limits: lim}, {Name: "b", Routes: []string{"/orders"}, Limits: lim}},
		Paths:   Paths{Case: PathsInsensitive},
	})
	if err == nil {
		t.Fatal("/Orders and /orders accepted with case insensitive, want a conflict naming the route")
	}
	if _, err := NewPolicy(PolicyConfig{Store: limiter.NewMemoryStore(limiter.MemoryConfig{}), Paths: Paths{Case: "folded"}}); err == nil {
		t.Error(`case "folded" accepted, want an error`)
	}
}

// The one-pass check every request takes agrees with the escaped path's: a disagreement would let
// a path skip normalising (and its route) or normalise a path for nothing.
func FuzzIsNormalURLIsTheEscapedPathsCheck(f *testing.F) {
	for _, p := range []string{"/api/v1/orders/42", "/a//b", "/a/./b", "/a/../b", "/a/.", "/a/..", "/a/.b",
		"/a/..b", "/a/b/", "/", "/a%2Fb", "/a b", `/a\b`, "/a!b", "/ü", "/a/...", "/.well-known/x",
		"/a?b", "/a;b=c", "/a:b@c", "/%", "/a/%2e%2e/b", "//", "/.", "/..", "/~x/(y)*'"} {
		f.Add(p, "")
		f.Add(p, url.PathEscape(p))
	}
	f.Fuzz(func(t *testing.T, path, raw string) {
		u := &url.URL{Path: path, RawPath: raw}
		if got, want := isNormalURL(u), isNormal(u.EscapedPath()); got != want {
			t.Errorf("path %q raw %q: isNormalURL %v, isNormal(EscapedPath) %v", path, raw, got, want)
		}
	})
}
