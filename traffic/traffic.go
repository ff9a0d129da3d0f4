// Package traffic sends HTTP requests through rl-exporter serve the way a
// mixed population of clients would: many well-behaved clients that stay
// under their limits, and a few abusive ones that hammer one endpoint and
// collect 429s. It feeds the demo stack's dashboards and alerts, and drives
// the end-to-end alert test.
//
// Each client has its own identity (the user header) and plan tier (the
// tier header), sends at a steady rate, and spreads its requests over the
// targets in turn, so several serve replicas share one population.
package traffic

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Config.
const (
	DefaultNormal      = 20
	DefaultNormalRate  = 0.5
	DefaultAbusive     = 2
	DefaultAbusiveRate = 20
	DefaultUserHeader  = "X-User-ID"
	DefaultTierHeader  = "X-Plan-Tier"
	DefaultTimeout     = 5 * time.Second
)

// DefaultNormalPaths are what well-behaved clients request, in turn: the
// public, internal and default classes of examples/demo.yaml.
var DefaultNormalPaths = []string{"GET /api/v1/orders/42", "POST /api/v1/orders", "GET /internal/stats", "GET /hello"}

// DefaultAbusivePaths are what abusive clients hammer.
var DefaultAbusivePaths = []string{"GET /api/v1/orders/42"}

// Config describes a population of clients. The zero value of every field
// but Targets is a usable default; Abusive 0 means DefaultAbusive, so a
// population with no abusive client sets NoAbusive.
type Config struct {
	// Targets are the base URLs of the serve replicas (http://host:port).
	Targets []string
	// Normal clients send NormalRate requests per second each, over
	// NormalPaths. Defaults DefaultNormal, DefaultNormalRate.
	Normal     int
	NormalRate float64
	// Abusive clients send AbusiveRate requests per second each, over
	// AbusivePaths. Defaults DefaultAbusive, DefaultAbusiveRate.
	Abusive     int
	AbusiveRate float64
	// NoAbusive leaves the abusive clients out (Abusive is then ignored).
	NoAbusive bool
	// NormalPaths and AbusivePaths are "METHOD /path" requests, taken in
	// turn. Defaults DefaultNormalPaths, DefaultAbusivePaths.
	NormalPaths, AbusivePaths []string
	// Tiers are sent in TierHeader, one per client in turn (client i gets
	// Tiers[i % len]); empty sends no tier header.
	Tiers []string
	// UserHeader and TierHeader name the identity and plan tier headers.
	// Defaults DefaultUserHeader, DefaultTierHeader.
	UserHeader, TierHeader string
	// Client sends the requests. Default: a client with DefaultTimeout.
	Client *http.Client
	// Logger gets request errors at debug level. Default: discard.
	Logger *slog.Logger
	// Priority, when set, names the priority under which serve's overload
	// limit admits a request (method, path) sent on tier (the tier header's
	// value, "" when none is sent), so that the answers are also counted by
	// priority. Called once per client and request, concurrently.
	Priority func(method, path, tier string) string
}

type request struct{ method, path string }

func (c *Config) defaults() ([]request, []request, error) {
	if len(c.Targets) == 0 {
		return nil, nil, errors.New("traffic: no target")
	}
	for i, t := range c.Targets {
		u, err := url.Parse(t)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, nil, fmt.Errorf("traffic: target %d: %q is not an http or https URL", i, t)
		}
		c.Targets[i] = strings.TrimSuffix(t, "/")
	}
	if c.Normal == 0 {
		c.Normal = DefaultNormal
	}
	if c.NormalRate == 0 {
		c.NormalRate = DefaultNormalRate
	}
	if c.Abusive == 0 {
		c.Abusive = DefaultAbusive
	}
	if c.AbusiveRate == 0 {
		c.AbusiveRate = DefaultAbusiveRate
	}
	if c.NoAbusive {
		c.Abusive = 0
	}
	if c.Normal < 0 || c.Abusive < 0 {
		return nil, nil, fmt.Errorf("traffic: client counts must be 0 or more, got normal %d, abusive %d", c.Normal, c.Abusive)
	}
	if !(c.NormalRate > 0) || !(c.AbusiveRate > 0) || c.NormalRate > 1000 || c.AbusiveRate > 1000 {
		return nil, nil, fmt.Errorf("traffic: rates must be above 0 and at most 1000 per client, got normal %v, abusive %v", c.NormalRate, c.AbusiveRate)
	}
	if len(c.NormalPaths) == 0 {
		c.NormalPaths = DefaultNormalPaths
	}
	if len(c.AbusivePaths) == 0 {
		c.AbusivePaths = DefaultAbusivePaths
	}
	normal, err := parseRequests("normal", c.NormalPaths)
	if err != nil {
		return nil, nil, err
	}
	abusive, err := parseRequests("abusive", c.AbusivePaths)
	if err != nil {
		return nil, nil, err
	}
	if c.UserHeader == "" {
		c.UserHeader = DefaultUserHeader
	}
	if c.TierHeader == "" {
		c.TierHeader = DefaultTierHeader
	}
	if c.Client == nil {
		c.Client = &http.Client{Timeout: DefaultTimeout}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return normal, abusive, nil
}

func parseRequests(kind string, in []string) ([]request, error) {
	out := make([]request, 0, len(in))
	for i, s := range in {
		method, path, ok := strings.Cut(strings.TrimSpace(s), " ")
		if !ok {
			method, path = http.MethodGet, s
		}
		if !strings.HasPrefix(path, "/") || method == "" || strings.ToUpper(method) != method {
			return nil, fmt.Errorf("traffic: %s path %d: %q is not \"METHOD /path\" or \"/path\"", kind, i, s)
		}
		out = append(out, request{method: method, path: path})
	}
	return out, nil
}

// Stats counts what the clients saw, the well-behaved and the abusive
// apart, and by the tier sent and the priority (Config.Priority). Safe
// for concurrent use.
type Stats struct {
	normal, abusive counts
	mu              sync.Mutex
	byTier          map[string]*counts
	byPriority      map[string]*counts
}

// group returns the counts of name in *m, made on first use.
func (s *Stats) group(m *map[string]*counts, name string) *counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	if *m == nil {
		*m = map[string]*counts{}
	}
	c, ok := (*m)[name]
	if !ok {
		c = &counts{}
		(*m)[name] = c
	}
	return c
}

// counts are the counts of one kind of client.
type counts struct {
	sent, errs atomic.Uint64
	mu         sync.Mutex
	byStatus   map[int]uint64
}

// Counts is what one kind of client saw.
type Counts struct {
	Sent     uint64 // requests completed (answered or failed)
	Errors   uint64 // requests that got no HTTP response
	ByStatus map[int]uint64
}

// Snapshot is a copy of Stats at one instant: the totals, the normal and
// the abusive clients' own counts, and the counts by tier sent (when
// Config.Tiers is set) and by priority (when Config.Priority is).
type Snapshot struct {
	Counts
	Normal, Abusive Counts
	ByTier          map[string]Counts
	ByPriority      map[string]Counts
}

// Snapshot copies the counts.
func (s *Stats) Snapshot() Snapshot {
	snap := Snapshot{Normal: s.normal.snapshot(), Abusive: s.abusive.snapshot()}
	s.mu.Lock()
	for _, g := range []struct {
		from map[string]*counts
		to   *map[string]Counts
	}{{s.byTier, &snap.ByTier}, {s.byPriority, &snap.ByPriority}} {
		for name, c := range g.from {
			if *g.to == nil {
				*g.to = map[string]Counts{}
			}
			(*g.to)[name] = c.snapshot()
		}
	}
	s.mu.Unlock()
	snap.Counts = Counts{
		Sent:     snap.Normal.Sent + snap.Abusive.Sent,
		Errors:   snap.Normal.Errors + snap.Abusive.Errors,
		ByStatus: map[int]uint64{},
	}
	for _, c := range []Counts{snap.Normal, snap.Abusive} {
		for k, v := range c.ByStatus {
			snap.ByStatus[k] += v
		}
	}
	return snap
}

func (c *counts) snapshot() Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	by := make(map[int]uint64, len(c.byStatus))
	for k, v := range c.byStatus {
		by[k] = v
	}
	return Counts{Sent: c.sent.Load(), Errors: c.errs.Load(), ByStatus: by}
}

func (c *counts) count(status int) {
	c.mu.Lock()
	if c.byStatus == nil {
		c.byStatus = map[int]uint64{}
	}
	c.byStatus[status]++
	c.mu.Unlock()
}

// String writes "sent 120: 200=100 429=20, errors 0".
func (c Counts) String() string {
	codes := make([]int, 0, len(c.ByStatus))
	for code := range c.ByStatus {
		codes = append(codes, code)
	}
	slices.Sort(codes)
	parts := make([]string, 0, len(codes))
	for _, code := range codes {
		parts = append(parts, strconv.Itoa(code)+"="+strconv.FormatUint(c.ByStatus[code], 10))
	}
	return fmt.Sprintf("sent %d: %s, errors %d", c.Sent, strings.Join(parts, " "), c.Errors)
}

// String writes the well-behaved and the abusive clients apart:
// "normal: sent 120: 200=120, errors 0 | abusive: sent 60: 200=5 429=55, errors 0".
func (s Snapshot) String() string {
	return "normal: " + s.Normal.String() + " | abusive: " + s.Abusive.String()
}

// Breakdown is a line per tier sent, then per priority, each
// "tier free: sent 120: 200=100 503=20, errors 0", sorted by name; none
// when the counts were not kept by tier or priority.
func (s Snapshot) Breakdown() []string {
	var out []string
	for _, g := range []struct {
		what string
		by   map[string]Counts
	}{{"tier", s.ByTier}, {"priority", s.ByPriority}} {
		names := make([]string, 0, len(g.by))
		for name := range g.by {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			out = append(out, g.what+" "+name+": "+g.by[name].String())
		}
	}
	return out
}

// Validate reports what is wrong with cfg, as Run would, without sending
// anything.
func (c Config) Validate() error {
	c.Targets = append([]string(nil), c.Targets...)
	_, _, err := c.defaults()
	return err
}

// Run sends requests until ctx is done and returns what the clients saw.
// stats, when not nil, is updated as requests complete, so a caller can
// report progress; otherwise Run keeps its own.
func Run(ctx context.Context, cfg Config, stats *Stats) (Snapshot, error) {
	normal, abusive, err := cfg.defaults()
	if err != nil {
		return Snapshot{}, err
	}
	if stats == nil {
		stats = &Stats{}
	}
	var wg sync.WaitGroup
	client := 0
	start := func(kind string, n int, rate float64, reqs []request, own *counts) {
		for i := range n {
			c := clientState{
				cfg: &cfg, reqs: reqs,
				user:     fmt.Sprintf("%s-%d", kind, i+1),
				interval: time.Duration(float64(time.Second) / rate),
				offset:   client,
			}
			shared := []*counts{own}
			if len(cfg.Tiers) > 0 {
				c.tier = cfg.Tiers[client%len(cfg.Tiers)]
				shared = append(shared, stats.group(&stats.byTier, c.tier))
			}
			c.stats = make([][]*counts, len(reqs))
			for j, r := range reqs {
				c.stats[j] = shared
				if cfg.Priority != nil {
					c.stats[j] = append(slices.Clip(shared), stats.group(&stats.byPriority, cfg.Priority(r.method, r.path, c.tier)))
				}
			}
			client++
			wg.Go(func() { c.run(ctx) })
		}
	}
	start("normal", cfg.Normal, cfg.NormalRate, normal, &stats.normal)
	start("abusive", cfg.Abusive, cfg.AbusiveRate, abusive, &stats.abusive)
	wg.Wait()
	return stats.Snapshot(), nil
}

type clientState struct {
	cfg *Config
	// stats are, for each of reqs, the counts its answers add to: its
	// kind's (normal, abusive), its tier's and its priority's.
	stats      [][]*counts
	reqs       []request
	user, tier string
	interval   time.Duration
	offset     int
}

func (c *clientState) run(ctx context.Context) {
	// A random first delay spreads the clients over the interval.
	select {
	case <-ctx.Done():
		return
	case <-time.After(rand.N(c.interval + 1)):
	}
	tick := time.NewTicker(c.interval)
	defer tick.Stop()
	for n := c.offset; ; n++ {
		c.send(ctx, n)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (c *clientState) send(ctx context.Context, n int) {
	// Every target in turn, then the next path: every path reaches every
	// target, whatever the two counts.
	nt := len(c.cfg.Targets)
	target := c.cfg.Targets[n%nt]
	i := (n / nt) % len(c.reqs)
	r, stats := c.reqs[i], c.stats[i]
	req, err := http.NewRequestWithContext(ctx, r.method, target+r.path, nil)
	if err != nil {
		for _, s := range stats {
			s.sent.Add(1)
			s.errs.Add(1)
		}
		return
	}
	req.Header.Set(c.cfg.UserHeader, c.user)
	if c.tier != "" {
		req.Header.Set(c.cfg.TierHeader, c.tier)
	}
	resp, err := c.cfg.Client.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			for _, s := range stats {
				s.sent.Add(1)
				s.errs.Add(1)
			}
			c.cfg.Logger.Debug("request failed", slog.String("target", target), slog.Any("error", err))
		}
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	for _, s := range stats {
		s.sent.Add(1)
		s.count(resp.StatusCode)
	}
}
