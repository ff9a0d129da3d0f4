// Command codestats measures what makes the code harder to change: the
// functions longer than a page, the blocks of lines written twice, the
// places that name an algorithm outside the table of algorithms
// (limiter/algorithms.go), each package's share of comment lines, the
// places each algorithm's arithmetic is written (see arithmetic.go for
// the rule; calendar boundaries, DefaultArithmeticAside, listed apart),
// outside tests and generated files; the time.Sleep calls in
// tests; and the names the Envoy service (rls) uses from the HTTP
// middleware (httplimit). Run it from the repository root:
//
//	go run ./internal/codestats            # the whole tree
//	go run ./internal/codestats -max 60    # another length limit
//
// It prints one line per long function (length, name, file:line), longest
// first, then one line per repeated block (lines, the two places), then
// one line per file that names an algorithm (places, file), each list
// after its count. A place that names an algorithm is an identifier or a
// string literal of a Go file, or a word or string of a Lua script, that
// spells an algorithm's name or constant (sliding_log, SlidingLog,
// slidingLogIndex); comments do not count. Then, each after its heading:
// per package, its comment share (lines any part of which is a comment,
// over non-blank lines); per package, its tests' time.Sleep calls; per
// algorithm, the files its arithmetic is written in (then, in brackets,
// those set aside); and the names rls
// uses from httplimit. It reads files only and always exits 0 unless it
// cannot read the tree.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	root := flag.String("root", ".", "directory to measure")
	maxLines := flag.Int("max", 80, "report functions longer than this many lines")
	block := flag.Int("block", 6, "report blocks of at least this many repeated lines")
	table := flag.String("table", DefaultAlgorithmTable, "the table of algorithms, whose names are not counted")
	flag.Parse()
	files, err := goFiles(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "codestats:", err)
		os.Exit(1)
	}
	lua, err := filesEnding(*root, ".lua")
	if err != nil {
		fmt.Fprintln(os.Stderr, "codestats:", err)
		os.Exit(1)
	}
	tests, err := testFiles(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "codestats:", err)
		os.Exit(1)
	}
	if err := report(os.Stdout, files, lua, tests, *maxLines, *block, *table, DefaultArithmeticAside); err != nil {
		fmt.Fprintln(os.Stderr, "codestats:", err)
		os.Exit(1)
	}
}

// sourceFile is one Go file measured, its path relative to the root.
type sourceFile struct {
	path    string
	content []byte
}

// goFiles reads every Go file under root that is neither a test nor
// generated, skipping testdata, vendor and hidden directories.
func goFiles(root string) ([]sourceFile, error) { return filesEnding(root, ".go") }

// filesEnding reads every file under root whose name ends with ext,
// skipping testdata, vendor and hidden directories, Go tests and
// generated files.
func filesEnding(root, ext string) ([]sourceFile, error) {
	return walkFiles(root, func(name string) bool {
		return strings.HasSuffix(name, ext) && !strings.HasSuffix(name, "_test.go")
	}, func(b []byte) bool {
		if ext == ".lua" {
			return !isGeneratedLua(b)
		}
		return ext != ".go" || !isGenerated(b)
	})
}

// testFiles reads every Go test file under root, skipping testdata,
// vendor and hidden directories.
func testFiles(root string) ([]sourceFile, error) {
	return walkFiles(root, func(name string) bool { return strings.HasSuffix(name, "_test.go") }, nil)
}

// walkFiles reads the files under root whose name want takes and, when
// keep is set, whose content keep takes, skipping testdata, vendor and
// hidden directories, in path order.
func walkFiles(root string, want func(name string) bool, keep func(content []byte) bool) ([]sourceFile, error) {
	var files []sourceFile
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !want(d.Name()) {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if keep != nil && !keep(b) {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		files = append(files, sourceFile{path: filepath.ToSlash(rel), content: b})
		return nil
	})
	sort.Slice(files, func(i, j int) bool { return files[i].path < files[j].path })
	return files, err
}

// skipDir reports whether a directory of that name is not measured.
func skipDir(name string) bool {
	return name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".")
}

// isGenerated follows the Go convention: a line "// Code generated ... DO
// NOT EDIT." before the package clause.
func isGenerated(src []byte) bool {
	for _, line := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(line, "package ") {
			return false
		}
		if strings.HasPrefix(line, "// Code generated ") && strings.HasSuffix(strings.TrimSpace(line), "DO NOT EDIT.") {
			return true
		}
	}
	return false
}

// isGeneratedLua reports whether a Lua file's first line is "-- Code
// generated ... DO NOT EDIT.".
func isGeneratedLua(src []byte) bool {
	line, _, _ := strings.Cut(string(src), "\n")
	return strings.HasPrefix(line, "-- Code generated ") && strings.HasSuffix(strings.TrimSpace(line), "DO NOT EDIT.")
}

func report(w io.Writer, files, lua, tests []sourceFile, maxLines, block int, table string, aside []string) error {
	long, err := longFunctions(files, maxLines)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "functions over %d lines (outside tests): %d\n", maxLines, len(long))
	for _, f := range long {
		fmt.Fprintf(w, "  %4d  %s  %s:%d\n", f.lines, f.name, f.file, f.line)
	}
	pairs := repeatedBlocks(files, block)
	fmt.Fprintf(w, "blocks of %d or more lines repeated (outside tests), as pairs of places: %d\n", block, len(pairs))
	for _, p := range pairs {
		fmt.Fprintf(w, "  %4d  %s:%d ~ %s:%d\n", p.lines, p.a.file, p.a.line, p.b.file, p.b.line)
	}
	named := algorithmPlaces(files, lua, table)
	places := 0
	for _, n := range named {
		places += n.places
	}
	fmt.Fprintf(w, "places an algorithm is named (outside tests and %s, Go and Lua): %d in %d files\n", table, places, len(named))
	for _, n := range named {
		fmt.Fprintf(w, "  %4d  %s\n", n.places, n.file)
	}
	shares := commentShares(files)
	fmt.Fprintf(w, "comment share per package (comment lines / non-blank lines, outside tests): %d packages\n", len(shares))
	for _, c := range shares {
		fmt.Fprintf(w, "  %3d%%  %5d / %5d  %s\n", c.percent(), c.comments, c.nonBlank, c.pkg)
	}
	sleeps, err := testSleeps(tests)
	if err != nil {
		return err
	}
	total := 0
	for _, s := range sleeps {
		total += s.calls
	}
	fmt.Fprintf(w, "time.Sleep calls in tests: %d in %d packages\n", total, len(sleeps))
	for _, s := range sleeps {
		fmt.Fprintf(w, "  %4d  %s\n", s.calls, s.pkg)
	}
	arith, err := arithmeticPlaces(files, lua, aside)
	if err != nil {
		return err
	}
	most := 0
	for _, a := range arith {
		most = max(most, len(a.files))
	}
	fmt.Fprintf(w, "places each algorithm's arithmetic is written (files with a function, type, switch case or Lua script of the algorithm that computes and compares, decide and settle; calendar boundaries and Envoy's bucket apart): at most %d\n", most)
	for _, a := range arith {
		line := fmt.Sprintf("  %2d  %-14s  %s", len(a.files), a.algorithm, strings.Join(a.files, " "))
		for _, f := range a.aside {
			why := AsideWhy[f]
			if why == "" {
				why = "set aside"
			}
			line += "  (and " + why + ": " + f + ")"
		}
		fmt.Fprintln(w, line)
	}
	names, err := importedNames(files, "rls", "httplimit")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "names rls uses from httplimit (outside tests): %d\n", len(names))
	if len(names) > 0 {
		fmt.Fprintf(w, "  %s\n", strings.Join(names, " "))
	}
	all, err := importedNames(append(append([]sourceFile(nil), files...), tests...), "rls", "httplimit")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "names rls uses from httplimit (tests included): %d\n", len(all))
	return nil
}
