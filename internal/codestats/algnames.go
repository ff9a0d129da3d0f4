package main

import (
	"go/scanner"
	"go/token"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/rl-exporter/rl-exporter/limiter"
)

// DefaultAlgorithmTable is the file that is the table of algorithms: the
// one place meant to name them all, not counted.
const DefaultAlgorithmTable = "limiter/algorithms.go"

// namedAt is one file and the number of places in it that name an
// algorithm.
type namedAt struct {
	file   string
	places int
}

// algorithmWords are the algorithms' names as compared: lower case,
// without underscores ("slidinglog" for sliding_log, SlidingLog,
// slidingLogIndex).
func algorithmWords() []string {
	var out []string
	for _, a := range limiter.AllAlgorithms() {
		out = append(out, normalise(string(a)))
	}
	return out
}

func normalise(s string) string { return strings.ToLower(strings.ReplaceAll(s, "_", "")) }

// namesAlgorithm reports whether a token (an identifier, or a string
// literal's contents) spells an algorithm's name or constant.
func namesAlgorithm(tok string, words []string) bool {
	n := normalise(tok)
	for _, w := range words {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// algorithmPlaces counts, per file, the places outside the table that
// name an algorithm: in Go files, the identifiers and string literals
// that spell one (comments do not count: they describe, they do not have
// to change when an algorithm is added); in Lua files, the same outside
// comments. Files come most places first.
func algorithmPlaces(goFiles, luaFiles []sourceFile, table string) []namedAt {
	words := algorithmWords()
	var out []namedAt
	for _, f := range goFiles {
		if f.path == table {
			continue
		}
		if n := goPlaces(f, words); n > 0 {
			out = append(out, namedAt{f.path, n})
		}
	}
	for _, f := range luaFiles {
		if n := luaPlaces(f, words); n > 0 {
			out = append(out, namedAt{f.path, n})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].places != out[j].places {
			return out[i].places > out[j].places
		}
		return out[i].file < out[j].file
	})
	return out
}

func goPlaces(f sourceFile, words []string) int {
	fset := token.NewFileSet()
	file := fset.AddFile(f.path, -1, len(f.content))
	var s scanner.Scanner
	s.Init(file, f.content, nil, 0) // comments skipped
	n := 0
	for {
		_, tok, lit := s.Scan()
		if tok == token.EOF {
			return n
		}
		switch tok {
		case token.IDENT:
			if namesAlgorithm(lit, words) {
				n++
			}
		case token.STRING:
			if v, err := strconv.Unquote(lit); err == nil && namesAlgorithm(v, words) {
				n++
			}
		}
	}
}

// luaComment is a Lua comment: "--" to the end of the line (the scripts
// use no block comments).
var luaComment = regexp.MustCompile(`--[^\n]*`)

// luaToken is a Lua identifier or the contents of a quoted string.
var luaToken = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*|"[^"\n]*"|'[^'\n]*'`)

func luaPlaces(f sourceFile, words []string) int {
	code := luaComment.ReplaceAllString(string(f.content), "")
	n := 0
	for _, tok := range luaToken.FindAllString(code, -1) {
		if namesAlgorithm(strings.Trim(tok, `"'`), words) {
			n++
		}
	}
	return n
}
