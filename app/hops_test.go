package app_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/app"
	"github.com/rl-exporter/rl-exporter/config"
	"github.com/rl-exporter/rl-exporter/internal/redistest"
)

// The hops of a proxied request, from net/http's call of the listener's handler to
// the Redis command that decides it, are what a reader follows to learn how
// rl-exporter works: README.md's "How it fits together" names them, in order, and
// the goals below keep them few.
const (
	maxHops      = 12 // rl-exporter's frames on the stack at the Redis call
	maxHopFiles  = 10 // the files they are in
	modulePrefix = "github.com/rl-exporter/rl-exporter/"
)

// hop is one frame of rl-exporter's on the stack: its file (from the module's
// root) and its function as README.md names it (Type.Method or Func).
type hop struct{ file, fn string }

func (h hop) String() string { return h.file + " " + h.fn }

// stackAtEval is a go-redis hook keeping the stack of the first script call
// (EVALSHA or EVAL) it sees. Safe for concurrent use.
type stackAtEval struct {
	mu   sync.Mutex
	hops []hop
	seen bool
}

func (*stackAtEval) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s *stackAtEval) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := strings.ToLower(cmd.Name()); name == "evalsha" || name == "eval" {
			s.capture()
		}
		return next(ctx, cmd)
	}
}

func (s *stackAtEval) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if name := strings.ToLower(cmd.Name()); name == "evalsha" || name == "eval" {
				s.capture()
				break
			}
		}
		return next(ctx, cmds)
	}
}

// capture keeps rl-exporter's frames of the calling stack, outermost first,
// leaving out this test's own.
func (s *stackAtEval) capture() {
	pcs := make([]uintptr, 128)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	var hops []hop
	for {
		f, more := frames.Next()
		if strings.HasPrefix(f.Function, modulePrefix) && !strings.HasSuffix(f.File, "_test.go") {
			hops = append(hops, hop{file: relFile(f.File), fn: funcName(f.Function)})
		}
		if !more {
			break
		}
	}
	for i, j := 0, len(hops)-1; i < j; i, j = i+1, j-1 {
		hops[i], hops[j] = hops[j], hops[i]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.seen {
		s.hops, s.seen = hops, true
	}
}

func (s *stackAtEval) captured() ([]hop, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hops, s.seen
}

// relFile is file from the module's root ("server/server.go").
func relFile(file string) string {
	file = filepath.ToSlash(file)
	for _, dir := range []string{"/app/", "/server/", "/proxy/", "/httplimit/", "/decision/", "/limiter/", "/region/", "/rls/"} {
		if i := strings.LastIndex(file, dir); i >= 0 {
			return file[i+1:]
		}
	}
	return file
}

// funcName is fn as README.md names it, its innermost function without package path,
// pointer receiver or closure suffix: "httplimit.(*Middleware).Handler.func1" is
// "Middleware.Handler", and so is that closure inlined into a caller.
func funcName(fn string) string {
	fn = fn[strings.LastIndex(fn, "/")+1:]
	fn = fn[strings.Index(fn, ".")+1:]
	fn = strings.NewReplacer("(*", "", "(", "", ")", "").Replace(fn)
	parts := strings.Split(regexp.MustCompile(`(\.func\d+)+$`).ReplaceAllString(fn, ""), ".")
	if n := len(parts); n > 1 && isType(parts[n-2]) {
		return parts[n-2] + "." + parts[n-1]
	}
	return parts[len(parts)-1]
}

// isType says whether name, a part of a function's name, is a type's: capitalised, or
// one of the unexported types on the path.
func isType(name string) bool {
	return name != "" && (name[0] >= 'A' && name[0] <= 'Z' || strings.HasSuffix(name, "Binding") || strings.HasSuffix(name, "Handler") || strings.HasSuffix(name, "route"))
}

// distinctFiles counts the files of hops.
func distinctFiles(hops []hop) int {
	files := map[string]bool{}
	for _, h := range hops {
		files[h.file] = true
	}
	return len(files)
}

// readmeHops is README.md's list of hops under "How it fits together": its
// lines "N. `file` `Func`", in order.
func readmeHops(t *testing.T) []hop {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## How it fits together\n")
	if !ok {
		t.Fatal(`README.md has no "How it fits together" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var hops []hop
	for _, m := range regexp.MustCompile("(?m)^\\d+\\. `([^`]+)` `([^`]+)`").FindAllStringSubmatch(section, -1) {
		hops = append(hops, hop{file: m[1], fn: m[2]})
	}
	return hops
}

func TestAProxiedRequestReachesRedisInFewHopsAndTheReadmeNamesThem(t *testing.T) {
	rdb := redistest.Single(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer up.Close()
	file := filepath.Join(t.TempDir(), "rl.yaml")
	// Batching off: a decision made alone takes the same path, and so does every decision
	// of an idle instance; the batched one hands the call to a sender's goroutine.
	yaml := fmt.Sprintf(`
server: {listen: "127.0.0.1:0", upstream: %q}
store: {type: redis, timeout: 1s, redis: {url: %q, batch: {disabled: true}}}
classes:
  api:
    routes: ["GET /orders/{id}"]
    limits:
      default: {algorithm: gcra, rate: 100, period: 1s}
`, up.URL, rdb.URL())
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := (&config.Sources{File: file}).Load()
	if err != nil {
		t.Fatal(err)
	}
	hook := &stackAtEval{}
	built, err := app.Build(cfg, app.Deps{InstrumentRedis: func(c redis.UniversalClient) error {
		c.AddHook(hook)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, built)

	resp, err := http.Get("http://" + built.Addr("main") + "/orders/42")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("RateLimit") == "" && resp.Header.Get("X-RateLimit-Limit") == "" {
		t.Fatalf("GET /orders/42: %d %v; want 200 with the rate-limit headers", resp.StatusCode, resp.Header)
	}
	hops, ok := hook.captured()
	if !ok {
		t.Fatal("the request made no script call to Redis")
	}
	var list strings.Builder
	for i, h := range hops {
		fmt.Fprintf(&list, "\n%d. `%s` `%s`", i+1, h.file, h.fn)
	}
	if len(hops) > maxHops || distinctFiles(hops) > maxHopFiles {
		t.Errorf("%d hops through %d files from the listener to Redis; want at most %d through %d:%s",
			len(hops), distinctFiles(hops), maxHops, maxHopFiles, list.String())
	}
	if want := readmeHops(t); fmt.Sprint(want) != fmt.Sprint(hops) {
		t.Errorf("README.md's \"How it fits together\" lists the hops\n%v\nbut a request takes%s", want, list.String())
	}
}

// serve runs b until the test ends, returning once every part of it serves.
func serve(t *testing.T, b *app.Built) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	select {
	case <-b.Ready():
	case err := <-done:
		t.Fatalf("serve ended before it was ready: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("serve not ready within 10s")
	}
}
