// Package alertsink is a small receiver for Alertmanager's webhook: it
// decodes each notification, logs one line per alert in it and keeps the
// last ones in memory, served back as JSON. It stands in for on-call in the
// demo stack and is what the end-to-end test asserts on.
package alertsink

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// Notification is the body of one Alertmanager webhook call (version 4 of
// the payload, as Alertmanager 0.25 and later send it).
type Notification struct {
	Version           string            `json:"version"`
	GroupKey          string            `json:"groupKey"`
	TruncatedAlerts   int               `json:"truncatedAlerts"`
	Status            string            `json:"status"` // firing or resolved
	Receiver          string            `json:"receiver"`
	GroupLabels       map[string]string `json:"groupLabels"`
	CommonLabels      map[string]string `json:"commonLabels"`
	CommonAnnotations map[string]string `json:"commonAnnotations"`
	ExternalURL       string            `json:"externalURL"`
	Alerts            []Alert           `json:"alerts"`
	// ReceivedAt is when the sink received it (not part of the payload).
	ReceivedAt time.Time `json:"receivedAt"`
}

// Alert is one alert of a notification.
type Alert struct {
	Status       string            `json:"status"` // firing or resolved
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
	Fingerprint  string            `json:"fingerprint"`
}

// DefaultKeep is how many notifications a Sink keeps when Config.Keep is 0.
const DefaultKeep = 1000

// maxBody bounds a notification body.
const maxBody = 4 << 20

// Config configures a Sink; the zero value is usable.
type Config struct {
	// Keep is how many of the latest notifications are kept. Default DefaultKeep.
	Keep int
	// Logger gets one line per alert of each notification. Default: discard.
	Logger *slog.Logger
}

// Sink receives Alertmanager webhook notifications. It is an http.Handler:
// POST stores and logs a notification, GET lists the ones kept as JSON.
// Safe for concurrent use.
type Sink struct {
	keep   int
	logger *slog.Logger

	mu      sync.Mutex
	kept    []Notification
	changed chan struct{} // closed and replaced on every notification
}

// New returns an empty Sink.
func New(cfg Config) *Sink {
	if cfg.Keep <= 0 {
		cfg.Keep = DefaultKeep
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Sink{keep: cfg.Keep, logger: cfg.Logger, changed: make(chan struct{})}
}

// ServeHTTP implements http.Handler.
func (s *Sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
		var n Notification
		dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
		if err := dec.Decode(&n); err != nil {
			http.Error(w, fmt.Sprintf("not an Alertmanager webhook notification: %v", err), http.StatusBadRequest)
			return
		}
		n.ReceivedAt = time.Now().UTC()
		s.add(n)
		w.WriteHeader(http.StatusOK)
	case http.MethodGet, http.MethodHead:
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(s.Notifications())
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		http.Error(w, "use POST to notify, GET to list", http.StatusMethodNotAllowed)
	}
}

func (s *Sink) add(n Notification) {
	for _, a := range n.Alerts {
		attrs := []any{
			slog.String("receiver", n.Receiver),
			slog.String("status", a.Status),
			slog.String("alertname", a.Labels["alertname"]),
			slog.String("severity", a.Labels["severity"]),
		}
		for _, l := range []string{"endpoint", "plan_tier", "operation", "long_window"} {
			if v, ok := a.Labels[l]; ok {
				attrs = append(attrs, slog.String(l, v))
			}
		}
		attrs = append(attrs, slog.String("summary", a.Annotations["summary"]))
		s.logger.Info("alert notification", attrs...)
	}
	s.mu.Lock()
	s.kept = append(s.kept, n)
	if len(s.kept) > s.keep {
		s.kept = append([]Notification(nil), s.kept[len(s.kept)-s.keep:]...)
	}
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// Notifications returns a copy of the notifications kept, oldest first.
func (s *Sink) Notifications() []Notification {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Notification(nil), s.kept...)
}

// Match reports whether an alert is the one looked for.
type Match func(n Notification, a Alert) bool

// Wait blocks until a kept notification holds an alert that match accepts,
// and returns the notification and the alert, or the context's error.
func (s *Sink) Wait(ctx context.Context, match Match) (Notification, Alert, error) {
	for {
		s.mu.Lock()
		for _, n := range s.kept {
			for _, a := range n.Alerts {
				if match(n, a) {
					s.mu.Unlock()
					return n, a, nil
				}
			}
		}
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return Notification{}, Alert{}, ctx.Err()
		case <-changed:
		}
	}
}

// AlertMatch matches an alert by name, status (firing or resolved) and labels.
func AlertMatch(name, status string, labels map[string]string) Match {
	return func(_ Notification, a Alert) bool {
		if a.Labels["alertname"] != name || a.Status != status {
			return false
		}
		for k, v := range labels {
			if a.Labels[k] != v {
				return false
			}
		}
		return true
	}
}
