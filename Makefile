# rl-exporter — make help lists the targets.
GO       ?= go
BIN      ?= bin/rl-exporter
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS  := -s -w -X main.version=$(VERSION) -X main.revision=$(REVISION)
TEST_DEPS := redis-server redis-cli promtool amtool prometheus prometheus-alertmanager nginx caddy jq

.PHONY: help build test deps bench lint compare run
help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-8s %s\n", $$1, $$2}'

build: ## build bin/rl-exporter
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/rl-exporter

run: build ## start serve (memory store, examples/demo.yaml) in front of a demo upstream; Ctrl-C stops both
	@echo "rl-exporter serve on http://127.0.0.1:8480 in front of the demo upstream on http://127.0.0.1:8481"
	@echo "try:  curl -i http://127.0.0.1:8480/hello       (5 per minute per client: the 6th gets 429)"
	@echo "      curl -i -X POST http://127.0.0.1:8480/v1/check -d '{\"key\":\"alice\",\"endpoint\":\"GET /api/v1/orders/42\"}'"
	@echo "      curl -s http://127.0.0.1:8480/metrics | grep '^rate_limit_' | head"
	@echo "Envoy's rate limit service (gRPC, domain 'demo' of examples/rls) on 127.0.0.1:8081: see docs/envoy.md"
	@$(BIN) demo-upstream --listen 127.0.0.1:8481 >/dev/null & up=$$!; \
	trap 'kill $$up 2>/dev/null' EXIT INT TERM; \
	$(BIN) serve --config examples/demo.yaml

deps: ## install the programs the tests run (redis-server, promtool, amtool, prometheus, alertmanager, nginx, caddy) when missing
	@./scripts/ensure-deps.sh $(TEST_DEPS)

# The goal tests (files tagged !race) hold latencies and overshoots to
# their documented bounds; they run one package at a time (-p 1) so that
# no other package's test competes with them for the CPUs. -p 1 builds one
# test binary at a time too, so only the packages holding a goal test are
# named (GOAL_PKGS, from go list's test files: a build-tag change moves them).
GOAL_PKGS = $(GO) list -f '{{$$d := .Dir}}{{range .TestGoFiles}}{{$$d}}/{{.}} {{end}}{{range .XTestGoFiles}}{{$$d}}/{{.}} {{end}}' ./... \
	| xargs grep -l '^func TestGoal' | xargs -n1 dirname | sort -u

test: deps ## run the whole test suite (installs what it needs)
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 18m ./...
	pkgs=$$($(GOAL_PKGS)) && test -n "$$pkgs" || { echo "make test: no package holds a func TestGoal" >&2; exit 1; }; \
	$(GO) test -p 1 -count=1 -timeout 15m -run '^TestGoal' $$pkgs
	cd bench && $(GO) test -count=1 ./...
	cd deploy/test && $(GO) test -count=1 ./...

bench: ## run the Go benchmarks
	$(GO) test -run '^$$' -bench . -benchmem ./...

# Fuzz targets as package:target; -fuzz runs one target of a package at a
# time. Their seed corpora (testdata/fuzz/) run in make test as plain tests.
FUZZTIME ?= 30s
FUZZ_TARGETS := ./limiter/redisstore:FuzzRedisKeys ./httplimit:FuzzCheckBody \
	./httplimit:FuzzRateLimitHeaders ./config:FuzzParse ./config:FuzzEnvOverride ./slo:FuzzLoadSpec

.PHONY: fuzz
fuzz: ## run each fuzz target for FUZZTIME (30s); a failing input is saved under the package's testdata/fuzz/
	GO=$(GO) ./scripts/fuzz.sh $(FUZZTIME) $(FUZZ_TARGETS)

compare: ## compare with redis_rate, ulule/limiter and x/time/rate (bench/ module; COMPARE_FLAGS=--duration=3s)
	@./scripts/ensure-deps.sh redis-server
	cd bench && $(GO) run ./compare $(COMPARE_FLAGS)

.PHONY: compare-http
compare-http: build ## serve vs nginx limit_req with wrk, interleaved (DURATION=10s ROUNDS=3; installs nginx and wrk when it can)
	BIN=$(BIN) ./scripts/compare-http.sh

.PHONY: rules
rules: ## regenerate rules/, rules-tests/, alerts/ and dashboards/ from slo.yaml (and deploy/generated/ from deploy/slo.yaml)
	$(GO) run ./cmd/rl-exporter rules --spec slo.yaml --out .
	$(GO) run ./cmd/rl-exporter rules --spec deploy/slo.yaml --out deploy/generated
	$(GO) run ./cmd/rl-exporter rules --spec slo.yaml --format prometheus-operator --out deploy/kubernetes

lint: ## gofmt and go vet
	@test -z "$$(gofmt -l .)" || (gofmt -l .; exit 1)
	$(GO) vet ./...

.PHONY: chart
chart: ## print the Helm chart's manifests as helm template renders them, without helm or a cluster (VALUES=file.yaml)
	@cd deploy/test && $(GO) run ./cmd/render-chart $(if $(VALUES),--values $(abspath $(VALUES)))

.PHONY: stack
stack: ## run the demo stack without Docker (Redis, two replicas, Prometheus, Alertmanager, alert sink, load; Grafana when installed); Ctrl-C stops it
	./scripts/local-stack.sh
