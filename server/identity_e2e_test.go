package server_test

import (
	"fmt"
	"testing"
)

// Behind a load balancer (this host, trusted) that appends X-Forwarded-For
// and passes a client's Forwarded through, serve keys each client by the
// address the load balancer saw, whatever Forwarded says, and an IPv6
// client by its /64.
func TestBehindALoadBalancerAClientNeitherPicksNorRotatesItsKey(t *testing.T) {
	up := upstream(t)
	p := startServe(t, []string{"main"}, "--config", writeConfig(t, `
classes:
  default:
    limits:
      default: {algorithm: fixed_window, rate: 2, period: 1m}
identity: {trusted_proxies: [127.0.0.1/32]}
`), "--upstream", up.URL)
	statuses := func(n int, hdr func(i int) map[string]string) string {
		var codes []int
		for i := 0; i < n; i++ {
			codes = append(codes, get(t, p.url("main", "/"), hdr(i)).StatusCode)
		}
		return fmt.Sprint(codes)
	}
	if got := statuses(4, func(i int) map[string]string {
		return map[string]string{"X-Forwarded-For": "203.0.113.50", "Forwarded": fmt.Sprintf("for=198.51.100.%d", i+1)}
	}); got != "[200 200 429 429]" {
		t.Errorf("a new Forwarded: for= on every request: statuses %s, want [200 200 429 429]", got)
	}
	if got := statuses(3, func(int) map[string]string {
		return map[string]string{"X-Forwarded-For": "203.0.113.51", "Forwarded": "for=198.51.100.99"}
	}); got != "[200 200 429]" {
		t.Errorf("Forwarded: for=<victim>: statuses %s, want [200 200 429]", got)
	}
	if got := statuses(2, func(int) map[string]string { return map[string]string{"X-Forwarded-For": "198.51.100.99"} }); got != "[200 200]" {
		t.Errorf("the victim after the attack: statuses %s, want [200 200]: its budget untouched", got)
	}
	for i, fwd := range []string{"for=unknown", "for=_hidden", "proto=https"} {
		client := fmt.Sprintf("203.0.113.%d", 60+i)
		if got := statuses(2, func(int) map[string]string { return map[string]string{"X-Forwarded-For": client, "Forwarded": fwd} }); got != "[200 200]" {
			t.Errorf("Forwarded: %s from %s: statuses %s, want [200 200]: a bucket of its own, not a shared one", fwd, client, got)
		}
	}
	if got := statuses(5, func(i int) map[string]string {
		return map[string]string{"X-Forwarded-For": fmt.Sprintf("2001:db8:1:2::%d", i+1)}
	}); got != "[200 200 429 429 429]" {
		t.Errorf("five addresses of one /64: statuses %s, want [200 200 429 429 429]", got)
	}
}
