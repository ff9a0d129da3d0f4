package server_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/rl-exporter/rl-exporter/httplimit"
	"github.com/rl-exporter/rl-exporter/limiter"
	"github.com/rl-exporter/rl-exporter/server"
)

// Allocation budgets of the request path, per request, for the whole
// process (serve, its upstream and the client of the benchmark, which
// both allocate nothing per request). The benchmarks fail when over.
// Measured: 35 per proxied request and 35 per decision; net/http's server
// (request parsing, the header map cloned at WriteHeader) makes most of
// them. The rate-limit headers are rendered once per policy, the direct
// path forwards a request without a body on its own goroutine and parses
// the usual answer in four allocations, and the decision API's usual
// bodies are read and written without reflection, which is what keeps
// the rest this low.
const (
	proxiedAllocBudget = 36
	checkAllocBudget   = 40
)

// BenchmarkRequestPath measures one request through serve (memory store, a
// limit never reached) on keep-alive connections, serially and from
// GOMAXPROCS clients, and reports allocs/op for the whole process, which
// it holds to a budget:
//
//	go test -run '^$' -bench RequestPath -benchmem ./server
func BenchmarkRequestPath(b *testing.B) {
	up := startRawUpstream(b)
	base := startBenchServeOn(b, up, limiter.NewMemoryStore(limiter.MemoryConfig{}))
	proxied := []byte("GET /api/v1/orders/42 HTTP/1.1\r\nHost: bench\r\nUser-Agent: bench\r\n\r\n")
	body := `{"key":"user:bench","endpoint":"GET /api/v1/orders/42"}`
	check := []byte("POST /v1/check HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	for _, c := range []struct {
		name   string
		req    []byte
		budget float64
	}{
		{"proxied", proxied, proxiedAllocBudget},
		{"check", check, checkAllocBudget},
	} {
		b.Run(c.name+"/serial", func(b *testing.B) {
			conn := dialRaw(b, base)
			measureAllocs(b, c.budget, func() {
				for b.Loop() {
					conn.roundTrip(b, c.req)
				}
			})
		})
		b.Run(c.name+"/parallel", func(b *testing.B) {
			measureAllocs(b, c.budget, func() {
				b.RunParallel(func(pb *testing.PB) {
					conn := dialRaw(b, base)
					for pb.Next() {
						conn.roundTrip(b, c.req)
					}
				})
			})
		})
	}
}

// measureAllocs runs fn and reports the process's allocations per
// operation as "allocs/req", failing the benchmark when over budget.
func measureAllocs(b *testing.B, budget float64, fn func()) {
	b.Helper()
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	if b.N == 0 {
		return
	}
	per := float64(after.Mallocs-before.Mallocs) / float64(b.N)
	b.ReportMetric(per, "allocs/req")
	// The first short runs are mostly connection set-up; the budget is
	// for the steady state.
	if b.N >= 1000 && per > budget {
		b.Errorf("OVER BUDGET: %.1f allocations per request, budget %.0f", per, budget)
	}
}

// startBenchServeOn runs serve on store in front of upstream, with one
// class limited to 100,000,000 requests per second per client, which no
// benchmark reaches.
func startBenchServeOn(b *testing.B, upstream string, store limiter.Store) string {
	b.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		b.Fatal(err)
	}
	p, err := httplimit.NewPolicy(httplimit.PolicyConfig{
		Store: store,
		Classes: []httplimit.Class{{Name: "default", Limits: map[string]limiter.Limit{
			"default": limiter.PerSecond(limiter.GCRA, 100_000_000),
		}}},
	})
	if err != nil {
		b.Fatal(err)
	}
	mw, err := httplimit.New(httplimit.Config{Policy: p})
	if err != nil {
		b.Fatal(err)
	}
	srv, err := server.New(server.Config{Listen: "127.0.0.1:0", Upstream: u, Middleware: mw})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	return srv.Addr("main")
}

// startRawUpstream is the tiniest HTTP/1.1 upstream: it answers every
// request on a connection with the same few bytes and allocates nothing
// per request, so that the benchmark counts serve's allocations.
func startRawUpstream(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 6\r\n\r\nhello\n")
	var closed atomic.Bool
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					n, err := readHead(r)
					if err != nil {
						return
					}
					if _, err := r.Discard(n); err != nil {
						return
					}
					if _, err := c.Write(resp); err != nil {
						return
					}
				}
			}()
		}
	}()
	b.Cleanup(func() { closed.Store(true); ln.Close() })
	return "http://" + ln.Addr().String()
}

var contentLength = []byte("content-length:")

// readHead reads a request's or response's head and returns its
// Content-Length (0 when absent).
func readHead(r *bufio.Reader) (int, error) {
	n := 0
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		if len(line) <= 2 {
			return n, nil
		}
		if len(line) > len(contentLength) && bytes.EqualFold(line[:len(contentLength)], contentLength) {
			v := bytes.TrimSpace(line[len(contentLength):])
			n = 0
			for _, d := range v {
				n = n*10 + int(d-'0')
			}
		}
	}
}

// rawConn is a keep-alive client connection that sends prepared requests
// and reads the answers without allocating.
type rawConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialRaw(b *testing.B, addr string) *rawConn {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return &rawConn{c: c, r: bufio.NewReaderSize(c, 16<<10)}
}

func (rc *rawConn) roundTrip(b *testing.B, req []byte) {
	if _, err := rc.c.Write(req); err != nil {
		b.Fatal(err)
	}
	status, err := rc.r.Peek(12)
	if err != nil {
		b.Fatal(err)
	}
	if !bytes.Equal(status[9:12], []byte("200")) {
		head, _ := rc.r.Peek(rc.r.Buffered())
		b.Fatal(fmt.Errorf("answer %q, want 200", head))
	}
	n, err := readHead(rc.r)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.CopyN(io.Discard, rc.r, int64(n)); err != nil {
		b.Fatal(err)
	}
}
