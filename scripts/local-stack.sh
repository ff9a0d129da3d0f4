#!/usr/bin/env bash
# Runs the demo stack of docker-compose.yml on this machine, without Docker:
# redis-server, the demo upstream, two rl-exporter serve replicas sharing
# that Redis, Prometheus with the rules generated from deploy/slo.yaml,
# Alertmanager with the generated config, the alert sink and the load
# generator; and Grafana with the generated dashboards when grafana-server
# (or grafana) is installed, provisioned by deploy/local-stack/grafana/ with
# a data source at this stack's Prometheus.
#
#   scripts/local-stack.sh                   # until Ctrl-C, which stops everything
#   scripts/local-stack.sh --duration 120    # stop after 120 seconds
#
# Ports (override with the environment), all on 127.0.0.1:
#   SERVE_A_PORT=8480 SERVE_B_PORT=8490 UPSTREAM_PORT=8491 REDIS_PORT=16380
#   PROMETHEUS_PORT=9480 ALERTMANAGER_PORT=9483 SINK_PORT=5480 GRAFANA_PORT=3480
# Needs: go, redis-server, prometheus, prometheus-alertmanager (or
# alertmanager) — `make deps` installs the Debian packages. Grafana is
# optional (not a Debian package): GRAFANA_HOME is its home path, by
# default /usr/share/grafana.
set -euo pipefail

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; }

duration=""
while [ $# -gt 0 ]; do
  case "$1" in
    --duration) duration="${2:?--duration needs a number of seconds}"; shift 2 ;;
    --duration=*) duration="${1#*=}"; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "local-stack: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
done
if [ -n "$duration" ] && ! [[ "$duration" =~ ^[1-9][0-9]*$ ]]; then
  echo "local-stack: --duration must be a whole number of seconds, got $duration" >&2
  exit 2
fi

cd "$(dirname "$0")/.."

: "${SERVE_A_PORT:=8480}" "${SERVE_B_PORT:=8490}" "${UPSTREAM_PORT:=8491}" "${REDIS_PORT:=16380}"
: "${PROMETHEUS_PORT:=9480}" "${ALERTMANAGER_PORT:=9483}" "${SINK_PORT:=5480}" "${GRAFANA_PORT:=3480}"

need() {
  for name in "$@"; do
    if command -v "$name" >/dev/null 2>&1; then command -v "$name"; return 0; fi
  done
  echo "local-stack: $1 not found: run make deps (Debian packages redis-server, prometheus, prometheus-alertmanager)" >&2
  exit 1
}
redis_bin=$(need redis-server)
prometheus_bin=$(need prometheus)
alertmanager_bin=$(need prometheus-alertmanager alertmanager)
need go >/dev/null
grafana_bin=$(command -v grafana-server || command -v grafana || true)

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

ports="SERVE_A_PORT SERVE_B_PORT UPSTREAM_PORT REDIS_PORT PROMETHEUS_PORT ALERTMANAGER_PORT SINK_PORT"
if [ -n "$grafana_bin" ]; then ports="$ports GRAFANA_PORT"; fi
for var in $ports; do
  port=${!var}
  if [ "$port" = 6379 ]; then
    echo "local-stack: $var=6379 is the machine's usual Redis; choose another port" >&2
    exit 2
  fi
  if listening "$port"; then
    echo "local-stack: port $port ($var) is already in use; set $var to a free port" >&2
    exit 1
  fi
done

work=$(mktemp -d "${TMPDIR:-/tmp}/rl-exporter-stack.XXXXXX")
mkdir -p "$work/logs"
pids=()

cleanup() {
  trap - EXIT INT TERM
  echo
  echo "local-stack: stopping"
  for ((i=${#pids[@]}-1; i>=0; i--)); do
    kill "${pids[i]}" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  if [ -n "${KEEP_WORK:-}" ]; then
    echo "local-stack: logs and data kept in $work"
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start NAME PROGRAM ARGS...: runs it in the background, output in logs/NAME.log.
start() {
  local name=$1; shift
  "$@" >"$work/logs/$name.log" 2>&1 &
  pids+=($!)
}

# wait_port NAME PORT: waits until the program listens, or stops with its log.
wait_port() {
  local name=$1 port=$2 pid=${pids[${#pids[@]}-1]}
  for _ in $(seq 1 150); do
    if listening "$port"; then return 0; fi
    if ! kill -0 "$pid" 2>/dev/null; then break; fi
    sleep 0.2
  done
  echo "local-stack: $name did not come up on port $port; its log:" >&2
  tail -n 20 "$work/logs/$name.log" >&2
  exit 1
}

echo "local-stack: building rl-exporter"
bin="$work/rl-exporter"
CGO_ENABLED=0 go build -o "$bin" ./cmd/rl-exporter

# The stack's spec with the sink on this machine, and what it generates.
sed "s#http://alert-sink:5001/alerts#http://127.0.0.1:$SINK_PORT/alerts#" deploy/slo.yaml >"$work/slo.yaml"
if grep -q 'alert-sink:5001' "$work/slo.yaml" || ! grep -q "127.0.0.1:$SINK_PORT" "$work/slo.yaml"; then
  echo "local-stack: could not point deploy/slo.yaml's webhooks at the local sink" >&2
  exit 1
fi
"$bin" rules --spec "$work/slo.yaml" --out "$work/generated" >/dev/null

cat >"$work/prometheus.yml" <<EOF
# deploy/prometheus.yml with this machine's addresses.
global:
  scrape_interval: 5s
  evaluation_interval: 5s
rule_files:
  - $work/generated/rules/rl-exporter.rules.yml
alerting:
  alertmanagers:
    - static_configs:
        - targets: ["127.0.0.1:$ALERTMANAGER_PORT"]
scrape_configs:
  - job_name: rl-exporter
    static_configs:
      - targets: ["127.0.0.1:$SERVE_A_PORT", "127.0.0.1:$SERVE_B_PORT"]
EOF

start redis "$redis_bin" --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$work" --save "" --appendonly no
wait_port redis "$REDIS_PORT"
start upstream "$bin" demo-upstream --listen "127.0.0.1:$UPSTREAM_PORT"
wait_port upstream "$UPSTREAM_PORT"
for replica in a b; do
  var="SERVE_${replica^^}_PORT"
  start "rl-exporter-$replica" "$bin" serve --config deploy/rl-exporter.yaml \
    --listen "127.0.0.1:${!var}" --redis-url "redis://127.0.0.1:$REDIS_PORT/0" \
    --upstream "http://127.0.0.1:$UPSTREAM_PORT"
  wait_port "rl-exporter-$replica" "${!var}"
done
start alert-sink "$bin" alert-sink --listen "127.0.0.1:$SINK_PORT"
wait_port alert-sink "$SINK_PORT"
start alertmanager "$alertmanager_bin" --config.file="$work/generated/alerts/alertmanager.yml" \
  --storage.path="$work/alertmanager" --web.listen-address="127.0.0.1:$ALERTMANAGER_PORT" \
  --cluster.listen-address=
wait_port alertmanager "$ALERTMANAGER_PORT"
start prometheus "$prometheus_bin" --config.file="$work/prometheus.yml" \
  --storage.tsdb.path="$work/prometheus" --web.listen-address="127.0.0.1:$PROMETHEUS_PORT"
wait_port prometheus "$PROMETHEUS_PORT"
grafana_line="  Grafana                not installed (grafana-server); see deploy/local-stack/grafana/"
if [ -n "$grafana_bin" ]; then
  # deploy/local-stack/grafana/ with this stack's Prometheus port and dashboards.
  mkdir -p "$work/grafana/provisioning"
  cp -r deploy/local-stack/grafana/datasources deploy/local-stack/grafana/dashboards "$work/grafana/provisioning/"
  sed -i "s#http://127.0.0.1:9480#http://127.0.0.1:$PROMETHEUS_PORT#" "$work/grafana/provisioning/datasources/rl-exporter.yml"
  grafana_args=()
  if [ "$(basename "$grafana_bin")" = grafana ]; then grafana_args=(server); fi
  RL_STACK_DASHBOARDS="$work/generated/dashboards" start grafana "$grafana_bin" "${grafana_args[@]}" \
    --homepath "${GRAFANA_HOME:-/usr/share/grafana}" \
    cfg:default.paths.provisioning="$work/grafana/provisioning" cfg:default.paths.data="$work/grafana/data" \
    cfg:default.paths.logs="$work/grafana/logs" cfg:default.server.http_addr=127.0.0.1 \
    cfg:default.server.http_port="$GRAFANA_PORT" cfg:default.auth.anonymous.enabled=true
  wait_port grafana "$GRAFANA_PORT"
  grafana_line="  Grafana                http://127.0.0.1:$GRAFANA_PORT/d/rl-exporter-overview"
fi
start traffic "$bin" traffic --target "http://127.0.0.1:$SERVE_A_PORT" \
  --target "http://127.0.0.1:$SERVE_B_PORT" --tiers free,pro --normal 20 --abusive 2

cat <<EOF

local-stack: running (logs in $work/logs)
  rl-exporter replica a  http://127.0.0.1:$SERVE_A_PORT   (/metrics, /v1/check, proxy)
  rl-exporter replica b  http://127.0.0.1:$SERVE_B_PORT
  Prometheus             http://127.0.0.1:$PROMETHEUS_PORT/alerts
  Alertmanager           http://127.0.0.1:$ALERTMANAGER_PORT
  alert sink             http://127.0.0.1:$SINK_PORT      (notifications as JSON; logged below)
$grafana_line
The abusive free client makes RateLimitRejectionRatioHigh fire within about two minutes.
Stop Redis to see RateLimitFailOpen page:  kill -STOP ${pids[0]}   (kill -CONT ${pids[0]} to resume)
Ctrl-C stops everything.

EOF

tail -n +1 -f "$work/logs/alert-sink.log" &
pids+=($!)

if [ -n "$duration" ]; then
  sleep "$duration" &
else
  sleep infinity &
fi
pids+=($!)
wait "${pids[${#pids[@]}-1]}"
