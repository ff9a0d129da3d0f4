package slo

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	amconfig "github.com/prometheus/alertmanager/config"
	commoncfg "github.com/prometheus/common/config"
)

// checkWithAlertmanager loads content with the current Alertmanager
// library's own loader (strict: unknown fields are errors). Only the tests
// link it: see the package doc.
func checkWithAlertmanager(content []byte) error {
	_, err := amconfig.Load(string(content))
	return err
}

// Every spec the repository ships or tests with generates an Alertmanager
// configuration that Alertmanager's own loader accepts.
func TestEveryGeneratedAlertmanagerConfigLoadsInAlertmanager(t *testing.T) {
	specs, err := filepath.Glob("testdata/valid/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	specs = append(specs, "testdata/unreachable-row.yaml", "../slo.yaml", "../deploy/slo.yaml")
	for _, spec := range specs {
		t.Run(spec, func(t *testing.T) {
			m, err := LoadFile(spec)
			if err != nil {
				t.Fatal(err)
			}
			files, err := Generate(m)
			if err != nil {
				t.Fatal(err)
			}
			var found bool
			for _, f := range files {
				if f.Path != AlertmanagerPath {
					continue
				}
				found = true
				if err := checkWithAlertmanager(f.Content); err != nil {
					t.Errorf("Alertmanager's config.Load refuses %s:\n%v\n%s", f.Path, err, f.Content)
				}
			}
			if !found {
				t.Fatalf("no %s generated", AlertmanagerPath)
			}
		})
	}
}

// The check above can fail: the loader refuses what Alertmanager would,
// here a route to a receiver the configuration does not define.
func TestTheAlertmanagerLoaderRefusesAnUndefinedReceiver(t *testing.T) {
	m, err := LoadFile("../slo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := m.Alertmanager()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Route.Routes[0].Receiver = "nobody"
	var buf bytes.Buffer
	if err := WriteAlertmanager(&buf, cfg, "slo.yaml"); err != nil {
		t.Fatal(err)
	}
	err = checkWithAlertmanager(buf.Bytes())
	if err == nil || !strings.Contains(err.Error(), "nobody") {
		t.Errorf("config.Load = %v, want an error naming the undefined receiver", err)
	}
}

// The reason the package writes its own Alertmanager types: the generated
// configuration, loaded with the current Alertmanager library and encoded
// back with its types, is one amtool 0.25 refuses, because those types
// write every field the current release knows. Should a release of the
// library stop doing so, this test fails and the types in
// alertmanager.go can give way to the library's.
func TestAmtool025RefusesTheConfigAsAlertmanagersOwnTypesWriteIt(t *testing.T) {
	requireTool(t, "amtool")
	out, err := exec.Command("amtool", "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("amtool --version: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "version 0.25.") {
		t.Fatalf("amtool is not Alertmanager 0.25, the oldest release the generated configuration supports:\n%s", out)
	}
	dir := generateInto(t, filepath.Join(repoRoot, "slo.yaml"))
	ours, err := os.ReadFile(filepath.Join(dir, AlertmanagerPath))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := amconfig.Load(string(ours))
	if err != nil {
		t.Fatal(err)
	}
	// Encode the URLs as they are, not as "<secret>" (this test is not
	// parallel: the switch is global).
	commoncfg.MarshalSecretValue = true
	t.Cleanup(func() { commoncfg.MarshalSecretValue = false })
	theirs := filepath.Join(dir, "theirs.yml")
	if err := os.WriteFile(theirs, []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	msg, err := run(t, dir, "amtool", "check-config", theirs)
	if err == nil {
		t.Fatalf("amtool 0.25 accepts the configuration as Alertmanager's types write it:\n%s", cfg.String())
	}
	if !strings.Contains(msg, "not found in type") {
		t.Errorf("amtool 0.25 refuses it, but not for an unknown field:\n%s", msg)
	}
	if msg, err := run(t, dir, "amtool", "check-config", AlertmanagerPath); err != nil {
		t.Errorf("amtool 0.25 refuses the configuration as generated: %v\n%s", err, msg)
	}
}
