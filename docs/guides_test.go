package docs

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// guides are the pages whose shell blocks run as written, in order, from a
// fresh checkout. A guide is one line here.
var guides = []string{
	"cost-and-quotas.md",
	"overload.md",
	"kubernetes.md",
	"gateways.md",
}

// notRun marks a shell block that the guide test does not run, with the
// reason after it: "```sh not-run: needs a Kubernetes cluster".
const notRun = "not-run:"

// guidePorts are the ports the pages and examples name; each guide runs
// with each of them moved to a free port, in its commands and in the
// checkout's examples/, and moved back in what the commands print.
var guidePorts = []string{"8480", "8481", "8482", "8081", "9480", "8080"}

// guideBlock is one shell block of a page.
type guideBlock struct {
	page   string
	line   int    // of the opening fence
	info   string // the fence's info string: "console", "sh not-run: ..."
	cmds   []guideCommand
	prompt bool // a console block: its commands' output is shown
}

// guideCommand is one command line of a block ("\"-continued lines
// joined) and, in a console block, the output the page shows for it.
type guideCommand struct {
	line   int
	text   string
	output []string
}

// guideBlocks returns the sh, bash, shell and console blocks of page.
func guideBlocks(t *testing.T, page string) []guideBlock {
	t.Helper()
	raw, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []guideBlock
	var cur *guideBlock
	var body []string
	bodyStart := 0
	for i, l := range strings.Split(string(raw), "\n") {
		trimmed := strings.TrimSpace(l)
		if !strings.HasPrefix(trimmed, "```") {
			if cur != nil {
				body = append(body, l)
			}
			continue
		}
		if cur == nil {
			info := strings.TrimSpace(strings.TrimLeft(trimmed, "`"))
			lang, _, _ := strings.Cut(info, " ")
			cur = &guideBlock{page: filepath.Base(page), line: i + 1, info: info, prompt: lang == "console"}
			if !slices.Contains([]string{"sh", "bash", "shell", "console"}, lang) {
				cur.info = "" // not a shell block: skipped below
			}
			body, bodyStart = nil, i+2
			continue
		}
		if cur.info != "" {
			cur.cmds = blockCommands(body, bodyStart, cur.prompt)
			blocks = append(blocks, *cur)
		}
		cur = nil
	}
	return blocks
}

// blockCommands cuts a block's lines into commands: in a console block
// the "$ " lines, each followed by its output; in another every line that
// is neither blank nor a comment.
func blockCommands(lines []string, first int, prompt bool) []guideCommand {
	var cmds []guideCommand
	for i := 0; i < len(lines); i++ {
		l := strings.TrimRight(lines[i], " ")
		start := i
		isCmd := !prompt || strings.HasPrefix(l, "$ ")
		if !isCmd {
			if len(cmds) > 0 {
				cmds[len(cmds)-1].output = append(cmds[len(cmds)-1].output, l)
			}
			continue
		}
		l = strings.TrimPrefix(l, "$ ")
		for strings.HasSuffix(l, "\\") && i+1 < len(lines) {
			i++
			l += "\n" + lines[i]
		}
		if t := strings.TrimSpace(l); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		cmds = append(cmds, guideCommand{line: first + start, text: l})
	}
	return cmds
}

// checkout copies the repository's files (tracked, and new ones not
// ignored: what a clone has once they are committed) into a directory,
// with the binary under test as bin/rl-exporter.
func checkout(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	dir := t.TempDir()
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join(root, name)
		fi, err := os.Lstat(src)
		if err != nil {
			continue // deleted in the working tree
		}
		dst := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, dst); err != nil {
				t.Fatal(err)
			}
			continue
		}
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(binary)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(abs, filepath.Join(dir, "bin", "rl-exporter")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// portPattern finds an address with one of guidePorts.
var portPattern = regexp.MustCompile(`((?:127\.0\.0\.1|localhost|0\.0\.0\.0)?:)(` + strings.Join(guidePorts, "|") + `)\b`)

// portMap moves each of guidePorts to a free port.
type portMap map[string]string

func newPortMap(t *testing.T) portMap {
	m := portMap{}
	for i, a := range freeAddrs(t, len(guidePorts)) {
		_, free, err := net.SplitHostPort(a)
		if err != nil {
			t.Fatal(err)
		}
		m[guidePorts[i]] = free
	}
	return m
}

// apply moves the ports of the addresses in s.
func (m portMap) apply(s string) string {
	return portPattern.ReplaceAllStringFunc(s, func(a string) string {
		sm := portPattern.FindStringSubmatch(a)
		return sm[1] + m[sm[2]]
	})
}

// undo moves the free ports back in what a command printed.
func (m portMap) undo(s string) string {
	for orig, free := range m {
		s = regexp.MustCompile(`\b`+free+`\b`).ReplaceAllString(s, orig)
	}
	return s
}

// moveExamplePorts applies m to every file under examples/ of a checkout.
func moveExamplePorts(t *testing.T, dir string, m portMap) {
	t.Helper()
	err := filepath.WalkDir(filepath.Join(dir, "examples"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Type()&os.ModeSymlink != 0 {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if moved := m.apply(string(b)); moved != string(b) {
			return os.WriteFile(path, []byte(moved), 0o644)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// normalisers make what varies from run to run the same on the page and in
// what a command printed: times, time-dependent counts, ids and hashes.
var normalisers = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`), "<time>"},
	{regexp.MustCompile(`(?i)^(date: ).*$`), "${1}<time>"},
	{regexp.MustCompile(`("created": ?)\d+`), "${1}<unix>"},
	{regexp.MustCompile(`("reset_seconds": ?)\d+`), "${1}<n>"},
	{regexp.MustCompile(`(?i)((?:retry-after|x-ratelimit-reset): )\d+`), "${1}<n>"},
	{regexp.MustCompile(`(;t=)\d+`), "${1}<n>"},
	{regexp.MustCompile(`chatcmpl-[A-Za-z0-9]+`), "chatcmpl-<id>"},
	{regexp.MustCompile(`\b[0-9a-f]{12,}\b`), "<hex>"},
}

func normalise(lines []string) []string {
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		// The go command says so when it fetches a module the machine's
		// cache lacks (a guide's go run on a fresh machine), once: not
		// what the page shows a reader who ran it before.
		if strings.HasPrefix(l, "go: downloading ") {
			continue
		}
		l = strings.TrimRight(l, " \t\r")
		for _, n := range normalisers {
			l = n.re.ReplaceAllString(l, n.with)
		}
		out = append(out, l)
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

// background matches a command started in the background: "cmd &".
var background = regexp.MustCompile(`[^&]&\s*$`)

// configFlag finds the files a command reads its config from.
var configFlag = regexp.MustCompile(`(?:--config|-c)[ =](\S+)`)

// prefixFlag finds the directory a command reads a relative config from
// (nginx -p "$PWD/examples/nginx/" -c nginx.conf).
var prefixFlag = regexp.MustCompile(`\s-p[ =](\S+)`)

// configFiles returns the files, in the checkout dir, that cmd names as
// its config: relative to the directory it runs in, or to its -p prefix.
func configFiles(dir, cmd string) []string {
	path := func(arg string) string {
		arg = strings.Trim(arg, `"'`)
		for _, pwd := range []string{"${PWD}", "$PWD"} {
			arg = strings.ReplaceAll(arg, pwd, dir)
		}
		if !filepath.IsAbs(arg) {
			arg = filepath.Join(dir, arg)
		}
		return arg
	}
	var files []string
	for _, m := range configFlag.FindAllStringSubmatch(cmd, -1) {
		files = append(files, path(m[1]))
		for _, p := range prefixFlag.FindAllStringSubmatch(cmd, -1) {
			files = append(files, filepath.Join(path(p[1]), strings.Trim(m[1], `"'`)))
		}
	}
	return files
}

// loopbackAddr finds the addresses a block's programs listen on.
var loopbackAddr = regexp.MustCompile(`127\.0\.0\.1:\d+`)

// guideShell is one bash reading a guide's commands as they are written
// to it, so that what a block starts in the background serves the next.
type guideShell struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
	logs  string
}

func startGuideShell(t *testing.T, dir string) *guideShell {
	t.Helper()
	home := t.TempDir()
	logs := t.TempDir()
	cmd := exec.Command("bash", "--noprofile", "--norc", "-s")
	cmd.Dir = dir
	// Go's caches stay where they are (a command may go run); the rest of
	// a user's home does not leak in, nor is written to.
	env := append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "PATH="+os.Getenv("PATH")+":/usr/sbin:/sbin")
	for _, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH"} {
		v, err := exec.Command("go", "env", k).Output()
		if err != nil {
			t.Fatal(err)
		}
		env = append(env, k+"="+strings.TrimSpace(string(v)))
	}
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sh := &guideShell{cmd: cmd, in: in, lines: make(chan string, 1024), logs: logs}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 4<<20)
		for sc.Scan() {
			sh.lines <- sc.Text()
		}
		close(sh.lines)
	}()
	t.Cleanup(func() {
		in.Close()
		// The shell and what it started in the background.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	return sh
}

// result is what one command printed and its exit status.
type result struct {
	output []string
	status int
	pid    int // the program a command started in the background ($!)
}

// run runs a block's commands (ports already moved) and returns what each
// printed, stderr included, as a terminal shows both.
func (sh *guideShell) run(ctx context.Context, id int, cmds []string) ([]result, error) {
	var script strings.Builder
	for i, c := range cmds {
		if background.MatchString(c) {
			c = strings.TrimSuffix(strings.TrimSpace(c), "&") + fmt.Sprintf(` >%q 2>&1 &`, filepath.Join(sh.logs, fmt.Sprintf("bg-%d-%d.log", id, i)))
		}
		// jobs, after each command, reports and forgets the jobs that
		// ended, as an interactive shell does at its next prompt: the
		// next job started is %1 again once all have ended, as the reader's.
		fmt.Fprintf(&script, "printf '\\036cmd %d\\n'\n%s\nprintf '\\n\\036rc %d %%d %%s\\n' $? \"$!\"\njobs >/dev/null\n", i, c, i)
	}
	if _, err := io.WriteString(sh.in, script.String()); err != nil {
		return nil, err
	}
	results := make([]result, len(cmds))
	for i := 0; i < len(cmds); {
		select {
		case l, ok := <-sh.lines:
			if !ok {
				return results, fmt.Errorf("the shell ended during command %d", i+1)
			}
			switch {
			case strings.HasPrefix(l, "\x1ecmd "):
			case strings.HasPrefix(l, "\x1erc "):
				f := strings.Fields(strings.TrimPrefix(l, "\x1erc "))
				results[i].status, _ = strconv.Atoi(f[1])
				if len(f) > 2 && background.MatchString(cmds[i]) {
					results[i].pid, _ = strconv.Atoi(f[2])
				}
				// The marker's leading newline ends the output.
				if o := results[i].output; len(o) > 0 && o[len(o)-1] == "" {
					results[i].output = o[:len(o)-1]
				}
				i++
			default:
				results[i].output = append(results[i].output, l)
			}
		case <-ctx.Done():
			return results, fmt.Errorf("command %d did not end in time; it printed:\n%s", i+1, strings.Join(results[i].output, "\n"))
		}
	}
	return results, nil
}

// waitListening waits until every address accepts connections. It fails
// at once when one does not yet and a program the block started in the
// background (started: its pid, and its command) has ended: that one will
// never listen (a port taken, a config refused), and its log says why.
func waitListening(ctx context.Context, addrs []string, started map[int]string) error {
	for _, a := range addrs {
		for {
			c, err := net.DialTimeout("tcp", a, time.Second)
			if err == nil {
				c.Close()
				break
			}
			for pid, cmd := range started {
				if !running(pid) {
					return fmt.Errorf("nothing listens on %s, and this program the block started has ended:\n%s", a, cmd)
				}
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("nothing listens on %s", a)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

// running says whether process pid runs: neither gone nor a zombie its
// shell has yet to reap. Without /proc a zombie counts as running.
func running(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		if _, err := os.Stat("/proc/self/stat"); err != nil {
			return syscall.Kill(pid, 0) == nil
		}
		return false
	}
	// The state follows the name, which is in parentheses and may hold any byte.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// logsOf returns what the background commands printed.
func (sh *guideShell) logsOf() string {
	var b strings.Builder
	names, _ := filepath.Glob(filepath.Join(sh.logs, "*.log"))
	for _, n := range names {
		data, _ := os.ReadFile(n)
		fmt.Fprintf(&b, "--- %s\n%s", filepath.Base(n), data)
	}
	return b.String()
}

// TestEveryGuideRunsAsWrittenAndPrintsWhatItShows runs the shell blocks of
// each guide, in order, in one shell, from a fresh checkout with the
// binary under test as bin/rl-exporter: every command must exit 0, and
// what a console block's command prints must be what the page shows,
// with ports, times, ids and hashes normalised. A program started in the
// background (cmd &) serves the next blocks once the loopback addresses
// its block names (in the command or its --config file, nginx's -c under
// its -p) accept connections; the block fails at once if one of its
// programs ends before. A block whose info string says "not-run: why" is skipped.
func TestEveryGuideRunsAsWrittenAndPrintsWhatItShows(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every guide's commands")
	}
	for _, page := range guides {
		t.Run(page, func(t *testing.T) {
			dir := checkout(t)
			ports := newPortMap(t)
			moveExamplePorts(t, dir, ports)
			sh := startGuideShell(t, dir)
			ran := 0
			for id, b := range guideBlocks(t, page) {
				if strings.Contains(b.info, notRun) {
					t.Logf("%s:%d not run (%s)", page, b.line, strings.TrimSpace(b.info[strings.Index(b.info, notRun)+len(notRun):]))
					continue
				}
				var cmds []string
				var addrs []string
				starts := false
				for _, c := range b.cmds {
					moved := ports.apply(c.text)
					cmds = append(cmds, moved)
					if background.MatchString(c.text) {
						starts = true
						addrs = append(addrs, loopbackAddr.FindAllString(moved, -1)...)
						for _, f := range configFiles(dir, moved) {
							if cfg, err := os.ReadFile(f); err == nil {
								addrs = append(addrs, loopbackAddr.FindAllString(string(cfg), -1)...)
							}
						}
					}
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				results, err := sh.run(ctx, id, cmds)
				if err == nil && starts {
					started := map[int]string{}
					for i, r := range results {
						if r.pid > 0 {
							started[r.pid] = cmds[i]
						}
					}
					slices.Sort(addrs)
					err = waitListening(ctx, slices.Compact(addrs), started)
				}
				cancel()
				if err != nil {
					t.Fatalf("%s:%d: %v\nthe programs started in the background printed:\n%s", page, b.line, err, sh.logsOf())
				}
				for i, c := range b.cmds {
					ran++
					got := strings.Split(ports.undo(strings.Join(results[i].output, "\n")), "\n")
					if results[i].status != 0 {
						t.Errorf("%s:%d: exit status %d:\n$ %s\n%s", page, c.line, results[i].status, c.text, strings.Join(got, "\n"))
						continue
					}
					if !b.prompt {
						continue
					}
					want, have := normalise(c.output), normalise(got)
					if !slices.Equal(want, have) {
						t.Errorf("%s:%d:\n$ %s\nthe page shows:\n%s\nthe command printed:\n%s\n(compared with times, ids and hashes normalised:\n%s\n  vs\n%s)",
							page, c.line, c.text, strings.Join(c.output, "\n"), strings.Join(got, "\n"), strings.Join(want, "\n"), strings.Join(have, "\n"))
					}
				}
			}
			if ran == 0 {
				t.Errorf("%s: no command ran", page)
			}
			if t.Failed() {
				t.Logf("the programs started in the background printed:\n%s", sh.logsOf())
			}
		})
	}
}

func TestTheGuideExtractorSeesPromptsOutputContinuationsAndNotRun(t *testing.T) {
	page := filepath.Join(t.TempDir(), "page.md")
	if err := os.WriteFile(page, []byte("text\n\n```sh\nbin/x serve &\n# comment\ncurl a \\\n  -d b\n```\n\n```console\n$ echo hi\nhi\n\n$ true\n```\n\n```sh not-run: needs a cluster\nkubectl apply\n```\n\n```yaml\nnot: a command\n```\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range guideBlocks(t, page) {
		for _, c := range b.cmds {
			got = append(got, fmt.Sprintf("%d %q %v %q => %q", c.line, b.info, b.prompt, c.text, c.output))
		}
	}
	want := []string{
		`4 "sh" false "bin/x serve &" => []`,
		`6 "sh" false "curl a \\\n  -d b" => []`,
		`11 "console" true "echo hi" => ["hi" ""]`,
		`14 "console" true "true" => []`,
		`18 "sh not-run: needs a cluster" false "kubectl apply" => []`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("blocks:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n := normalise([]string{`"created":1796443375,"id":"chatcmpl-demo2" at 2026-12-05T04:02:56.029910499Z key apikey:1fbfd5e2a34698de`, ""}); !slices.Equal(n, []string{`"created":<unix>,"id":"chatcmpl-<id>" at <time> key apikey:<hex>`}) {
		t.Errorf("normalised: %q", n)
	}
	// A go run on a machine whose module cache lacks a module says so once.
	if n := normalise([]string{"go: downloading helm.sh/helm/v3 v3.22.0", "kind: Service", "go: downloading sigs.k8s.io/yaml v1.6.0"}); !slices.Equal(n, []string{"kind: Service"}) {
		t.Errorf("normalised: %q", n)
	}
	if got := configFiles("/co", `/usr/sbin/nginx -p "$PWD/examples/nginx/" -e stderr -c nginx.conf &`); !slices.Contains(got, "/co/examples/nginx/nginx.conf") {
		t.Errorf("nginx's config under its prefix not found: %q", got)
	}
	if got := configFiles("/co", `caddy run --config examples/Caddyfile.forward-auth &`); !slices.Equal(got, []string{"/co/examples/Caddyfile.forward-auth"}) {
		t.Errorf("config files: %q", got)
	}
	m := portMap{"8480": "41234"}
	if got := m.apply("--listen 127.0.0.1:8480 :8480 port 8480"); got != "--listen 127.0.0.1:41234 :41234 port 8480" {
		t.Errorf("ports moved: %q", got)
	}
	if got := m.undo("addr=127.0.0.1:41234"); got != "addr=127.0.0.1:8480" {
		t.Errorf("ports moved back: %q", got)
	}
}

// A program a block starts in the background that ends before its address
// listens (a port another program took, a config it refuses) fails the
// block at once, naming it, rather than when the block's time is up.
func TestABlockWhoseProgramEndsBeforeListeningFailsAtOnce(t *testing.T) {
	sh := startGuideShell(t, t.TempDir())
	addr := freeAddr(t)
	cmd := "bash -c 'echo cannot listen on " + addr + "; exit 3' &"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	results, err := sh.run(ctx, 0, []string{cmd, "true"})
	if err != nil {
		t.Fatal(err)
	}
	if results[0].pid == 0 || results[1].pid != 0 {
		t.Fatalf("pids of the commands: %d, %d; want the background one's alone", results[0].pid, results[1].pid)
	}
	err = waitListening(ctx, []string{addr}, map[int]string{results[0].pid: cmd})
	if err == nil || !strings.Contains(err.Error(), "has ended") || !strings.Contains(err.Error(), cmd) {
		t.Fatalf("waitListening: %v; want at once that %q ended", err, cmd)
	}
	if logs := sh.logsOf(); !strings.Contains(logs, "cannot listen on "+addr) {
		t.Errorf("the program's log:\n%s", logs)
	}
}

// Every port a guide's programs listen on is one of its own, and none is
// of the kernel's ephemeral range, which connections take their local port
// from: one taken so between its choice and the program's listen would
// leave the program unable to listen.
func TestTheGuidesPortsAreDistinctAndNoConnectionsOwn(t *testing.T) {
	low, high := belowEphemeral()
	if high <= low {
		t.Skip("the kernel names no ephemeral range with room below it")
	}
	for range 20 {
		m := newPortMap(t)
		distinct := map[string]bool{}
		for orig, free := range m {
			if port, err := strconv.Atoi(free); err != nil || port < low || port >= high {
				t.Fatalf("%s moved to %s, not in [%d, %d)", orig, free, low, high)
			}
			distinct[free] = true
		}
		if len(distinct) != len(guidePorts) {
			t.Fatalf("%v: %d distinct ports for the guides' %d", m, len(distinct), len(guidePorts))
		}
	}
}

// fileFence is a block's info string naming the repository file it shows.
var fileFence = regexp.MustCompile("^\\s*```+\\s*[a-z]*\\s+file=(\\S+)")

// TestABlockThatNamesAFileIsThatFile holds every block whose info string
// says file=PATH ("```yaml file=examples/llm-cost.yaml") to that file of
// the repository, byte for byte.
func TestABlockThatNamesAFileIsThatFile(t *testing.T) {
	n := 0
	for _, page := range pages(t) {
		raw, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(raw), "\n")
		for i := 0; i < len(lines); i++ {
			m := fileFence.FindStringSubmatch(lines[i])
			if m == nil {
				continue
			}
			var body strings.Builder
			j := i + 1
			for ; j < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[j]), "```"); j++ {
				body.WriteString(lines[j] + "\n")
			}
			n++
			want, err := os.ReadFile(filepath.Join(root, m[1]))
			if err != nil {
				t.Errorf("%s:%d: %v", page, i+1, err)
			} else if body.String() != string(want) {
				t.Errorf("%s:%d: the block differs from %s: copy the file into the page\n--- page\n%s--- %s\n%s", page, i+1, m[1], body.String(), m[1], want)
			}
			i = j
		}
	}
	if n == 0 {
		t.Error("no block names its file: docs/cost-and-quotas.md shows examples/llm-cost.yaml")
	}
}
