#!/usr/bin/env bash
# `make soak`: the load and soak measurements of docs/reliability.md. Not
# part of `make test`. Everything runs on this machine: the server listens
# on 127.0.0.1 only, wrk targets it for a fixed time, and the step soak is
# a fixed number of steps on a fake clock.
#
#   1. load: 1,000 workflows with 7 days of hourly slots (168,000 state
#      files); `celos server` on them; wrk against /workflow-slots (the
#      ids rotating over every workflow) and /ui: throughput and latency
#      percentiles (p99), and the server's RSS before and after.
#   2. soak: 10,000 steps (5 simulated minutes apart: 34.7 days) of the real
#      engine on a real state database with 1,000 workflows, pruning final
#      slots older than 8 days once a simulated day: the live heap and the
#      state database's size every 1,000 steps; fails if either still grows
#      once the retention is reached.
#   3. `celos db prune` on the soak's state database (dry run, then for real).
#
# Knobs (environment): SOAK_DIR (default: a new /tmp/celos-soak.*),
# SOAK_WORKFLOWS (1000), SOAK_STEPS (10000), SOAK_WRK_DURATION (20s),
# SOAK_WRK_CONNECTIONS (16). wrk is the Debian package `wrk`: installed here
# when missing and running as root.
set -euo pipefail
cd "$(dirname "$0")/.."

work=${SOAK_DIR:-$(mktemp -d /tmp/celos-soak.XXXXXX)}
mkdir -p "$work"
workflows=${SOAK_WORKFLOWS:-1000}
steps=${SOAK_STEPS:-10000}
duration=${SOAK_WRK_DURATION:-20s}
conns=${SOAK_WRK_CONNECTIONS:-16}
summary=$work/summary.txt
: > "$summary"
say() { echo "$*" | tee -a "$summary"; }

if ! command -v wrk >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "soak: installing wrk (Debian package)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq --no-install-recommends wrk >/dev/null
  else
    echo "soak: wrk is missing: sudo apt-get install wrk" >&2
    exit 1
  fi
fi

echo "soak: building into $work"
go build -o "$work/celos" ./cmd/celos
go build -o "$work/soak" ./cmd/celos-soak

# ---- 1. load -------------------------------------------------------------
load=$work/load
rm -rf "$load"
"$work/soak" gen -dir "$load" -workflows "$workflows" -days 7 | tee -a "$summary"
"$work/celos" server --listen 127.0.0.1 --port 0 --workflows "$load/wf" --db "$load/db" \
  --jobs "$load/jobs" --logs '' --log-level warn --url-file "$load/url" 2> "$load/server.log" &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do
  [ -s "$load/url" ] && break
  kill -0 "$server" 2>/dev/null || { cat "$load/server.log" >&2; exit 1; }
  sleep 0.1
done
url=$(cat "$load/url")
case $url in http://127.0.0.1:*) ;; *) echo "soak: server URL $url is not loopback" >&2; exit 1 ;; esac
"$work/celos" workflows --server "$url" > /dev/null
rss() { awk '/VmRSS/ {printf "%.0f MiB", $2/1024}' "/proc/$server/status"; }
say "server: $url, RSS $(rss) with $workflows workflows loaded"

cat > "$load/ids.lua" <<EOF
local n, i = $workflows, 0
request = function()
  i = (i + 1) % n
  return wrk.format("GET", string.format("/workflow-slots?id=wf-%04d", i))
end
EOF
# Warm the state database's index (the first request of a workflow reads its files).
wrk -t 2 -c 4 -d 5s -s "$load/ids.lua" "$url" > /dev/null
for target in "/workflow-slots (ids rotating over $workflows workflows, 168 slots each)|$url|-s $load/ids.lua" \
              "/ui (the grid of $workflows workflows)|$url/ui|"; do
  IFS='|' read -r name u extra <<< "$target"
  say ""
  say "wrk -t 2 -c $conns -d $duration --latency: $name"
  # shellcheck disable=SC2086
  wrk -t 2 -c "$conns" -d "$duration" --latency $extra "$u" | tee "$load/wrk.out"
  grep -E 'Requests/sec|Transfer/sec|^ +(50|90|99)%|Non-2xx|Socket errors' "$load/wrk.out" >> "$summary" || true
done
say "server RSS after the load: $(rss)"
kill -TERM "$server"
wait "$server" || true
trap - EXIT

# ---- 2. soak -------------------------------------------------------------
say ""
"$work/soak" steps -dir "$work/steps" -workflows "$workflows" -steps "$steps" -json "$work/steps.json" | tee -a "$summary"

# ---- 3. celos db prune on what the soak left --------------------------------
end=$(sed -n 's/.*"simTime": "\(.*\)".*/\1/p' "$work/steps.json" | tail -1)
say ""
say "celos db prune --db $work/steps/db --older-than 8d --now $end --workflows-dir $work/steps/wf"
"$work/celos" db prune --db "$work/steps/db" --older-than 8d --now "$end" --workflows-dir "$work/steps/wf" --dry-run | tee -a "$summary"
"$work/celos" db prune --db "$work/steps/db" --older-than 8d --now "$end" --workflows-dir "$work/steps/wf" | tee -a "$summary"

echo
echo "soak: done; summary in $summary"
