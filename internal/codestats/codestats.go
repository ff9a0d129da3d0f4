// Command codestats measures what makes the code harder to change: the
// functions longer than a page, the blocks of lines written twice, and
// the places that name an algorithm outside the table of algorithms
// (limiter/algorithms.go), outside tests and generated files. Run it from
// the repository root:
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
// slidingLogIndex); comments do not count. It reads files only and always
// exits 0 unless it cannot read the tree.
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
	if err := report(os.Stdout, files, lua, *maxLines, *block, *table); err != nil {
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
// generated Go files.
func filesEnding(root, ext string) ([]sourceFile, error) {
	var files []sourceFile
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ext) || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if ext == ".go" && isGenerated(b) {
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

func report(w io.Writer, files, lua []sourceFile, maxLines, block int, table string) error {
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
	return nil
}
