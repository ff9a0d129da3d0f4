package region

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/limiter/redisstore"
)

// Defaults of Config and StoreOptions.
const (
	// DefaultSyncInterval is how often a region ships its changed counts.
	DefaultSyncInterval = 100 * time.Millisecond
	// DefaultSyncTimeout bounds one shipping pipeline to one peer.
	DefaultSyncTimeout = time.Second
	// DefaultMaxClockSkew is how far ahead of the receiving Redis's clock
	// a shipped slot's window may start before the merge ignores it.
	DefaultMaxClockSkew = 5 * time.Second
	// PeerBatchSenders is the least number of batches of strict decisions
	// on their way to one peer region at once (redisstore.BatchConfig.Senders
	// of the peers' stores; the local store keeps Store.Batch as it is).
	PeerBatchSenders = 8
	// PeerPoolSize is the least connection pool of the client hybrid's
	// strict decisions use on a peer (its options otherwise): each such
	// decision holds a connection for a cross-region round trip, so
	// rate × round trip connections are busy at once.
	PeerPoolSize = 256
	// DefaultHybridThreshold is the share of the limit a key may reach
	// in async before hybrid decides it strictly.
	DefaultHybridThreshold = 0.8
)

// Observer is told what the regions do. The collector implements it; calls
// must be cheap and safe for concurrent use (decisions call ObserveDecision
// and ObserveRTT on their path, the shipper calls ObserveSync from its own
// goroutines).
type Observer interface {
	// ObserveSync is called after each shipping round to a peer: lag is the
	// age of the newest counts known from that peer (its last shipping that
	// reached the local Redis, by the wall clocks of both processes; since
	// New when none ever did), err non-nil when this region's round to the
	// peer failed.
	ObserveSync(peer string, lag time.Duration, err error)
	// ObserveDecision is called for every decision of a strict, async or
	// hybrid store: home is "local" or "remote", where the decision ran.
	ObserveDecision(mode Mode, home string)
	// ObserveRTT is called after each cross-region call (a strict or hybrid
	// decision on a peer's Redis), failed ones included.
	ObserveRTT(peer string, elapsed time.Duration)
	// ObserveRejectedSlots is called when a merge ignored n slots of the
	// exchange with peer whose window started more than
	// Config.MaxClockSkew ahead of the receiving Redis's clock: shipped to
	// peer's Redis, or, for peer's strict slots, merged into the local one.
	ObserveRejectedSlots(peer string, n int)
}

// Where a decision ran, the home argument of Observer.ObserveDecision.
const (
	HomeLocal  = "local"
	HomeRemote = "remote"
)

// Config configures a Set. It is a plain value.
type Config struct {
	// Local is this region's name. Required; a key of Clients.
	Local string
	// Clients is every region's Redis, the local one included, by region
	// name. The Set does not close them.
	Clients map[string]redis.UniversalClient
	// Store is the configuration every region's redisstore.Store is built
	// with (the same Prefix everywhere, so that regions agree on key names),
	// except that a peer's store has at least PeerBatchSenders batch senders.
	Store redisstore.Config
	// SyncInterval is how often the counts changed by async and hybrid
	// decisions are shipped to every peer. Default DefaultSyncInterval.
	SyncInterval time.Duration
	// SyncTimeout is the deadline of one shipping pipeline to one peer.
	// Default DefaultSyncTimeout.
	SyncTimeout time.Duration
	// MaxClockSkew is how far in the future of the receiving Redis's clock
	// a merged slot's window start (or epoch) may be: a slot further ahead
	// (a peer whose Redis clock stepped forward, or a forged one) would win
	// every max() merge and hide its writer's real counts until that time,
	// so the merge ignores it and Observer.ObserveRejectedSlots counts it.
	// Default DefaultMaxClockSkew.
	MaxClockSkew time.Duration
	// Observer, when set, is told of shipping rounds, decisions and
	// cross-region calls.
	Observer Observer
	// Logger receives the shipper's failures (at most one line per peer
	// per change between failing and succeeding). Default: discard.
	Logger *slog.Logger
}

// StoreOptions configures the store Set.Store returns.
type StoreOptions struct {
	// HybridThreshold is, for ModeHybrid, the share of the limit a key's
	// global estimate may reach before its decisions turn strict; in (0, 1].
	// Default DefaultHybridThreshold.
	HybridThreshold float64
	// Home pins the home region of every key of the store (strict and
	// hybrid); "" hashes each key (Set.Home).
	Home string
}

// Set is the regions one process knows: a redisstore.Store per region and
// the shipper of the async counts. Make one with New at start-up and Close
// it at shutdown. It is safe for concurrent use.
type Set struct {
	cfg    Config
	names  []string // sorted
	stores map[string]*redisstore.Store
	// remote are the clients hybrid's strict decisions use on each peer
	// (see ownClient), closers the ones made here.
	remote  map[string]redis.UniversalClient
	closers []func() error
	obs     Observer
	log     *slog.Logger
	scripts *asyncScripts
	ship    *shipper

	closeOnce sync.Once
}

// New validates cfg and builds a redisstore.Store per region and the
// shipper, which ships once Start is called. It does not contact Redis.
func New(cfg Config) (*Set, error) {
	if cfg.Local == "" {
		return nil, errors.New("region: Local (this region's name) is required")
	}
	if _, ok := cfg.Clients[cfg.Local]; !ok {
		return nil, fmt.Errorf("region: no Redis client for the local region %q", cfg.Local)
	}
	if cfg.SyncInterval < 0 || cfg.SyncTimeout < 0 || cfg.MaxClockSkew < 0 {
		return nil, errors.New("region: SyncInterval, SyncTimeout and MaxClockSkew must not be negative")
	}
	if cfg.MaxClockSkew == 0 {
		cfg.MaxClockSkew = DefaultMaxClockSkew
	}
	if cfg.SyncInterval == 0 {
		cfg.SyncInterval = DefaultSyncInterval
	}
	if cfg.SyncTimeout == 0 {
		cfg.SyncTimeout = DefaultSyncTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Set{cfg: cfg, stores: make(map[string]*redisstore.Store, len(cfg.Clients)), remote: map[string]redis.UniversalClient{}, log: cfg.Logger, obs: cfg.Observer}
	if s.obs == nil {
		s.obs = nopObserver{}
	}
	for name, c := range cfg.Clients {
		if name == "" {
			return nil, errors.New("region: a region name is empty")
		}
		if c == nil {
			return nil, fmt.Errorf("region: no Redis client for region %q", name)
		}
		scfg := cfg.Store
		if name != cfg.Local && !scfg.Batch.Disabled {
			// A cross-region round trip holds a sender for its whole
			// length: more of them keep decisions from queueing behind it.
			scfg.Batch.Senders = max(scfg.Batch.Senders, PeerBatchSenders)
		}
		st, err := redisstore.New(c, scfg)
		if err != nil {
			return nil, fmt.Errorf("region: store of region %q: %w", name, err)
		}
		s.stores[name] = st
		s.names = append(s.names, name)
	}
	slices.Sort(s.names)
	for _, name := range s.names {
		if name == cfg.Local {
			s.remote[name] = cfg.Clients[name]
			continue
		}
		// Hybrid's strict decisions are one script call each, not batched:
		// each holds a connection for a whole round trip.
		c, closeClient := ownClient(cfg.Clients[name], PeerPoolSize, 0)
		s.remote[name] = c
		if closeClient != nil {
			s.closers = append(s.closers, closeClient)
		}
	}
	scripts, err := loadAsyncScripts()
	if err != nil {
		return nil, fmt.Errorf("region: %w", err)
	}
	s.scripts = scripts
	s.ship = newShipper(s)
	return s, nil
}

// Regions returns the region names, sorted.
func (s *Set) Regions() []string { return slices.Clone(s.names) }

// Local returns this region's name.
func (s *Set) Local() string { return s.cfg.Local }

// Home returns the hashed home region of key: the region whose rendezvous
// score for key is the highest (see homeOf). Adding or removing a region
// moves only the keys whose highest score it has or had.
func (s *Set) Home(key string) string { return homeOf(s.names, key) }

// Store returns a limiter.Store for limits of mode m: ModeLocal gives the
// local region's redisstore.Store itself. The store refuses (with an error
// from Decide) a limit whose algorithm the mode does not support; check
// Supports first.
func (s *Set) Store(m Mode, opt StoreOptions) (limiter.Store, error) {
	if opt.Home != "" {
		if _, ok := s.stores[opt.Home]; !ok {
			return nil, fmt.Errorf("region: home region %q is not one of %v", opt.Home, s.names)
		}
	}
	switch m {
	case ModeLocal:
		return s.stores[s.cfg.Local], nil
	case ModeStrict:
		return &strictStore{set: s, home: opt.Home}, nil
	case ModeAsync:
		return newAsyncStore(s, ModeAsync, 0, ""), nil
	case ModeHybrid:
		th := opt.HybridThreshold
		if th == 0 {
			th = DefaultHybridThreshold
		}
		if th < 0 || th > 1 {
			return nil, fmt.Errorf("region: hybrid threshold %v is not in (0, 1]", th)
		}
		return newAsyncStore(s, ModeHybrid, th, opt.Home), nil
	}
	_, err := ParseMode(string(m))
	return nil, fmt.Errorf("region: %w", err)
}

// Warm readies every region's Redis for the first decisions, all regions
// at once: each region's store loads its scripts (redisstore.Store.Warm),
// and each peer's client for hybrid's strict decisions loads the async
// scripts, opening their connections on the way. A decision homed in a
// distant region would otherwise pay on its first call for the dial and
// the scripts' loading, several round trips, and outlast its timeout. It
// returns when every region is done or ctx ends; the error names each
// region that could not be readied (its first decisions then load the
// scripts as before). Safe for concurrent use.
func (s *Set) Warm(ctx context.Context) error {
	errs := make([]error, len(s.names))
	var wg sync.WaitGroup
	for i, name := range s.names {
		wg.Go(func() {
			err := s.stores[name].Warm(ctx)
			if name != s.cfg.Local {
				err = errors.Join(err, s.scripts.load(ctx, s.remote[name]))
			}
			if err != nil {
				errs[i] = fmt.Errorf("region %s: %w", name, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Start begins shipping the changed counts every SyncInterval, until
// Close; New starts nothing. Calling it again does nothing.
func (s *Set) Start() { s.ship.start() }

// Close stops shipping after one last round to every peer bounded by
// SyncTimeout. It does not close the clients of Config (only those it made
// from them). Stores must not be used after
// Close; closing twice does nothing.
func (s *Set) Close() error {
	s.closeOnce.Do(func() {
		s.ship.close()
		for _, c := range s.closers {
			_ = c()
		}
	})
	return nil
}

// nopObserver is the Observer of a Set configured without one.
type nopObserver struct{}

func (nopObserver) ObserveSync(string, time.Duration, error) {}
func (nopObserver) ObserveDecision(Mode, string)             {}
func (nopObserver) ObserveRejectedSlots(string, int)         {}
func (nopObserver) ObserveRTT(string, time.Duration)         {}
