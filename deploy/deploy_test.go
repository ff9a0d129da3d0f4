package deploy

import (
	"bytes"
	"debug/elf"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/rl-exporter/rl-exporter/config"
	"github.com/rl-exporter/rl-exporter/dashboards"
	"github.com/rl-exporter/rl-exporter/slo"
)

var update = flag.Bool("update", false, "rewrite deploy/generated from deploy/slo.yaml")

const root = ".."

// compose is the part of the Compose file format the stack uses; decoding
// it strictly makes a misspelt key an error.
type compose struct {
	Name     string             `yaml:"name"`
	Anchor   service            `yaml:"x-rl-exporter"`
	Services map[string]service `yaml:"services"`
}

type service struct {
	Build *struct {
		Context    string `yaml:"context"`
		Dockerfile string `yaml:"dockerfile"`
	} `yaml:"build"`
	Image       string            `yaml:"image"`
	Command     []string          `yaml:"command"`
	Volumes     []string          `yaml:"volumes"`
	Ports       []string          `yaml:"ports"`
	DependsOn   []string          `yaml:"depends_on"`
	Environment map[string]string `yaml:"environment"`
	Restart     string            `yaml:"restart"`
}

func loadCompose(t *testing.T) compose {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	if len(c.Services) == 0 {
		t.Fatal("docker-compose.yml: no services")
	}
	return c
}

// mount is one bind mount of a service.
type mount struct{ service, host, container string }

func mounts(t *testing.T, c compose) []mount {
	t.Helper()
	var out []mount
	for name, s := range c.Services {
		for _, v := range s.Volumes {
			parts := strings.Split(v, ":")
			if len(parts) < 2 || len(parts) > 3 || (len(parts) == 3 && parts[2] != "ro" && parts[2] != "rw") {
				t.Errorf("service %s: volume %q is not HOST:CONTAINER[:ro]", name, v)
				continue
			}
			if !strings.HasPrefix(parts[0], "./") {
				t.Errorf("service %s: volume %q does not mount a path of the repository", name, v)
				continue
			}
			out = append(out, mount{service: name, host: parts[0], container: parts[1]})
		}
	}
	return out
}

func TestEveryMountedPathAndBuildContextExists(t *testing.T) {
	c := loadCompose(t)
	ms := mounts(t, c)
	if len(ms) < 7 {
		t.Fatalf("only %d mounts: %+v", len(ms), ms)
	}
	for _, m := range ms {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(m.host))); err != nil {
			t.Errorf("service %s mounts %s, which does not exist: %v", m.service, m.host, err)
		}
	}
	built := 0
	for name, s := range c.Services {
		if s.Build == nil {
			if s.Image == "" {
				t.Errorf("service %s has neither build nor image", name)
			}
			continue
		}
		built++
		ctx := filepath.Join(root, filepath.FromSlash(s.Build.Context))
		if fi, err := os.Stat(ctx); err != nil || !fi.IsDir() {
			t.Errorf("service %s: build context %s is not a directory (%v)", name, s.Build.Context, err)
			continue
		}
		if _, err := os.Stat(filepath.Join(ctx, s.Build.Dockerfile)); err != nil {
			t.Errorf("service %s: %v", name, err)
		}
		if len(s.Command) == 0 {
			t.Errorf("service %s runs rl-exporter without a subcommand", name)
		}
	}
	if built < 5 {
		t.Errorf("%d services built from the Dockerfile, want upstream, two replicas, traffic and alert-sink", built)
	}
	for name, s := range c.Services {
		for _, d := range s.DependsOn {
			if _, ok := c.Services[d]; !ok {
				t.Errorf("service %s depends on %s, which is not a service", name, d)
			}
		}
	}
}

func TestTheStackHasEveryPartAndAvoidsTheUsualHostPorts(t *testing.T) {
	c := loadCompose(t)
	for _, want := range []string{"redis", "upstream", "rl-exporter-a", "rl-exporter-b", "traffic", "alert-sink", "prometheus", "alertmanager", "grafana"} {
		if _, ok := c.Services[want]; !ok {
			t.Errorf("no service %s", want)
		}
	}
	seen := map[string]string{}
	for name, s := range c.Services {
		for _, p := range s.Ports {
			host, _, ok := strings.Cut(p, ":")
			if !ok {
				t.Errorf("service %s: port %q does not pin a host port", name, p)
			}
			if slices.Contains([]string{"9090", "9093", "3000", "6379"}, host) {
				t.Errorf("service %s publishes host port %s, which a Prometheus, Alertmanager, Grafana or Redis of the machine may hold", name, host)
			}
			if other, dup := seen[host]; dup {
				t.Errorf("host port %s published by %s and %s", host, other, name)
			}
			seen[host] = name
		}
	}
	// The load reaches both replicas.
	cmd := strings.Join(c.Services["traffic"].Command, " ")
	for _, r := range []string{"rl-exporter-a", "rl-exporter-b"} {
		if !strings.Contains(cmd, "http://"+r+":"+listenPort(t, c, r)) {
			t.Errorf("traffic command %q does not target %s", cmd, r)
		}
	}
}

// listenPort is the port a service of the Dockerfile's image listens on,
// from its command line or, for serve, from its config file.
func listenPort(t *testing.T, c compose, service string) string {
	t.Helper()
	s := c.Services[service]
	for i, a := range s.Command {
		v, ok := strings.CutPrefix(a, "--listen=")
		if !ok && a == "--listen" && i+1 < len(s.Command) {
			v, ok = s.Command[i+1], true
		}
		if ok {
			_, port, err := net.SplitHostPort(v)
			if err != nil {
				t.Fatalf("service %s: --listen %q: %v", service, v, err)
			}
			return port
		}
	}
	if len(s.Command) > 0 && s.Command[0] == "serve" {
		cfg := serveConfig(t, c, service)
		_, port, err := net.SplitHostPort(cfg.Server.Listen)
		if err != nil {
			t.Fatalf("service %s: server.listen %q: %v", service, cfg.Server.Listen, err)
		}
		return port
	}
	t.Fatalf("service %s: cannot tell its port from %q", service, s.Command)
	return ""
}

// hostPath maps a container path of a service to the repository file
// mounted there.
func hostPath(t *testing.T, c compose, service, container string) string {
	t.Helper()
	for _, m := range mounts(t, c) {
		if m.service != service {
			continue
		}
		if container == m.container {
			return filepath.Join(root, filepath.FromSlash(m.host))
		}
		if rest, ok := strings.CutPrefix(container, m.container+"/"); ok {
			return filepath.Join(root, filepath.FromSlash(m.host), filepath.FromSlash(rest))
		}
	}
	t.Fatalf("service %s mounts nothing at %s", service, container)
	return ""
}

func serveConfig(t *testing.T, c compose, service string) *config.Config {
	t.Helper()
	args := c.Services[service].Command
	i := slices.Index(args, "--config")
	if i < 0 || i+1 >= len(args) {
		t.Fatalf("service %s: serve without --config", service)
	}
	cfg, err := config.Load(hostPath(t, c, service, args[i+1]))
	if err != nil {
		t.Fatalf("service %s: %v", service, err)
	}
	return cfg
}

func TestTheReplicasShareRedisInFrontOfTheUpstream(t *testing.T) {
	c := loadCompose(t)
	for _, r := range []string{"rl-exporter-a", "rl-exporter-b"} {
		cfg := serveConfig(t, c, r)
		if cfg.Store.Type != "redis" || cfg.Store.FailPolicy != "open" {
			t.Errorf("%s: store %s with fail policy %s, want a shared Redis failing open", r, cfg.Store.Type, cfg.Store.FailPolicy)
		}
		checkURL(t, c, r+" store.redis.url", cfg.Store.Redis.URL, "redis", "6379")
		checkURL(t, c, r+" server.upstream", cfg.Server.Upstream, "upstream", listenPort(t, c, "upstream"))
	}
}

// checkURL checks that raw names a service of the stack at the port it
// listens on.
func checkURL(t *testing.T, c compose, what, raw, service, port string) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	if u.Hostname() != service || u.Port() != port {
		t.Errorf("%s is %s, want the %s service on port %s", what, raw, service, port)
	}
	if _, ok := c.Services[u.Hostname()]; !ok {
		t.Errorf("%s names host %s, which is not a service", what, u.Hostname())
	}
}

func requireTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not installed: run `make deps` (Debian packages prometheus and prometheus-alertmanager)", name)
	}
	return p
}

func TestPromtoolAcceptsThePrometheusConfigAndItsRules(t *testing.T) {
	c := loadCompose(t)
	cfgPath := hostPath(t, c, "prometheus", "/etc/prometheus/prometheus.yml")
	out, err := exec.Command(requireTool(t, "promtool"), "check", "config", cfgPath).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check config %s: %v\n%s", cfgPath, err, out)
	}
	// promtool checks the rule files the config names, found relative to
	// it: the same files the compose file mounts beside it.
	if !strings.Contains(string(out), "rl-exporter.rules.yml") || !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool did not check the generated rules:\n%s", out)
	}
	var prom struct {
		Global struct {
			ScrapeInterval string `yaml:"scrape_interval"`
		} `yaml:"global"`
		RuleFiles []string `yaml:"rule_files"`
		Alerting  struct {
			Alertmanagers []struct {
				StaticConfigs []struct {
					Targets []string `yaml:"targets"`
				} `yaml:"static_configs"`
			} `yaml:"alertmanagers"`
		} `yaml:"alerting"`
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	raw, _ := os.ReadFile(cfgPath)
	if err := yaml.Unmarshal(raw, &prom); err != nil {
		t.Fatal(err)
	}
	for _, rf := range prom.RuleFiles {
		if got := hostPath(t, c, "prometheus", "/etc/prometheus/"+rf); !strings.HasPrefix(filepath.ToSlash(got), "../deploy/generated/rules/") {
			t.Errorf("rule file %s is mounted from %s, not from the generated rules", rf, got)
		}
	}
	spec := stackModel(t)
	var job []string
	for _, sc := range prom.ScrapeConfigs {
		if sc.JobName == spec.Job {
			for _, s := range sc.StaticConfigs {
				job = append(job, s.Targets...)
			}
		}
	}
	want := []string{"rl-exporter-a:" + listenPort(t, c, "rl-exporter-a"), "rl-exporter-b:" + listenPort(t, c, "rl-exporter-b")}
	if !slices.Equal(job, want) {
		t.Errorf("scrape job %s targets %v, want both replicas %v", spec.Job, job, want)
	}
	if am := prom.Alerting.Alertmanagers; len(am) != 1 || len(am[0].StaticConfigs) != 1 ||
		!slices.Equal(am[0].StaticConfigs[0].Targets, []string{"alertmanager:9093"}) {
		t.Errorf("alerting targets %+v, want the alertmanager service", am)
	}

	// Grafana is told the scrape interval, for $__rate_interval.
	var ds grafanaDatasources
	decodeStrict(t, hostPath(t, c, "grafana", "/etc/grafana/provisioning/datasources/rl-exporter.yml"), &ds)
	if ds.APIVersion != 1 || len(ds.Datasources) != 1 {
		t.Fatalf("datasources provisioning: %+v", ds)
	}
	d := ds.Datasources[0]
	if d.Type != "prometheus" || !d.IsDefault || d.JSONData.TimeInterval != prom.Global.ScrapeInterval {
		t.Errorf("datasource %+v: want the default prometheus datasource with timeInterval %s", d, prom.Global.ScrapeInterval)
	}
	checkURL(t, c, "Grafana's Prometheus datasource", d.URL, "prometheus", "9090")
}

func decodeStrict(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func TestGrafanaProvisionsTheGeneratedDashboards(t *testing.T) {
	c := loadCompose(t)
	var prov grafanaDashboardProviders
	decodeStrict(t, hostPath(t, c, "grafana", "/etc/grafana/provisioning/dashboards/rl-exporter.yml"), &prov)
	if prov.APIVersion != 1 || len(prov.Providers) != 1 || prov.Providers[0].Type != "file" {
		t.Fatalf("dashboards provisioning: %+v", prov)
	}
	dir := hostPath(t, c, "grafana", prov.Providers[0].Options.Path)
	if filepath.ToSlash(dir) != "../deploy/generated/dashboards" {
		t.Errorf("Grafana loads dashboards from %s, want the generated deploy/generated/dashboards", dir)
	}
	if _, err := os.Stat(filepath.Join(dir, filepath.Base(dashboards.OverviewPath))); err != nil {
		t.Errorf("the Overview dashboard is not where Grafana looks: %v", err)
	}
	home := c.Services["grafana"].Environment["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
	if _, err := os.Stat(hostPath(t, c, "grafana", home)); err != nil {
		t.Errorf("home dashboard %s: %v", home, err)
	}
}

func TestAmtoolAcceptsTheAlertmanagerConfigAndItReachesTheSink(t *testing.T) {
	c := loadCompose(t)
	path := hostPath(t, c, "alertmanager", "/etc/alertmanager/alertmanager.yml")
	out, err := exec.Command(requireTool(t, "amtool"), "check-config", path).CombinedOutput()
	if err != nil {
		t.Fatalf("amtool check-config %s: %v\n%s", path, err, out)
	}
	var am struct {
		Receivers []struct {
			Name           string `yaml:"name"`
			WebhookConfigs []struct {
				URL string `yaml:"url"`
			} `yaml:"webhook_configs"`
		} `yaml:"receivers"`
	}
	raw, _ := os.ReadFile(path)
	if err := yaml.Unmarshal(raw, &am); err != nil {
		t.Fatal(err)
	}
	hooks := 0
	for _, r := range am.Receivers {
		for _, w := range r.WebhookConfigs {
			hooks++
			checkURL(t, c, "receiver "+r.Name+" webhook", w.URL, "alert-sink", listenPort(t, c, "alert-sink"))
		}
	}
	if hooks < 2 {
		t.Errorf("%d webhooks, want the page and ticket receivers on the sink", hooks)
	}
}

func TestTheDockerfileBuildsAStaticBinaryRunAsNonRoot(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var stages, users []string
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "FROM":
			stages = append(stages, f[1])
		case "USER":
			users = append(users, f[1])
		case "COPY":
			if strings.HasPrefix(f[1], "--from") {
				continue
			}
			for _, src := range f[1 : len(f)-1] {
				if src == "." {
					continue
				}
				if _, err := os.Stat(filepath.Join(root, src)); err != nil {
					t.Errorf("COPY %s: %v", src, err)
				}
			}
		}
	}
	if len(stages) < 2 {
		t.Errorf("%d stages, want a build stage and a runtime stage", len(stages))
	}
	final := stages[len(stages)-1]
	if !strings.HasPrefix(final, "gcr.io/distroless/static") && final != "scratch" {
		t.Errorf("runtime stage %s is not a static-binary base", final)
	}
	if !strings.Contains(string(raw), "CGO_ENABLED=0") {
		t.Error("the binary is not built with CGO_ENABLED=0")
	}
	if len(users) == 0 || strings.HasPrefix(users[len(users)-1], "0") || strings.HasPrefix(users[len(users)-1], "root") {
		t.Errorf("USER %v: the image must run as a non-root user", users)
	}
}

// The alert tests generated with the stack's rules pass, so the demo's
// shortened for: durations still fire and stay quiet as they should.
func TestTheStackRulesPassTheirGeneratedPromtoolTests(t *testing.T) {
	tests, err := filepath.Glob(filepath.Join("generated", filepath.FromSlash(slo.RuleTestsDir), "*.yml"))
	if err != nil || len(tests) < 5 {
		t.Fatalf("generated rule tests: %v %v", tests, err)
	}
	args := []string{"test", "rules"}
	for _, f := range tests {
		args = append(args, filepath.Base(f))
	}
	cmd := exec.Command(requireTool(t, "promtool"), args...)
	cmd.Dir = filepath.Dir(tests[0])
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// The Dockerfile's build (CGO_ENABLED=0) makes a static binary, which is
// what lets it run on distroless/static: no interpreter, no shared library.
func TestTheBinaryBuiltWithoutCgoIsStatic(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "rl-exporter")
	build := exec.Command("go", "build", "-o", bin, "./cmd/rl-exporter")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatalf("%s is not an ELF binary: %v", bin, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("the binary has a %s program header: it is dynamically linked", p.Type)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v", libs)
	}
}

// stackSpec is the SLO spec of the demo stack.
const stackSpec = "slo.yaml"

func stackModel(t *testing.T) *slo.Model {
	t.Helper()
	m, err := slo.LoadFile(stackSpec)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// generatedFiles is what `rl-exporter rules --spec deploy/slo.yaml --out
// deploy/generated` writes.
func generatedFiles(t *testing.T, m *slo.Model) []slo.File {
	t.Helper()
	files, err := slo.Generate(m)
	if err != nil {
		t.Fatal(err)
	}
	dash, err := dashboards.Generate(m)
	if err != nil {
		t.Fatal(err)
	}
	return append(files, dash...)
}

func TestGeneratedStackFilesMatchTheStackSpec(t *testing.T) {
	files := generatedFiles(t, stackModel(t))
	want := map[string]bool{}
	for _, f := range files {
		p := filepath.Join("generated", filepath.FromSlash(f.Path))
		want[p] = true
		if *update {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, f.Content, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("%v (regenerate: rl-exporter rules --spec deploy/slo.yaml --out deploy/generated)", err)
			continue
		}
		if !bytes.Equal(got, f.Content) {
			t.Errorf("deploy/%s differs from what deploy/slo.yaml generates: regenerate with rl-exporter rules --spec deploy/slo.yaml --out deploy/generated", p)
		}
	}
	err := filepath.WalkDir("generated", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if !want[p] {
			if *update {
				return os.Remove(p)
			}
			t.Errorf("deploy/%s is not generated from deploy/slo.yaml: remove it", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestTheStackSpecDiffersFromTheDefaultsOnlyWhereADemoNeedsIt(t *testing.T) {
	stack, repo := stackModel(t), func() *slo.Model {
		m, err := slo.LoadFile(filepath.Join(root, "slo.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}()
	// Same thresholds, job and windows as the repository's spec, so the
	// stack's dashboards and alerts show what production would.
	same := []struct {
		what       string
		got, wantV any
	}{
		{"job", stack.Job, repo.Job},
		{"rejection threshold", stack.Rejection.Threshold, repo.Rejection.Threshold},
		{"rejection window", stack.Rejection.Window, repo.Rejection.Window},
		{"latency threshold", stack.Latency.Threshold, repo.Latency.Threshold},
		{"fail-open threshold", stack.FailOpen.Threshold, repo.FailOpen.Threshold},
		{"fail-open window", stack.FailOpen.Window, repo.FailOpen.Window},
		{"objective", stack.Availability.Objective, repo.Availability.Objective},
	}
	for _, s := range same {
		if fmt.Sprint(s.got) != fmt.Sprint(s.wantV) {
			t.Errorf("%s: stack %v, repository %v", s.what, s.got, s.wantV)
		}
	}
}

// serve's built-in main listener answers this host only: each container
// and pod sets its own to every interface, or nothing outside could reach
// it.
func TestEveryContainerAndPodListensOnEveryInterface(t *testing.T) {
	everywhere := func(what, addr string) {
		t.Helper()
		host, _, err := net.SplitHostPort(addr)
		if err != nil || (host != "" && host != "0.0.0.0" && host != "::") {
			t.Errorf("%s listens on %q, want every interface (0.0.0.0)", what, addr)
		}
	}
	raw, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := regexp.MustCompile(`(?m)^CMD \["serve", "--listen", "([^"]+)"\]$`).FindSubmatch(raw)
	if cmd == nil {
		t.Fatal(`the Dockerfile's CMD is not ["serve", "--listen", ADDR]`)
	}
	everywhere("the image's serve", string(cmd[1]))
	c := loadCompose(t)
	for _, r := range []string{"rl-exporter-a", "rl-exporter-b"} {
		everywhere(r, serveConfig(t, c, r).Server.Listen)
	}
	k8s, err := config.Load(filepath.Join(root, "deploy", "kubernetes", "rl-exporter.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	everywhere("the Kubernetes base", k8s.Server.Listen)
	everywhere("the Kubernetes base's metrics listener", k8s.Server.MetricsListen)
}
