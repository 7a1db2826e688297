#!/usr/bin/env bash
# Issue 18's fairness check, repeated: one tenant at 10x another's rate (together 0.85 X)
# against the light tenant alone at its own rate, ROUNDS times, alternating between the given
# builds so that a noisy machine hits them alike; then 8 equal tenants at 0.85 X once per build.
# X (capacity) comes from a closed-loop run of the first build unless X is set. The light
# tenant's p99 is the sixth-slowest of about 600 jobs, so single runs differ by tens of percent:
# the summary gives each round's ratio and the median per build.
#   bench/serve/fair.sh OUTDIR BIN [BIN...]        (env: ROUNDS=3 SECS=30 X= PROFILE= LOG_N=13)
# PROFILE (a file from `heloom profile --out`, or `measure`) is passed to every spawned server
# as its cost profile; by default the servers use the built-in one.
set -euo pipefail
out=${1:?OUTDIR}; shift
[ $# -ge 1 ] || { echo "usage: $0 OUTDIR BIN [BIN...]" >&2; exit 2; }
mkdir -p "$out"
rounds=${ROUNDS:-3}; secs=${SECS:-30}; logn=${LOG_N:-13}
prof=()
[ -n "${PROFILE:-}" ] && prof=(--profile "$PROFILE")
lt() { "$@" >"$log" 2>&1 || { echo "failed: $* (see $log)" >&2; return 1; }; }
if [ -z "${X:-}" ]; then
  log=$out/calibrate.log
  lt "$1" loadtest --log-n "$logn" --tenants 8 --rate 300 --closed-loop --duration 10 --clients 64 \
    --warmup 2 --out "$out/calibrate" "${prof[@]}"
  X=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["overall"]["sustained_jobs_s"])' \
    "$out/calibrate/loadtest.json")
fi
heavy=$(python3 -c "print(round(0.85 * $X, 2))")
light=$(python3 -c "print(round(0.85 * $X / 11, 2))")
echo "X = $X jobs/s: the pair at $heavy jobs/s, the light tenant alone at $light" | tee "$out/summary.txt"
for r in $(seq 1 "$rounds"); do
  b=0
  for bin in "$@"; do
    d=$out/b$b-r$r
    log=$d-pair.log; lt "$bin" loadtest --log-n "$logn" --tenants 2 --heavy 10 --duration "$secs" \
      --rate "$heavy" --warmup 2 --out "$d-pair" "${prof[@]}"
    log=$d-alone.log; lt "$bin" loadtest --log-n "$logn" --tenants 1 --duration "$secs" \
      --rate "$light" --warmup 2 --out "$d-alone" "${prof[@]}"
    b=$((b + 1))
  done
done
b=0
for bin in "$@"; do
  log=$out/b$b-fair8.log; lt "$bin" loadtest --log-n "$logn" --tenants 8 --duration "$secs" \
    --rate "$heavy" --warmup 2 --out "$out/b$b-fair8" "${prof[@]}"
  b=$((b + 1))
done
python3 - "$out" "$rounds" "$@" <<'PY' | tee -a "$out/summary.txt"
import json, statistics, sys
out, rounds, bins = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def tenants(d):
    return json.load(open(f"{out}/{d}/loadtest.json"))["per_tenant"]
print("build  round  light p99 beside (ms)  alone (ms)  ratio  heavy p99 (ms)")
for b, path in enumerate(bins):
    ratios = []
    for r in range(1, rounds + 1):
        pair, alone = tenants(f"b{b}-r{r}-pair"), tenants(f"b{b}-r{r}-alone")
        lb, la = pair[1]["latency_ms"]["p99"], alone[0]["latency_ms"]["p99"]
        h = pair[0]["latency_ms"]["p99"]
        ratios.append(lb / la)
        print(f"b{b}     {r:5d}  {lb:21.1f}  {la:10.1f}  {lb / la:5.2f}  {h:14.1f}")
    f8 = json.load(open(f"{out}/b{b}-fair8/loadtest.json"))["fairness"]
    print(f"b{b} ({path}): median ratio {statistics.median(ratios):.2f} (target <= 1.5); "
          f"8 tenants: Jain {f8['jain_throughput']:.3f} (target >= 0.95)")
PY
lscpu | grep -E 'Model name|^CPU\(s\)' >>"$out/summary.txt"
gzip -9f "$out"/*/jobs.csv 2>/dev/null || true
