#!/usr/bin/env bash
# Makes sure the programs the test suite runs are installed: redis-server and
# redis-cli (Debian package redis-server), promtool (prometheus), amtool
# (prometheus-alertmanager), and nginx and caddy (the gateways the
# forward-auth tests run). Installs missing ones with apt-get when it can,
# otherwise stops with one line naming what to install.
set -euo pipefail

declare -A pkg_of=(
  [redis-server]=redis-server
  [redis-cli]=redis-tools
  [promtool]=prometheus
  [prometheus]=prometheus
  [amtool]=prometheus-alertmanager
  [prometheus-alertmanager]=prometheus-alertmanager
  [nginx]=nginx
  [caddy]=caddy
)

# nginx is installed in /usr/sbin, which a user's PATH may lack.
found() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ]; }
missing=()
for bin in "$@"; do
  found "$bin" || missing+=("${pkg_of[$bin]:-$bin}")
done
[ ${#missing[@]} -eq 0 ] && exit 0

# Deduplicate package names.
mapfile -t pkgs < <(printf '%s\n' "${missing[@]}" | sort -u)

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing ${pkgs[*]} ..." >&2
  export DEBIAN_FRONTEND=noninteractive
  if apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null; then
    # The Debian packages start their services; the tests start their own.
    for svc in prometheus prometheus-alertmanager; do
      if printf '%s\n' "${pkgs[@]}" | grep -qx "$svc"; then
        (service "$svc" stop || pkill -x "$svc" || true) >/dev/null 2>&1
      fi
    done
    # nginx and caddy are stopped through their service only: a test's
    # own nginx or caddy may be running beside the packaged one.
    for svc in nginx caddy; do
      if printf '%s\n' "${pkgs[@]}" | grep -qx "$svc"; then
        (service "$svc" stop || true) >/dev/null 2>&1
      fi
    done
    exit 0
  fi
fi
echo "missing test dependencies: install the Debian packages: ${pkgs[*]} (apt-get install ${pkgs[*]})" >&2
exit 1
