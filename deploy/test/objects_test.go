package deploytest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	monitoringv1alpha1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// kinds are the objects the deployment may hold, each with its real type.
var kinds = map[string]func() any{
	"apps/v1 Deployment":                                func() any { return &appsv1.Deployment{} },
	"v1 Service":                                        func() any { return &corev1.Service{} },
	"v1 ConfigMap":                                      func() any { return &corev1.ConfigMap{} },
	"v1 Secret":                                         func() any { return &corev1.Secret{} },
	"policy/v1 PodDisruptionBudget":                     func() any { return &policyv1.PodDisruptionBudget{} },
	"autoscaling/v2 HorizontalPodAutoscaler":            func() any { return &autoscalingv2.HorizontalPodAutoscaler{} },
	"monitoring.coreos.com/v1 ServiceMonitor":           func() any { return &monitoringv1.ServiceMonitor{} },
	"monitoring.coreos.com/v1 PrometheusRule":           func() any { return &monitoringv1.PrometheusRule{} },
	"monitoring.coreos.com/v1alpha1 AlertmanagerConfig": func() any { return &monitoringv1alpha1.AlertmanagerConfig{} },
}

// decodeStrict decodes every YAML document of data into its kind's type;
// an unknown kind, an unknown or duplicate field, is an error.
func decodeStrict(source string, data []byte) ([]any, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []any
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, fmt.Errorf("%s, document %d: %v", source, i, err)
		}
		if tm.Kind == "" && tm.APIVersion == "" {
			continue // only comments
		}
		mk, ok := kinds[tm.APIVersion+" "+tm.Kind]
		if !ok {
			return nil, fmt.Errorf("%s, document %d: unexpected %s %s", source, i, tm.APIVersion, tm.Kind)
		}
		v := mk()
		if err := yaml.UnmarshalStrict(doc, v); err != nil {
			return nil, fmt.Errorf("%s, document %d (%s): %v", source, i, tm.Kind, err)
		}
		out = append(out, v)
	}
}

// set is one deployment's objects, by kind.
type set struct {
	deploy  *appsv1.Deployment
	svc     *corev1.Service
	cm      *corev1.ConfigMap
	pdb     *policyv1.PodDisruptionBudget
	hpa     *autoscalingv2.HorizontalPodAutoscaler
	sm      *monitoringv1.ServiceMonitor
	pr      *monitoringv1.PrometheusRule
	secrets []*corev1.Secret
}

func collect(t *testing.T, objs []any) set {
	t.Helper()
	var s set
	for _, o := range objs {
		switch o := o.(type) {
		case *appsv1.Deployment:
			put(t, &s.deploy, o)
		case *corev1.Service:
			put(t, &s.svc, o)
		case *corev1.ConfigMap:
			put(t, &s.cm, o)
		case *policyv1.PodDisruptionBudget:
			put(t, &s.pdb, o)
		case *autoscalingv2.HorizontalPodAutoscaler:
			put(t, &s.hpa, o)
		case *monitoringv1.ServiceMonitor:
			put(t, &s.sm, o)
		case *monitoringv1.PrometheusRule:
			put(t, &s.pr, o)
		case *corev1.Secret:
			s.secrets = append(s.secrets, o)
		}
	}
	if s.deploy == nil || s.svc == nil || s.cm == nil {
		t.Fatalf("want a Deployment, a Service and a ConfigMap; have %d objects", len(objs))
	}
	return s
}

// put keeps the one object of its kind a set may hold.
func put[T any](t *testing.T, dst **T, o *T) {
	t.Helper()
	if *dst != nil {
		t.Errorf("more than one %T", o)
	}
	*dst = o
}

// want is what a set must hold beside the Deployment, Service and
// ConfigMap.
type want struct {
	pdb, hpa, operator bool
	rules              *monitoringv1.PrometheusRule // the PrometheusRule's spec must be this one's
}

// listeners are the addresses of serve's config that a Service exposes.
type listeners struct {
	Server struct {
		Listen        string `json:"listen"`
		MetricsListen string `json:"metrics_listen"`
		GRPCListen    string `json:"grpc_listen"`
	} `json:"server"`
}

func port(t *testing.T, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("listen address %q: %v", addr, err)
	}
	n, err := strconv.ParseInt(p, 10, 32)
	if err != nil {
		t.Fatalf("listen address %q: %v", addr, err)
	}
	return int32(n)
}

// checkSet holds the objects to what the cluster needs of them: names and
// labels that find each other, probes and ports on serve's real
// listeners, a locked-down container, and a config that passes
// rl-exporter check as the pod mounts it.
func checkSet(t *testing.T, s set, w want) {
	t.Helper()
	d := s.deploy
	pod := labels.Set(d.Spec.Template.Labels)
	if sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err != nil || sel.Empty() || !sel.Matches(pod) {
		t.Errorf("Deployment selector %v does not select its pods %v (%v)", d.Spec.Selector, pod, err)
	}
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("containers %d, want 1", len(d.Spec.Template.Spec.Containers))
	}
	c := d.Spec.Template.Spec.Containers[0]

	// The config, laid out as the volume mounts it, passes check.
	i := slices.Index(c.Args, "--config")
	if i < 0 || i+1 >= len(c.Args) {
		t.Fatalf("args %v name no --config", c.Args)
	}
	cfgPath := c.Args[i+1]
	dir := t.TempDir()
	mounted := false
	for _, m := range c.VolumeMounts {
		if m.MountPath != filepath.Dir(cfgPath) {
			continue
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name != m.Name || v.ConfigMap == nil || v.ConfigMap.Name != s.cm.Name {
				continue
			}
			mounted = true
			items := v.ConfigMap.Items
			if len(items) == 0 {
				for _, k := range slices.Sorted(maps.Keys(s.cm.Data)) {
					items = append(items, corev1.KeyToPath{Key: k, Path: k})
				}
			}
			for _, it := range items {
				data, ok := s.cm.Data[it.Key]
				if !ok {
					t.Errorf("volume %s projects key %s, which ConfigMap %s lacks", v.Name, it.Key, s.cm.Name)
				}
				p := filepath.Join(dir, filepath.FromSlash(it.Path))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if !mounted {
		t.Fatalf("no volume of ConfigMap %s is mounted at %s", s.cm.Name, filepath.Dir(cfgPath))
	}
	cfgFile := filepath.Join(dir, filepath.Base(cfgPath))
	if out := run(t, "check", "--config", cfgFile); !strings.Contains(out, "valid") {
		t.Errorf("check: %s", out)
	}
	raw, err := os.ReadFile(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	var l listeners
	if err := yaml.Unmarshal(raw, &l); err != nil {
		t.Fatal(err)
	}

	containerPort := map[string]int32{}
	for _, p := range c.Ports {
		containerPort[p.Name] = p.ContainerPort
	}
	// /healthz and /readyz are on the metrics listener when there is one.
	health := l.Server.MetricsListen
	if health == "" {
		health = l.Server.Listen
	}
	for probe, path := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != path {
			t.Errorf("want a probe of %s; have %+v", path, probe)
			continue
		}
		if n := containerPort[probe.HTTPGet.Port.String()]; n != port(t, health) {
			t.Errorf("the probe of %s goes to port %s (%d); serve answers it on %s", path, probe.HTTPGet.Port.String(), n, health)
		}
	}

	// Limits, and the Go runtime told of them.
	if c.Resources.Limits.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v: want cpu and memory limits", c.Resources)
	}
	from := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil {
			from[e.Name] = e.ValueFrom.ResourceFieldRef.Resource
		}
	}
	if from["GOMAXPROCS"] != "limits.cpu" || from["GOMEMLIMIT"] != "limits.memory" {
		t.Errorf("GOMAXPROCS and GOMEMLIMIT from %v, want limits.cpu and limits.memory", from)
	}

	// Non-root, read-only, no privilege.
	psc, sc := d.Spec.Template.Spec.SecurityContext, c.SecurityContext
	nonRoot := (sc != nil && sc.RunAsNonRoot != nil && *sc.RunAsNonRoot) || (psc != nil && psc.RunAsNonRoot != nil && *psc.RunAsNonRoot)
	if !nonRoot {
		t.Error("runAsNonRoot is not set")
	}
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		t.Errorf("container securityContext %+v: want readOnlyRootFilesystem, no privilege escalation, capabilities drop ALL", sc)
	}

	// One Service port per listener, to the container port serve binds.
	if !labels.SelectorFromSet(s.svc.Spec.Selector).Matches(pod) || len(s.svc.Spec.Selector) == 0 {
		t.Errorf("Service selector %v does not select the pods %v", s.svc.Spec.Selector, pod)
	}
	svcPort := map[string]corev1.ServicePort{}
	for _, p := range s.svc.Spec.Ports {
		svcPort[p.Name] = p
	}
	for name, addr := range map[string]string{"http": l.Server.Listen, "metrics": l.Server.MetricsListen, "grpc": l.Server.GRPCListen} {
		p, ok := svcPort[name]
		if addr == "" {
			if ok {
				t.Errorf("Service port %s, but the config has no such listener", name)
			}
			continue
		}
		if !ok {
			t.Errorf("no Service port %s for the listener %s", name, addr)
			continue
		}
		if n := containerPort[p.TargetPort.String()]; n != port(t, addr) {
			t.Errorf("Service port %s goes to container port %s (%d); serve listens on %s", name, p.TargetPort.String(), n, addr)
		}
	}

	// Secrets the objects make are the ones the container reads.
	for _, sec := range s.secrets {
		used := false
		for _, e := range c.Env {
			if r := e.ValueFrom; r != nil && r.SecretKeyRef != nil && r.SecretKeyRef.Name == sec.Name {
				_, has := sec.Data[r.SecretKeyRef.Key]
				_, hasString := sec.StringData[r.SecretKeyRef.Key]
				if !has && !hasString {
					t.Errorf("env %s reads key %s of Secret %s, which lacks it", e.Name, r.SecretKeyRef.Key, sec.Name)
				}
				used = true
			}
		}
		if !used {
			t.Errorf("Secret %s is read by no env", sec.Name)
		}
	}

	if (s.pdb != nil) != w.pdb {
		t.Errorf("PodDisruptionBudget %v, want %v", s.pdb != nil, w.pdb)
	} else if s.pdb != nil {
		if sel, err := metav1.LabelSelectorAsSelector(s.pdb.Spec.Selector); err != nil || sel.Empty() || !sel.Matches(pod) {
			t.Errorf("PodDisruptionBudget selector %v does not select the pods", s.pdb.Spec.Selector)
		}
	}
	if (s.hpa != nil) != w.hpa {
		t.Errorf("HorizontalPodAutoscaler %v, want %v", s.hpa != nil, w.hpa)
	} else if s.hpa != nil {
		if r := s.hpa.Spec.ScaleTargetRef; r.APIVersion != "apps/v1" || r.Kind != "Deployment" || r.Name != d.Name {
			t.Errorf("HorizontalPodAutoscaler scales %+v, not Deployment %s", r, d.Name)
		}
		if d.Spec.Replicas != nil {
			t.Errorf("the Deployment sets %d replicas beside the HorizontalPodAutoscaler: every apply resets its count", *d.Spec.Replicas)
		}
	}

	if (s.sm != nil) != w.operator || (s.pr != nil) != w.operator {
		t.Fatalf("ServiceMonitor %v and PrometheusRule %v, want %v", s.sm != nil, s.pr != nil, w.operator)
	}
	if !w.operator {
		return
	}
	if sel, err := metav1.LabelSelectorAsSelector(&s.sm.Spec.Selector); err != nil || sel.Empty() || !sel.Matches(labels.Set(s.svc.Labels)) {
		t.Errorf("ServiceMonitor selector %v does not select the Service's labels %v", s.sm.Spec.Selector, s.svc.Labels)
	}
	if len(s.sm.Spec.Endpoints) != 1 || s.sm.Spec.Endpoints[0].Path != "/metrics" {
		t.Fatalf("ServiceMonitor endpoints %+v, want one at /metrics", s.sm.Spec.Endpoints)
	}
	metrics := l.Server.MetricsListen
	if metrics == "" {
		metrics = l.Server.Listen
	}
	if p, ok := svcPort[s.sm.Spec.Endpoints[0].Port]; !ok || containerPort[p.TargetPort.String()] != port(t, metrics) {
		t.Errorf("ServiceMonitor scrapes port %q; /metrics is on %s", s.sm.Spec.Endpoints[0].Port, metrics)
	}
	// The scraped job is the one the rules select.
	job := s.svc.Labels[s.sm.Spec.JobLabel]
	if s.sm.Spec.JobLabel == "" || job == "" {
		t.Errorf("ServiceMonitor jobLabel %q names no label of the Service %v", s.sm.Spec.JobLabel, s.svc.Labels)
	}
	if len(s.pr.Spec.Groups) == 0 {
		t.Fatal("the PrometheusRule has no groups")
	}
	sel := regexp.MustCompile(`job="([^"]*)"`)
	for _, g := range s.pr.Spec.Groups {
		for _, r := range g.Rules {
			for _, m := range sel.FindAllStringSubmatch(r.Expr.String(), -1) {
				if m[1] != job {
					t.Fatalf("rule %s%s selects job %q; Prometheus scrapes job %q", r.Record, r.Alert, m[1], job)
				}
			}
		}
	}
	if w.rules != nil && !equality.Semantic.DeepEqual(s.pr.Spec, w.rules.Spec) {
		t.Errorf("the PrometheusRule's groups differ from the generated ones")
	}
}
