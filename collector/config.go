package collector

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"time"
)

// Defaults of Config.
const (
	// DefaultTier is the plan tier used when Config.DefaultTier is empty.
	DefaultTier = "default"
	// DefaultNearLimitShare is the share of the limit below which an
	// allowed decision counts as near the limit.
	DefaultNearLimitShare = 0.2
	// DefaultMaxLabelSets is the default cap on (endpoint, plan_tier) label sets.
	DefaultMaxLabelSets = 1000
	// DefaultStoreName labels rate_limit_store_errors_total when Config.Store is empty.
	DefaultStoreName = "memory"
	// DefaultTopKeys is the default number of keys the top-limited sketch tracks.
	DefaultTopKeys = 100
	// DefaultTopWindow is the default length of one top-limited window.
	DefaultTopWindow = 10 * time.Minute
	// OtherEndpoint is the endpoint label value of decisions whose endpoint
	// is not configured or lies beyond the cardinality cap.
	OtherEndpoint = "other"
)

// Config configures a Collector. The zero value of every optional field is a
// usable default; Endpoints should list the route patterns the HTTP layer
// passes as limiter.Record.Endpoint.
type Config struct {
	// Endpoints are the configured route patterns, in order of priority:
	// when the cardinality cap bites, the later ones fold into "other".
	Endpoints []string
	// Tiers are the configured plan tiers. DefaultTier is added when missing.
	Tiers []string
	// DefaultTier counts decisions whose plan tier is empty or not
	// configured. Default DefaultTier ("default").
	DefaultTier string
	// NearLimitShare: an allowed decision whose remaining quota is below
	// this share of the limit counts in rate_limit_near_limit_total.
	// Default DefaultNearLimitShare (0.2); must be in (0, 1].
	NearLimitShare float64
	// MaxLabelSets caps the number of (endpoint, plan_tier) label sets,
	// the "other" endpoint's included. Default DefaultMaxLabelSets.
	MaxLabelSets int
	// NativeHistograms adds a native (sparse) histogram beside the classic
	// buckets of rate_limit_redis_duration_seconds and
	// rate_limit_delay_seconds, for scrapers that ask for protobuf.
	NativeHistograms bool
	// Exemplars attaches the trace id of the sampled span in the context
	// of ObserveStore to its observation as an exemplar. Turn it on with
	// tracing; off, ObserveStore does not look into the context at all.
	Exemplars bool
	// Store is the store label of rate_limit_store_errors_total ("memory",
	// "redis"). Default DefaultStoreName.
	Store string
	// Version, Revision and GoVersion label rl_exporter_build_info.
	// GoVersion defaults to runtime.Version(); the others to "unknown".
	Version, Revision, GoVersion string
	// TopKeys is how many keys the top-limited sketch tracks (its memory
	// is fixed by it). Default DefaultTopKeys.
	TopKeys int
	// TopWindow is the length of one top-limited window: the sketch starts
	// afresh every TopWindow and the previous window stays readable.
	// Default DefaultTopWindow.
	TopWindow time.Duration
	// Now is the clock of the top-limited windows, for tests. Default: the
	// monotonic clock (cheaper than time.Now on the rejection path).
	Now func() time.Time
	// Logger receives the few events worth logging (label folding on
	// reconfiguration). Default: discard.
	Logger *slog.Logger
}

func (c *Config) defaults() error {
	if c.DefaultTier == "" {
		c.DefaultTier = DefaultTier
	}
	if c.NearLimitShare == 0 {
		c.NearLimitShare = DefaultNearLimitShare
	}
	if math.IsNaN(c.NearLimitShare) || c.NearLimitShare <= 0 || c.NearLimitShare > 1 {
		return fmt.Errorf("near limit share: must be in (0, 1], got %v", c.NearLimitShare)
	}
	if c.MaxLabelSets == 0 {
		c.MaxLabelSets = DefaultMaxLabelSets
	}
	if c.MaxLabelSets < 0 {
		return fmt.Errorf("max label sets: must be > 0, got %d", c.MaxLabelSets)
	}
	if c.Store == "" {
		c.Store = DefaultStoreName
	}
	if c.Version == "" {
		c.Version = "unknown"
	}
	if c.Revision == "" {
		c.Revision = "unknown"
	}
	if c.GoVersion == "" {
		c.GoVersion = runtime.Version()
	}
	if c.TopKeys == 0 {
		c.TopKeys = DefaultTopKeys
	}
	if c.TopKeys < 0 {
		return fmt.Errorf("top keys: must be > 0, got %d", c.TopKeys)
	}
	if c.TopWindow == 0 {
		c.TopWindow = DefaultTopWindow
	}
	if c.TopWindow < 0 {
		return fmt.Errorf("top window: must be > 0, got %s", c.TopWindow)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// errReservedEndpoint is returned, wrapped, when a configured endpoint is "other".
var errReservedEndpoint = errors.New(`endpoint "other" is reserved for folded label sets`)

// labelPlan is the validated set of label values of one configuration.
type labelPlan struct {
	endpoints   []string // kept endpoints, in configured order, without "other"
	folded      []string // configured endpoints beyond the cap
	tiers       []string // configured tiers, default tier included
	defaultTier string
}

// planLabels validates endpoints and tiers and applies the cardinality cap:
// (len(kept)+1) × len(tiers) ≤ maxSets, the +1 being "other".
func planLabels(endpoints, tiers []string, defaultTier string, maxSets int) (labelPlan, error) {
	if defaultTier == "" {
		defaultTier = DefaultTier
	}
	p := labelPlan{defaultTier: defaultTier}
	seenTier := map[string]bool{}
	for i, t := range tiers {
		if t == "" {
			return p, fmt.Errorf("tiers[%d]: empty plan tier", i)
		}
		if !seenTier[t] {
			seenTier[t] = true
			p.tiers = append(p.tiers, t)
		}
	}
	if !seenTier[defaultTier] {
		p.tiers = append(p.tiers, defaultTier)
	}
	if maxSets < len(p.tiers) {
		return p, fmt.Errorf("max label sets: %d is below the number of plan tiers (%d), which the %q endpoint alone needs", maxSets, len(p.tiers), OtherEndpoint)
	}
	keep := maxSets/len(p.tiers) - 1
	seenEP := map[string]bool{}
	for i, e := range endpoints {
		if e == "" {
			return p, fmt.Errorf("endpoints[%d]: empty endpoint", i)
		}
		if e == OtherEndpoint {
			return p, fmt.Errorf("endpoints[%d]: %w", i, errReservedEndpoint)
		}
		if seenEP[e] {
			continue
		}
		seenEP[e] = true
		if len(p.endpoints) < keep {
			p.endpoints = append(p.endpoints, e)
		} else {
			p.folded = append(p.folded, e)
		}
	}
	return p, nil
}
