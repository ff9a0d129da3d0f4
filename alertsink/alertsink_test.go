package alertsink

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// payload is a notification as Alertmanager 0.25 sends it to a webhook.
const payload = `{
  "receiver": "page",
  "status": "firing",
  "alerts": [{
    "status": "firing",
    "labels": {"alertname": "RateLimitRejectionRatioHigh", "endpoint": "GET /api/v1/orders/{id}", "plan_tier": "free", "severity": "page"},
    "annotations": {"summary": "Too many requests are rejected", "runbook_url": "https://example.com/runbook"},
    "startsAt": "2026-11-29T19:00:00.000Z",
    "endsAt": "0001-01-01T00:00:00Z",
    "generatorURL": "http://prometheus/graph",
    "fingerprint": "5c3f2a"
  }],
  "groupLabels": {"alertname": "RateLimitRejectionRatioHigh"},
  "commonLabels": {"alertname": "RateLimitRejectionRatioHigh", "severity": "page"},
  "commonAnnotations": {},
  "externalURL": "http://alertmanager:9093",
  "version": "4",
  "groupKey": "{}:{alertname=\"RateLimitRejectionRatioHigh\"}",
  "truncatedAlerts": 0
}`

func TestSinkKeepsLogsAndListsWhatAlertmanagerSends(t *testing.T) {
	var logs bytes.Buffer
	s := New(Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	srv := httptest.NewServer(s)
	defer srv.Close()

	resp, err := http.Post(srv.URL+"/alerts", "application/json", strings.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST status %d, want 200", resp.StatusCode)
	}
	for _, want := range []string{"alertname=RateLimitRejectionRatioHigh", "status=firing", "severity=page", `endpoint="GET /api/v1/orders/{id}"`, "plan_tier=free", "receiver=page"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log line lacks %s:\n%s", want, logs.String())
		}
	}

	resp, err = http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var listed []Notification
	if err := json.NewDecoder(resp.Body).Decode(&listed); err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || listed[0].Receiver != "page" || len(listed[0].Alerts) != 1 ||
		listed[0].Alerts[0].Labels["plan_tier"] != "free" || listed[0].ReceivedAt.IsZero() {
		t.Fatalf("GET lists %+v", listed)
	}
}

func TestWaitReturnsTheMatchingAlertOnceItArrives(t *testing.T) {
	s := New(Config{})
	post := func(body string) {
		s.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body)))
	}
	// The firing alert is kept already: Wait's first look at it (the match
	// refusing it) comes before the resolved one is posted, so that the
	// resolved one comes through the wait for a change.
	post(payload)
	want := AlertMatch("RateLimitRejectionRatioHigh", "resolved", map[string]string{"plan_tier": "free", "severity": "page"})
	looked := make(chan struct{})
	var once sync.Once
	match := func(n Notification, a Alert) bool {
		once.Do(func() { close(looked) })
		return want(n, a)
	}
	go func() {
		<-looked
		post(strings.ReplaceAll(payload, `"firing"`, `"resolved"`))
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, a, err := s.Wait(ctx, match)
	if err != nil {
		t.Fatal(err)
	}
	if n.Status != "resolved" || a.Annotations["runbook_url"] != "https://example.com/runbook" {
		t.Fatalf("got %+v / %+v", n, a)
	}

	short, cancel2 := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel2()
	if _, _, err := s.Wait(short, AlertMatch("RateLimitFailOpen", "firing", nil)); err == nil {
		t.Fatal("Wait found an alert that never arrived")
	}
}

func TestSinkRefusesWhatIsNotANotification(t *testing.T) {
	s := New(Config{Keep: 2})
	cases := []struct {
		name, method, body string
		want               int
	}{
		{"a body that is not JSON is a 400", http.MethodPost, "alert!", http.StatusBadRequest},
		{"a DELETE is a 405", http.MethodDelete, "", http.StatusMethodNotAllowed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, httptest.NewRequest(c.method, "/", strings.NewReader(c.body)))
			if rec.Code != c.want {
				t.Fatalf("status %d, want %d", rec.Code, c.want)
			}
		})
	}
	for range 5 {
		s.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/", strings.NewReader(payload)))
	}
	if got := len(s.Notifications()); got != 2 {
		t.Fatalf("kept %d notifications, want the last 2", got)
	}
}
