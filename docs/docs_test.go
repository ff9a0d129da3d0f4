// Package docs holds the documentation pages of rl-exporter; its test keeps
// the shell commands of the README and of these pages runnable as written
// from a fresh clone.
package docs

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/rl-exporter/rl-exporter/internal/testbin"
)

// root is the repository, where the README's commands run.
const root = ".."

var binary string

func TestMain(m *testing.M) { testbin.Main(m, "../cmd/rl-exporter", &binary) }

// command is one shell command of a page, with the output the page shows
// for it (console blocks: the lines after "$ command").
type command struct {
	page, line string
	words      []string
	output     []string
}

func (c command) String() string { return c.page + ": " + c.line }

// pages are the README and every docs page.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	out := []string{filepath.Join(root, "README.md")}
	for _, d := range docs {
		out = append(out, d)
	}
	return out
}

var fence = regexp.MustCompile("^\\s*```+\\s*([a-z]*)")

// commands extracts the commands of the sh, bash, shell and console code
// blocks of a page. In a block with "$ " prompts only the prompted lines
// are commands and the others their output; otherwise every line that is
// not a comment is one. A trailing "\" joins lines.
func commands(t *testing.T, page string) []command {
	t.Helper()
	raw, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var out []command
	var block []string
	in, lang := false, ""
	flush := func() {
		prompted := slices.ContainsFunc(block, func(l string) bool { return strings.HasPrefix(strings.TrimSpace(l), "$ ") })
		for i := 0; i < len(block); i++ {
			l := strings.TrimSpace(block[i])
			for strings.HasSuffix(l, "\\") && i+1 < len(block) {
				i++
				l = strings.TrimSuffix(l, "\\") + " " + strings.TrimSpace(block[i])
			}
			if prompted {
				if !strings.HasPrefix(l, "$ ") {
					if len(out) > 0 && out[len(out)-1].page == filepath.Base(page) {
						out[len(out)-1].output = append(out[len(out)-1].output, block[i])
					}
					continue
				}
				l = strings.TrimPrefix(l, "$ ")
			}
			if l == "" || strings.HasPrefix(l, "#") {
				continue
			}
			for _, words := range split(l) {
				out = append(out, command{page: filepath.Base(page), line: l, words: words})
			}
		}
		block = nil
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if m := fence.FindStringSubmatch(l); m != nil {
			if in {
				if lang == "sh" || lang == "bash" || lang == "shell" || lang == "console" {
					flush()
				}
				in, block = false, nil
			} else {
				in, lang = true, m[1]
			}
			continue
		}
		if in {
			block = append(block, l)
		}
	}
	return out
}

// split cuts a shell line into simple commands (at |, &&, ||, ; and &)
// of words, honouring quotes, dropping a trailing comment, leading
// NAME=value assignments and redirections.
func split(line string) [][]string {
	var cmds [][]string
	var words []string
	var w strings.Builder
	inWord := false
	end := func() {
		if inWord {
			words = append(words, w.String())
			w.Reset()
			inWord = false
		}
	}
	endCmd := func() {
		end()
		for len(words) > 0 && regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`).MatchString(words[0]) {
			words = words[1:]
		}
		if len(words) > 0 {
			cmds = append(cmds, words)
		}
		words = nil
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				j = len(line) - i - 1
			}
			w.WriteString(line[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			j := i + 1
			for j < len(line) && line[j] != '"' {
				if line[j] == '\\' {
					j++
				}
				j++
			}
			w.WriteString(line[i+1 : min(j, len(line))])
			i = j
			inWord = true
		case c == '$' && i+1 < len(line) && line[i+1] == '(':
			depth := 0
			j := i + 1
			for ; j < len(line); j++ {
				if line[j] == '(' {
					depth++
				} else if line[j] == ')' {
					depth--
					if depth == 0 {
						break
					}
				}
			}
			w.WriteString("$(…)")
			i = j
			inWord = true
		case c == '#' && !inWord:
			endCmd()
			return cmds
		case c == ' ' || c == '\t':
			end()
		case c == '|' || c == ';' || c == '&':
			endCmd()
			if i+1 < len(line) && (line[i+1] == '|' || line[i+1] == '&') {
				i++
			}
		case c == '>' || c == '<':
			end()
			// Drop the redirection's target.
			j := i + 1
			for j < len(line) && (line[j] == '>' || line[j] == '&' || line[j] == ' ') {
				j++
			}
			for j < len(line) && line[j] != ' ' {
				j++
			}
			i = j
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	endCmd()
	return cmds
}

// flagsOf returns the flags a subcommand's help lists.
func flagsOf(t *testing.T, sub string) map[string]bool {
	t.Helper()
	out, _ := exec.Command(binary, sub, "-h").CombinedOutput()
	flags := map[string]bool{"h": true, "help": true}
	for _, m := range regexp.MustCompile(`(?m)^\s+-([a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	if len(flags) == 2 {
		t.Fatalf("rl-exporter %s -h lists no flags:\n%s", sub, out)
	}
	return flags
}

// subcommands returns the commands the top-level help lists.
func subcommands(t *testing.T) map[string]bool {
	t.Helper()
	out, _ := exec.Command(binary, "help").CombinedOutput()
	_, list, _ := strings.Cut(string(out), "commands:\n")
	list, _, _ = strings.Cut(list, "\n\n")
	subs := map[string]bool{}
	for _, l := range strings.Split(list, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			subs[f[0]] = true
		}
	}
	if !subs["serve"] || !subs["check"] {
		t.Fatalf("no command list in the help:\n%s", out)
	}
	return subs
}

// makeTargets returns the Makefile's targets.
func makeTargets(t *testing.T) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):`).FindAllStringSubmatch(string(raw), -1) {
		targets[m[1]] = true
	}
	return targets
}

// pathLike is a word that names a file or directory of the repository.
var pathLike = regexp.MustCompile(`^(\./)?[A-Za-z0-9_.-]+(/[A-Za-z0-9_.*{}-]+)+/?$|^[A-Za-z0-9_-]+\.(ya?ml|json|md|sh|go)$`)

// outputFlags take a path the command writes, which need not exist.
var outputFlags = map[string]bool{"--out": true, "-out": true, "-o": true, "--svg": true, "-svg": true}

func checkPaths(t *testing.T, c command, dir string, words []string) {
	t.Helper()
	for i, w := range words {
		if i > 0 && outputFlags[words[i-1]] {
			continue
		}
		if k, v, ok := strings.Cut(w, "="); ok && strings.HasPrefix(k, "-") {
			if outputFlags[k] {
				continue
			}
			w = v
		}
		if strings.Contains(w, "://") || strings.Contains(w, ":") || strings.Contains(w, "$") || strings.HasPrefix(w, "/") ||
			strings.HasPrefix(w, "-") || !pathLike.MatchString(w) {
			continue
		}
		// A word is a path of the repository when its first part is one
		// (examples/x.yaml) or it names a file (rl.yaml); 60/m and
		// pkg.Service/Method are not.
		first, _, _ := strings.Cut(strings.TrimPrefix(w, "./"), "/")
		if _, err := os.Stat(filepath.Join(root, dir, first)); err != nil && !regexp.MustCompile(`\.(ya?ml|json|md|sh|go|svg)$`).MatchString(w) {
			continue
		}
		if strings.ContainsAny(w, "*{") {
			if m, _ := filepath.Glob(filepath.Join(root, dir, strings.NewReplacer("{", "", "}", "").Replace(w))); len(m) == 0 {
				t.Errorf("%s: %s matches no file of the repository", c, w)
			}
			continue
		}
		if _, err := os.Stat(filepath.Join(root, dir, w)); err != nil {
			t.Errorf("%s: %s is not in the repository", c, w)
		}
	}
}

// TestEveryCommandOfTheDocsNamesWhatExists reads every shell command of
// the README and the docs pages and checks what a fresh clone needs to run
// it as written: rl-exporter is bin/rl-exporter (make build, make run) or
// go run ./cmd/rl-exporter, never a bare rl-exporter that is on no PATH;
// its subcommands and flags exist; make targets exist; every repository
// file named exists.
func TestEveryCommandOfTheDocsNamesWhatExists(t *testing.T) {
	subs := subcommands(t)
	targets := makeTargets(t)
	flags := map[string]map[string]bool{}
	n := 0
	for _, page := range pages(t) {
		// dir is where a "cd DIR &&" earlier on the same line went.
		dir, line := "", ""
		for _, c := range commands(t, page) {
			n++
			w := c.words
			if c.line != line {
				dir, line = "", c.line
			}
			switch {
			case w[0] == "cd" && len(w) == 2:
				dir = w[1]
				continue
			case w[0] == "rl-exporter":
				t.Errorf("%s: rl-exporter is on no PATH after make build: write bin/rl-exporter", c)
				continue
			case w[0] == "make":
				for _, target := range w[1:] {
					if !strings.HasPrefix(target, "-") && !strings.Contains(target, "=") && !targets[target] {
						t.Errorf("%s: the Makefile has no target %q", c, target)
					}
				}
			case w[0] == "bin/rl-exporter" || (w[0] == "go" && len(w) > 2 && w[1] == "run" && strings.TrimSuffix(w[2], "/") == "./cmd/rl-exporter"):
				args := w[1:]
				if w[0] == "go" {
					args = w[3:]
				}
				if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" || args[0] == "version" {
					break
				}
				sub := args[0]
				if !subs[sub] {
					t.Errorf("%s: rl-exporter has no command %q", c, sub)
					continue
				}
				if flags[sub] == nil {
					flags[sub] = flagsOf(t, sub)
				}
				for _, a := range args[1:] {
					if !strings.HasPrefix(a, "-") {
						continue
					}
					name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
					if !flags[sub][name] {
						t.Errorf("%s: rl-exporter %s has no flag --%s", c, sub, name)
					}
				}
			}
			checkPaths(t, c, dir, w)
		}
	}
	if n < 20 {
		t.Fatalf("only %d commands found: the extraction is broken", n)
	}
}

// TestTheCommandsThatNeedNoNetworkRunAsWritten runs, from the repository
// root, every bin/rl-exporter check and rules --check of the docs, and
// compares what a console block shows with what the command prints.
func TestTheCommandsThatNeedNoNetworkRunAsWritten(t *testing.T) {
	ran := 0
	for _, page := range pages(t) {
		for _, c := range commands(t, page) {
			w := c.words
			if w[0] != "bin/rl-exporter" || len(w) < 2 {
				continue
			}
			offline := w[1] == "check" || (w[1] == "rules" && slices.Contains(w, "--check")) || w[1] == "-h" || w[1] == "version"
			if !offline {
				continue
			}
			cmd := exec.Command(binary, w[1:]...)
			cmd.Dir = root
			out, err := cmd.CombinedOutput()
			ran++
			if len(c.output) > 0 {
				got := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
				if !slices.Equal(got, c.output) {
					t.Errorf("%s prints\n%s\nwhile the page shows\n%s", c, out, strings.Join(c.output, "\n"))
				}
				continue
			}
			if err != nil {
				t.Errorf("%s: %v\n%s", c, err, out)
			}
		}
	}
	if ran < 3 {
		t.Fatalf("ran %d commands: want the README's check and the docs' check and rules --check at least", ran)
	}
}

// TestTheReadmeStartsWithWhatItIsHowToRunItAndACurlSession checks the
// first screen: what rl-exporter is, make run before make test, and a
// curl session against make run.
func TestTheReadmeStartsWithWhatItIsHowToRunItAndACurlSession(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	first := strings.Join(lines[:min(len(lines), 40)], "\n")
	run, test := strings.Index(first, "make run"), strings.Index(first, "make test")
	if !strings.Contains(first, "rate limiter") || run < 0 || test < 0 || run > test {
		t.Errorf("the first screen does not say what rl-exporter is, then make run before make test:\n%s", first)
	}
	if strings.Count(first, "curl ") < 3 || !strings.Contains(first, "127.0.0.1:8480") {
		t.Errorf("the first screen has no curl session against make run's serve:\n%s", first)
	}
	for _, p := range []string{"configuration.md", "metrics.md", "alerts-and-slos.md", "dashboards-and-stack.md"} {
		if !strings.Contains(string(raw), "(docs/"+p+")") {
			t.Errorf("the README does not link docs/%s", p)
		}
		if _, err := os.Stat(p); err != nil {
			t.Error(err)
		}
	}
}

func TestTheExtractorSeesCommandsPromptsAndOutput(t *testing.T) {
	page := filepath.Join(t.TempDir(), "page.md")
	if err := os.WriteFile(page, []byte("text\n\n```sh\nRL_X=1 bin/rl-exporter serve --config examples/demo.yaml & # comment\ncurl -s -d '{\"a\": \"b | c\"}' x | grep y\nmake \\\n  run\n```\n\n```console\n$ bin/rl-exporter check --config a.yaml\nrl-exporter check: a.yaml is invalid\n```\n\n```yaml\nnot: a command\n```\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range commands(t, page) {
		got = append(got, strings.Join(c.words, " ")+" => "+strings.Join(c.output, "/"))
	}
	want := []string{
		"bin/rl-exporter serve --config examples/demo.yaml => ",
		"curl -s -d {\"a\": \"b | c\"} x => ",
		"grep y => ",
		"make run => ",
		"bin/rl-exporter check --config a.yaml => rl-exporter check: a.yaml is invalid",
	}
	if !slices.Equal(got, want) {
		t.Errorf("commands:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
