package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/rl-exporter/rl-exporter/server"
)

// shutdownGrace is how long requests in flight may take once a server
// subcommand is told to stop.
const shutdownGrace = 5 * time.Second

// serveHTTP serves h on ln until ctx is done, then shuts the server down,
// waiting up to shutdownGrace for the requests in flight. It returns nil
// after such a shutdown and the error that stopped serving otherwise.
// Request heads are bounded as serve's listeners bound them by default.
func serveHTTP(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	server.LimitHeaders(srv, server.DefaultMaxHeaderBytes, server.DefaultMaxHeaderCount)
	drained := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(drained)
		sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
	err := srv.Serve(ln)
	if !stop() {
		<-drained // Serve returns as soon as Shutdown starts; let it finish.
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
