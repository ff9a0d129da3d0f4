package main

import (
	"bytes"
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestTheHelpListsEveryCommandOfTheTableOnce(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"--help"}, nil, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d", code)
	}
	help := stderr.String()
	names := make([]string, 0, len(commands))
	for _, c := range commands {
		line := "  " + c.name + " "
		if strings.Count(help, line) != 1 {
			t.Errorf("help lists %q %d times:\n%s", c.name, strings.Count(help, line), help)
		}
		if !strings.Contains(help, c.summary) {
			t.Errorf("help lacks the summary of %s", c.name)
		}
		names = append(names, c.name)
	}
	if !slices.IsSorted(names) {
		t.Errorf("commands are not in alphabetical order: %v", names)
	}
	for _, want := range []string{"alert-sink", "bench", "check", "demo-upstream", "rules", "serve", "simulate", "traffic"} {
		if !slices.Contains(names, want) {
			t.Errorf("command %s is missing from the table", want)
		}
	}
}

func TestAnUnknownCommandIsNamedAndExits2(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"serv"}, nil, &stdout, &stderr); code != exitUsage {
		t.Errorf("exit %d, want %d", code, exitUsage)
	}
	if !strings.Contains(stderr.String(), `unknown command "serv"`) {
		t.Errorf("stderr:\n%s", stderr.String())
	}
}

func TestEnvironReadsTheLastValueAndThePrefixedNames(t *testing.T) {
	env := environ{"PATH=/bin", "RL_LOG__LEVEL=info", "OTHER=1", "RL_EMPTY=", "RL_LOG__LEVEL=debug", "RL_SERVER__LISTEN=:1"}
	if got := env.Get("RL_LOG__LEVEL"); got != "debug" {
		t.Errorf("Get = %q, want the last value, debug", got)
	}
	if got := env.Get("MISSING"); got != "" {
		t.Errorf("Get of an unset name = %q", got)
	}
	want := []string{"RL_LOG__LEVEL=debug", "RL_SERVER__LISTEN=:1"}
	if got := env.WithPrefix("RL_"); !slices.Equal(got, want) {
		t.Errorf("WithPrefix = %q, want %q", got, want)
	}
}

// serve reads the RL_* variables from the environment run is given, not
// from the process's.
func TestServeReadsTheInjectedEnvironmentOnly(t *testing.T) {
	t.Setenv("RL_LOG__LEVEL", "loud-from-the-process")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"serve"}, environ{"RL_LOG__LEVEL=loud-from-the-test"}, &stdout, &stderr)
	if code != exitFailure {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitFailure, stderr.String())
	}
	if !strings.Contains(stderr.String(), "loud-from-the-test") {
		t.Errorf("the injected RL_LOG__LEVEL is not what serve refused:\n%s", stderr.String())
	}
	if strings.Contains(stderr.String(), "loud-from-the-process") {
		t.Errorf("serve read the process environment:\n%s", stderr.String())
	}
}

// Only main reads the process environment; every subcommand gets it from
// run, so a test can give it one.
func TestOnlyMainReadsTheProcessEnvironment(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if ok && fn.Name.Name == "main" && fn.Recv == nil {
				continue
			}
			ast.Inspect(decl, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "os" {
					switch sel.Sel.Name {
					case "Getenv", "LookupEnv", "Environ", "ExpandEnv":
						t.Errorf("%s: os.%s outside main: use the environment run passes", fset.Position(sel.Pos()), sel.Sel.Name)
					}
				}
				return true
			})
		}
	}
}
