#!/bin/sh
# Drives rl-exporter serve's gRPC listener and envoyproxy/ratelimit with the
# same load (rls-load: 64 calls in flight over one connection, 1000 users,
# one descriptor per call), one after the other, on one private
# redis-server, with the same rule: domain bench, key user, a fixed window
# of 1,000,000 per second (every call admitted).
#
#   RL=/path/to/rl-exporter RATELIMIT=/path/to/envoyproxy-ratelimit ./compare.sh [rounds]
#
# Ports 16399 (redis-server) and 18080-18089 must be free; WORK (default
# a new temporary directory) holds the configs and the logs.
set -eu
RL=${RL:?path to the rl-exporter binary}
RATELIMIT=${RATELIMIT:?path to the envoyproxy/ratelimit service_cmd binary}
ROUNDS=${1:-3}
WORK=${WORK:-$(mktemp -d)}
HERE=$(cd "$(dirname "$0")" && pwd)
LOAD="$WORK/rls-load"
(cd "$HERE" && go build -o "$LOAD" .)

mkdir -p "$WORK/rls" "$WORK/rt/ratelimit/config"
cat > "$WORK/rls/bench.yaml" <<'YAML'
domain: bench
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: 1000000}
YAML
cp "$WORK/rls/bench.yaml" "$WORK/rt/ratelimit/config/bench.yaml"
cat > "$WORK/rl.yaml" <<YAML
server: {listen: "127.0.0.1:18080", grpc_listen: "127.0.0.1:18081"}
rls: {config_dir: $WORK/rls}
YAML

redis-server --port 16399 --bind 127.0.0.1 --save '' --appendonly no > "$WORK/redis.log" 2>&1 &
REDIS=$!
trap 'kill $REDIS 2>/dev/null' EXIT
sleep 0.5

for round in $(seq "$ROUNDS"); do
	echo "round $round, load average $(cut -d' ' -f1-3 /proc/loadavg)"
	redis-cli -p 16399 flushall > /dev/null
	"$RL" serve --config "$WORK/rl.yaml" --redis-url redis://127.0.0.1:16399 --log-level warn > "$WORK/rl.log" 2>&1 &
	PID=$!
	sleep 1.5
	"$LOAD" -addr 127.0.0.1:18081 -streams 64 -duration 10s -warmup 2s | sed 's/^/  rl-exporter: /'
	curl -s 127.0.0.1:18080/metrics | grep '^rate_limit_requests_total{endpoint="bench.user"' | sed 's/^/    /'
	kill $PID; wait $PID 2> /dev/null || true

	redis-cli -p 16399 flushall > /dev/null
	env USE_STATSD=false USE_PROMETHEUS=true PROMETHEUS_ADDR=127.0.0.1:18085 LOG_LEVEL=warn \
		BACKEND_TYPE=redis REDIS_SOCKET_TYPE=tcp REDIS_URL=127.0.0.1:16399 \
		RUNTIME_ROOT="$WORK/rt" RUNTIME_SUBDIRECTORY=ratelimit RUNTIME_WATCH_ROOT=false \
		HOST=127.0.0.1 PORT=18083 DEBUG_HOST=127.0.0.1 DEBUG_PORT=18084 GRPC_HOST=127.0.0.1 GRPC_PORT=18082 \
		"$RATELIMIT" > "$WORK/ratelimit.log" 2>&1 &
	PID=$!
	sleep 1.5
	"$LOAD" -addr 127.0.0.1:18082 -streams 64 -duration 10s -warmup 2s | sed 's/^/  envoyproxy\/ratelimit: /'
	kill $PID; wait $PID 2> /dev/null || true
done
