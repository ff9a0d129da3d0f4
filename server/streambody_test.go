package server_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/server"
)

// chatRequest is the body of an OpenAI-style streamed chat completion.
const chatRequest = `{"model":"m","stream":true,"messages":[{"role":"user","content":"hello"}]}`

// streamEnd is how an OpenAI-style stream ends.
const streamEnd = "data: [DONE]\n\n"

// sseUpstream answers every POST as an LLM API does: once it has read the body
// and found it to be chatRequest, with events server-sent events, a millisecond
// apart, and then streamEnd; a body that arrives otherwise ends the stream without
// streamEnd.
func sseUpstream(t testing.TB, events int) *httptest.Server {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		w.Header().Set("Content-Type", "text/event-stream")
		body, err := io.ReadAll(r.Body)
		if err != nil || string(body) != chatRequest {
			_, _ = fmt.Fprintf(w, "data: the request body arrived as %q (%v)\n\n", body, err)
			return
		}
		for i := range events {
			if _, err := fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"token %d\"}}]}\n\n", i); err != nil || rc.Flush() != nil {
				return
			}
			// Tokens come apart, as a model writes them: the answer is still
			// under way when the proxy's last read of the body comes.
			time.Sleep(time.Millisecond)
		}
		_, _ = io.WriteString(w, streamEnd)
	}))
	t.Cleanup(up.Close)
	return up
}

// TestAStreamedAnswerReachesItsClientWholeWhenTheProxyEndsSendingTheBodyLate: an
// upstream that reads the whole body of a POST before it answers, as an LLM API
// does, streams its answer whole to the client whenever the proxy's transport makes
// its last read of the body, after it sent all of it (the check that the body is no
// longer than its Content-Length; the end of a body replayed after the class read
// its estimate from it). A loaded machine can put that read after the answer began,
// which cut the answer short; here the read waits, every time, until the client has
// the answer's headers.
func TestAStreamedAnswerReachesItsClientWholeWhenTheProxyEndsSendingTheBodyLate(t *testing.T) {
	lim := limiter.PerSecond(limiter.GCRA, 1_000_000)
	estimating := costClass("chat", httplimit.CostFrom{JSON: "usage.total_tokens"}, 100, lim, "POST /v1/chat/completions")
	estimating.Estimate.JSON = "max_tokens"
	for _, c := range []struct {
		name  string
		class httplimit.Class
	}{
		{"a class of a fixed cost", httplimit.Class{Name: "default", Limits: map[string]limiter.Limit{"default": lim}}},
		{"a class that estimates the cost from the body", estimating},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := httplimit.NewPolicy(httplimit.PolicyConfig{Classes: []httplimit.Class{c.class}, Store: limiter.NewMemoryStore(limiter.MemoryConfig{})})
			if err != nil {
				t.Fatal(err)
			}
			mw, err := httplimit.New(httplimit.Config{Policy: p})
			if err != nil {
				t.Fatal(err)
			}
			u, err := url.Parse(sseUpstream(t, 50).URL)
			if err != nil {
				t.Fatal(err)
			}
			srv, err := server.New(server.Config{Listen: "127.0.0.1:0", Upstream: u, Middleware: mw})
			if err != nil {
				t.Fatal(err)
			}
			headers := make(chan struct{})
			srv.WrapHandler("main", func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					r.Body = &lateAtEnd{ReadCloser: r.Body, until: headers}
					next.ServeHTTP(w, r)
				})
			})
			base := runServer(t, srv)

			req, err := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(chatRequest))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			client := &http.Client{Transport: &http.Transport{}, Timeout: 20 * time.Second}
			defer client.CloseIdleConnections()
			resp, err := client.Do(req)
			close(headers)
			if err != nil {
				t.Fatalf("POST: %v", err)
			}
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK || err != nil || !strings.HasSuffix(string(got), streamEnd) {
				t.Fatalf("status %d, read error %v; the stream (%d bytes) ends with %q, not with %q", resp.StatusCode, err, len(got), tail(got), streamEnd)
			}
		})
	}
}

// lateAtEnd is a request body whose reads after its end wait until the until
// channel closes (at most 10s). Used by one goroutine at a time.
type lateAtEnd struct {
	io.ReadCloser
	until <-chan struct{}
	ended bool
}

func (b *lateAtEnd) Read(p []byte) (int, error) {
	if b.ended {
		select {
		case <-b.until:
		case <-time.After(10 * time.Second):
		}
	}
	n, err := b.ReadCloser.Read(p)
	b.ended = b.ended || err == io.EOF
	return n, err
}

// tail is the end of a stream, for a message.
func tail(b []byte) string {
	if len(b) > 60 {
		b = b[len(b)-60:]
	}
	return string(b)
}
