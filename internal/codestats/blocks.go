package main

import (
	"go/parser"
	"go/token"
	"sort"
	"strings"
)

// place is a line of a file.
type place struct {
	file string
	line int
}

// pair is a block of lines that stands at two places.
type pair struct {
	a, b  place
	lines int
}

// line is one significant line: its text without indentation, and where
// it stands.
type line struct {
	text string
	at   place
}

// maxPlaces is how many places one window may stand in before it counts
// as a common idiom (if err != nil { return ... }) rather than a copy.
const maxPlaces = 8

// repeatedBlocks finds the blocks of at least size consecutive significant
// lines (blank lines, comments and lone braces do not count) that stand
// at two places, the same to the letter once indentation is ignored. Each
// maximal run shared by two places is one pair; the longest come first.
func repeatedBlocks(files []sourceFile, size int) []pair {
	var all [][]line
	windows := map[string][][2]int{} // window text -> (file index, line index)
	for fi, f := range files {
		lines := significantLines(f)
		all = append(all, lines)
		for i := 0; i+size <= len(lines); i++ {
			k := windowKey(lines[i : i+size])
			windows[k] = append(windows[k], [2]int{fi, i})
		}
	}
	matched := map[[4]int]bool{}
	for _, at := range windows {
		if len(at) < 2 || len(at) > maxPlaces {
			continue
		}
		for x := 0; x < len(at); x++ {
			for y := x + 1; y < len(at); y++ {
				a, b := at[x], at[y]
				if a[0] == b[0] && b[1]-a[1] < size {
					continue // overlapping windows of one file
				}
				matched[[4]int{a[0], a[1], b[0], b[1]}] = true
			}
		}
	}
	var out []pair
	for m := range matched {
		if matched[[4]int{m[0], m[1] - 1, m[2], m[3] - 1}] {
			continue // not the start of its run
		}
		n := 0
		for matched[[4]int{m[0], m[1] + n, m[2], m[3] + n}] {
			n++
		}
		a, b := all[m[0]], all[m[2]]
		out = append(out, pair{a: a[m[1]].at, b: b[m[3]].at, lines: n + size - 1})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].lines != out[j].lines {
			return out[i].lines > out[j].lines
		}
		if out[i].a.file != out[j].a.file {
			return out[i].a.file < out[j].a.file
		}
		return out[i].a.line < out[j].a.line
	})
	return out
}

// significantLines are the lines of a file that can make a copy: not
// blank, not a comment, not a lone brace, not the package clause or an
// import (every file of a package starts alike).
func significantLines(f sourceFile) []line {
	skip := importLines(f)
	var out []line
	for i, l := range strings.Split(string(f.content), "\n") {
		t := strings.TrimSpace(l)
		if skip[i+1] || t == "" || strings.HasPrefix(t, "//") || strings.HasPrefix(t, "package ") || strings.Trim(t, "{}()[],;") == "" {
			continue
		}
		out = append(out, line{text: t, at: place{file: f.path, line: i + 1}})
	}
	return out
}

// importLines returns the line numbers of the file's import declarations.
func importLines(f sourceFile) map[int]bool {
	fset := token.NewFileSet()
	parsed, err := parser.ParseFile(fset, f.path, f.content, parser.ImportsOnly)
	skip := map[int]bool{}
	if err != nil {
		return skip
	}
	for _, d := range parsed.Decls {
		for l := fset.Position(d.Pos()).Line; l <= fset.Position(d.End()).Line; l++ {
			skip[l] = true
		}
	}
	return skip
}

func windowKey(lines []line) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.text)
		b.WriteByte('\n')
	}
	return b.String()
}
