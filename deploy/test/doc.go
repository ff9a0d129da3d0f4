// Package deploytest checks the Kubernetes deployment of rl-exporter: the
// kustomize base in deploy/kubernetes/ and the Helm chart in
// deploy/helm/rl-exporter/. It is a module of its own so that the
// Kubernetes, kustomize and Helm libraries stay out of rl-exporter's.
//
// Every object, as kustomize builds it and as the chart renders it, decodes
// strictly (an unknown field is an error) into the types of k8s.io/api and,
// for ServiceMonitor and PrometheusRule, of the prometheus-operator; the
// objects refer to each other by the names and labels they carry; and the
// config they mount passes `rl-exporter check`.
package deploytest
