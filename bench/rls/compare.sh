#!/bin/sh
# Drives rl-exporter serve's gRPC listener and envoyproxy/ratelimit with the
# same load (rls-load: 64 calls in flight over one connection, 1000 users,
# one descriptor per call), one after the other, on one private
# redis-server, with the same rule: domain bench, key user, a fixed window
# of 1,000,000 per second (every call admitted).
#
#   RL=/path/to/rl-exporter RATELIMIT=/path/to/envoyproxy-ratelimit ./compare.sh [rounds]
#
# Odd rounds run rl-exporter first, even rounds envoyproxy/ratelimit first,
# so that neither always has the machine's quieter half. Each run prints its
# calls per second, the service's and redis-server's CPU time per call (from
# /proc and INFO cpu: on a busy machine a steadier figure than wall-clock
# throughput), its allocations per call (go_memstats_mallocs_total) and the
# load generator's own; each round prints the ratio of the two throughputs
# and of the two services' CPU per call, and the end their medians.
#
# Ports 16399 (redis-server) and 18080-18089 must be free; WORK (default
# a new temporary directory) holds the configs and the logs.
set -eu
RL=${RL:?path to the rl-exporter binary}
RATELIMIT=${RATELIMIT:?path to the envoyproxy/ratelimit service_cmd binary}
ROUNDS=${1:-3}
DURATION=${DURATION:-10s}
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
trap 'kill $REDIS 2>/dev/null || true' EXIT
sleep 0.5


# measure NAME ADDR PID METRICS: runs the load on ADDR, prints its line with the CPU
# and allocations per call of PID and of redis-server over the measured part, and leaves the
# calls per second in $WORK/NAME.rate.
measure() {
	"$LOAD" -addr "$2" -streams 64 -duration "$DURATION" -warmup 2s -pid "$3" -redis 127.0.0.1:16399 -metrics "$4" > "$WORK/$1.out"
	sed "s/^/  $1: /" "$WORK/$1.out"
	sed -n 's/.* calls\/s=\([0-9]*\) .*/\1/p' "$WORK/$1.out" > "$WORK/$1.rate"
	sed -n 's/.* service_cpu\/call=\([0-9.]*\)µs.*/\1/p' "$WORK/$1.out" > "$WORK/$1.cpu"
}

run_rl() {
	redis-cli -p 16399 flushall > /dev/null
	"$RL" serve --config "$WORK/rl.yaml" --redis-url redis://127.0.0.1:16399 --log-level warn > "$WORK/rl.log" 2>&1 &
	PID=$!
	sleep 1.5
	measure rl-exporter 127.0.0.1:18081 $PID http://127.0.0.1:18080/metrics
	curl -s 127.0.0.1:18080/metrics | grep '^rate_limit_requests_total{endpoint="bench.user"' | sed 's/^/    /'
	kill $PID; wait $PID 2> /dev/null || true
}

run_ratelimit() {
	redis-cli -p 16399 flushall > /dev/null
	env USE_STATSD=false USE_PROMETHEUS=true PROMETHEUS_ADDR=127.0.0.1:18085 LOG_LEVEL=warn \
		BACKEND_TYPE=redis REDIS_SOCKET_TYPE=tcp REDIS_URL=127.0.0.1:16399 \
		RUNTIME_ROOT="$WORK/rt" RUNTIME_SUBDIRECTORY=ratelimit RUNTIME_WATCH_ROOT=false \
		HOST=127.0.0.1 PORT=18083 DEBUG_HOST=127.0.0.1 DEBUG_PORT=18084 GRPC_HOST=127.0.0.1 GRPC_PORT=18082 \
		"$RATELIMIT" > "$WORK/ratelimit.log" 2>&1 &
	PID=$!
	sleep 1.5
	measure envoyproxy-ratelimit 127.0.0.1:18082 $PID http://127.0.0.1:18085/metrics
	kill $PID; wait $PID 2> /dev/null || true
}

: > "$WORK/ratios"
: > "$WORK/cpu_ratios"
for round in $(seq "$ROUNDS"); do
	echo "round $round, load average $(cut -d' ' -f1-3 /proc/loadavg)"
	if [ $((round % 2)) -eq 1 ]; then
		run_rl
		run_ratelimit
	else
		run_ratelimit
		run_rl
	fi
	ratio=$(awk -v a="$(cat "$WORK/rl-exporter.rate")" -v b="$(cat "$WORK/envoyproxy-ratelimit.rate")" 'BEGIN {printf "%.2f", a / b}')
	echo "$ratio" >> "$WORK/ratios"
	echo "  round $round ratio (rl-exporter / envoyproxy-ratelimit calls/s): $ratio"
	cpu_ratio=$(awk -v a="$(cat "$WORK/rl-exporter.cpu")" -v b="$(cat "$WORK/envoyproxy-ratelimit.cpu")" 'BEGIN {printf "%.2f", b / a}')
	echo "$cpu_ratio" >> "$WORK/cpu_ratios"
	echo "  round $round CPU ratio (envoyproxy-ratelimit / rl-exporter service CPU per call): $cpu_ratio"
done
# median FILE WHAT: prints the median of FILE's numbers.
median() {
	sort -n "$1" | awk -v what="$2" '{r[NR] = $1} END {m = (NR % 2) ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2; printf "median %s of %d rounds: %.2f\n", what, NR, m}'
}
median "$WORK/ratios" "ratio"
median "$WORK/cpu_ratios" "CPU ratio"
