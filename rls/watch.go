package rls

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Watch calls onChange each time the content of the domain files of dir
// changes (a file added, removed or edited), checking every interval, until
// ctx is done. The files are hashed, so a touched but unchanged file causes
// no call. onChange runs on Watch's goroutine, one call at a time. Watch
// blocks.
func Watch(ctx context.Context, dir string, interval time.Duration, onChange func()) {
	last := hashDir(dir)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if h := hashDir(dir); h != last {
			last = h
			onChange()
		}
	}
}

// hashDir hashes the names and contents of the domain files of dir; an
// unreadable directory or file hashes to a value of its own.
func hashDir(dir string) [32]byte {
	h := sha256.New()
	entries, err := os.ReadDir(dir)
	if err != nil {
		h.Write([]byte("unreadable: " + err.Error()))
		return [32]byte(h.Sum(nil))
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if ext := filepath.Ext(e.Name()); !e.IsDir() && !strings.HasPrefix(e.Name(), ".") && (ext == ".yaml" || ext == ".yml") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		h.Write([]byte(n))
		h.Write([]byte{0})
		if err != nil {
			h.Write([]byte("unreadable: " + err.Error()))
		}
		fs := sha256.Sum256(b)
		h.Write(fs[:])
	}
	return [32]byte(h.Sum(nil))
}
