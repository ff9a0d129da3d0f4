package rlclient_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"

	"github.com/rl-exporter/rl-exporter/rlclient"
)

func Example() {
	// A stand-in for an API behind rl-exporter: the first request is over
	// the limit and told to come back in a second.
	var calls atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.Header().Set("RateLimit", `"default";r=0;t=1`)
			http.Error(w, "rate limit exceeded", http.StatusTooManyRequests)
			return
		}
		w.Header().Set("RateLimit", `"default";r=4;t=60`)
		fmt.Fprintln(w, "hello")
	}))
	defer api.Close()

	client := &http.Client{Transport: rlclient.New(rlclient.Config{
		MaxRetries:    3, // then the last 429 is returned as it is
		SlowDownBelow: 2, // pace requests when fewer than 2 remain
	})}
	resp, err := client.Get(api.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, strings.TrimSpace(string(body)), "after", calls.Load(), "requests")
	// Output: 200 hello after 2 requests
}
