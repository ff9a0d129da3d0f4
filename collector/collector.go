package collector

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rl-exporter/rl-exporter/collector/buckets"
	"github.com/rl-exporter/rl-exporter/limiter"
)

// failureReasons are the reason label values of rate_limit_fail_open_total
// and rate_limit_fail_closed_total, as returned by limiter.ErrorKind.
var failureReasons = [...]string{"timeout", "error", "circuit_open"}

// statuses are the status label values of rate_limit_requests_total, each
// counted at its limiter.Status.Index.
var statuses = limiter.AllStatuses()

// storeErrorKinds are the kind label values of rate_limit_store_errors_total.
var storeErrorKinds = [...]string{"timeout", "error"}

const (
	reasonTimeout = iota
	reasonError
	reasonCircuitOpen
	numReasons
)

// Indices of rate_limit_labels_folded_total.
const (
	foldEndpointUnconfigured = iota
	foldEndpointCap
	foldTierUnconfigured
	numFolds
)

var foldLabels = [numFolds][2]string{
	{"endpoint", "unconfigured"},
	{"endpoint", "cardinality_cap"},
	{"plan_tier", "unconfigured"},
}

// pairSeries holds the counters of one (endpoint, plan_tier) label set.
type pairSeries struct {
	tier      string
	requests  [limiter.NumStatuses]atomic.Uint64 // by limiter.Status.Index
	nearLimit atomic.Uint64
	cost      atomic.Pointer[pairCost]     // from the label set's first reservation
	refusals  atomic.Pointer[[]namedCount] // by configured limit (refusals.go)
	refusedBy atomic.Uint64                // refusals by a limit not configured: OtherLimit
}

// endpointFails holds the per-endpoint failure counters.
type endpointFails struct {
	open   [numReasons]atomic.Uint64
	closed [numReasons]atomic.Uint64
	// degraded counts decisions made on the local share (FailLocal),
	// canceled the callers that went away while the store decided.
	degraded atomic.Uint64
	canceled atomic.Uint64
}

// endpointSeries is one endpoint label value with its tiers. It is
// immutable once published in a labelIndex; the counters it points to
// outlive reconfigurations.
type endpointSeries struct {
	name        string
	tiers       map[string]*pairSeries
	order       []*pairSeries // tiers in configured order, for Collect and lookup
	defaultPair *pairSeries
	fails       *endpointFails
	delay       prometheus.Observer
}

// maxScannedTiers: up to this many tiers, a linear scan with string
// comparisons finds a tier faster than hashing it.
const maxScannedTiers = 8

// tier returns the series of plan tier t, or nil.
func (ep *endpointSeries) tier(t string) *pairSeries {
	if len(ep.order) <= maxScannedTiers {
		for _, ps := range ep.order {
			if ps.tier == t {
				return ps
			}
		}
		return nil
	}
	return ep.tiers[t]
}

// labelIndex is an immutable snapshot of every label set; RecordDecision
// reads it without locking, reconfiguration swaps in a new one.
type labelIndex struct {
	endpoints map[string]*endpointSeries // configured (kept) endpoints and "other"
	order     []*endpointSeries          // kept endpoints in configured order, then "other"
	capped    map[string]struct{}        // configured endpoints beyond the cap
	other     *endpointSeries
	plan      labelPlan
}

type limitKey struct{ endpoint, tier string }

type limitValue struct {
	name      string // the limit label
	algorithm string
	quota     float64
}

// Collector counts decisions and store calls and exposes them to
// Prometheus. RecordDecision and ObserveStore are safe for concurrent use,
// lock-free and allocation-free for configured label sets; Reconfigure and
// SetLimit may be called concurrently with them and with scrapes.
type Collector struct {
	cfg       Config
	nearShare float64
	exemplars bool

	index  atomic.Pointer[labelIndex]
	mu     sync.Mutex                // serialises Reconfigure and SetLimit; guards limits
	limits map[limitKey][]limitValue // a tier's limits, in the order set

	folded       [numFolds]atomic.Uint64
	storeErrors  [2]atomic.Uint64 // by storeErrorKinds
	unreplicated atomic.Uint64
	unconfirmed  atomic.Uint64 // rate_limit_failover_unconfirmed_total

	storeDuration *prometheus.HistogramVec
	storeObs      map[string]prometheus.Observer // by operation, read-only after New
	delay         *prometheus.HistogramVec

	top *topK
	reg *prometheus.Registry

	circuitMu sync.Mutex
	circuit   map[string]limiter.CircuitState // by store
	perNode   bool                            // a node's breaker was added: no series for the store's own

	requestsDesc, nearLimitDesc, failOpenDesc, failClosedDesc *prometheus.Desc
	storeErrorsDesc, limitDesc, buildInfoDesc, foldedDesc     *prometheus.Desc
	degradedDesc, canceledDesc, circuitDesc, unreplicatedDesc *prometheus.Desc
	quotaDesc, refusalsDesc, unconfirmedDesc                  *prometheus.Desc

	costDesc, openDesc, unknownDesc *prometheus.Desc
	duplicatesDesc                  *prometheus.Desc
	estimateRatio                   *prometheus.HistogramVec

	leases leaseMetrics // lease.go

	identityFallbacks *prometheus.CounterVec // identity.go
}

var (
	_ prometheus.Collector = (*Collector)(nil)
	_ limiter.Recorder     = (*Collector)(nil)
	_ limiter.Observer     = (*Collector)(nil)

	_ limiter.CircuitSetObserver = (*Collector)(nil)
)

// New validates cfg and returns a Collector with every series of the
// configured endpoints and tiers at zero, registered on its own registry
// (see Registry and Handler) together with the Go and process collectors.
func New(cfg Config) (*Collector, error) {
	if err := cfg.defaults(); err != nil {
		return nil, fmt.Errorf("collector: %w", err)
	}
	plan, err := planLabels(cfg.Endpoints, cfg.Tiers, cfg.DefaultTier, cfg.MaxLabelSets)
	if err != nil {
		return nil, fmt.Errorf("collector: %w", err)
	}
	c := &Collector{
		cfg:       cfg,
		nearShare: cfg.NearLimitShare,
		exemplars: cfg.Exemplars,
		limits:    map[limitKey][]limitValue{},
		circuit:   map[string]limiter.CircuitState{cfg.Store: limiter.CircuitClosed},
		top:       newTopK(cfg.TopKeys, cfg.TopWindow, cfg.Now),
	}
	c.initDescs()
	c.storeDuration = prometheus.NewHistogramVec(histogramOpts(
		"rate_limit_redis_duration_seconds",
		"Time each decision waited on the store (Redis or memory), timeouts included, by operation (the algorithm).",
		buckets.StoreDuration(), cfg.NativeHistograms), []string{"operation"})
	c.storeObs = make(map[string]prometheus.Observer, limiter.NumAlgorithms)
	for _, a := range limiter.AllAlgorithms() {
		c.storeObs[string(a)] = c.storeDuration.WithLabelValues(string(a))
	}
	c.storeObs[string(limiter.Concurrency)] = c.storeDuration.WithLabelValues(string(limiter.Concurrency))
	c.delay = prometheus.NewHistogramVec(histogramOpts(
		"rate_limit_delay_seconds",
		"Delay given to admitted leaky_bucket requests (observed only when above zero).",
		buckets.Delay(), cfg.NativeHistograms), []string{"endpoint"})
	c.initCost()
	c.leases = newLeaseMetrics()
	c.identityFallbacks = newIdentityFallbacks()
	c.index.Store(c.buildIndex(nil, plan))
	for _, e := range plan.folded {
		cfg.Logger.Warn("endpoint beyond the cardinality cap is counted as other", "endpoint", e, "max_label_sets", cfg.MaxLabelSets)
	}
	c.reg = prometheus.NewRegistry()
	if err := c.Register(c.reg); err != nil {
		return nil, fmt.Errorf("collector: register: %w", err)
	}
	return c, nil
}

// initDescs describes the series Collect builds from the collector's own
// counts (the rest are client_golang vectors).
func (c *Collector) initDescs() {
	c.requestsDesc = prometheus.NewDesc("rate_limit_requests_total",
		"Rate-limit decisions, exactly one per request, by outcome (allowed, rejected, shadow_rejected, fail_open, fail_closed, penalized).",
		[]string{"status", "endpoint", "plan_tier"}, nil)
	c.nearLimitDesc = prometheus.NewDesc("rate_limit_near_limit_total",
		"Allowed decisions that left less than the configured share of the limit.",
		[]string{"endpoint", "plan_tier"}, nil)
	c.failOpenDesc = prometheus.NewDesc("rate_limit_fail_open_total",
		"Requests let through because the store failed, by reason.",
		[]string{"endpoint", "reason"}, nil)
	c.failClosedDesc = prometheus.NewDesc("rate_limit_fail_closed_total",
		"Requests refused with 503 because the store failed, by reason.",
		[]string{"endpoint", "reason"}, nil)
	c.storeErrorsDesc = prometheus.NewDesc("rate_limit_store_errors_total",
		"Store calls that failed, by kind.",
		[]string{"store", "kind"}, nil)
	c.limitDesc = prometheus.NewDesc("rate_limit_limit",
		"The limit in force: requests per window, or the bucket size for bucket algorithms.",
		[]string{"endpoint", "plan_tier", "algorithm"}, nil)
	c.quotaDesc = prometheus.NewDesc("rate_limit_quota",
		"The quota in force per window (the bucket size for bucket algorithms), without the algorithm label, to divide usage by; one per limit of a tier of several.",
		[]string{"endpoint", "plan_tier", "limit"}, nil)
	c.refusalsDesc = prometheus.NewDesc("rate_limit_refusals_total",
		"Requests refused by a limit (status rejected), once per limit that refused: a request refused by several limits of its tier counts once under each.",
		[]string{"endpoint", "plan_tier", "limit"}, nil)
	c.buildInfoDesc = prometheus.NewDesc("rl_exporter_build_info",
		"A constant 1 labelled with the version, revision and Go version of rl-exporter.",
		[]string{"version", "revision", "goversion"}, nil)
	c.degradedDesc = prometheus.NewDesc("rate_limit_degraded_total",
		"Decisions made on this instance's share of the limit because the store failed (fail_policy local); they are also counted in rate_limit_requests_total as allowed or rejected.",
		[]string{"endpoint"}, nil)
	c.canceledDesc = prometheus.NewDesc("rate_limit_canceled_total",
		"Requests whose caller cancelled or went away while the store decided; not store failures, not in rate_limit_requests_total.",
		[]string{"endpoint"}, nil)
	c.circuitDesc = prometheus.NewDesc("rate_limit_circuit_state",
		"State of the circuit breaker in front of the store: 0 closed, 1 half-open, 2 open.",
		[]string{"store"}, nil)
	c.unreplicatedDesc = prometheus.NewDesc("rate_limit_redis_unreplicated_writes_total",
		"Decisions whose Redis write no replica acknowledged within store.redis.durability_timeout (store.redis.durability wait); they were answered and counted all the same.",
		[]string{"store"}, nil)
	c.unconfirmedDesc = prometheus.NewDesc("rate_limit_failover_unconfirmed_total",
		"Decisions whose Redis write was on its way to a Sentinel-managed primary when a Sentinel began promoting its replica: answered, but possibly missing on the promoted primary.",
		[]string{"store"}, nil)
	c.foldedDesc = prometheus.NewDesc("rate_limit_labels_folded_total",
		`Decisions whose endpoint was counted as "other" or whose plan tier as the default tier, because the value was not configured or beyond the cardinality cap.`,
		[]string{"label", "reason"}, nil)
}

func histogramOpts(name, help string, buckets []float64, native bool) prometheus.HistogramOpts {
	o := prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}
	if native {
		o.NativeHistogramBucketFactor = 1.1
		// Beyond 160 buckets the resolution is halved instead of the
		// histogram being reset (NativeHistogramMinResetDuration is zero).
		o.NativeHistogramMaxBucketNumber = 160
	}
	return o
}

// buildIndex makes the label index for plan, reusing the counters of old
// so that reconfiguration never resets a counter of a label set it keeps.
func (c *Collector) buildIndex(old *labelIndex, plan labelPlan) *labelIndex {
	idx := &labelIndex{
		endpoints: make(map[string]*endpointSeries, len(plan.endpoints)+1),
		capped:    make(map[string]struct{}, len(plan.folded)),
		plan:      plan,
	}
	for _, e := range plan.folded {
		idx.capped[e] = struct{}{}
	}
	names := append(append(make([]string, 0, len(plan.endpoints)+1), plan.endpoints...), OtherEndpoint)
	for _, name := range names {
		var prev *endpointSeries
		if old != nil {
			prev = old.endpoints[name]
		}
		ep := &endpointSeries{name: name, tiers: make(map[string]*pairSeries, len(plan.tiers))}
		if prev != nil {
			ep.fails = prev.fails
		} else {
			ep.fails = &endpointFails{}
		}
		ep.delay = c.delay.WithLabelValues(name)
		for _, t := range plan.tiers {
			var ps *pairSeries
			if prev != nil {
				ps = prev.tiers[t]
			}
			if ps == nil {
				ps = &pairSeries{tier: t}
			}
			ep.tiers[t] = ps
			ep.order = append(ep.order, ps)
		}
		ep.defaultPair = ep.tiers[plan.defaultTier]
		idx.endpoints[name] = ep
		idx.order = append(idx.order, ep)
	}
	idx.other = idx.endpoints[OtherEndpoint]
	return idx
}

// Reconfigure replaces the configured endpoints, tiers and default tier,
// keeping the counts of every label set that stays. Label sets that go
// disappear from the next scrape. On error nothing changes. Safe for
// concurrent use with recording and scrapes.
func (c *Collector) Reconfigure(endpoints, tiers []string, defaultTier string) error {
	plan, err := planLabels(endpoints, tiers, defaultTier, c.cfg.MaxLabelSets)
	if err != nil {
		return fmt.Errorf("collector: reconfigure: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.index.Load()
	idx := c.buildIndex(old, plan)
	c.index.Store(idx)
	for _, ep := range old.order {
		if _, ok := idx.endpoints[ep.name]; !ok {
			c.delay.DeleteLabelValues(ep.name)
			c.estimateRatio.DeletePartialMatch(prometheus.Labels{"endpoint": ep.name})
		}
	}
	for k := range c.limits {
		ep, ok := idx.endpoints[k.endpoint]
		if !ok || ep.tiers[k.tier] == nil {
			delete(c.limits, k)
		}
	}
	for _, e := range plan.folded {
		c.cfg.Logger.Warn("endpoint beyond the cardinality cap is counted as other", "endpoint", e, "max_label_sets", c.cfg.MaxLabelSets)
	}
	return nil
}

// ErrUnknownLabel is returned, wrapped, by SetLimit for an endpoint or
// plan tier that is not configured.
var ErrUnknownLabel = errors.New("not configured")

// SetLimit sets rate_limit_limit for an endpoint and plan tier to the quota
// of lim (lim.Quota(): requests per window, or the bucket size), labelled
// with its algorithm, and rate_limit_quota, labelled limit with the
// endpoint's name; a later call for the same endpoint and tier replaces
// it, algorithm included. It is SetLimits of one limit named after the
// endpoint: the limit of a rule with no other name. An endpoint folded by
// the cardinality cap is ignored (its limit would be a label set beyond
// the cap). Safe for concurrent use.
func (c *Collector) SetLimit(endpoint, tier string, lim limiter.Limit) error {
	return c.SetLimits(endpoint, tier, []NamedLimit{{Name: endpoint, Limit: lim}})
}

// setLimitLocked sets the limits of a configured endpoint and tier ("": the
// default tier) and returns the tier, or "" for an endpoint beyond the cap.
func (c *Collector) setLimitLocked(endpoint, tier string, vs []limitValue) (string, error) {
	idx := c.index.Load()
	if _, ok := idx.capped[endpoint]; ok {
		return "", nil
	}
	ep, ok := idx.endpoints[endpoint]
	if !ok || endpoint == OtherEndpoint {
		return "", fmt.Errorf("collector: set limit: endpoint %q: %w", endpoint, ErrUnknownLabel)
	}
	if tier == "" {
		tier = idx.plan.defaultTier
	}
	if ep.tiers[tier] == nil {
		return "", fmt.Errorf("collector: set limit of %s: plan tier %q: %w", endpoint, tier, ErrUnknownLabel)
	}
	c.limits[limitKey{endpoint, tier}] = vs
	ep.tiers[tier].nameRefusals(vs)
	return tier, nil
}

// Register registers the Collector, the Go and process collectors on reg.
// Go and process collectors that reg already has are left alone.
func (c *Collector) Register(reg prometheus.Registerer) error {
	if err := reg.Register(c); err != nil {
		return err
	}
	for _, extra := range []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := reg.Register(extra); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return err
			}
		}
	}
	return nil
}

// Registry is the Collector's own registry, which Handler serves. Other
// parts of the server may register their collectors on it.
func (c *Collector) Registry() *prometheus.Registry { return c.reg }

// Handler serves the Collector's registry at /metrics with promhttp, in
// OpenMetrics when the scraper asks for it (so exemplars reach Prometheus),
// counting its own scrapes in promhttp_metric_handler_requests_total.
func (c *Collector) Handler() http.Handler {
	return HandlerFor(c.reg, c.cfg.Logger)
}

// HandlerFor serves any registry the way Handler does.
func HandlerFor(reg *prometheus.Registry, logger *slog.Logger) http.Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return promhttp.InstrumentMetricHandler(reg, promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		EnableOpenMetrics: true,
		ErrorLog:          scrapeErrorLog{logger},
		ErrorHandling:     promhttp.ContinueOnError,
		Registry:          reg,
	}))
}

// Describe sends the descriptors of every series. Part of prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.requestsDesc, c.nearLimitDesc, c.failOpenDesc, c.failClosedDesc,
		c.storeErrorsDesc, c.limitDesc, c.buildInfoDesc, c.foldedDesc,
		c.degradedDesc, c.canceledDesc, c.circuitDesc, c.unreplicatedDesc, c.quotaDesc,
		c.refusalsDesc, c.unconfirmedDesc, c.costDesc, c.openDesc, c.unknownDesc, c.duplicatesDesc,
	} {
		ch <- d
	}
	c.estimateRatio.Describe(ch)
	c.storeDuration.Describe(ch)
	c.delay.Describe(ch)
	c.leases.describe(ch)
	c.identityFallbacks.Describe(ch)
}

// Collect sends the current value of every series. Part of prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	idx := c.index.Load()
	for _, ep := range idx.order {
		for _, ps := range ep.order {
			for _, s := range statuses {
				i, _ := s.Index()
				ch <- prometheus.MustNewConstMetric(c.requestsDesc, prometheus.CounterValue,
					float64(ps.requests[i].Load()), string(s), ep.name, ps.tier)
			}
			ch <- prometheus.MustNewConstMetric(c.nearLimitDesc, prometheus.CounterValue,
				float64(ps.nearLimit.Load()), ep.name, ps.tier)
			c.collectCost(ch, ep.name, ps)
			c.collectRefusals(ch, ep.name, ps)
		}
		for i, r := range failureReasons {
			ch <- prometheus.MustNewConstMetric(c.failOpenDesc, prometheus.CounterValue,
				float64(ep.fails.open[i].Load()), ep.name, r)
			ch <- prometheus.MustNewConstMetric(c.failClosedDesc, prometheus.CounterValue,
				float64(ep.fails.closed[i].Load()), ep.name, r)
		}
		ch <- prometheus.MustNewConstMetric(c.degradedDesc, prometheus.CounterValue, float64(ep.fails.degraded.Load()), ep.name)
		ch <- prometheus.MustNewConstMetric(c.canceledDesc, prometheus.CounterValue, float64(ep.fails.canceled.Load()), ep.name)
	}
	for i, k := range storeErrorKinds {
		ch <- prometheus.MustNewConstMetric(c.storeErrorsDesc, prometheus.CounterValue,
			float64(c.storeErrors[i].Load()), c.cfg.Store, k)
	}
	ch <- prometheus.MustNewConstMetric(c.unreplicatedDesc, prometheus.CounterValue,
		float64(c.unreplicated.Load()), c.cfg.Store)
	ch <- prometheus.MustNewConstMetric(c.unconfirmedDesc, prometheus.CounterValue,
		float64(c.unconfirmed.Load()), c.cfg.Store)
	for i, l := range foldLabels {
		ch <- prometheus.MustNewConstMetric(c.foldedDesc, prometheus.CounterValue,
			float64(c.folded[i].Load()), l[0], l[1])
	}
	ch <- prometheus.MustNewConstMetric(c.buildInfoDesc, prometheus.GaugeValue, 1,
		c.cfg.Version, c.cfg.Revision, c.cfg.GoVersion)
	c.circuitMu.Lock()
	for store, st := range c.circuit {
		ch <- prometheus.MustNewConstMetric(c.circuitDesc, prometheus.GaugeValue, float64(st), store)
	}
	c.circuitMu.Unlock()
	c.mu.Lock()
	limits := make([]prometheus.Metric, 0, 2*len(c.limits))
	for k, vs := range c.limits {
		if len(vs) == 1 { // a tier of several limits has no one limit in force
			limits = append(limits, prometheus.MustNewConstMetric(c.limitDesc, prometheus.GaugeValue, vs[0].quota, k.endpoint, k.tier, vs[0].algorithm))
		}
		for _, v := range vs {
			if v.algorithm != string(limiter.Concurrency) { // requests in flight are no quota per window
				limits = append(limits, prometheus.MustNewConstMetric(c.quotaDesc, prometheus.GaugeValue, v.quota, k.endpoint, k.tier, v.name))
			}
		}
	}
	c.mu.Unlock()
	for _, m := range limits {
		ch <- m
	}
	c.storeDuration.Collect(ch)
	c.delay.Collect(ch)
	c.estimateRatio.Collect(ch)
	c.leases.collect(ch)
	c.identityFallbacks.Collect(ch)
}

// CircuitChanged sets rate_limit_circuit_state{store} to the breaker's new
// state. Part of limiter.CircuitObserver: safe for concurrent use, quick
// (called on a change of state, never per decision).
func (c *Collector) CircuitChanged(store string, _, to limiter.CircuitState) {
	c.circuitMu.Lock()
	if store != c.cfg.Store || !c.perNode {
		c.circuit[store] = to
	}
	c.circuitMu.Unlock()
}

// CircuitAdded starts the series rate_limit_circuit_state{store} at state:
// a Redis Cluster master's breaker, made when the master joined the slot
// map. From the first, the store's own series is dropped for good: a keyed
// decision on a Cluster consults its master's breaker alone, so the store's
// would say "closed" while a master's circuit is open. Part of
// limiter.CircuitSetObserver: safe for concurrent use, quick.
func (c *Collector) CircuitAdded(store string, state limiter.CircuitState) {
	c.circuitMu.Lock()
	if !c.perNode {
		c.perNode = true
		delete(c.circuit, c.cfg.Store)
	}
	c.circuit[store] = state
	c.circuitMu.Unlock()
}

// CircuitRemoved drops the series rate_limit_circuit_state{store}: its
// breaker is gone with the master that left the slot map, whose last state
// would otherwise be exported for good. Part of limiter.CircuitSetObserver:
// safe for concurrent use, quick.
func (c *Collector) CircuitRemoved(store string) {
	c.circuitMu.Lock()
	delete(c.circuit, store)
	c.circuitMu.Unlock()
}
