// Package e2e proves the operator's chain with the real programs: traffic
// through the built rl-exporter serve on a private redis-server, scraped by
// Prometheus 2.42 evaluating the rules `rl-exporter rules` generates from a
// spec, Alertmanager 0.25 routing with the generated configuration to a
// webhook sink. The tests assert what on-call would receive. They need the
// Debian packages redis-server, prometheus and prometheus-alertmanager
// (`make deps` installs them).
package e2e
