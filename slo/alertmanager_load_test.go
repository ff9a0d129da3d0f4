package slo

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	amconfig "github.com/prometheus/alertmanager/config"
)

// checkWithAlertmanager loads content with the current Alertmanager
// library's own loader (strict: unknown fields are errors). Only the tests
// link it: see the comment on AlertmanagerConfig.
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
