#!/usr/bin/env bash
# The cost of running jobs on node servers, side by side on one machine: the same closed-loop
# load test (N = 2^14, every result decrypted and checked) against `heloom serve --threads T`
# (in process) and against `heloom serve --local-nodes 1 --node-threads T`, alternating, ROUNDS
# times each; CPU seconds of the front and the node server per run (from /proc). With OLD=path
# to an older `heloom` binary, its local-nodes front runs alongside too (the load test is
# always this build's).
#
#   bench/ray/node-overhead.sh                 # T=2 ROUNDS=2 DURATION=12
#   OUT=bench/results/node-overhead-<cpu> bench/ray/node-overhead.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
T=${T:-2}
ROUNDS=${ROUNDS:-2}
DURATION=${DURATION:-12}
BIN=${HELOOM_BIN:-target/release/heloom}
OUT=${OUT:-target/node-overhead}
[ -x "$BIN" ] || { echo "node-overhead.sh: $BIN missing: cargo build --release -p heloom-cli" >&2; exit 1; }
mkdir -p "$OUT"
cpu_of() { awk '{ printf "%.1f", ($14 + $15) / 100 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
desc() { local c; for c in $(pgrep -P "$1"); do echo "$c"; desc "$c"; done; }
# run NAME SERVER_BIN ARGS...: one load test; prints a table row.
run() {
  local name=$1 bin=$2; shift 2
  local d; d=$(mktemp -d -t heloom-node-overhead-XXXXXX)
  "$bin" serve --data "$d/data" --listen 127.0.0.1:0 --allow-insecure "$@" 2>"$d/front.log" &
  local front=$! url=""
  for _ in $(seq 300); do
    url=$(grep -so 'listening on http://[0-9.:]*' "$d/front.log" | head -1 | cut -d' ' -f3 || true)
    [ -n "$url" ] && break; sleep 0.1
  done
  [ -n "$url" ] || { cat "$d/front.log" >&2; exit 1; }
  "$BIN" loadtest --url "$url" --data "$d/data" --tenants 4 --duration "$DURATION" --log-n 14 \
    --clients 16 --closed-loop --check-after --warmup 2 --out "$d/lt" --json >"$d/lt.json" 2>"$d/lt.log" &
  local lt=$!
  # CPU read just before the window ends (the processes are still alive then).
  sleep $((DURATION - 1))
  local nodes=0 c
  for c in $(desc "$front"); do nodes=$(awk -v a="$nodes" -v b="$(cpu_of "$c")" 'BEGIN { print a + b }'); done
  local fcpu; fcpu=$(cpu_of "$front")
  wait "$lt"
  kill "$front"; wait "$front" 2>/dev/null || true
  python3 - "$d/lt.json" "$name" "$fcpu" "$nodes" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); o = r["overall"]
assert r["ok"] and o["wrong"] == 0, "a result was wrong or a job failed"
print(f"{sys.argv[2]:<24} {o['sustained_jobs_s']:8.1f} {o['done']:7d} {float(sys.argv[3]):9.1f} {float(sys.argv[4]):9.1f}")
PY
  rm -rf "$d"
}
{
  echo "node-overhead: $("$BIN" info 2>/dev/null | head -1); $(nproc) cores; T=$T, $DURATION s closed loop, 16 clients, N = 2^14"
  printf '%-24s %8s %7s %9s %9s\n' run "jobs/s" done "front s" "nodes s"
  for r in $(seq "$ROUNDS"); do
    run "in-process #$r" "$BIN" --threads "$T"
    run "local-nodes #$r" "$BIN" --local-nodes 1 --node-threads "$T"
    if [ -n "${OLD:-}" ]; then run "local-nodes old #$r" "$OLD" --local-nodes 1 --node-threads "$T"; fi
  done
} | tee "$OUT/node-overhead.txt"
