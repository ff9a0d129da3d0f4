package slo

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"
)

// Spec is the SLO spec as written in slo.yaml, before validation. Durations
// are Prometheus duration strings ("30s", "5m", "1h", "3d"). [DefaultSpec]
// returns the values used for every field a file leaves out. A Spec is a
// plain value: copy it, change it and [Compile] it; it is not safe for
// concurrent mutation.
type Spec struct {
	// Job is the Prometheus scrape job of the exporter. Every expression
	// selects job="<Job>", and RateLimitMetricsAbsent watches it.
	Job string `koanf:"job"`
	// Labels are added to every alert (team, service, ...).
	Labels map[string]string `koanf:"labels"`
	// RunbookURL is the page every alert links to; each alert appends
	// "#<alertname in lower case>" unless it sets its own runbook_url.
	RunbookURL string `koanf:"runbook_url"`

	RejectionRatio RejectionRatioSpec `koanf:"rejection_ratio"`
	StoreLatency   StoreLatencySpec   `koanf:"store_latency"`
	FailOpen       FailOpenSpec       `koanf:"fail_open"`
	Degraded       DegradedSpec       `koanf:"degraded"`
	MetricsAbsent  AlertSpec          `koanf:"metrics_absent"`
	Availability   AvailabilitySpec   `koanf:"availability"`
	// Regions holds the multi-region alerts; nil (no regions: block in the
	// file) leaves them out, and a block, even an empty one, turns them on
	// with [DefaultRegions] for every field it leaves out.
	Regions *RegionsSpec `koanf:"regions"`
	Routing RoutingSpec  `koanf:"routing"`
	// Cost holds the alerts on reservations and cost estimates.
	Cost CostSpec `koanf:"cost"`
	// Overload is the upstream's latency objective, the default target of
	// serve's server.overload, and the alert on shed critical requests.
	Overload OverloadSpec `koanf:"overload"`
	// LeasesExpired is RateLimitLeasesExpiring, on concurrency leases (leases.go).
	LeasesExpired LeasesExpiredSpec `koanf:"leases_expired"`
	// QuotaExpired is RateLimitQuotaAssignmentsExpiring, on the quota service (quota.go).
	QuotaExpired QuotaExpiredSpec `koanf:"quota_assignments_expired"`
	// SharesGiveBacks is RateLimitSharesGiveBacksFailing, on classes with shares (shares.go).
	SharesGiveBacks SharesGiveBacksSpec `koanf:"shares_give_back_errors"`
}

// OverloadSpec is the objective of the upstream behind serve: its responses'
// LatencyQuantile within LatencyThreshold. server.overload (with slo_spec
// naming this file) sheds requests by priority to hold it; CriticalShed
// alerts when even critical requests are shed.
type OverloadSpec struct {
	LatencyQuantile  float64          `koanf:"latency_quantile"`
	LatencyThreshold string           `koanf:"latency_threshold"`
	CriticalShed     CriticalShedSpec `koanf:"critical_shed"`
}

// CriticalShedSpec is the alert on critical requests shed, counted in
// rate_limit_shed_total{priority="critical"} per upstream.
type CriticalShedSpec struct {
	AlertSpec `koanf:",squash"`
	// Window is the rate window over which shed requests are seen.
	Window string `koanf:"window"`
}

// RegionsSpec is the multi-region objective: how stale the counts known
// from a peer region may grow before a warning, and how long a peer may go
// without one successful sync, while sync errors keep coming, before a page.
// It reads rate_limit_region_sync_lag_seconds and
// rate_limit_region_sync_errors_total, per peer_region.
type RegionsSpec struct {
	// SyncLagThreshold: RateLimitRegionSyncLagHigh fires when the counts
	// known from a peer (the worst instance's) are older than this ...
	SyncLagThreshold string `koanf:"sync_lag_threshold"`
	// SyncLagFor: ... for this long.
	SyncLagFor string `koanf:"sync_lag_for"`
	// SyncLagSeverity routes RateLimitRegionSyncLagHigh: page, ticket or
	// warning.
	SyncLagSeverity string `koanf:"sync_lag_severity"`
	// UnreachableFor: RateLimitRegionPeerUnreachable fires when an instance
	// has had no successful sync with a peer for this long (its sync lag is
	// over it and still growing) while its sync errors keep increasing.
	UnreachableFor string `koanf:"unreachable_for"`
	// UnreachableSeverity routes RateLimitRegionPeerUnreachable.
	UnreachableSeverity string `koanf:"unreachable_severity"`
	// Labels are added to both alerts, over the spec-wide labels.
	Labels map[string]string `koanf:"labels"`
}

// DefaultRegions returns the values a regions: block gets for every field
// it leaves out.
func DefaultRegions() RegionsSpec {
	return RegionsSpec{
		SyncLagThreshold:    "2s",
		SyncLagFor:          "5m",
		SyncLagSeverity:     "warning",
		UnreachableFor:      "2m",
		UnreachableSeverity: "page",
	}
}

// AlertSpec holds what every alert lets the spec override.
type AlertSpec struct {
	// Enabled false leaves the alert (and its recording rules) out.
	Enabled bool `koanf:"enabled"`
	// For is how long the condition must hold before the alert fires.
	For string `koanf:"for"`
	// Severity routes the alert: page, ticket or warning.
	Severity string `koanf:"severity"`
	// Labels are added to this alert, over the spec-wide labels.
	Labels map[string]string `koanf:"labels"`
	// RunbookURL replaces the default runbook link of this alert.
	RunbookURL string `koanf:"runbook_url"`
	// Summary and Description replace the default annotation texts; they
	// are Prometheus alert templates ({{ $value }}, {{ $labels.endpoint }}).
	Summary     string `koanf:"summary"`
	Description string `koanf:"description"`
}

// RejectionRatioSpec is the objective on 429s: the share of decisions
// rejected per endpoint and plan tier.
type RejectionRatioSpec struct {
	AlertSpec `koanf:",squash"`
	// ThresholdPercent: alert when more than this share of decisions is
	// rejected.
	ThresholdPercent float64 `koanf:"threshold_percent"`
	// MinRequestsPerSecond is the traffic floor below which the ratio does
	// not alert (3 rejections out of 40 at night page nobody).
	MinRequestsPerSecond float64 `koanf:"min_requests_per_second"`
	// Window is the rate window of the ratio.
	Window string `koanf:"window"`
}

// StoreLatencySpec is the objective on the time decisions wait on the store.
type StoreLatencySpec struct {
	AlertSpec `koanf:",squash"`
	// Quantile of rate_limit_redis_duration_seconds, 0.99 for the p99.
	Quantile float64 `koanf:"quantile"`
	// Threshold must be one of the histogram's bucket bounds (see
	// [latencyBuckets]) below the highest, so the alert means exactly "more
	// than 1 - Quantile of the decisions took longer than Threshold".
	Threshold string `koanf:"threshold"`
	// Window is the rate window of the quantile.
	Window string `koanf:"window"`
}

// FailOpenSpec is the alert on requests let through because the store failed.
type FailOpenSpec struct {
	AlertSpec `koanf:",squash"`
	// Threshold: alert when more than this many requests failed open within
	// Window, summed over all instances and endpoints.
	Threshold float64 `koanf:"threshold"`
	// Window over which the fail-open events are counted.
	Window string `koanf:"window"`
}

// DegradedSpec is the alert on time spent degraded: decisions made on each
// instance's share of the limit because the store failed (fail_policy
// local). It fires once degraded decisions have gone on for For.
type DegradedSpec struct {
	AlertSpec `koanf:",squash"`
	// Window is the rate window over which degraded decisions are seen.
	Window string `koanf:"window"`
}

// AvailabilitySpec is the limiter's availability SLO: the share of
// decisions that did not fail open or closed. A 429 is the limiter doing
// its job and never burns this budget.
type AvailabilitySpec struct {
	// Enabled false leaves the SLO and its burn-rate alerts out.
	Enabled bool `koanf:"enabled"`
	// ObjectivePercent is the target, e.g. 99.9; it must be below 100.
	ObjectivePercent float64 `koanf:"objective_percent"`
	// Period is the SLO period the budget is spread over, e.g. 30d or 28d.
	Period string `koanf:"period"`
	// Windows is the multi-window multi-burn-rate table, one alert per row.
	Windows []BurnWindowSpec `koanf:"windows"`
	// Labels, RunbookURL, Summary and Description as in [AlertSpec], for
	// every RateLimitErrorBudgetBurn alert.
	Labels      map[string]string `koanf:"labels"`
	RunbookURL  string            `koanf:"runbook_url"`
	Summary     string            `koanf:"summary"`
	Description string            `koanf:"description"`
}

// BurnWindowSpec is one row of the burn-rate table: alert when both the long
// and the short window burn budget faster than the rate at which
// BudgetPercent of the period's budget is gone within Long.
type BurnWindowSpec struct {
	Long          string  `koanf:"long"`
	Short         string  `koanf:"short"`
	BudgetPercent float64 `koanf:"budget_percent"`
	Severity      string  `koanf:"severity"`
	For           string  `koanf:"for"`
}

// RoutingSpec shapes the generated Alertmanager configuration.
type RoutingSpec struct {
	GroupBy        []string `koanf:"group_by"`
	GroupWait      string   `koanf:"group_wait"`
	GroupInterval  string   `koanf:"group_interval"`
	RepeatInterval string   `koanf:"repeat_interval"`
	// Page receives severity=page; Ticket receives ticket and warning (and
	// anything else). A receiver with no integration gets the default
	// webhook.
	Page   ReceiverSpec `koanf:"page"`
	Ticket ReceiverSpec `koanf:"ticket"`
}

// ReceiverSpec lists the integrations of one receiver. Secrets are only ever
// named by file (routing_key_file, api_key_file, ...): Alertmanager reads
// them at run time and the generated file never holds them.
type ReceiverSpec struct {
	Webhook   *WebhookSpec   `koanf:"webhook"`
	PagerDuty *PagerDutySpec `koanf:"pagerduty"`
	Opsgenie  *OpsgenieSpec  `koanf:"opsgenie"`
	Slack     *SlackSpec     `koanf:"slack"`
}

// WebhookSpec is a generic webhook. Alertmanager 0.25 has no url_file, so
// the URL is written as is: put credentials in CredentialsFile, not in it
// (a URL with a user or password is refused).
type WebhookSpec struct {
	URL string `koanf:"url"`
	// CredentialsFile holds a bearer token sent in the Authorization header.
	CredentialsFile string `koanf:"credentials_file"`
}

// PagerDutySpec is a PagerDuty Events API v2 integration (or v1 with
// ServiceKeyFile).
type PagerDutySpec struct {
	RoutingKeyFile string `koanf:"routing_key_file"`
	ServiceKeyFile string `koanf:"service_key_file"`
	URL            string `koanf:"url"`
}

// OpsgenieSpec is an Opsgenie integration.
type OpsgenieSpec struct {
	APIKeyFile string `koanf:"api_key_file"`
	APIURL     string `koanf:"api_url"`
}

// SlackSpec is a Slack incoming-webhook integration.
type SlackSpec struct {
	APIURLFile string `koanf:"api_url_file"`
	Channel    string `koanf:"channel"`
}

// DefaultWebhookURL is where receivers without an integration send alerts.
const DefaultWebhookURL = "http://127.0.0.1:5001/alerts"

// DefaultSpec returns the spec used for every field a file leaves out.
func DefaultSpec() Spec {
	return Spec{
		Job:        "rl-exporter",
		RunbookURL: "https://github.com/rl-exporter/rl-exporter/blob/main/README.md",
		RejectionRatio: RejectionRatioSpec{
			AlertSpec:            AlertSpec{Enabled: true, For: "5m", Severity: "page"},
			ThresholdPercent:     5,
			MinRequestsPerSecond: 1,
			Window:               "5m",
		},
		StoreLatency: StoreLatencySpec{
			AlertSpec: AlertSpec{Enabled: true, For: "5m", Severity: "warning"},
			Quantile:  0.99,
			Threshold: "50ms",
			Window:    "5m",
		},
		FailOpen: FailOpenSpec{
			AlertSpec: AlertSpec{Enabled: true, For: "0s", Severity: "page"},
			Threshold: 10,
			Window:    "1m",
		},
		Degraded: DegradedSpec{
			AlertSpec: AlertSpec{Enabled: true, For: "5m", Severity: "warning"},
			Window:    "1m",
		},
		MetricsAbsent: AlertSpec{Enabled: true, For: "5m", Severity: "warning"},
		Availability: AvailabilitySpec{
			Enabled:          true,
			ObjectivePercent: 99.9,
			Period:           "30d",
			Windows:          DefaultBurnWindows(),
		},
		Overload: OverloadSpec{
			LatencyQuantile: 0.99, LatencyThreshold: "500ms",
			CriticalShed: CriticalShedSpec{AlertSpec: AlertSpec{Enabled: true, For: "1m", Severity: "page"}, Window: "5m"},
		},
		Routing: RoutingSpec{
			GroupBy:        []string{"alertname", "endpoint", "plan_tier"},
			GroupWait:      "30s",
			GroupInterval:  "5m",
			RepeatInterval: "4h",
		},
		Cost:            DefaultCost(),
		LeasesExpired:   defaultLeasesExpired(),
		QuotaExpired:    defaultQuotaExpired(),
		SharesGiveBacks: defaultSharesGiveBacks(),
	}
}

// DefaultBurnWindows is the Google SRE Workbook's table ("Alerting on SLOs"):
// page when 2 % of a 30-day budget burns in an hour or 5 % in six hours,
// open a ticket when 10 % burns in a day or in three days.
func DefaultBurnWindows() []BurnWindowSpec {
	return []BurnWindowSpec{
		{Long: "1h", Short: "5m", BudgetPercent: 2, Severity: "page", For: "2m"},
		{Long: "6h", Short: "30m", BudgetPercent: 5, Severity: "page", For: "15m"},
		{Long: "1d", Short: "2h", BudgetPercent: 10, Severity: "ticket", For: "15m"},
		{Long: "3d", Short: "6h", BudgetPercent: 10, Severity: "ticket", For: "15m"},
	}
}

// FieldError is one problem in a spec: the file, the field (a dotted path
// such as "availability.windows[0].long") and why it is wrong.
type FieldError struct {
	// File is the spec as named to Load or LoadFile.
	File string
	// Field is the dotted path of the field, empty when the whole file is
	// at fault (not YAML at all).
	Field string
	// Reason says what is wrong and, where it can, what to write instead.
	Reason string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s: %s", e.File, e.Reason)
	}
	return fmt.Sprintf("%s: %s: %s", e.File, e.Field, e.Reason)
}

// LoadFile reads the spec at path and compiles it; see [Load].
func LoadFile(path string) (*Model, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load SLO spec %s: %w", path, err)
	}
	return Load(data, path)
}

// Load decodes a YAML spec over [DefaultSpec] and compiles it. name is the
// file the errors point at. Unknown fields, wrong types and impossible
// values are reported together as [FieldError]s joined with errors.Join.
func Load(data []byte, name string) (*Model, error) {
	spec, decodeErr := Decode(data, name)
	var fe *FieldError
	if errors.As(decodeErr, &fe) && fe.Field == "" {
		return nil, decodeErr // not YAML at all
	}
	m, compileErr := Compile(spec, name)
	if err := errors.Join(decodeErr, compileErr); err != nil {
		return nil, err
	}
	return m, nil
}

// Decode reads a YAML spec strictly over [DefaultSpec] without validating
// the values; [Compile] does that.
func Decode(data []byte, name string) (Spec, error) {
	spec := DefaultSpec()
	k := koanf.New(".")
	if err := k.Load(rawbytes.Provider(data), yaml.Parser()); err != nil {
		return spec, &FieldError{File: name, Reason: fmt.Sprintf("not valid YAML: %v", err)}
	}
	// A list in the file replaces the default list instead of merging into
	// it element by element.
	if k.Exists("availability.windows") {
		spec.Availability.Windows = nil
	}
	if k.Exists("routing.group_by") {
		spec.Routing.GroupBy = nil
	}
	// The regions block is opt-in: present (even empty or null), it starts
	// from the defaults and the file's fields go over them.
	if _, present := k.Raw()["regions"]; present {
		r := DefaultRegions()
		spec.Regions = &r
	}
	var md mapstructure.Metadata
	err := k.UnmarshalWithConf("", &spec, koanf.UnmarshalConf{
		Tag: "koanf",
		DecoderConfig: &mapstructure.DecoderConfig{
			Metadata:         &md,
			WeaklyTypedInput: false,
			TagName:          "koanf",
			Squash:           true,
			// Fields match exactly: "Job" is an unknown field, not "job".
			MatchName: func(key, field string) bool { return key == field },
		},
	})
	var errs []error
	if err != nil {
		errs = append(errs, decodeErrors(name, err)...)
	}
	unused := slices.Clone(md.Unused)
	sort.Strings(unused)
	for _, key := range unused {
		errs = append(errs, &FieldError{File: name, Field: key, Reason: unknownFieldReason(key)})
	}
	if len(errs) > 0 {
		return spec, errors.Join(errs...)
	}
	return spec, nil
}

// decodeErrors turns mapstructure's errors into FieldErrors.
func decodeErrors(file string, err error) []error {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range joined.Unwrap() {
			out = append(out, decodeErrors(file, e)...)
		}
		return out
	}
	var de *mapstructure.DecodeError
	if errors.As(err, &de) {
		reason := de.Unwrap().Error()
		reason = strings.ReplaceAll(reason, "'", "")
		return []error{&FieldError{File: file, Field: de.Name(), Reason: "wrong type: " + reason}}
	}
	return []error{&FieldError{File: file, Reason: err.Error()}}
}

// inlineSecrets maps fields that would put a secret into the generated file
// to the file-based field to use instead.
var inlineSecrets = map[string]string{
	"routing_key": "routing_key_file",
	"service_key": "service_key_file",
	"api_key":     "api_key_file",
	"api_url":     "api_url_file",
	"password":    "credentials_file",
	"token":       "credentials_file",
	"credentials": "credentials_file",
}

func unknownFieldReason(key string) string {
	last := key[strings.LastIndex(key, ".")+1:]
	if alt, ok := inlineSecrets[last]; ok {
		return fmt.Sprintf("unknown field: secrets are read from files and never written into the generated configuration; use %s", alt)
	}
	return "unknown field"
}
