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
    for try in 1 2; do
      echo "fuzz: $pkg $target ($budget)"
      out=$(mktemp)
      if go test -run '^$' -fuzz "^${target}\$" -fuzztime "$budget" -fuzzminimizetime "$minimize" "$pkg" 2>&1 | tee "$out"; [ "${PIPESTATUS[0]}" = 0 ]; then
        rm -f "$out"; break
      fi
      # A finding is a failing input written under testdata/fuzz: that
      # always fails. Go's fuzzing engine can also stop with "context
      # deadline exceeded" when -fuzztime ends while it is minimizing a new
      # (passing) input; that finds nothing, so it is tried once more and,
      # if it happens again, reported without failing.
      if grep -q 'Failing input written to' "$out" || ! grep -q 'context deadline exceeded' "$out"; then
        status=1; rm -f "$out"; break
      fi
      rm -f "$out"
      if [ "$try" = 2 ]; then
        echo "fuzz: $pkg $target: the fuzzing engine ran out of time while minimizing (no failing input); not a finding"
      fi
    done
  done
done
exit $status
