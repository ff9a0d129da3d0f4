#!/usr/bin/env bash
# Runs Go fuzz targets one after the other: fuzz.sh FUZZTIME pkg:Target...
# (go test -fuzz takes one target of a package at a time). A target fails the
# run when it finds a failing input (saved under the package's
# testdata/fuzz/<Target>/, to commit once fixed) or fails in any other way.
# One failure is not a finding: Go 1.26's fuzzing coordinator can end a
# target with a bare "context deadline exceeded" when -fuzztime runs out
# while a worker is busy (go.dev/issue/75804, fixed in Go 1.27); without a
# new input saved, that is reported and the run goes on.
# FUZZMINIMIZETIME (default 5s) bounds the minimizing of each new input: Go's
# default of 60s lets a target whose inputs take tens of milliseconds (the
# SLO spec, the config file) spend most of its time minimizing.
set -uo pipefail

fuzztime=$1
shift
go=${GO:-go}
minimize=${FUZZMINIMIZETIME:-5s}
status=0
for target in "$@"; do
  pkg=${target%%:*}
  name=${target#*:}
  corpus="$pkg/testdata/fuzz/$name"
  before=$(ls "$corpus" 2>/dev/null | sort)
  echo "fuzz $name in $pkg for $fuzztime"
  out=$(mktemp)
  "$go" test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimize" "$pkg" 2>&1 | tee "$out"
  rc=${PIPESTATUS[0]}
  after=$(ls "$corpus" 2>/dev/null | sort)
  if [[ $rc -ne 0 ]]; then
    if [[ "$before" == "$after" ]] && grep -q '^    context deadline exceeded$' "$out" && ! grep -q -- '--- FAIL: .*/' "$out" && [[ $(grep -c '^    ' "$out") -eq 1 ]]; then
      echo "fuzz $name: stopped by Go's fuzzing deadline race (go.dev/issue/75804), no failing input found"
    else
      echo "fuzz $name: FAILED; new inputs in $corpus: $(comm -13 <(echo "$before") <(echo "$after") | tr '\n' ' ')"
      status=1
    fi
  fi
  rm -f "$out"
done
exit $status
