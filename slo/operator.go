package slo

import (
	"bytes"
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/prometheus/prometheus/model/rulefmt"
)

// The prometheus-operator custom resources are written from the small types
// below, with the field names of the operator's API
// (github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring):
// that module and the Kubernetes machinery under it stay out of every
// binary that imports slo. The tests decode each generated resource
// strictly into the operator's own types.

// Paths of the prometheus-operator resources, relative to the output
// directory.
const (
	OperatorDir                = "prometheus-operator"
	PrometheusRulePath         = OperatorDir + "/rl-exporter.prometheusrule.yaml"
	AlertmanagerConfigCRPath   = OperatorDir + "/rl-exporter.alertmanagerconfig.yaml"
	OperatorSecretName         = "rl-exporter-alerting"
	operatorName               = "rl-exporter"
	operatorMonitoringV1       = "monitoring.coreos.com/v1"
	operatorMonitoringV1alpha1 = "monitoring.coreos.com/v1alpha1"
)

// crMeta is a custom resource's type and object metadata.
type crMeta struct {
	APIVersion string       `yaml:"apiVersion"`
	Kind       string       `yaml:"kind"`
	Metadata   crObjectMeta `yaml:"metadata"`
}

type crObjectMeta struct {
	Name   string            `yaml:"name"`
	Labels map[string]string `yaml:"labels,omitempty"`
}

// prometheusRule is a PrometheusRule: the rule groups as Prometheus reads
// them.
type prometheusRule struct {
	crMeta `yaml:",inline"`
	Spec   rulefmt.RuleGroups `yaml:"spec"`
}

// alertmanagerConfigCR is an AlertmanagerConfig (v1alpha1).
type alertmanagerConfigCR struct {
	crMeta `yaml:",inline"`
	Spec   crAMSpec `yaml:"spec"`
}

type crAMSpec struct {
	Route        *crRoute        `yaml:"route"`
	Receivers    []crReceiver    `yaml:"receivers"`
	InhibitRules []crInhibitRule `yaml:"inhibitRules,omitempty"`
}

type crMatcher struct {
	Name      string `yaml:"name"`
	Value     string `yaml:"value"`
	MatchType string `yaml:"matchType"`
}

type crRoute struct {
	Receiver       string      `yaml:"receiver"`
	GroupBy        []string    `yaml:"groupBy,omitempty"`
	GroupWait      string      `yaml:"groupWait,omitempty"`
	GroupInterval  string      `yaml:"groupInterval,omitempty"`
	RepeatInterval string      `yaml:"repeatInterval,omitempty"`
	Matchers       []crMatcher `yaml:"matchers,omitempty"`
	Routes         []*crRoute  `yaml:"routes,omitempty"`
}

type crInhibitRule struct {
	SourceMatch []crMatcher `yaml:"sourceMatch"`
	TargetMatch []crMatcher `yaml:"targetMatch"`
	Equal       []string    `yaml:"equal,omitempty"`
}

// crSecretKey selects a key of a Secret in the resource's namespace.
type crSecretKey struct {
	Name string `yaml:"name"`
	Key  string `yaml:"key"`
}

type crReceiver struct {
	Name             string              `yaml:"name"`
	WebhookConfigs   []crWebhookConfig   `yaml:"webhookConfigs,omitempty"`
	PagerdutyConfigs []crPagerdutyConfig `yaml:"pagerdutyConfigs,omitempty"`
	OpsgenieConfigs  []crOpsgenieConfig  `yaml:"opsgenieConfigs,omitempty"`
	SlackConfigs     []crSlackConfig     `yaml:"slackConfigs,omitempty"`
}

type crHTTPConfig struct {
	Authorization *crAuthorization `yaml:"authorization,omitempty"`
}

type crAuthorization struct {
	Type        string       `yaml:"type,omitempty"`
	Credentials *crSecretKey `yaml:"credentials"`
}

type crWebhookConfig struct {
	SendResolved bool          `yaml:"sendResolved"`
	URL          string        `yaml:"url"`
	HTTPConfig   *crHTTPConfig `yaml:"httpConfig,omitempty"`
}

type crPagerdutyConfig struct {
	SendResolved bool         `yaml:"sendResolved"`
	RoutingKey   *crSecretKey `yaml:"routingKey,omitempty"`
	ServiceKey   *crSecretKey `yaml:"serviceKey,omitempty"`
	URL          string       `yaml:"url,omitempty"`
	Severity     string       `yaml:"severity,omitempty"`
}

type crOpsgenieConfig struct {
	SendResolved bool         `yaml:"sendResolved"`
	APIKey       *crSecretKey `yaml:"apiKey"`
	APIURL       string       `yaml:"apiURL,omitempty"`
	Priority     string       `yaml:"priority,omitempty"`
}

type crSlackConfig struct {
	SendResolved bool         `yaml:"sendResolved"`
	APIURL       *crSecretKey `yaml:"apiURL"`
	Channel      string       `yaml:"channel,omitempty"`
	Title        string       `yaml:"title,omitempty"`
	Text         string       `yaml:"text,omitempty"`
}

// GenerateOperator builds what `rl-exporter rules --format
// prometheus-operator` writes: a PrometheusRule holding the rules, and an
// AlertmanagerConfig holding the routes, receivers and inhibit rules. In
// Kubernetes a credential is a Secret, not a file: every *_file of the spec
// becomes key <the file's base name> of the Secret OperatorSecretName.
func GenerateOperator(m *Model) ([]File, error) {
	source := filepath.Base(m.Source)
	labels := map[string]string{"app.kubernetes.io/name": operatorName, "app.kubernetes.io/part-of": operatorName}
	rg, err := m.RuleGroups()
	if err != nil {
		return nil, err
	}
	pr := prometheusRule{
		crMeta: crMeta{APIVersion: operatorMonitoringV1, Kind: "PrometheusRule", Metadata: crObjectMeta{Name: operatorName, Labels: labels}},
		Spec:   *rg,
	}
	am, err := m.Alertmanager()
	if err != nil {
		return nil, err
	}
	spec, err := operatorAlertmanager(am)
	if err != nil {
		return nil, err
	}
	ac := alertmanagerConfigCR{
		crMeta: crMeta{APIVersion: operatorMonitoringV1alpha1, Kind: "AlertmanagerConfig", Metadata: crObjectMeta{Name: operatorName, Labels: labels}},
		Spec:   spec,
	}
	var files []File
	for _, f := range []struct {
		path string
		v    any
		note string
	}{
		{PrometheusRulePath, pr, "# Select it with the Prometheus resource's ruleSelector (these labels) in its ruleNamespaceSelector.\n"},
		{AlertmanagerConfigCRPath, ac, fmt.Sprintf("# Credentials come from the Secret %s in the same namespace, one key per *_file of the spec\n"+
			"# (named by the file's base name). The operator adds a namespace matcher to the top route.\n", OperatorSecretName)},
	} {
		var buf bytes.Buffer
		fmt.Fprintf(&buf, "# Code generated by rl-exporter rules from %s. DO NOT EDIT.\n", source)
		buf.WriteString(f.note)
		if err := encodeYAML(&buf, f.v); err != nil {
			return nil, fmt.Errorf("encode %s: %w", f.path, err)
		}
		files = append(files, File{Path: f.path, Content: buf.Bytes()})
	}
	return files, nil
}

// matcherPattern is a matcher as the generated configuration writes it:
// name, operator, quoted value.
var matcherPattern = regexp.MustCompile(`^([a-zA-Z_][a-zA-Z0-9_]*)(=~|!~|!=|=)(".*")$`)

func crMatchers(ms []string) ([]crMatcher, error) {
	var out []crMatcher
	for _, s := range ms {
		p := matcherPattern.FindStringSubmatch(s)
		if p == nil {
			return nil, fmt.Errorf("matcher %q: not name, operator and quoted value", s)
		}
		v, err := strconv.Unquote(p[3])
		if err != nil {
			return nil, fmt.Errorf("matcher %q: %w", s, err)
		}
		out = append(out, crMatcher{Name: p[1], Value: v, MatchType: p[2]})
	}
	return out, nil
}

func crRouteOf(r *AMRoute) (*crRoute, error) {
	ms, err := crMatchers(r.Matchers)
	if err != nil {
		return nil, err
	}
	out := &crRoute{Receiver: r.Receiver, GroupBy: r.GroupBy, GroupWait: r.GroupWait, GroupInterval: r.GroupInterval,
		RepeatInterval: r.RepeatInterval, Matchers: ms}
	for _, sub := range r.Routes {
		c, err := crRouteOf(sub)
		if err != nil {
			return nil, err
		}
		out.Routes = append(out.Routes, c)
	}
	return out, nil
}

// secretKey names the Secret key standing for a credential file.
func secretKey(file string) *crSecretKey {
	if file == "" {
		return nil
	}
	return &crSecretKey{Name: OperatorSecretName, Key: path.Base(filepath.ToSlash(file))}
}

func operatorAlertmanager(am *AlertmanagerConfig) (crAMSpec, error) {
	route, err := crRouteOf(am.Route)
	if err != nil {
		return crAMSpec{}, err
	}
	spec := crAMSpec{Route: route}
	for _, ir := range am.InhibitRules {
		src, err := crMatchers(ir.SourceMatchers)
		if err != nil {
			return crAMSpec{}, err
		}
		tgt, err := crMatchers(ir.TargetMatchers)
		if err != nil {
			return crAMSpec{}, err
		}
		spec.InhibitRules = append(spec.InhibitRules, crInhibitRule{SourceMatch: src, TargetMatch: tgt, Equal: ir.Equal})
	}
	for _, r := range am.Receivers {
		rc := crReceiver{Name: r.Name}
		for _, w := range r.WebhookConfigs {
			c := crWebhookConfig{SendResolved: w.SendResolved, URL: w.URL}
			if w.HTTPConfig != nil && w.HTTPConfig.Authorization != nil {
				c.HTTPConfig = &crHTTPConfig{Authorization: &crAuthorization{Type: "Bearer", Credentials: secretKey(w.HTTPConfig.Authorization.CredentialsFile)}}
			}
			rc.WebhookConfigs = append(rc.WebhookConfigs, c)
		}
		for _, p := range r.PagerdutyConfigs {
			rc.PagerdutyConfigs = append(rc.PagerdutyConfigs, crPagerdutyConfig{SendResolved: p.SendResolved,
				RoutingKey: secretKey(p.RoutingKeyFile), ServiceKey: secretKey(p.ServiceKeyFile), URL: p.URL, Severity: p.Severity})
		}
		for _, o := range r.OpsgenieConfigs {
			rc.OpsgenieConfigs = append(rc.OpsgenieConfigs, crOpsgenieConfig{SendResolved: o.SendResolved,
				APIKey: secretKey(o.APIKeyFile), APIURL: o.APIURL, Priority: o.Priority})
		}
		for _, s := range r.SlackConfigs {
			rc.SlackConfigs = append(rc.SlackConfigs, crSlackConfig{SendResolved: s.SendResolved,
				APIURL: secretKey(s.APIURLFile), Channel: s.Channel, Title: s.Title, Text: s.Text})
		}
		spec.Receivers = append(spec.Receivers, rc)
	}
	return spec, nil
}
