// Package slo turns one small SLO spec (slo.yaml) into what on-call people
// run: Prometheus recording and alerting rules, the promtool unit tests that
// prove every alert fires when it should and stays quiet when it should not,
// and an Alertmanager configuration that routes the alerts.
//
// The flow is loader → model → generators → writers: [LoadFile] or [Load]
// reads a spec strictly (unknown fields are errors), [Compile] applies the
// defaults and validates it into a [Model], and the Model's methods build
// Prometheus's own rulefmt types and an Alertmanager configuration that the
// Write functions encode to any io.Writer. [Generate] bundles all of it into
// the files `rl-exporter rules` writes. The package reads no flags, no
// environment and no clock; everything it does is pure and safe to run in a
// test or in CI. Its functions share no state and are safe for concurrent
// use; its types are plain values, safe to read concurrently and not to
// mutate while another goroutine reads them.
package slo
