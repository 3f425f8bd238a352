#!/usr/bin/env bash
# scripts/bench-export.sh [N]: `celos vet` and `celos export` side by side with
# `cue vet -c` and `cue export` on a generated project of N workflows (default
# 1,000; schema/bench_test.go's writeBenchProject, through TestWriteBenchProject),
# as processes, alternating, ROUNDS rounds (default 3). celos runs three ways:
# --no-cache, with an empty cache directory (the first run: it compiles and
# writes the entry) and with that entry there (an unchanged project). Prints
# the median wall time (ms) and peak RSS (MB) of each, and the ratios.
# Needs the cue CLI (scripts/test-deps.sh installs it) and GNU time.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000}
rounds=${ROUNDS:-3}
cue=$(command -v cue || true)
[ -n "$cue" ] || cue=$(go env GOPATH)/bin/cue
[ -x "$cue" ] || { echo "bench-export: the cue CLI is missing: run scripts/test-deps.sh" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "bench-export: GNU time (/usr/bin/time) is missing: apt-get install time" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
CELOS_BENCH_PROJECT=$work/proj CELOS_BENCH_N=$n go test -count=1 -run '^TestWriteBenchProject$' ./schema >/dev/null
go build -o "$work/celos" ./cmd/celos
export CUE_REGISTRY=none

# run NAME CMD...: one run in the project directory; appends "ms kb" to $work/NAME.
run() {
	local name=$1
	shift
	local start end
	start=$(date +%s%N)
	if ! (cd "$work/proj" && /usr/bin/time -f '%M' -o "$work/rss" "$@" >/dev/null 2>"$work/err"); then
		echo "bench-export: $name failed:" >&2
		cat "$work/err" >&2
		exit 1
	fi
	end=$(date +%s%N)
	echo "$(((end - start) / 1000000)) $(tail -1 "$work/rss")" >>"$work/$name"
}

for r in $(seq "$rounds"); do
	run cue-vet "$cue" vet -c .
	run celos-vet-nocache "$work/celos" vet --no-cache
	rm -rf "$work/cache"
	CELOS_CACHE_DIR=$work/cache run celos-vet-first "$work/celos" vet
	CELOS_CACHE_DIR=$work/cache run celos-vet-cached "$work/celos" vet
	run cue-export "$cue" export .
	run celos-export-nocache "$work/celos" export --no-cache
	rm -rf "$work/cache"
	CELOS_CACHE_DIR=$work/cache run celos-export-first "$work/celos" export
	CELOS_CACHE_DIR=$work/cache run celos-export-cached "$work/celos" export
done

# median FILE COLUMN
median() { cut -d' ' -f"$2" "$1" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "$n workflows, $rounds rounds, load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-22s %10s %10s %12s %12s\n' command wall-ms peak-MB "wall vs cue" "peak vs cue"
for base in vet export; do
	cw=$(median "$work/cue-$base" 1)
	cm=$(median "$work/cue-$base" 2)
	for name in cue-$base celos-$base-nocache celos-$base-first celos-$base-cached; do
		w=$(median "$work/$name" 1)
		m=$(median "$work/$name" 2)
		awk -v n="$name" -v w="$w" -v m="$m" -v cw="$cw" -v cm="$cm" \
			'BEGIN {printf "%-22s %10d %10.1f %11.2fx %11.2fx\n", n, w, m/1024, w/cw, m/cm}'
	done
done
