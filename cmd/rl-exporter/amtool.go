package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// errNoAmtool says amtool is not on the PATH of the environment run got.
var errNoAmtool = errors.New("amtool not found on PATH")

// findAmtool finds the amtool executable in the directories of env's PATH
// (not the process's: run's environment is the only one subcommands read).
func findAmtool(env environ) (string, error) {
	for _, dir := range filepath.SplitList(env.Get("PATH")) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, "amtool")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errNoAmtool
}

// checkWithAmtool checks an Alertmanager configuration with `amtool
// check-config`, Alertmanager's own loader, run as a separate program so
// that rl-exporter does not link Alertmanager. It returns errNoAmtool when
// amtool is not installed.
func checkWithAmtool(ctx context.Context, env environ, content []byte) error {
	amtool, err := findAmtool(env)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "rl-exporter-rules-")
	if err != nil {
		return fmt.Errorf("amtool check-config: %w", err)
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(file, content, 0o600); err != nil {
		return fmt.Errorf("amtool check-config: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, amtool, "check-config", file)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("amtool check-config refuses it: %v\n%s", err, strings.TrimSpace(string(out)))
	}
	return nil
}
