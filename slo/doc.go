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
//
// The Alertmanager configuration is written from the package's own small
// types ([AlertmanagerConfig] and the AM* types), not from
// github.com/prometheus/alertmanager/config's, for two reasons. Those
// types write every field the current release knows, global
// (smtp_tls_config, slack_app_url, rocketchat_api_url), per route
// (labels) and per webhook (url_file, timeout), and Alertmanager 0.25
// refuses each of them as unknown, so a configuration they write does not
// load in 0.25 (TestAmtool025RefusesTheConfigAsAlertmanagersOwnTypesWriteIt
// shows it with amtool 0.25). And that package links the whole
// Alertmanager tree into every binary that imports slo, the rate
// limiter's own among them. The package's types hold only fields 0.25 and
// current releases both accept; the tests load what they write with the
// current library and with amtool 0.25, and `rl-exporter rules` checks it
// with amtool when installed.
package slo
