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
	// DefaultMaxClockSkew is the default of Config.MaxClockSkew.
	DefaultMaxClockSkew = 5 * time.Second
	// PeerBatchSenders is the least BatchConfig.Senders of a peer's store.
	PeerBatchSenders = 8
	// PeerPoolSize is the least pool of hybrid's client on a peer: each
	// strict decision holds a connection for a cross-region round trip.
	PeerPoolSize = 256
	// DefaultHybridThreshold is the default of StoreOptions.HybridThreshold.
	DefaultHybridThreshold = 0.8
)

// Observer is told what the regions do, from decisions' paths and the
// shipper's goroutines: calls must be cheap and safe for concurrent use.
type Observer interface {
	// ObserveSync is called after each shipping round to a peer: lag is
	// the age of the newest counts known from it (since New when none),
	// err the round's failure.
	ObserveSync(peer string, lag time.Duration, err error)
	// ObserveDecision is told where each non-local decision ran.
	ObserveDecision(mode Mode, home string)
	// ObserveRTT is called after each cross-region call, failed ones too.
	ObserveRTT(peer string, elapsed time.Duration)
	// ObserveRejectedSlots is called when a merge of the exchange with peer
	// ignored n slots more than Config.MaxClockSkew ahead.
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
	// Clients is every region's Redis by name; the Set does not close them.
	Clients map[string]redis.UniversalClient
	// Store configures every region's redisstore.Store (one Prefix, so
	// that the regions agree on key names).
	Store redisstore.Config
	// SyncInterval is how often changed counts are shipped to every peer.
	// Default DefaultSyncInterval.
	SyncInterval time.Duration
	// SyncTimeout bounds one shipping pipeline. Default DefaultSyncTimeout.
	SyncTimeout time.Duration
	// MaxClockSkew is how far ahead of the receiving Redis's clock a merged
	// slot may start; one further ahead would win every max(), so it is
	// ignored and counted. Default DefaultMaxClockSkew.
	MaxClockSkew time.Duration
	// Observer, when set, is told what the regions do.
	Observer Observer
	// Logger receives the shipper's failures, a line per peer per change.
	Logger *slog.Logger
}

// StoreOptions configures the store Set.Store returns.
type StoreOptions struct {
	// HybridThreshold is the share of the limit, in (0, 1], a key's global
	// estimate reaches before hybrid turns strict. Default DefaultHybridThreshold.
	HybridThreshold float64
	// Home pins the home region of every key of the store (strict and
	// hybrid); "" hashes each key (Set.Home).
	Home string
}

// Set is the regions one process knows: a store per region and the
// shipper. Safe for concurrent use.
type Set struct {
	cfg    Config
	names  []string // sorted
	stores map[string]*redisstore.Store
	// remote are hybrid's clients on each peer, closers those made here.
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
			// A cross-region round trip holds a sender all along.
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
		// Hybrid's strict decisions are not batched.
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

// Home returns key's hashed home region (rendezvous: adding a region moves
// only the keys it wins).
func (s *Set) Home(key string) string { return homeOf(s.names, key) }

// Store returns a limiter.Store for mode m (ModeLocal: the local
// redisstore.Store), which refuses an algorithm m does not Support.
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

// Warm readies every region's Redis at once (scripts and connections, see
// redisstore.Store.Warm), so that a first decision homed far away does not
// outlast its timeout; the error names each region not readied. Safe for
// concurrent use.
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

// Close stops shipping after a last round to every peer (within
// SyncTimeout) and closes only the clients it made. Stores must not be
// used after; closing twice does nothing.
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
