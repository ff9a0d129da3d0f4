package server_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/app"
	"github.com/rl-exporter/rl-exporter/config"
	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/livelimits"
)

// reservationExpiry reads the expiry a /v1/check reservation token carries (its last field).
func reservationExpiry(t *testing.T, tok string) time.Time {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(tok, "r1."))
	if err != nil {
		t.Fatalf("token %q: %v", tok, err)
	}
	var f []any
	if err := json.Unmarshal(raw, &f); err != nil || len(f) != 6 {
		t.Fatalf("token %q holds %s", tok, raw)
	}
	return time.Unix(int64(f[5].(float64)), 0)
}

// A live change of a cost_from class's limit, put in force by serve's live cache, replaces the
// limit alone: reservations taken under it keep the class's reserve.hold.
func TestALiveChangeOfACostFromClassKeepsItsReserveHold(t *testing.T) {
	cfg, err := config.Parse("rl.yaml", []byte(`
server: {listen: "127.0.0.1:0"}
reload: {watch: false}
live: {enabled: true}
classes:
  chat:
    routes: ["POST /v1/chat"]
    cost_from: {json: usage.total_tokens}
    estimate: {default: 100}
    reserve: {hold: 30m, on_expiry: refund}
    limits: {default: {algorithm: fixed_window, rate: 1000, period: 24h}}
`))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := app.Build(cfg, app.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, srv)
	cache := srv.LiveLimits()
	key := livelimits.ClassKey(cache.Prefix(), "chat", cfg.Tiers.Default)
	ch := livelimits.Change{MaxRequests: 500, RolloutPercent: 100}
	ctx := context.Background()
	if err := cache.Backend().Write(ctx, key, ch.Fields(), time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := cache.Refresh(ctx, key); err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	srv.Middleware().CheckHandler().ServeHTTP(w, httptest.NewRequest("POST", httplimit.CheckPath,
		strings.NewReader(`{"key":"user:1","endpoint":"POST /v1/chat","reserve":true}`)))
	var got httplimit.CheckResponse
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Code != 200 || got.Limit != 500 || got.Reservation == "" {
		t.Fatalf("reserving check under the live change: %d %s", w.Code, w.Body)
	}
	if left := time.Until(reservationExpiry(t, got.Reservation)); left < 25*time.Minute {
		t.Fatalf("the reservation expires in %s, want the class's hold of 30m", left.Round(time.Second))
	}
}
