package server_test

import (
	"bufio"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rl-exporter/rl-exporter/internal/eventually"
	"github.com/rl-exporter/rl-exporter/internal/redistest"
)

// countingUpstream counts the requests in flight at it and the most seen
// at once. /hold holds a request until its client goes away, /stream
// sends a first chunk and then holds the rest, /x holds it for hold,
// anything else answers at once.
type countingUpstream struct {
	*httptest.Server
	hold          time.Duration
	inFlight, max atomic.Int64
	served        atomic.Int64
}

func newCountingUpstream(t *testing.T, hold time.Duration) *countingUpstream {
	t.Helper()
	u := &countingUpstream{hold: hold}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := u.inFlight.Add(1)
		defer u.inFlight.Add(-1)
		for m := u.max.Load(); n > m && !u.max.CompareAndSwap(m, n); m = u.max.Load() {
		}
		u.served.Add(1)
		switch r.URL.Path {
		case "/hold":
			<-r.Context().Done()
			return
		case "/stream":
			_, _ = w.Write([]byte("first chunk\n"))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		case "/x":
			t := time.NewTimer(u.hold) // the upstream's own work
			defer t.Stop()
			select {
			case <-t.C:
			case <-r.Context().Done():
				return
			}
		}
		_, _ = w.Write([]byte("ok\n"))
	}))
	t.Cleanup(u.Close)
	return u
}

// leaseConfig's store timeout is generous and its fail policy closed, so
// that a slow Redis on a loaded machine refuses visibly (503) instead of
// letting a request through without a lease.
const leaseConfig = `
store: {timeout: 2s, fail_policy: closed}
classes:
  default:
    limits:
      default: {algorithm: concurrency, limit: %LIMIT%, lease_ttl: 2s}
`

func leaseConfigFile(t *testing.T, limit string) string {
	return writeConfig(t, strings.ReplaceAll(leaseConfig, "%LIMIT%", limit))
}

// openStream sends method /stream through p on a raw connection and
// returns it once the first chunk of the body has arrived.
func openStream(t *testing.T, p *proc, method string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", p.addrs["main"])
	if err != nil {
		t.Fatal(err)
	}
	req := method + " /stream HTTP/1.1\r\nHost: a\r\n"
	if method == "POST" {
		req += "Content-Length: 4\r\n\r\nbody" // a body: through ReverseProxy, not the direct path
	} else {
		req += "\r\n"
	}
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%s /stream: %v %v", method, resp, err)
	}
	if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || line != "first chunk\n" {
		t.Fatalf("%s /stream: first chunk %q, %v", method, line, err)
	}
	return conn
}

func statusOf(t *testing.T, method, url string) int {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	if method == "POST" {
		req, _ = http.NewRequest(method, url, strings.NewReader("body"))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Through the proxy, on the direct path (GET) and through ReverseProxy
// (POST) alike: a client that disconnects mid-response gives its lease
// back, on Redis, although its request's context is gone.
func TestAClientThatDisconnectsMidResponseThroughTheProxyFreesItsLease(t *testing.T) {
	rdb := redistest.Single(t)
	up := newCountingUpstream(t, 0)
	p := startServe(t, []string{"main"}, "--config", leaseConfigFile(t, "1"), "--upstream", up.URL, "--redis-url", rdb.URL())
	for _, method := range []string{"GET", "POST"} {
		conn := openStream(t, p, method)
		if s := statusOf(t, method, p.url("main", "/now")); s != http.StatusTooManyRequests {
			t.Fatalf("%s while a response streams: %d, want 429\n%s", method, s, p.log())
		}
		conn.Close()
		// Within 1 s: given back, not expired at the lease_ttl of 2 s.
		eventually.True(t, time.Second, method+": the lease of the client that went away is given back", func() bool {
			n, _ := rdb.Do("ZCARD", "rl:{default|default|/|ip:127.0.0.1}:concurrency")
			return n == int64(0)
		})
		if s := statusOf(t, method, p.url("main", "/now")); s != http.StatusOK {
			t.Fatalf("%s after the client went away: %d", method, s)
		}
	}
	// A response that ends gives its lease back too.
	for range 3 {
		if s := statusOf(t, "POST", p.url("main", "/now")); s != http.StatusOK {
			t.Fatalf("one request after another: %d", s)
		}
	}
}
