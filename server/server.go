// Package server is the process behind `rl-exporter serve`: a reverse proxy
// to an upstream behind the rate-limit middleware, the decision API, health
// and readiness endpoints, /metrics and an optional admin listener.
//
// Reserved paths on the main listener (never proxied), /v1/ being CheckAPI.Prefix:
//
//	POST /v1/check    the decision API, for Config.CheckAPI's peers (proxied when disabled)
//	POST /v1/commit   settles a reservation of /v1/check, for the same peers
//	POST /v1/release  gives a lease of /v1/check back, for the same peers
//	GET /v1/usage     a key's budgets, for the same peers
//	/v1/auth[/…]      forward-auth for nginx, Caddy, Traefik and Envoy, for the same peers
//	/metrics          Prometheus metrics     } on their own listener
//	/healthz          the process is up      } when MetricsListen is set
//	/readyz           decisions can be made  }
//
// What shows users' keys is served only on the admin listener (AdminListen). Every
// listener bounds what a client may hold (Config's timeouts and header bounds).
package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rl-exporter/rl-exporter/admin"
	"github.com/rl-exporter/rl-exporter/collector"
	"github.com/rl-exporter/rl-exporter/config"
	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/proxy"
)

// Reserved paths.
const (
	MetricsPath = "/metrics"
	HealthPath  = "/healthz"
	ReadyPath   = "/readyz"
)

// Defaults of Config: those of the config file (config.Defaults).
const (
	DefaultShutdownTimeout   = config.DefaultShutdownTimeout
	DefaultReadyTimeout      = config.DefaultReadyTimeout
	DefaultReadHeaderTimeout = config.DefaultReadHeaderTimeout
	DefaultReadTimeout       = config.DefaultReadTimeout
	DefaultIdleTimeout       = config.DefaultIdleTimeout
)

// Config configures a Server. Listen and Middleware are required; a zero
// duration or bound takes its Default constant.
type Config struct {
	// Listen is the main listener's address ("host:port"; port 0 picks one).
	Listen string
	// MetricsListen, when set, serves /metrics, /healthz and /readyz, leaving those paths to the upstream.
	MetricsListen string
	// AdminListen, when set, serves AdminHandlers. Off by default.
	AdminListen string
	// AuthListen, when set (with the decision API on), also serves forward-auth alone, reading heads
	// up to AuthMaxHeaderBytes: a gateway forwarding every client header gets a decision, never a 431.
	AuthListen string
	// Upstream is where non-reserved requests are proxied. Nil: they get 404.
	Upstream          *url.URL
	UpstreamTransport TransportConfig
	// Middleware enforces the limits in front of the proxy and answers /v1/check.
	Middleware *httplimit.Middleware
	// CheckAPI says who may use the decision API. Zero: this host alone.
	CheckAPI CheckAPI
	// Ready reports whether the store is reachable (nil: always); called at most once per ReadyTimeout.
	Ready        func(context.Context) error
	ReadyTimeout time.Duration
	// FailPolicy ("open", "local" or "closed"; empty: "open"): /readyz stays ready
	// during a store outage unless it is "closed" or ReadyStrict is set.
	FailPolicy  string
	ReadyStrict bool
	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a body from the handler's first read of it (so a
	// leaky_bucket delay is not counted); a client still sending then is cut off.
	ReadTimeout time.Duration
	// IdleTimeout closes a kept-alive connection idle for this long.
	IdleTimeout time.Duration
	// MaxHeaderBytes (at least MinMaxHeaderBytes) and MaxHeaderCount (Host included)
	// bound a request's head on every listener; beyond either the answer is 431.
	MaxHeaderBytes int
	MaxHeaderCount int
	// AuthMaxHeaderBytes (at least MaxHeaderBytes; zero: DefaultAuthMaxHeaderBytes) bounds a
	// forward-auth head; past it /v1/auth refuses with the gateway's status, never 431. With an
	// Upstream, the main listener still stops every head at MaxHeaderBytes.
	AuthMaxHeaderBytes int
	// MetricsHandler serves /metrics. Default: the Go and process collectors.
	MetricsHandler http.Handler
	// MetricsWebConfigFile is an exporter-toolkit web config (TLS, basic auth) for MetricsListen.
	MetricsWebConfigFile string
	// AdminHandlers are mounted on the admin listener by ServeMux pattern.
	AdminHandlers map[string]http.Handler
	// AdminAuthFailures, when set, is exported as rl_exporter_admin_auth_failures_total.
	AdminAuthFailures *admin.AuthFailures
	// ShutdownTimeout bounds the drain of in-flight requests.
	ShutdownTimeout time.Duration
	// Closers are closed after the drain, in order (the Redis client).
	Closers []io.Closer
	// Logger receives start, stop and proxy-error lines. Default: discard.
	Logger *slog.Logger
	// Overload, when set with Upstream, sheds requests to it by priority
	// (overload.go); the Middleware must pass routes (httplimit.Config.PassRoute).
	Overload *Overload
}

// CheckAPI says who may use the decision API, POST /v1/check, which believes
// the key and plan tier in its body and so must be out of its clients' reach.
type CheckAPI struct {
	// Disabled leaves the path to the proxy, like any other path.
	Disabled bool
	// AllowedPeers are the networks of the connection's remote address (never a forwarded
	// header) allowed to call it; others get 403, undecided. Empty: DefaultCheckPeers.
	AllowedPeers []netip.Prefix
	// Tokens, when set, are also required of an allowed peer as Authorization: Bearer
	// (compared in constant time; ReadWrite ignored); without one the answer is 401.
	Tokens []admin.Token
	// Prefix is where every path of the decision API is served ("/rl/": /rl/check, /rl/auth,
	// …), out of the way of an upstream whose own API has the same paths. Empty: DefaultPrefix.
	Prefix string
}

// DefaultPrefix is CheckAPI.Prefix's default: the paths of httplimit's DecisionAPI as they are.
const DefaultPrefix = httplimit.DecisionAPIPrefix

// DefaultCheckPeers returns the decision API's peers by default: 127.0.0.0/8 and ::1/128.
func DefaultCheckPeers() []netip.Prefix {
	return []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
}

// Server is a serve process, running or ready to run. Safe for concurrent use.
type Server struct {
	cfg             Config
	logger          *slog.Logger
	listeners       map[string]net.Listener // "main", "metrics", "admin"
	servers         map[string]*http.Server
	slow            map[string]*atomic.Uint64 // slow clients cut off, by listener
	oversized       map[string]*atomic.Uint64 // heads refused with 431, by listener
	panics          map[string]*atomic.Uint64 // panics recovered, by listener
	store           storeState
	checkGuard      *admin.TokenGuard // asks the decision API's callers for a token; nil without CheckAPI.Tokens
	stopping        atomic.Bool
	serving         chan struct{} // closed once Serve's listeners accept
	drainOnce       sync.Once
	closeOnce       sync.Once
	overloadMetrics *collector.Overload // nil without Config.Overload
}

// New validates cfg and opens the listeners, so that Addr is known before Serve.
func New(cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, logger: cfg.Logger, listeners: map[string]net.Listener{}, servers: map[string]*http.Server{},
		slow: map[string]*atomic.Uint64{}, oversized: map[string]*atomic.Uint64{}, panics: map[string]*atomic.Uint64{},
		serving: make(chan struct{})}
	s.store.init()
	if err := s.setupOverload(); err != nil {
		return nil, err
	}
	if toks := cfg.CheckAPI.Tokens; len(toks) > 0 {
		g, err := admin.NewTokenGuardWith(admin.TokenGuardConfig{Tokens: toks, Realm: "rl-exporter decision API"})
		if err != nil {
			return nil, fmt.Errorf("server: CheckAPI.Tokens: %w", err)
		}
		s.checkGuard = g
	}
	addrs, handlers, err := s.handlers()
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"main", "metrics", "admin", "auth"} {
		if addr, ok := addrs[name]; ok {
			if err := s.listen(name, addr, handlers[name]); err != nil {
				s.closeListeners()
				return nil, err
			}
		}
	}
	return s, nil
}

func (c Config) withDefaults() (Config, error) {
	if c.Listen == "" {
		return c, errors.New("server: Listen is required")
	}
	if c.Middleware == nil {
		return c, errors.New("server: Middleware is required")
	}
	c.ReadyTimeout = orDefault(c.ReadyTimeout, DefaultReadyTimeout)
	c.ShutdownTimeout = orDefault(c.ShutdownTimeout, DefaultShutdownTimeout)
	c.ReadHeaderTimeout = orDefault(c.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	c.ReadTimeout = orDefault(c.ReadTimeout, DefaultReadTimeout)
	c.IdleTimeout = orDefault(c.IdleTimeout, DefaultIdleTimeout)
	if c.MaxHeaderBytes == 0 {
		c.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if c.MaxHeaderBytes < MinMaxHeaderBytes {
		return c, fmt.Errorf("server: MaxHeaderBytes %d is below %d", c.MaxHeaderBytes, MinMaxHeaderBytes)
	}
	c.MaxHeaderCount = orDefault(c.MaxHeaderCount, DefaultMaxHeaderCount)
	c.AuthMaxHeaderBytes = max(orDefault(c.AuthMaxHeaderBytes, DefaultAuthMaxHeaderBytes), c.MaxHeaderBytes)
	c.FailPolicy = cmp.Or(c.FailPolicy, "open")
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.MetricsHandler == nil {
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		c.MetricsHandler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
	}
	return c, nil
}

func orDefault[T int | time.Duration](v, dflt T) T {
	if v <= 0 {
		return dflt
	}
	return v
}

func (s *Server) handlers() (addrs map[string]string, handlers map[string]http.Handler, err error) {
	cfg := s.cfg
	main, err := s.mainHandler()
	if err != nil {
		return nil, nil, err
	}
	handlers = map[string]http.Handler{"main": main}
	addrs = map[string]string{"main": cfg.Listen}
	if cfg.MetricsListen != "" {
		addrs["metrics"] = cfg.MetricsListen
		handlers["metrics"] = s.opsHandler()
	}
	if cfg.AdminListen != "" {
		addrs["admin"] = cfg.AdminListen
		mux := http.NewServeMux()
		for pat, h := range cfg.AdminHandlers {
			mux.Handle(pat, h)
		}
		handlers["admin"] = mux
	}
	if cfg.AuthListen != "" && !cfg.CheckAPI.Disabled {
		addrs["auth"] = cfg.AuthListen
		handlers["auth"] = s.authOnlyHandler()
	}
	return addrs, handlers, nil
}

func (s *Server) listen(name, addr string, h http.Handler) error {
	cfg := s.cfg
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("server: %s listener %s: %w", name, addr, err)
	}
	oversized, panics := &atomic.Uint64{}, &atomic.Uint64{}
	s.oversized[name], s.panics[name] = oversized, panics
	limits, readBytes := headLimits{maxCount: cfg.MaxHeaderCount, refused: oversized}, cfg.MaxHeaderBytes
	var auth func(*http.Request) bool
	if (name == "main" || name == "auth") && !cfg.CheckAPI.Disabled {
		auth = authMatcher(cmp.Or(cfg.CheckAPI.Prefix, DefaultPrefix))
		limits.auth = auth
		// Gateways forward heads as large as they accept; net/http's 431 is a failure to
		// nginx, which may let the request through, so /v1/auth must read them and refuse.
		if cfg.Upstream == nil || name == "auth" {
			readBytes, limits.maxBytes = cfg.AuthMaxHeaderBytes+authHeadSlack, cfg.MaxHeaderBytes
		}
	}
	srv := &http.Server{
		Handler:           &listenerHandler{s: s, limits: limits, panics: panics, auth: auth, next: h},
		ReadHeaderTimeout: min(cfg.ReadHeaderTimeout, cfg.ReadTimeout),
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    readBytes - headerReadSlack,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	// The exporter-toolkit's TLS hides the metrics listener's connections from this count.
	if name != "metrics" || cfg.MetricsWebConfigFile == "" {
		slow := &atomic.Uint64{}
		s.slow[name] = slow
		ln = &slowClientListener{Listener: ln, slow: slow, oversized: oversized}
		srv.ConnState = slowClientConnState
	}
	s.listeners[name] = ln
	s.servers[name] = srv
	return nil
}

func (s *Server) closeListeners() {
	for _, ln := range s.listeners {
		_ = ln.Close()
	}
}

// Addr returns the bound address of listener "main", "metrics" or "admin", or "".
func (s *Server) Addr(name string) string {
	if ln, ok := s.listeners[name]; ok {
		return ln.Addr().String()
	}
	return ""
}

// Middleware returns the middleware in front of the proxy (to Swap policies).
func (s *Server) Middleware() *httplimit.Middleware { return s.cfg.Middleware }

// decisionRoute is a decision API path under DefaultPrefix and its guarded handler.
type decisionRoute struct {
	path string
	h    http.Handler
}

// decisionAPI is keyed by path under prefix; nil when the decision API is disabled.
func (s *Server) decisionAPI(prefix string) map[string]decisionRoute {
	if s.cfg.CheckAPI.Disabled {
		return nil
	}
	out := map[string]decisionRoute{}
	for path, h := range s.cfg.Middleware.DecisionAPI() {
		if path == httplimit.AuthPath {
			h = authHeadLimit(h, s.cfg.Middleware, s.cfg.AuthMaxHeaderBytes, s.cfg.MaxHeaderCount)
		}
		out[prefix+strings.TrimPrefix(path, DefaultPrefix)] = decisionRoute{path: path, h: s.peerGuarded(h, path)}
	}
	return out
}

// mainHandler dispatches the reserved paths exactly (no path cleaning, so
// the upstream sees the path the client sent) and proxies the rest.
func (s *Server) mainHandler() (http.Handler, error) {
	prefix := s.cfg.CheckAPI.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	api := s.decisionAPI(prefix)
	authPath := prefix + strings.TrimPrefix(httplimit.AuthPath, DefaultPrefix)
	auth, isAuth := api[authPath], authMatcher(prefix)
	notFound := "no upstream is configured"
	if api != nil {
		notFound += "; only " + prefix + "check and " + prefix + "auth are served"
	}
	var rest http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", notFound)
	})
	if s.cfg.Upstream != nil {
		var err error
		if rest, err = s.proxy(s.cfg.Upstream); err != nil {
			return nil, err
		}
		if s.cfg.Overload != nil {
			rest = s.overloadGate(rest)
		}
	}
	limited := s.cfg.Middleware.Handler(rest)
	ops := s.cfg.MetricsListen == ""
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rt, ok := api[r.URL.Path]
		if !ok && auth.h != nil && isAuth(r) {
			rt, ok = auth, true // Envoy's ext_authz: the original path under path_prefix
		}
		if ok {
			if prefix != DefaultPrefix {
				r = atPath(r, prefix)
			}
			rt.h.ServeHTTP(w, r)
			return
		}
		switch r.URL.Path {
		case MetricsPath, HealthPath, ReadyPath:
			if ops {
				s.opsHandler().ServeHTTP(w, r)
				return
			}
		}
		limited.ServeHTTP(w, r)
	}), nil
}

// withoutAuthorization drops the checked token, lest forward-auth read it as a client's API key.
func withoutAuthorization(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r2 := new(http.Request)
		*r2 = *r
		r2.Header = r.Header.Clone()
		r2.Header.Del("Authorization")
		h.ServeHTTP(w, r2)
	})
}

// atPath moves r from prefix to DefaultPrefix, where httplimit's handlers read their paths.
func atPath(r *http.Request, prefix string) *http.Request {
	r2 := new(http.Request)
	*r2 = *r
	u := *r.URL
	u.Path = DefaultPrefix + u.Path[len(prefix):]
	if raw, ok := strings.CutPrefix(u.RawPath, prefix); ok {
		u.RawPath = DefaultPrefix + raw
	} else {
		u.RawPath = ""
	}
	r2.URL = &u
	return r2
}

// authOnlyHandler is AuthListen's handler: forward-auth, and 404 for every other path.
func (s *Server) authOnlyHandler() http.Handler {
	prefix := cmp.Or(s.cfg.CheckAPI.Prefix, DefaultPrefix)
	auth, isAuth := s.decisionAPI(prefix)[prefix+strings.TrimPrefix(httplimit.AuthPath, DefaultPrefix)], authMatcher(prefix)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isAuth(r) {
			writeError(w, http.StatusNotFound, "not_found", "this listener serves "+prefix+"auth alone")
			return
		}
		if prefix != DefaultPrefix {
			r = atPath(r, prefix)
		}
		auth.h.ServeHTTP(w, r)
	})
}

// authMatcher also matches paths under the auth path: Envoy's ext_authz with path_prefix.
func authMatcher(prefix string) func(*http.Request) bool {
	authPath := prefix + strings.TrimPrefix(httplimit.AuthPath, DefaultPrefix)
	return func(r *http.Request) bool {
		p := r.URL.Path
		return p == authPath || len(p) > len(authPath) && strings.HasPrefix(p, authPath+"/")
	}
}

// peerGuarded is nil when the decision API is disabled.
func (s *Server) peerGuarded(api http.Handler, path string) http.Handler {
	if s.cfg.CheckAPI.Disabled {
		return nil
	}
	if s.checkGuard != nil {
		api = s.checkGuard.ReadOnly(withoutAuthorization(api))
	}
	allowed := s.cfg.CheckAPI.AllowedPeers
	if len(allowed) == 0 {
		allowed = DefaultCheckPeers()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		peer := httplimit.PeerAddr(r.RemoteAddr)
		for _, p := range allowed {
			if p.Contains(peer) {
				api.ServeHTTP(w, r)
				return
			}
		}
		who := r.RemoteAddr
		if peer.IsValid() {
			who = peer.String()
		}
		s.logger.LogAttrs(r.Context(), slog.LevelDebug, "decision API refused a peer", slog.String("peer", who))
		writeError(w, http.StatusForbidden, "peer_not_allowed",
			fmt.Sprintf("%s answers only the peers in server.check_api.allowed_peers; %s is not one of them", path, who))
	})
}

func (s *Server) opsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case MetricsPath:
			s.cfg.MetricsHandler.ServeHTTP(w, r)
		case HealthPath:
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = io.WriteString(w, "ok\n")
		case ReadyPath:
			s.ready(w, r)
		default:
			http.NotFound(w, r)
		}
	})
}

// Readiness is the body of /readyz.
type Readiness struct {
	// Ready is whether the instance should receive traffic (200; false: 503).
	Ready bool `json:"ready"`
	// Store is "up" or "down" (no answer within ReadyTimeout), as checked at most ReadyTimeout ago.
	Store string `json:"store"`
	// FailPolicy is how decisions are made while the store is down.
	FailPolicy string `json:"fail_policy"`
	// Strict is set when a store outage makes the instance unready.
	Strict bool `json:"strict"`
	// Reason says why the instance is not ready, or "store unavailable": the
	// store's address and error go to the log, not to whoever reaches /readyz.
	Reason string `json:"reason,omitempty"`
}

// readiness says whether decisions can be made: with the store up, always;
// with it down, while the fail policy still decides, unless ReadyStrict.
func (s *Server) readiness(ctx context.Context) Readiness {
	rd := Readiness{Ready: true, Store: "up", FailPolicy: s.cfg.FailPolicy, Strict: s.cfg.ReadyStrict}
	if s.stopping.Load() {
		rd.Ready, rd.Reason = false, "shutting down"
		return rd
	}
	if s.cfg.Ready == nil {
		return rd
	}
	if err := s.storeErr(ctx); err != nil {
		rd.Store, rd.Reason = "down", "store unavailable"
		rd.Ready = !s.cfg.ReadyStrict && s.cfg.FailPolicy != "closed"
	}
	return rd
}

func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	rd := s.readiness(r.Context())
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if !rd.Ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(rd)
}

func (s *Server) proxy(upstream *url.URL) (http.Handler, error) {
	p, err := proxy.New(proxy.Config{Upstream: upstream, Transport: s.cfg.UpstreamTransport, ErrorHandler: s.upstreamError})
	if err != nil {
		return nil, fmt.Errorf("server: Upstream: %w", err)
	}
	// Idle upstream connections close after the drain, with the store.
	s.cfg.Closers = append(s.cfg.Closers, p)
	return p, nil
}

// upstreamError answers a request the proxy could not forward. A failing body is the
// client's fault: 400 when malformed, nothing when ReadTimeout closed its connection.
func (s *Server) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	if be := (*BodyError)(nil); errors.As(err, &be) {
		if !isTimeout(be.Err) {
			writeError(w, http.StatusBadRequest, "bad_request", "the request body is malformed: "+be.Err.Error())
		}
		return
	}
	if errors.Is(err, context.Canceled) {
		return
	}
	httplimit.ReportUpstreamFailure(w) // nothing was served: a reservation is given back
	s.logger.LogAttrs(r.Context(), slog.LevelWarn, "upstream error", slog.String("path", r.URL.Path), slog.String("error", err.Error()))
	writeError(w, http.StatusBadGateway, "bad_gateway", "the upstream did not answer")
}

func writeError(w http.ResponseWriter, code int, kind, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = fmt.Fprintf(w, "{\"error\":%q,\"message\":%q}\n", kind, msg)
}

// Serve serves every listener until ctx is done, then turns /readyz unready,
// drains in-flight requests for up to ShutdownTimeout and closes the Closers.
// It returns nil after a clean shutdown, else the first serving error.
func (s *Server) Serve(ctx context.Context) error {
	err := s.Run(ctx, sync.OnceFunc(func() { close(s.serving) }))
	if err != nil {
		s.logger.Error("stopped on error", slog.String("part", "http"), slog.String("error", err.Error()))
		err = fmt.Errorf("http: %w", err)
	}
	if cerr := s.Shutdown(); err == nil {
		err = cerr
	}
	return err
}

// Ready is closed once Serve's listeners accept. Safe for concurrent use.
func (s *Server) Ready() <-chan struct{} { return s.serving }

// Shutdown drains (see drain) and closes the Closers; Serve calls it, and again it does nothing.
func (s *Server) Shutdown() error {
	err := s.drain()
	s.closeOnce.Do(func() {
		for _, c := range s.cfg.Closers {
			if cerr := c.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("close: %w", cerr)
			}
		}
		s.logger.Info("stopped")
	})
	return err
}

// drain closes the connections still busy after ShutdownTimeout. Idempotent.
func (s *Server) drain() error {
	var firstErr error
	s.drainOnce.Do(func() {
		s.stopping.Store(true)
		s.store.cancel()
		s.logger.Info("shutting down", slog.Duration("drain_timeout", s.cfg.ShutdownTimeout))
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
		defer cancel()
		var wg sync.WaitGroup
		var mu sync.Mutex
		for name, srv := range s.servers {
			wg.Go(func() {
				if err := srv.Shutdown(ctx); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("drain %s listener: %w", name, err)
					}
					mu.Unlock()
					_ = srv.Close()
				}
			})
		}
		wg.Wait()
	})
	return firstErr
}
