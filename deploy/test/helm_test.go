package deploytest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"sigs.k8s.io/yaml"
)

const chartDir = "../helm/rl-exporter"

// render renders the chart (Render) with values; operator says whether the
// cluster serves the prometheus-operator's resources.
func render(t *testing.T, values string, operator bool) (map[string]string, error) {
	t.Helper()
	var apis []string
	if operator {
		apis = []string{"monitoring.coreos.com/v1"}
	}
	return Render(chartDir, []byte(values), apis)
}

// rendered decodes every rendered manifest strictly; it returns them with
// NOTES.txt.
func rendered(t *testing.T, values string, operator bool) (set, string) {
	t.Helper()
	out, err := render(t, values, operator)
	if err != nil {
		t.Fatal(err)
	}
	var objs []any
	notes := ""
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range out {
			if !yield(k) {
				return
			}
		}
	}) {
		switch {
		case strings.HasSuffix(name, "NOTES.txt"):
			notes = out[name]
		case strings.HasSuffix(name, ".yaml"):
			o, err := decodeStrict(name, []byte(out[name]))
			if err != nil {
				t.Fatal(err)
			}
			objs = append(objs, o...)
		}
	}
	if notes == "" {
		t.Error("NOTES.txt renders empty")
	}
	return collect(t, objs), notes
}

func TestTheChartRendersTheBasesObjectsWithItsDefaults(t *testing.T) {
	s, notes := rendered(t, "", true)
	checkSet(t, s, want{pdb: true, operator: true,
		rules: generatedRule(t, filepath.Join(base, "prometheus-operator", "rl-exporter.prometheusrule.yaml"))})
	if r := s.deploy.Spec.Replicas; r == nil || *r != 1 {
		t.Errorf("replicas %v, want 1 on the memory store", r)
	}
	if len(s.secrets) != 0 {
		t.Errorf("%d Secrets without a password", len(s.secrets))
	}
	if !strings.Contains(notes, "rl-rl-exporter.limits.svc:8480/v1/check") {
		t.Errorf("NOTES.txt does not say where the decision API is:\n%s", notes)
	}

	// Without the prometheus-operator's API the chart leaves its
	// resources out, and says so.
	s, notes = rendered(t, "", false)
	checkSet(t, s, want{pdb: true})
	if !strings.Contains(notes, "no ServiceMonitor or PrometheusRule") {
		t.Errorf("NOTES.txt does not say the monitoring resources were left out:\n%s", notes)
	}
}

func TestTheChartRendersRedisAutoscalingTheRateLimitServiceAndYourSLO(t *testing.T) {
	// The rules of another SLO spec, as rl-exporter rules writes them.
	out := t.TempDir()
	run(t, "rules", "--spec", filepath.Join(repo, "slo", "testdata", "valid", "regions.yaml"), "--format", "prometheus-operator", "--out", out)
	rulesFile := filepath.Join(out, "prometheus-operator", "rl-exporter.prometheusrule.yaml")
	rules, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]any{
		"store": map[string]any{"type": "redis", "failPolicy": "closed",
			"redis": map[string]any{"url": "redis://redis-master.data:6379/0", "password": "s3cret"}},
		"autoscaling": map[string]any{"enabled": true, "minReplicas": 3, "maxReplicas": 12},
		"tiers":       map[string]any{"names": []any{"basic", "gold"}, "default": "basic"},
		"classes": map[string]any{
			"default": map[string]any{"limits": map[string]any{
				"basic": map[string]any{"algorithm": "fixed_window", "rate": 30, "period": "1m"}}},
			"search": map[string]any{"routes": []any{"GET /search"}, "limits": map[string]any{
				"basic": map[string]any{"algorithm": "sliding_window", "rate": 10, "period": "1s"},
				"gold":  map[string]any{"algorithm": "token_bucket", "rate": 100, "period": "1s", "burst": 200}}},
		},
		"server": map[string]any{"upstream": "http://api.apps:8080", "checkAPITokensSecret": "check-tokens",
			"ports": map[string]any{"http": 8000, "metrics": 9100, "grpc": 9000}},
		"rls":            map[string]any{"enabled": true},
		"config":         map[string]any{"headers": map[string]any{"problem_json": true}},
		"slo":            map[string]any{"rules": string(rules)},
		"serviceMonitor": map[string]any{"labels": map[string]any{"release": "kube-prometheus-stack"}},
	}
	raw, err := yaml.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := rendered(t, string(raw), true)
	checkSet(t, s, want{pdb: true, hpa: true, operator: true, rules: generatedRule(t, rulesFile)})
	if s.hpa.Spec.MinReplicas == nil || *s.hpa.Spec.MinReplicas != 3 || s.hpa.Spec.MaxReplicas != 12 {
		t.Errorf("HorizontalPodAutoscaler %d..%d, want 3..12", s.hpa.Spec.MinReplicas, s.hpa.Spec.MaxReplicas)
	}
	if len(s.secrets) != 1 || string(s.secrets[0].Data["password"]) != "s3cret" {
		t.Errorf("Secrets %v, want one holding the Redis password", s.secrets)
	}
	if s.sm.Labels["release"] != "kube-prometheus-stack" {
		t.Errorf("ServiceMonitor labels %v lack the Prometheus's selector", s.sm.Labels)
	}
	cfg := s.cm.Data["rl-exporter.yaml"]
	for _, part := range []string{"redis://redis-master.data:6379/0", "fail_policy: closed", "upstream: http://api.apps:8080",
		"GET /search", "problem_json: true", " listen: 0.0.0.0:", "grpc_listen: 0.0.0.0:9000", "config_dir: ratelimit"} {
		if !strings.Contains(cfg, part) {
			t.Errorf("the config lacks %q:\n%s", part, cfg)
		}
	}
	if strings.Contains(cfg, "s3cret") {
		t.Error("the Redis password is in the ConfigMap")
	}
	if _, ok := s.cm.Data["ratelimit-default.yaml"]; !ok {
		t.Errorf("no rate limit service domain in the ConfigMap: keys %v", s.cm.Data)
	}
}

func TestTheChartReadsTheRedisURLAndPasswordFromYourSecret(t *testing.T) {
	s, _ := rendered(t, `
replicaCount: 3
store:
  type: redis
  redis:
    url: redis://redis:6379/0
    existingSecret: my-redis
    passwordKey: redis-password
    urlKey: redis-url
`, true)
	checkSet(t, s, want{pdb: true, operator: true})
	if r := s.deploy.Spec.Replicas; r == nil || *r != 3 {
		t.Errorf("replicas %v, want 3", r)
	}
	refs := map[string]string{}
	for _, e := range s.deploy.Spec.Template.Spec.Containers[0].Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			refs[e.Name] = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		}
	}
	if refs["RL_STORE__REDIS__PASSWORD"] != "my-redis/redis-password" || refs["RL_STORE__REDIS__URL"] != "my-redis/redis-url" {
		t.Errorf("secret refs %v, want the password and URL from my-redis", refs)
	}
	if len(s.secrets) != 0 {
		t.Errorf("the chart made %d Secrets beside yours", len(s.secrets))
	}
}

// Bad values stop the render with an error naming the value.
func TestTheChartRefusesValuesThatCannotWork(t *testing.T) {
	for values, wantErr := range map[string]string{
		"store: {type: etcd}":                              "store.type",
		"store: {type: redis}":                             "store.redis.url",
		"autoscaling: {enabled: true}":                     "autoscaling.enabled",
		"slo: {rules: 'kind: ConfigMap'}":                  "slo.rules",
		"store: {redis: {password: a, existingSecret: b}}": "store.redis.password",
	} {
		_, err := render(t, values, true)
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("values %s: error %v, want one naming %s", values, err, wantErr)
		}
	}
}

// The values docs/kubernetes.md shows, from the file it names.
func TestTheChartRendersTheDocumentedRedisValues(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repo, "examples", "kubernetes", "values-redis.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s, notes := rendered(t, string(raw), true)
	checkSet(t, s, want{pdb: true, hpa: true, operator: true})
	if s.sm.Labels["release"] != "kube-prometheus-stack" || s.pr.Labels["release"] != "kube-prometheus-stack" {
		t.Errorf("ServiceMonitor labels %v, PrometheusRule labels %v: want the Prometheus's selector", s.sm.Labels, s.pr.Labels)
	}
	if strings.Contains(notes, "WARNING") {
		t.Errorf("NOTES.txt warns on the Redis store:\n%s", notes)
	}
}

func TestTheChartWarnsOfMemoryStorePodsCountingEachOnItsOwn(t *testing.T) {
	if _, notes := rendered(t, "replicaCount: 3", true); !strings.Contains(notes, "up to 3 times its limit") {
		t.Errorf("NOTES.txt does not warn of 3 pods on the memory store:\n%s", notes)
	}
	if _, notes := rendered(t, "", true); strings.Contains(notes, "WARNING") {
		t.Errorf("NOTES.txt warns of one pod on the memory store:\n%s", notes)
	}
}

// What helm lint says of the chart, for the default and the documented
// values: no warning, no error (an icon is only recommended).
func TestHelmLintFindsNothingToWarnOf(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repo, "examples", "kubernetes", "values-redis.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var documented map[string]any
	if err := yaml.Unmarshal(raw, &documented); err != nil {
		t.Fatal(err)
	}
	for name, values := range map[string]map[string]any{"default": nil, "values-redis.yaml": documented} {
		l := lint.All(chartDir, values, "limits", false)
		if len(l.Messages) == 0 {
			t.Errorf("%s: helm lint reports nothing, not even the missing icon: did it run?", name)
		}
		for _, m := range l.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("%s: helm lint: %s", name, m)
			}
		}
	}
}
