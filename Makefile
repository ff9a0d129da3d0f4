# rl-exporter — make help lists the targets.
GO       ?= go
BIN      ?= bin/rl-exporter
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS  := -s -w -X main.version=$(VERSION) -X main.revision=$(REVISION)
TEST_DEPS := redis-server redis-cli promtool amtool prometheus prometheus-alertmanager

.PHONY: help build test deps bench lint compare
help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-8s %s\n", $$1, $$2}'

build: ## build bin/rl-exporter
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/rl-exporter

deps: ## install the programs the tests run (redis-server, promtool, amtool) when missing
	@./scripts/ensure-deps.sh $(TEST_DEPS)

test: deps ## run the whole test suite (installs what it needs)
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 18m ./...

bench: ## run the Go benchmarks
	$(GO) test -run '^$$' -bench . -benchmem ./...

compare: ## compare with redis_rate, ulule/limiter and x/time/rate (bench/ module; COMPARE_FLAGS=--duration=3s)
	@./scripts/ensure-deps.sh redis-server
	cd bench && $(GO) run ./compare $(COMPARE_FLAGS)

lint: ## gofmt and go vet
	@test -z "$$(gofmt -l .)" || (gofmt -l .; exit 1)
	$(GO) vet ./...
