#!/usr/bin/env bash
# compare-http: rl-exporter serve against nginx with limit_req, side by side,
# on this machine, with the same load generator and the same tiny upstream.
#
# Starts `rl-exporter demo-upstream`, a private redis-server on a free port,
# `rl-exporter serve` on the memory store and on that Redis (a limit no run
# reaches: 100,000,000 per second per client), and nginx as a reverse proxy
# with limit_req and a keepalive upstream; then runs `wrk -t2 -c64` against
# each in interleaved rounds and prints, per path, the median requests/s,
# p99 and CPU per request of the server (utime + stime from /proc/PID/stat,
# nginx's workers included, over the run, divided by the requests served),
# with the ratio to nginx and the CPU per request over the bare upstream's
# (a proxied request is two HTTP exchanges, the upstream's one), ending with
# one line per serve path giving both goal ratios; nginx with auth_request asking serve's /v1/auth
# (examples/nginx/nginx.conf, a second nginx, the CPU of nginx and serve together);
# and POST /v1/check (memory and Redis) against the bare upstream answering
# the same POST.
#
# Environment: BIN (rl-exporter binary, default bin/rl-exporter),
# BASELINE_BIN (another rl-exporter binary, such as a previous release,
# whose serve is measured in the same rounds as "…, baseline"), DURATION
# (per run, default 10s), ROUNDS (default 3), CONNECTIONS (default 64),
# THREADS (default 2), ONLY (a regexp of the path names to run).
set -euo pipefail

BIN=${BIN:-bin/rl-exporter}
DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-3}
CONNECTIONS=${CONNECTIONS:-64}
THREADS=${THREADS:-2}
ONLY=${ONLY:-.}
here=$(cd "$(dirname "$0")" && pwd)

"$here/ensure-deps.sh" redis-server redis-cli nginx wrk
[ -x "$BIN" ] || { echo "compare-http: $BIN is not an executable rl-exporter (make build)" >&2; exit 1; }
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

dir=$(mktemp -d /tmp/rl-compare-http.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT INT TERM

# pick_port sets the variable named $1 to a TCP port on 127.0.0.1 that
# nothing listens on and that no earlier call picked (it runs in this
# shell, not in a $(...) subshell, so that RANDOM moves on between calls),
# below Linux's ephemeral range (32768 up), where the connections the runs
# open could take a port before the server picked for it binds it.
used_ports=" "
pick_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 12000))
    [[ $used_ports == *" $p "* ]] && continue
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      used_ports+="$p "
      printf -v "$1" '%s' "$p"
      return
    fi
  done
}

# wait_port waits until something accepts on 127.0.0.1:$1; after 30 s
# it shows the logs (which the exit removes) and stops.
wait_port() {
  for _ in $(seq 300); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "compare-http: nothing listens on 127.0.0.1:$1 after 30 s; the logs:" >&2
  tail -n 5 "$dir"/*.log "$dir"/nginx/logs/error.log >&2 2>/dev/null || true
  exit 1
}

pick_port up_port
"$BIN" demo-upstream --listen "127.0.0.1:$up_port" >"$dir/upstream.log" 2>&1 &
up_pid=$!; pids+=("$up_pid")

pick_port redis_port
redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no >"$dir/redis.log" 2>&1 &
redis_server_pid=$!; pids+=("$redis_server_pid")

serve_config() { # store-type extra-store-yaml port
  cat <<EOF
server:
  listen: "127.0.0.1:$3"
  upstream: "http://127.0.0.1:$up_port"
log: {level: warn}
store:
  type: $1
$2
classes:
  default:
    limits:
      default: {algorithm: gcra, rate: 100000000, period: 1s}
EOF
}
pick_port mem_port
serve_config memory "" "$mem_port" >"$dir/memory.yaml"
"$BIN" serve --config "$dir/memory.yaml" >"$dir/serve-memory.log" 2>&1 &
mem_pid=$!; pids+=("$mem_pid")

wait_port "$redis_port"
pick_port redis_serve_port
serve_config redis "  redis: {url: \"redis://127.0.0.1:$redis_port/0\"}" "$redis_serve_port" >"$dir/redis.yaml"
"$BIN" serve --config "$dir/redis.yaml" >"$dir/serve-redis.log" 2>&1 &
redis_pid=$!; pids+=("$redis_pid")

if [ -n "${BASELINE_BIN:-}" ]; then
  BASELINE_BIN=$(cd "$(dirname "$BASELINE_BIN")" && pwd)/$(basename "$BASELINE_BIN")
  pick_port base_mem_port
  serve_config memory "" "$base_mem_port" >"$dir/base-memory.yaml"
  "$BASELINE_BIN" serve --config "$dir/base-memory.yaml" >"$dir/base-serve-memory.log" 2>&1 &
  base_mem_pid=$!; pids+=("$base_mem_pid")
  pick_port base_redis_port
  serve_config redis "  redis: {url: \"redis://127.0.0.1:$redis_port/0\"}" "$base_redis_port" >"$dir/base-redis.yaml"
  "$BASELINE_BIN" serve --config "$dir/base-redis.yaml" >"$dir/base-serve-redis.log" 2>&1 &
  base_redis_pid=$!; pids+=("$base_redis_pid")
fi

pick_port nginx_port
pick_port auth_port
mkdir -p "$dir/nginx/logs" "$dir/nginx-auth"
# The documented forward-auth nginx.conf, on this run's ports, asking the
# memory serve (whose limit no run reaches) about every request.
sed -e "s/127.0.0.1:8480/127.0.0.1:$mem_port/; s/127.0.0.1:8481/127.0.0.1:$up_port/; s/listen 127.0.0.1:8080;/listen 127.0.0.1:$auth_port;/" \
  -e "s|error_log stderr warn;|error_log $dir/nginx-auth/error.log warn;|" \
  "$here/../examples/nginx/nginx.conf" >"$dir/nginx-auth/nginx.conf"
cat >"$dir/nginx/nginx.conf" <<EOF
daemon off;
worker_processes auto;
pid $dir/nginx/nginx.pid;
error_log $dir/nginx/logs/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $dir/nginx/body;
  proxy_temp_path $dir/nginx/proxy;
  fastcgi_temp_path $dir/nginx/fastcgi;
  uwsgi_temp_path $dir/nginx/uwsgi;
  scgi_temp_path $dir/nginx/scgi;
  limit_req_zone \$binary_remote_addr zone=perclient:10m rate=100000000r/s;
  upstream demo { server 127.0.0.1:$up_port; keepalive 256; }
  server {
    listen 127.0.0.1:$nginx_port;
    location / {
      limit_req zone=perclient burst=100000000 nodelay;
      proxy_pass http://demo;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
EOF
"$NGINX" -p "$dir/nginx" -e "$dir/nginx/logs/error.log" -c "$dir/nginx/nginx.conf" &
nginx_pid=$!; pids+=("$nginx_pid")
"$NGINX" -p "$dir/nginx-auth/" -e "$dir/nginx-auth/error.log" -c nginx.conf &
auth_nginx_pid=$!; pids+=("$auth_nginx_pid")

for p in "$up_port" "$mem_port" "$redis_serve_port" "$nginx_port" "$auth_port" ${base_mem_port:-} ${base_redis_port:-}; do wait_port "$p"; done

cat >"$dir/check.lua" <<'EOF'
wrk.method = "POST"
wrk.body = '{"key":"user:bench","endpoint":"GET /api/v1/orders/42"}'
wrk.headers["Content-Type"] = "application/json"
EOF

# The paths measured: name|url|wrk script|pid whose CPU is counted|pid
# of the Redis server, whose CPU is shown apart.
targets=(
  "upstream alone|http://127.0.0.1:$up_port/api/v1/orders/42||$up_pid|"
  "nginx limit_req|http://127.0.0.1:$nginx_port/api/v1/orders/42||$nginx_pid|"
  "nginx auth_request to serve|http://127.0.0.1:$auth_port/api/v1/orders/42||$auth_nginx_pid $mem_pid|"
  "serve memory|http://127.0.0.1:$mem_port/api/v1/orders/42||$mem_pid|"
  "serve redis|http://127.0.0.1:$redis_serve_port/api/v1/orders/42||$redis_pid|$redis_server_pid"
  "check upstream alone|http://127.0.0.1:$up_port/v1/check|$dir/check.lua|$up_pid|"
  "check memory|http://127.0.0.1:$mem_port/v1/check|$dir/check.lua|$mem_pid|"
  "check redis|http://127.0.0.1:$redis_serve_port/v1/check|$dir/check.lua|$redis_pid|$redis_server_pid"
)
if [ -n "${BASELINE_BIN:-}" ]; then
  targets+=(
    "serve memory, baseline|http://127.0.0.1:$base_mem_port/api/v1/orders/42||$base_mem_pid|"
    "serve redis, baseline|http://127.0.0.1:$base_redis_port/api/v1/orders/42||$base_redis_pid|$redis_server_pid"
    "check memory, baseline|http://127.0.0.1:$base_mem_port/v1/check|$dir/check.lua|$base_mem_pid|"
    "check redis, baseline|http://127.0.0.1:$base_redis_port/v1/check|$dir/check.lua|$base_redis_pid|$redis_server_pid"
  )
fi

# cpu_ticks prints utime + stime of the processes in $1 (a list) and of
# their children (nginx's workers), in clock ticks.
cpu_ticks() {
  local total=0 p f q
  for p in $1 $(for q in $1; do pgrep -P "$q" || true; done); do
    [ -r "/proc/$p/stat" ] || continue
    # Fields after the command name, which is in parentheses: utime is
    # field 14 of the line, the 12th after ") ".
    f=$(sed 's/^.*) //' "/proc/$p/stat")
    set -- $f
    total=$((total + ${12} + ${13}))
  done
  echo "$total"
}
hz=$(getconf CLK_TCK)

# to_ms turns a wrk latency (850.00us, 1.20ms, 2.01s) into milliseconds.
to_ms() {
  awk -v v="$1" 'BEGIN {
    n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
    if (u == "us") n /= 1000; else if (u == "s") n *= 1000; else if (u == "m") n *= 60000
    printf "%.3f", n }'
}

run() { # name url script pid round redis-pid
  local args=(-t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency)
  [ -n "$3" ] && args+=(-s "$3")
  local before after out rbefore=0 rafter=0
  before=$(cpu_ticks "$4")
  [ -n "$6" ] && rbefore=$(cpu_ticks "$6")
  out=$(wrk "${args[@]}" "$2")
  after=$(cpu_ticks "$4")
  [ -n "$6" ] && rafter=$(cpu_ticks "$6")
  local reqs rps p99 non2xx
  reqs=$(awk '/requests in/ {print $1}' <<<"$out")
  rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
  p99=$(to_ms "$(awk '$1 == "99%" {print $2}' <<<"$out")")
  non2xx=$(awk '/Non-2xx/ {print $NF}' <<<"$out")
  local cpu_us redis_us
  cpu_us=$(awk -v t=$((after - before)) -v hz="$hz" -v n="$reqs" 'BEGIN { printf "%.1f", t / hz * 1e6 / n }')
  redis_us=$(awk -v t=$((rafter - rbefore)) -v hz="$hz" -v n="$reqs" 'BEGIN { printf "%.1f", t / hz * 1e6 / n }')
  echo "$1|$5|$rps|$p99|$cpu_us|${non2xx:-0}|$redis_us" >>"$dir/results"
  printf '  round %s  %-28s %10.0f req/s  p99 %8s ms  CPU %6s µs/req%s%s\n' "$5" "$1" "$rps" "$p99" "$cpu_us" \
    "$([ -n "$6" ] && echo " + $redis_us in Redis")" "$([ -n "$non2xx" ] && echo "  (non-2xx: $non2xx)")" >&2
}

echo "compare-http: wrk -t$THREADS -c$CONNECTIONS -d$DURATION, $ROUNDS interleaved rounds; $(nproc) CPUs; $(uname -r); $("$NGINX" -v 2>&1); $BIN${BASELINE_BIN:+ (baseline $BASELINE_BIN)}; load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for t in "${targets[@]}"; do # warm-up, not counted
  IFS='|' read -r name url script pid rpid <<<"$t"
  [[ $name =~ $ONLY ]] || continue
  args=(-t"$THREADS" -c"$CONNECTIONS" -d2s)
  [ -n "$script" ] && args+=(-s "$script")
  wrk "${args[@]}" "$url" >/dev/null
done
for round in $(seq "$ROUNDS"); do
  for t in "${targets[@]}"; do
    IFS='|' read -r name url script pid rpid <<<"$t"
    [[ $name =~ $ONLY ]] || continue
    run "$name" "$url" "$script" "$pid" "$round" "$rpid"
  done
done

# Medians per path, and ratios: proxies to nginx, checks to the bare upstream.
awk -F'|' '
  function median(list,   a, n, i, j, t) {
    n = split(list, a, " ")
    for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
    return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
  }
  { if (!($1 in rps)) order[++k] = $1
    rps[$1] = rps[$1] " " $3; p99[$1] = p99[$1] " " $4; cpu[$1] = cpu[$1] " " $5; bad[$1] += $6; red[$1] = red[$1] " " $7 }
  END {
    for (i = 1; i <= k; i++) { n = order[i]; R[n] = median(rps[n]); P[n] = median(p99[n]); C[n] = median(cpu[n]); D[n] = median(red[n]) }
    printf "\n| path | requests/s (median) | p99 | CPU per request in the server | ratio |\n|---|---:|---:|---:|---|\n"
    for (i = 1; i <= k; i++) {
      n = order[i]; ratio = ""
      if ((n ~ /^serve/ || n ~ /^nginx auth_request/) && ("nginx limit_req" in R)) ratio = sprintf("%.2f× nginx requests/s, p99 %.2f× nginx", R[n] / R["nginx limit_req"], P[n] / P["nginx limit_req"])
      if ((n ~ /^serve/ || n ~ /^nginx/) && ("upstream alone" in C) && C["upstream alone"] > 0) ratio = ratio sprintf("%sCPU %.2f× the bare upstream", ratio == "" ? "" : ", ", C[n] / C["upstream alone"])
      if (n ~ /^check (memory|redis)/ && ("check upstream alone" in R)) ratio = sprintf("%.2f× the bare upstream", R[n] / R["check upstream alone"])
      inredis = (n ~ /redis/) ? sprintf(" + %.1f µs in Redis", D[n]) : ""
      printf "| %s | %.1fk | %.2f ms | %.1f µs%s | %s |\n", n, R[n] / 1000, P[n], C[n], inredis, ratio
      if (bad[n] > 0) printf "|  (%s: %d non-2xx answers over the runs) | | | | |\n", n, bad[n]
    }
    # The proxy'"'"'s goals as one line each: CPU per proxied request over the bare
    # upstream'"'"'s CPU per request (two HTTP exchanges against one), and p99 over nginx'"'"'s.
    for (i = 1; i <= k; i++) {
      n = order[i]
      if (n !~ /^serve (memory|redis)/) continue
      line = ""
      if (("upstream alone" in C) && C["upstream alone"] > 0) line = sprintf("proxy CPU per request / upstream CPU per request = %.2f (goal <= 2.0)", C[n] / C["upstream alone"])
      if (("nginx limit_req" in P) && P["nginx limit_req"] > 0) line = line sprintf("%sp99 / nginx p99 = %.2f (goal <= 1.5)", line == "" ? "" : "; ", P[n] / P["nginx limit_req"])
      if (line != "") printf "%s: %s\n", n, line
    }
  }' "$dir/results"
echo "load average at the end: $(cut -d" " -f1-3 /proc/loadavg)" >&2
