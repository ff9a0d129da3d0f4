// Package deploy holds the demo stack's configuration (docker-compose.yml
// at the repository root mounts it). Its tests check the stack statically
// with what runs without a Docker engine: every mounted path and build
// context exists, Prometheus's and Alertmanager's own tools accept the
// configs, the generated files match the generator, and the addresses the
// configs name are the services compose runs.
package deploy
