package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"

	"github.com/rl-exporter/rl-exporter/alertsink"
)

func runAlertSink(ctx context.Context, args []string, _ environ, stdout, stderr io.Writer) int {
	fs := newFlagSet("alert-sink", "[flags]", "Logs one line per alert of every notification Alertmanager posts, and lists the\n"+
		"latest notifications as JSON on GET.", stderr)
	listen := fs.String("listen", "127.0.0.1:5001", "address to listen on; Alertmanager posts to http://ADDR/alerts (any path)")
	format := fs.String("log-format", "text", "log format: text or json")
	if status, ok := parseFlags(fs, args); !ok {
		return status
	}
	var h slog.Handler
	switch *format {
	case "text":
		h = slog.NewTextHandler(stdout, nil)
	case "json":
		h = slog.NewJSONHandler(stdout, nil)
	default:
		fmt.Fprintf(stderr, "rl-exporter alert-sink: --log-format: %q is not text or json\n", *format)
		return exitUsage
	}
	logger := slog.New(h)
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "rl-exporter alert-sink: %v\n", err)
		return exitFailure
	}
	logger.Info("alert sink listening", slog.String("url", "http://"+ln.Addr().String()+"/alerts"))
	if err := serveHTTP(ctx, ln, alertsink.New(alertsink.Config{Logger: logger})); err != nil {
		fmt.Fprintf(stderr, "rl-exporter alert-sink: %v\n", err)
		return exitFailure
	}
	return exitOK
}
