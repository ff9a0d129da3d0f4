package main

import (
	"go/scanner"
	"go/token"
	"path"
	"sort"
	"strings"
)

// commentShare is one package's comment lines and non-blank lines.
type commentShare struct {
	pkg                string
	comments, nonBlank int
}

// percent is the package's comment share in whole per cent.
func (c commentShare) percent() int {
	if c.nonBlank == 0 {
		return 0
	}
	return (100*c.comments + c.nonBlank/2) / c.nonBlank
}

// commentShares measures, per package (directory), how many of its
// non-blank lines are comment lines: lines that hold a comment and no code,
// as cloc counts them, so a line of code with a trailing comment is code.
// Packages come in path order.
func commentShares(files []sourceFile) []commentShare {
	by := map[string]*commentShare{}
	for _, f := range files {
		pkg := path.Dir(f.path)
		c := by[pkg]
		if c == nil {
			c = &commentShare{pkg: pkg}
			by[pkg] = c
		}
		lines := strings.Split(string(f.content), "\n")
		for _, l := range lines {
			if strings.TrimSpace(l) != "" {
				c.nonBlank++
			}
		}
		for l := range commentLines(f) {
			if l <= len(lines) && strings.TrimSpace(lines[l-1]) != "" {
				c.comments++
			}
		}
	}
	out := make([]commentShare, 0, len(by))
	for _, c := range by {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pkg < out[j].pkg })
	return out
}

// commentLines returns the numbers of the lines of the Go file that a
// comment covers and no other token is on.
func commentLines(f sourceFile) map[int]bool {
	fset := token.NewFileSet()
	file := fset.AddFile(f.path, -1, len(f.content))
	var s scanner.Scanner
	s.Init(file, f.content, nil, scanner.ScanComments)
	out, code := map[int]bool{}, map[int]bool{}
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			for l := range code {
				delete(out, l)
			}
			return out
		}
		if tok == token.SEMICOLON && lit == "\n" {
			continue // inserted at a line's end, not written
		}
		if tok != token.COMMENT {
			code[file.Line(pos)] = true
			continue
		}
		first := file.Line(pos)
		for l := first; l <= first+strings.Count(lit, "\n"); l++ {
			out[l] = true
		}
	}
}
