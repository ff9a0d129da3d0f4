// Package e2e proves the operator's chain with the real programs: traffic
// through the built rl-exporter serve on a private redis-server, scraped by
// Prometheus 2.42 evaluating the rules `rl-exporter rules` generates from a
// spec, Alertmanager 0.25 routing with the generated configuration to a
// webhook sink. The tests assert what on-call would receive. They need the
// Debian packages redis-server, prometheus and prometheus-alertmanager
// (`make deps` installs them). The gateway tests run nginx (auth_request)
// and Caddy (forward_auth) with the example configurations in front of
// serve's /v1/auth, and send it the requests Traefik's ForwardAuth and
// Envoy's ext_authz send; they need the Debian packages nginx and caddy.
package e2e
