package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"syscall"

	"github.com/prometheus/exporter-toolkit/web"
)

// ValidateWebConfig checks a web configuration file in the format of the
// Prometheus exporter-toolkit (tls_server_config, basic_auth_users with
// bcrypt hashes, http_server_config), certificates included, so that a bad
// file fails at start-up rather than at the first scrape. An empty path is
// valid: plain HTTP without authentication.
func ValidateWebConfig(path string) error {
	if path == "" {
		return nil
	}
	if err := web.Validate(path); err != nil {
		return fmt.Errorf("web config %s: %w", path, err)
	}
	return nil
}

// Serve serves srv on l until srv is shut down (the error is then
// http.ErrServerClosed, as with http.Server.Serve). With a webConfigFile
// it applies the exporter-toolkit web configuration: TLS (certificates
// reloaded on each new connection) and basic auth, both optional. srv's
// Handler — typically a mux with Handler at /metrics — is wrapped, so all
// of srv is behind the same TLS and authentication. logger may be nil.
func Serve(l net.Listener, srv *http.Server, webConfigFile string, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := ValidateWebConfig(webConfigFile); err != nil {
		return err
	}
	path := webConfigFile
	return web.Serve(l, srv, &web.FlagConfig{WebConfigFile: &path}, logger)
}

// scrapeErrorLog is promhttp's error log. A scraper that hangs up while
// /metrics is written is no error of the exporter: its write errors
// (broken pipe, connection reset, closed connection) are logged at debug
// level; everything else (a collector that fails) at error level.
type scrapeErrorLog struct{ logger *slog.Logger }

// Println implements promhttp.Logger.
func (l scrapeErrorLog) Println(v ...any) {
	level := slog.LevelError
	for _, a := range v {
		if err, ok := a.(error); ok && clientGone(err) {
			level = slog.LevelDebug
		}
	}
	if !l.logger.Enabled(context.Background(), level) {
		return
	}
	l.logger.Log(context.Background(), level, "metrics: "+strings.TrimSuffix(fmt.Sprintln(v...), "\n"))
}

// clientGone reports whether err says the peer closed the connection.
func clientGone(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, http.ErrHandlerTimeout) ||
		errors.Is(err, context.Canceled)
}
