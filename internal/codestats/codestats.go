// Command codestats measures what makes the code harder to change: the
// functions longer than a page and the blocks of lines written twice,
// outside tests and generated files. Run it from the repository root:
//
//	go run ./internal/codestats            # the whole tree
//	go run ./internal/codestats -max 60    # another length limit
//
// It prints one line per long function (length, name, file:line), longest
// first, then one line per repeated block (lines, the two places), and the
// two counts. It reads files only and always exits 0 unless it cannot read
// the tree.
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
	flag.Parse()
	files, err := goFiles(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "codestats:", err)
		os.Exit(1)
	}
	if err := report(os.Stdout, files, *maxLines, *block); err != nil {
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
func goFiles(root string) ([]sourceFile, error) {
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
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if isGenerated(b) {
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

func report(w io.Writer, files []sourceFile, maxLines, block int) error {
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
	return nil
}
