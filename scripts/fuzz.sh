#!/usr/bin/env bash
# Runs every Go fuzz target of the repository for a bounded time each
# (default 10s): `scripts/fuzz.sh 30s`. New crashers are written by go test
# under the package's testdata/fuzz/ and then run as regression tests by
# plain `go test`: commit them.
set -euo pipefail
cd "$(dirname "$0")/.."
budget=${1:-10s}
# Minimizing a new interesting input may otherwise take 60 s per input: with
# large seeds (the golden workflows documents of FuzzLoad) the whole budget
# went into it (12 executions in 30 s).
minimize=${FUZZ_MINIMIZE_TIME:-5s}
status=0
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
    echo "fuzz: $pkg $target ($budget)"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$budget" -fuzzminimizetime "$minimize" "$pkg" || status=1
  done
done
exit $status
