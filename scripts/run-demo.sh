#!/usr/bin/env bash
# Runs the bundled demo (`make run`): compiles testdata/demo, prepares the
# state directory and runs `celos server --autoSchedule 5` in the foreground
# until Ctrl-C (the step in flight finishes first).
#
#   scripts/run-demo.sh [BIN] [PORT] [VAR]     (defaults: bin/celos 8080 var)
#
# Under VAR: workflows/demo.json (the compiled demo), db/ (slot states),
# logs/celos.log, jobs/ (each local run's record and output.log),
# defaults/, pools.json (a copy of testdata/demo-pools.json, the pools the
# demo's workflows name), demo-input/ (the files the `ingest` workflow's
# hdfsCheck trigger waits for; the `produce` workflow writes them),
# demo-state/.
#
# The demo's commands and triggers use paths relative to the server's
# working directory (var/demo-input/...): the server runs in the directory
# that holds VAR. The demo's workflows start at the time this script runs,
# minus 10 minutes (CELOS_DEMO_START=2026-01-01T00:00:00Z to choose), so
# there is no week of backlog. CELOS_DEMO_AUTOSCHEDULE=N steps every N
# seconds (default 5; 0: only POST /scheduler, e.g. `celos step`, steps).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-bin/celos}
port=${2:-8080}
var=${3:-var}
case $bin in /*) ;; */*) bin=$PWD/$bin ;; esac
case $var in /*) ;; *) var=$PWD/$var ;; esac
interval=${CELOS_DEMO_AUTOSCHEDULE:-5}
start=${CELOS_DEMO_START:-$(date -u -d '10 minutes ago' +%Y-%m-%dT%H:%M:00Z)}

if [ "$(basename "$var")" != var ]; then
  echo "run-demo.sh: the demo's paths are var/...; VAR must be a directory named var, not $var" >&2
  exit 2
fi
mkdir -p "$var"/{workflows,db,logs,jobs,defaults,demo-input,demo-state}

# Compile a copy of the demo whose start.cue names the start time.
src=$var/demo-src
rm -rf "$src"
cp -R "$repo/testdata/demo" "$src"
printf 'package demo\n\n_start: "%s"\n' "$start" >"$src/start.cue"
"$bin" export "$src" -o "$var/workflows/demo.json"
# The pools the demo's workflows name (re-read at every step: edit it to see).
cp "$repo/testdata/demo-pools.json" "$var/pools.json"

cd "$(dirname "$var")"
every="a step every ${interval}s"
[ "$interval" != 0 ] || every="steps on POST /scheduler only"
url=http://127.0.0.1:$port
[ "$port" != 0 ] || url='http://127.0.0.1:<port in var/url>'
cat <<EOF
celos demo: workflows produce, ingest, report, flaky, audit, compact from $start, $every.
  pools: var/pools.json (report and compact share "demo-heavy", limit 1)
  UI:    $url/ui
  API:   curl -s $url/workflow-list
         curl -s "$url/workflow-slots?id=ingest"
         curl -s "$url/trigger-status?id=ingest&time=<slot time>"
  CLI:   $bin slots --id ingest --server $url
  files: var/logs/celos.log, var/jobs/<workflow>/<slot>/output.log, var/demo-input/
Stop with Ctrl-C.
EOF
autoschedule=()
[ "$interval" = 0 ] || autoschedule=(--autoSchedule "$interval")
exec "$bin" server --port "$port" --workflows "$var/workflows" --db "$var/db" --logs "$var/logs" \
  --jobs "$var/jobs" --pools "$var/pools.json" --url-file "$var/url" "${autoschedule[@]}"
