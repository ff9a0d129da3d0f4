package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestServeHTTPLetsTheRequestInFlightFinishOnShutdown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		io.WriteString(w, "done")
	})
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serveHTTP(ctx, ln, h) }()

	got := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String() + "/")
		if err != nil {
			got <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- string(b)
	}()
	<-entered
	cancel()
	select {
	case err := <-served:
		t.Fatalf("serveHTTP returned (%v) while a request was in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if body := <-got; body != "done" {
		t.Errorf("the request in flight got %q, want its answer", body)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("serveHTTP after shutdown: %v, want nil", err)
		}
	case <-time.After(shutdownGrace):
		t.Fatal("serveHTTP did not return after shutdown")
	}
}

func TestServeHTTPReportsAListenerThatFails(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if err := serveHTTP(context.Background(), ln, http.NotFoundHandler()); err == nil {
		t.Error("serveHTTP on a closed listener returned nil")
	}
}

func TestServeHTTPAnswers431ToTooManyOrTooLargeHeaders(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serveHTTP(ctx, ln, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})) }()
	defer func() { cancel(); <-served }()
	for _, c := range []struct {
		name   string
		fields int
		value  string
		want   int
	}{
		{"a few fields", 3, "v", 200},
		{"101 fields", 101, "v", 431},
		{"a 70 KB field", 1, strings.Repeat("v", 70_000), 431},
	} {
		req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/", nil)
		for i := range c.fields {
			req.Header.Add("X-A", c.value+strings.Repeat("v", i%2))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: %d, want %d", c.name, resp.StatusCode, c.want)
		}
	}
}
