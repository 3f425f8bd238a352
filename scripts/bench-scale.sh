#!/usr/bin/env bash
# `make bench-scale`: the growth table of issue 18 (docs/benchmarks.md,
# "Scale: 100 / 1,000 / 10,000 workflows"), measured on this machine and
# printed. Not part of `make test`. For each size N (hourly workflows, a
# full 7-day window = N × 168 slots):
#
#   fill     the engine's first step on an empty state database (soak fill):
#            unsynced, and synced as a server writes (up to
#            BENCH_SCALE_SYNC_MAX workflows: on a shared disk a synced fill
#            of 10,000 takes many minutes); slots/s and peak RSS.
#   restart  a state database of N × 168 SUCCESS slots (soak gen), opened as
#            after a restart (soak restart): the first step (it waits at
#            most a second for the background read), when every state had
#            been read, the steady step (median of 5), peak RSS.
#   ui       `celos server` on that database (no --autoSchedule: no step):
#            the time from the start of the process to the answer of the
#            first GET /ui (the default view: one page of rows; and to the
#            URL file: the server is listening, within 50 ms), its size
#            and how many workflows it said were still being read (the
#            server reads every workflow's state in the background after a
#            start; the page does not wait for it, docs/ui.md), a second
#            GET /ui, the slowest of the views polled every 0.5 s after it
#            until one found every state read (the page's counts
#            complete), the time until then, and the server's RSS then. With
#            BENCH_SCALE_UI_OTHER=/path/to/celos, another build (say
#            main's) is measured the same way on the same database,
#            alternately, BENCH_SCALE_UI_ROUNDS times each (default 1), and
#            a second table puts them side by side.
#            BENCH_SCALE_UI_ALSO (words, default none) adds what else a
#            server may do at its start: "metrics" scrapes GET /metrics as
#            soon as it listens, alongside the first GET /ui (the cell adds
#            the scrape's time and its celos_workflows_loading), "prune"
#            runs the server with --prune-older-than 30d, "clear-cache"
#            POSTs /clear-cache as soon as it listens, before the first
#            GET /ui.
#
# Sizes from BENCH_SCALE_SHM_FROM workflows on (default 10,000) keep their
# state database on tmpfs (/dev/shm) when there is one, so that the run is
# bounded on a small shared disk: those rows measure the code and the
# kernel's file-system layer, not the disk, and say "tmpfs".
#
# Knobs (environment): BENCH_SCALE_SIZES ("100 1000 10000"),
# BENCH_SCALE_SYNC_MAX (1000), BENCH_SCALE_SHM_FROM (10000), BENCH_SCALE_DIR
# (default: a new /tmp/celos-bench-scale.*; removed at the end unless set),
# BENCH_SCALE_STEPS ("fill restart ui": any of them; restart and ui share
# soak gen's database), BENCH_SCALE_UI_OTHER, BENCH_SCALE_UI_ROUNDS,
# BENCH_SCALE_UI_ALSO.
set -euo pipefail
cd "$(dirname "$0")/.."

sizes=${BENCH_SCALE_SIZES:-100 1000 10000}
steps=" ${BENCH_SCALE_STEPS:-fill restart ui} "
ui_other=${BENCH_SCALE_UI_OTHER:-}
ui_rounds=${BENCH_SCALE_UI_ROUNDS:-1}
ui_also=" ${BENCH_SCALE_UI_ALSO:-} "
if [ -n "$ui_other" ] && [ ! -x "$ui_other" ]; then
  echo "bench-scale: BENCH_SCALE_UI_OTHER=$ui_other is not an executable" >&2
  exit 2
fi
sync_max=${BENCH_SCALE_SYNC_MAX:-1000}
shm_from=${BENCH_SCALE_SHM_FROM:-10000}
if [ -n "${BENCH_SCALE_DIR:-}" ]; then
  work=$BENCH_SCALE_DIR
  mkdir -p "$work"
else
  work=$(mktemp -d /tmp/celos-bench-scale.XXXXXX)
fi
shm=""
server=""
scrape=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null || true
  [ -n "$scrape" ] && kill "$scrape" 2>/dev/null || true
  [ -n "$shm" ] && rm -rf "$shm"
  [ -z "${BENCH_SCALE_DIR:-}" ] && rm -rf "$work"
  return 0
}
trap cleanup EXIT

echo "bench-scale: building into $work"
go build -o "$work/celos" ./cmd/celos
go build -o "$work/soak" ./cmd/celos-soak
echo "bench-scale: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"

# The tmpfs directory, made here (not in base's subshell) so that cleanup
# removes it.
for n in $sizes; do
  if [ "$n" -ge "$shm_from" ] && [ -d /dev/shm ] && [ -z "$shm" ]; then
    shm=$(mktemp -d /dev/shm/celos-bench-scale.XXXXXX)
  fi
done
# base N: the directory of size N's databases (tmpfs from shm_from on).
base() {
  if [ "$1" -ge "$shm_from" ] && [ -n "$shm" ]; then
    echo "$shm/$1"
  else
    echo "$work/$1"
  fi
}
# field OUTPUT KEY: the value of KEY= on the "result:" line of a soak run.
field() { sed -n "s/^result:.* $2=\([^ ]*\).*/\1/p" <<< "$1"; }
rss() { awk '/VmRSS/ {printf "%.0f MiB", $2/1024}' "/proc/$1/status"; }

# ui_measure CELOS BASE: start CELOS server on BASE/gen and time its GET /ui
# (see the header); sets ui_result to one table cell. (Not run in a
# subshell: cleanup must know the server's PID.)
ui_measure() {
  local celos=$1 b=$2 t0 tl t1 t2 first second left again total extra=() also="" took slowest
  rm -rf "$b/url" "$b/jobs" "$b/metrics.txt" "$b/metrics.time"
  [[ $ui_also == *" prune "* ]] && extra+=(--prune-older-than 30d)
  t0=$(date +%s.%N)
  "$celos" server --listen 127.0.0.1 --port 0 --workflows "$b/gen/wf" --db "$b/gen/db" \
    --jobs "$b/jobs" --logs '' --log-level warn --url-file "$b/url" "${extra[@]}" 2> "$b/server.log" &
  server=$!
  for _ in $(seq 1 1200); do
    [ -s "$b/url" ] && break
    kill -0 "$server" 2>/dev/null || { cat "$b/server.log" >&2; exit 1; }
    sleep 0.05
  done
  tl=$(date +%s.%N)
  url=$(cat "$b/url")
  case $url in http://127.0.0.1:*) ;; *) echo "bench-scale: server URL $url is not loopback" >&2; exit 1 ;; esac
  if [[ $ui_also == *" metrics "* ]]; then
    curl -sS -o "$b/metrics.txt" -w '%{time_total}' --max-time 600 "$url/metrics" > "$b/metrics.time" &
    scrape=$!
  fi
  if [[ $ui_also == *" clear-cache "* ]]; then
    curl -sS -X POST -o /dev/null --max-time 600 "$url/clear-cache"
  fi
  first=$(curl -sS -o "$b/first.html" -w '%{http_code} %{size_download}' --max-time 600 "$url/ui")
  t1=$(date +%s.%N)
  left=$(still_read "$b/first.html")
  second=$(curl -sS -o "$b/again.html" -w '%{time_total}' --max-time 600 "$url/ui")
  # Until a view finds every state read (bounded: 10 minutes).
  again=$(still_read "$b/again.html")
  slowest=$second
  for _ in $(seq 1 1200); do
    [ "$again" = 0 ] && break
    sleep 0.5
    took=$(curl -sS -o "$b/again.html" -w '%{time_total}' --max-time 600 "$url/ui")
    slowest=$(awk -v a="$slowest" -v b="$took" 'BEGIN {print (b > a ? b : a)}')
    again=$(still_read "$b/again.html")
  done
  t2=$(date +%s.%N)
  total="all read by $(awk -v a="$t0" -v b="$t2" 'BEGIN {printf "%.1f s", b-a}')"
  [ "$again" = 0 ] || total="$again still being read after 10 minutes"
  if [ -n "$scrape" ]; then
    wait "$scrape" || true
    scrape=""
    also="; GET /metrics $(awk -v s="$(cat "$b/metrics.time")" 'BEGIN {printf "%.2f s", s}'), loading $(sed -n 's/^celos_workflows_loading //p' "$b/metrics.txt")"
  fi
  ui_result="first $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f s", b-a}') after start (listening at $(awk -v a="$t0" -v b="$tl" 'BEGIN {printf "%.2f s", b-a}'); HTTP ${first% *}, $(awk -v s="${first#* }" 'BEGIN {printf "%.0f KB", s/1000}'), $left still being read), again $(awk -v s="$second" 'BEGIN {printf "%.0f ms", s*1000}'), slowest later view $(awk -v s="$slowest" 'BEGIN {printf "%.2f s", s}'), $total, server RSS $(rss "$server")$also"
  kill -TERM "$server"
  wait "$server" || true
  server=""
}
# still_read PAGE: how many workflows a /ui page says are still being read.
still_read() {
  local n
  n=$(grep -o '<b>[0-9]*</b> workflows\? still being read' "$1" | head -1 | grep -o '[0-9][0-9]*' | head -1 || true)
  echo "${n:-0}"
}

rows=()
ui_rows=()
for n in $sizes; do
  b=$(base "$n")
  where=disk
  case $b in /dev/shm/*) where=tmpfs ;; esac
  rm -rf "$b"
  mkdir -p "$b"
  echo
  echo "== $n workflows ($where: $b)"

  # The fills' files are removed only at the end of the size: on ext4 a
  # file created just after many were deleted costs ~10x the CPU (the inode
  # allocator skips recently deleted inodes one by one, reading each).
  fill_nosync="not run"
  fill_sync="not run (BENCH_SCALE_SYNC_MAX=$sync_max)"
  if [[ $steps == *" fill "* ]]; then
    out=$("$work/soak" fill -dir "$b/fill" -workflows "$n")
    echo "$out"
    fill_nosync="$(field "$out" secs) s (cpu $(field "$out" cpu) s), $(field "$out" rate) slots/s, peak RSS $(field "$out" rss)"
    if [ "$n" -le "$sync_max" ]; then
      out=$("$work/soak" fill -dir "$b/fill-sync" -workflows "$n" -fsync)
      echo "$out"
      fill_sync="$(field "$out" secs) s (cpu $(field "$out" cpu) s), $(field "$out" rate) slots/s, peak RSS $(field "$out" rss)"
    fi
  else
    fill_sync="not run"
  fi

  restart="not run"
  steady="not run"
  ui="not run"
  if [[ $steps == *" restart "* || $steps == *" ui "* ]]; then
    "$work/soak" gen -dir "$b/gen" -workflows "$n" -days 7
    sync
  fi
  if [[ $steps == *" restart "* ]]; then
    out=$("$work/soak" restart -dir "$b/gen" -workflows "$n")
    echo "$out"
    restart="first step $(field "$out" first) s, all read $(field "$out" all) s, peak RSS $(field "$out" rss)"
    steady="$(field "$out" steady) ms"
  fi
  if [[ $steps == *" ui "* ]]; then
    for r in $(seq 1 "$ui_rounds"); do
      ui_measure "$work/celos" "$b"
      ui=$ui_result
      echo "ui (this tree, round $r): $ui"
      ui_rows+=("| $n ($where) | this tree | $ui |")
      if [ -n "$ui_other" ]; then
        ui_measure "$ui_other" "$b"
        other=$ui_result
        echo "ui ($ui_other, round $r): $other"
        ui_rows+=("| $n ($where) | $ui_other | $other |")
      fi
    done
  fi
  rm -rf "$b"

  rows+=("| $n ($where) | $fill_nosync | $fill_sync | $restart | $steady | $ui |")
done

echo
echo "bench-scale: load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
echo
echo "| workflows (state on) | fresh 7-day fill, unsynced | fresh fill, synced | after a restart | steady step | GET /ui (time from process start) |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
if [ ${#ui_rows[@]} -gt 0 ]; then
  echo
  echo "| workflows (state on) | celos | GET /ui after a restart (no step) |"
  echo "|---|---|---|"
  printf '%s\n' "${ui_rows[@]}"
fi
