package rls

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/filewatch"
)

// Watcher notices changes to the domain files of a directory.
type Watcher struct {
	dir  string
	last [32]byte
}

// NewWatcher returns a Watcher of dir that takes its content now as the last seen: create it
// before loading the directory, so that no change made after the load goes unnoticed.
func NewWatcher(dir string) *Watcher { return &Watcher{dir: dir, last: hashDir(dir)} }

// Run calls onChange, until ctx is done, each time the domain files' content changes (a file
// added, removed or edited; hashed, so a touched but unchanged file is no change), checking
// every interval (never when 0), and at each receive on trigger (nil: none) whatever the
// content. onChange runs on Run's goroutine, one call at a time. Run blocks; call it once.
func (w *Watcher) Run(ctx context.Context, interval time.Duration, trigger <-chan struct{}, onChange func()) {
	filewatch.Run(ctx, filewatch.Config{
		Digest: func() [32]byte { return hashDir(w.dir) }, Since: w.last, Interval: interval, Trigger: trigger,
	}, onChange)
}

// CheckReload returns why the rules next must not replace old, those in force, on a reload, or
// nil: a directory left with no domain file (emptied, or its files moved away mid-deploy) would
// make every descriptor unlimited. A start on such a directory serves no domain, as configured.
func CheckReload(dir string, old, next *Rules) error {
	if len(next.domains) == 0 && len(old.domains) > 0 {
		return fmt.Errorf("rls config dir %s: no domain file (*.yaml, *.yml) left; refusing to drop the domains in force %v", dir, old.Domains())
	}
	return nil
}

// hashDir hashes the names and contents of dir's domain files, an unreadable one by its error.
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
