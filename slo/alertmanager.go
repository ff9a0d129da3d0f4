package slo

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Why these types rather than Alertmanager's own: see the package doc.

// AlertmanagerConfig is the generated Alertmanager configuration.
type AlertmanagerConfig struct {
	Route        *AMRoute        `yaml:"route"`
	InhibitRules []AMInhibitRule `yaml:"inhibit_rules,omitempty"`
	Receivers    []AMReceiver    `yaml:"receivers"`
}

// AMRoute is a node of the route tree.
type AMRoute struct {
	Receiver       string     `yaml:"receiver"`
	GroupBy        []string   `yaml:"group_by,omitempty"`
	Matchers       []string   `yaml:"matchers,omitempty"`
	GroupWait      string     `yaml:"group_wait,omitempty"`
	GroupInterval  string     `yaml:"group_interval,omitempty"`
	RepeatInterval string     `yaml:"repeat_interval,omitempty"`
	Routes         []*AMRoute `yaml:"routes,omitempty"`
}

// AMInhibitRule mutes target alerts while a source alert fires.
type AMInhibitRule struct {
	SourceMatchers []string `yaml:"source_matchers"`
	TargetMatchers []string `yaml:"target_matchers"`
	Equal          []string `yaml:"equal,omitempty"`
}

// AMReceiver is a named set of integrations.
type AMReceiver struct {
	Name             string              `yaml:"name"`
	WebhookConfigs   []AMWebhookConfig   `yaml:"webhook_configs,omitempty"`
	PagerdutyConfigs []AMPagerdutyConfig `yaml:"pagerduty_configs,omitempty"`
	OpsgenieConfigs  []AMOpsgenieConfig  `yaml:"opsgenie_configs,omitempty"`
	SlackConfigs     []AMSlackConfig     `yaml:"slack_configs,omitempty"`
}

// AMHTTPConfig carries credentials by file only.
type AMHTTPConfig struct {
	Authorization *AMAuthorization `yaml:"authorization,omitempty"`
}

// AMAuthorization sends "Bearer <contents of CredentialsFile>".
type AMAuthorization struct {
	CredentialsFile string `yaml:"credentials_file"`
}

// AMWebhookConfig is a webhook integration.
type AMWebhookConfig struct {
	SendResolved bool          `yaml:"send_resolved"`
	URL          string        `yaml:"url"`
	HTTPConfig   *AMHTTPConfig `yaml:"http_config,omitempty"`
}

// AMPagerdutyConfig is a PagerDuty integration.
type AMPagerdutyConfig struct {
	SendResolved   bool   `yaml:"send_resolved"`
	RoutingKeyFile string `yaml:"routing_key_file,omitempty"`
	ServiceKeyFile string `yaml:"service_key_file,omitempty"`
	URL            string `yaml:"url,omitempty"`
	Severity       string `yaml:"severity,omitempty"`
}

// AMOpsgenieConfig is an Opsgenie integration.
type AMOpsgenieConfig struct {
	SendResolved bool   `yaml:"send_resolved"`
	APIKeyFile   string `yaml:"api_key_file"`
	APIURL       string `yaml:"api_url,omitempty"`
	Priority     string `yaml:"priority,omitempty"`
}

// AMSlackConfig is a Slack integration.
type AMSlackConfig struct {
	SendResolved bool   `yaml:"send_resolved"`
	APIURLFile   string `yaml:"api_url_file"`
	Channel      string `yaml:"channel,omitempty"`
	Title        string `yaml:"title,omitempty"`
	Text         string `yaml:"text,omitempty"`
}

// Receiver names in the generated configuration.
const (
	ReceiverPage   = "rl-exporter-page"
	ReceiverTicket = "rl-exporter-ticket"
)

// Alertmanager builds the routing for the model's alerts: severity=page to
// the paging receiver, everything else (ticket, warning) to the ticket
// receiver, grouped by alert, endpoint and plan tier; plus inhibit rules
// where one cause would otherwise alert twice.
func (m *Model) Alertmanager() (*AlertmanagerConfig, error) {
	r := m.Routing
	cfg := &AlertmanagerConfig{
		Route: &AMRoute{
			Receiver:       ReceiverTicket,
			GroupBy:        r.GroupBy,
			GroupWait:      formatDuration(r.GroupWait),
			GroupInterval:  formatDuration(r.GroupInterval),
			RepeatInterval: formatDuration(r.RepeatInterval),
			Routes: []*AMRoute{
				{Receiver: ReceiverPage, Matchers: []string{`severity="page"`}},
				{Receiver: ReceiverTicket, Matchers: []string{`severity=~"ticket|warning"`}},
			},
		},
		Receivers: []AMReceiver{
			receiver(ReceiverPage, r.Page, "critical", "P1"),
			receiver(ReceiverTicket, r.Ticket, "warning", "P3"),
		},
	}
	if m.FailOpen != nil && m.Latency != nil {
		// A store that fails makes decisions fail open and slow at once;
		// the page says it all.
		cfg.InhibitRules = append(cfg.InhibitRules, AMInhibitRule{
			SourceMatchers: []string{matcher("alertname", AlertFailOpen), matcher("severity", m.FailOpen.Severity)},
			TargetMatchers: []string{matcher("alertname", AlertStoreLatencyHigh)},
		})
	}
	if s := m.Availability; s != nil {
		var hasPage, hasTicket bool
		for _, row := range s.Rows {
			hasPage = hasPage || (row.CanFire && row.Severity == "page")
			hasTicket = hasTicket || (row.CanFire && row.Severity != "page")
		}
		if hasPage && hasTicket {
			// The same burn seen by a short and a long row: the page is
			// enough.
			cfg.InhibitRules = append(cfg.InhibitRules, AMInhibitRule{
				SourceMatchers: []string{matcher("alertname", AlertErrorBudgetBurn), matcher("severity", "page")},
				TargetMatchers: []string{matcher("alertname", AlertErrorBudgetBurn), `severity=~"ticket|warning"`},
				Equal:          []string{"job"},
			})
		}
	}
	if o := m.Regions; o != nil {
		// A lost peer's lag grows past the warning's threshold too: the
		// page on the peer says it all.
		cfg.InhibitRules = append(cfg.InhibitRules, AMInhibitRule{
			SourceMatchers: []string{matcher("alertname", AlertRegionUnreachable), matcher("severity", o.Unreachable.Severity)},
			TargetMatchers: []string{matcher("alertname", AlertRegionSyncLagHigh)},
			Equal:          []string{"peer_region"},
		})
	}
	if m.SharesGiveBacks != nil {
		// Give-backs fail when the store fails: a page on the same job's store failing
		// (fail-open, or the budget burning with fail-closed) says it all. Only a page
		// silences it, never a ticket.
		var sources []string
		if m.FailOpen != nil {
			sources = append(sources, AlertFailOpen)
		}
		if s := m.Availability; s != nil && slices.ContainsFunc(s.Rows, func(r BurnRateRow) bool { return r.CanFire && r.Severity == "page" }) {
			sources = append(sources, AlertErrorBudgetBurn)
		}
		if len(sources) > 0 {
			name := matcher("alertname", sources[0])
			if len(sources) > 1 {
				name = "alertname=~" + strconv.Quote(strings.Join(sources, "|"))
			}
			cfg.InhibitRules = append(cfg.InhibitRules, AMInhibitRule{
				SourceMatchers: []string{name, matcher("severity", "page")},
				TargetMatchers: []string{matcher("alertname", AlertSharesGiveBacksFailing)},
				Equal:          []string{"job"},
			})
		}
	}
	return cfg, nil
}

func matcher(name, value string) string { return name + "=" + strconv.Quote(value) }

func receiver(name string, spec ReceiverSpec, pdSeverity, ogPriority string) AMReceiver {
	rc := AMReceiver{Name: name}
	if w := spec.Webhook; w != nil {
		c := AMWebhookConfig{SendResolved: true, URL: w.URL}
		if w.CredentialsFile != "" {
			c.HTTPConfig = &AMHTTPConfig{Authorization: &AMAuthorization{CredentialsFile: w.CredentialsFile}}
		}
		rc.WebhookConfigs = append(rc.WebhookConfigs, c)
	}
	if p := spec.PagerDuty; p != nil {
		rc.PagerdutyConfigs = append(rc.PagerdutyConfigs, AMPagerdutyConfig{
			SendResolved: true, RoutingKeyFile: p.RoutingKeyFile, ServiceKeyFile: p.ServiceKeyFile,
			URL: p.URL, Severity: pdSeverity,
		})
	}
	if o := spec.Opsgenie; o != nil {
		rc.OpsgenieConfigs = append(rc.OpsgenieConfigs, AMOpsgenieConfig{
			SendResolved: true, APIKeyFile: o.APIKeyFile, APIURL: o.APIURL, Priority: ogPriority,
		})
	}
	if s := spec.Slack; s != nil {
		rc.SlackConfigs = append(rc.SlackConfigs, AMSlackConfig{
			SendResolved: true, APIURLFile: s.APIURLFile, Channel: s.Channel,
			Title: `[{{ .Status | toUpper }}] {{ .CommonLabels.alertname }}`,
			Text:  `{{ range .Alerts }}{{ .Annotations.description }} {{ .Annotations.runbook_url }}{{ "\n" }}{{ end }}`,
		})
	}
	return rc
}

// WriteAlertmanager encodes cfg under a "Code generated" header naming the
// spec it came from.
func WriteAlertmanager(w io.Writer, cfg *AlertmanagerConfig, source string) error {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# Code generated by rl-exporter rules from %s. DO NOT EDIT.\n", source)
	fmt.Fprintf(&buf, "# Secrets are read from the *_file paths at run time; this file holds none.\n")
	if err := encodeYAML(&buf, cfg); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}
