package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"

	"github.com/rl-exporter/rl-exporter/collector"
)

// Run serves every listener, calling ready once they accept, until ctx is done or one
// fails, then drains them without closing the Closers and returns the first serving
// error. Serve is Run then Shutdown. Call it once.
func (s *Server) Run(ctx context.Context, ready func()) error {
	errc := make(chan error, len(s.servers))
	for name, srv := range s.servers {
		s.logger.Info("listening", slog.String("listener", name), slog.String("addr", s.Addr(name)))
		go func() {
			err := s.serveListener(name, srv, s.listeners[name])
			if errors.Is(err, http.ErrServerClosed) {
				err = nil
			}
			if err != nil {
				err = fmt.Errorf("%s listener: %w", name, err)
			}
			errc <- err
		}()
	}
	ready()
	var serveErr error
	n := len(s.servers)
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
		n--
	}
	if err := s.drain(); serveErr == nil {
		serveErr = err
	}
	for ; n > 0; n-- {
		<-errc
	}
	return serveErr
}

func (s *Server) serveListener(name string, srv *http.Server, ln net.Listener) error {
	if name == "metrics" && s.cfg.MetricsWebConfigFile != "" {
		return collector.Serve(ln, srv, s.cfg.MetricsWebConfigFile, s.logger)
	}
	return srv.Serve(ln)
}

// CountPanics counts c, the panics of a listener outside the Server (gRPC), in
// Panics(name) and the metrics. Call it before Serve and the first collection.
func (s *Server) CountPanics(name string, c *atomic.Uint64) { s.panics[name] = c }
