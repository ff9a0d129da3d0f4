package server_test

import (
	"bufio"
	"bytes"
	"fmt"
	"runtime"
	"strconv"
	"strings"
)

// goroutine is one entry of a full stack dump: its id, the id of the
// goroutine that started it (0 when the runtime did) and its stack.
type goroutine struct {
	id, parent int
	stack      string
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
	all := map[int]goroutine{}
	for _, block := range bytes.Split(buf, []byte("\n\n")) {
		g := goroutine{stack: string(block)}
		sc := bufio.NewScanner(bytes.NewReader(block))
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, "goroutine "); ok && g.id == 0 {
				g.id, _ = strconv.Atoi(strings.Fields(rest)[0])
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
// family, root excluded.
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
		if id != f.root && f.known[id] {
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
