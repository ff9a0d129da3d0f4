package server_test

import (
	"bufio"
	"bytes"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// goroutine is one entry of a full stack dump: its id, the id of the
// goroutine that started it (0 when the runtime did) and its stack.
type goroutine struct {
	id, parent int
	stack      string
	// exiting is a goroutine whose function has returned, caught in
	// runtime.goexit1 on its way out: it runs nothing more (client_golang's
	// Register leaves one for an instant after each registration).
	exiting bool
}

// liveGoroutines reads every goroutine's id and creator from a full stack
// dump. Counting goroutines would blame this test for those other tests
// leave winding down (a Redis pool re-dialling a server already stopped
// starts its own); the creator says whose each one is.
func liveGoroutines() map[int]goroutine {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	return parseGoroutines(buf)
}

// parseGoroutines reads a full stack dump's goroutines by id.
func parseGoroutines(buf []byte) map[int]goroutine {
	all := map[int]goroutine{}
	for _, block := range bytes.Split(buf, []byte("\n\n")) {
		g := goroutine{stack: string(block)}
		sc := bufio.NewScanner(bytes.NewReader(block))
		for first := true; sc.Scan(); {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, "goroutine "); ok && g.id == 0 {
				g.id, _ = strconv.Atoi(strings.Fields(rest)[0])
				continue
			}
			if first {
				g.exiting, first = strings.HasPrefix(line, "runtime.goexit1("), false
			}
			if strings.HasPrefix(line, "created by ") {
				if i := strings.LastIndex(line, " in goroutine "); i >= 0 {
					g.parent, _ = strconv.Atoi(line[i+len(" in goroutine "):])
				}
			}
		}
		if g.id != 0 {
			all[g.id] = g
		}
	}
	return all
}

// currentGoroutine is the id of the goroutine that calls it.
func currentGoroutine() int {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	id, _ := strconv.Atoi(strings.Fields(strings.TrimPrefix(string(buf), "goroutine "))[0])
	return id
}

// family follows the goroutines started by root, and by those, as they come
// and go: a goroutine belongs to it when its creator is root or one already
// seen in it, so the part of the tree whose creators have since ended stays
// known.
type family struct {
	root  int
	known map[int]bool
}

func newFamily(root int) *family { return &family{root: root, known: map[int]bool{root: true}} }

// alive looks at the goroutines now running and returns those of the
// family, root and those already exiting excluded (an exiting one still
// links the children it started to the family).
func (f *family) alive() []goroutine {
	all := liveGoroutines()
	for grew := true; grew; {
		grew = false
		for id, g := range all {
			if !f.known[id] && f.known[g.parent] {
				f.known[id], grew = true, true
			}
		}
	}
	var out []goroutine
	for id, g := range all {
		if id != f.root && f.known[id] && !g.exiting {
			out = append(out, g)
		}
	}
	return out
}

func stacks(gs []goroutine) string {
	var b strings.Builder
	for _, g := range gs {
		fmt.Fprintf(&b, "\n%s\n", g.stack)
	}
	return b.String()
}

// One exiting goroutine, as a leak check caught it after Build (its
// function returned, it runs nothing more), beside one that still runs:
// the family's alive is the running one alone.
func TestAnExitingGoroutineIsNotAlive(t *testing.T) {
	dump := []byte(`goroutine 6845 [running]:
main.test()
	/x/test.go:1 +0x1

goroutine 6855 [runnable]:
runtime.goexit1()
	/usr/local/go/src/runtime/proc.go:4475 +0xf0
runtime.goexit({})
	/usr/local/go/src/runtime/asm_amd64.s:1772 +0x6
created by github.com/prometheus/client_golang/prometheus.(*Registry).Register in goroutine 6845
	/root/go/pkg/mod/github.com/prometheus/client_golang@v1.25.0/prometheus/registry.go:291 +0x27d

goroutine 6856 [select]:
example.run()
	/x/run.go:9 +0x2
created by example.start in goroutine 6845
	/x/run.go:3 +0x3
`)
	all := parseGoroutines(dump)
	if len(all) != 3 || !all[6855].exiting || all[6856].exiting || all[6855].parent != 6845 {
		t.Fatalf("parsed %+v", all)
	}
}
