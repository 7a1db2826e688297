#!/usr/bin/env bash
# Issue 18's fairness targets on a many-core machine (the lent GPU host, 16 cores), from the
# repository root after bench/gpu/pack.sh: the capacity X (8 tenants in a closed loop of 64
# clients), one tenant at 10x another's rate at 0.85 X against the light tenant alone at its
# own rate, and 8 equal tenants at 0.85 X. The same commands as the 2-core runs under
# bench/results/serve-fair-*/ (N = 2^13, every result decrypted and checked). Everything lands
# in OUTDIR/all.tgz and OUTDIR/summary.txt.
#   bench/gpu/fair-on-gpu.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?OUTDIR}
pack=.device-pack
for z in "$pack"/heloom.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
h=$(pwd)/$pack/heloom
work=$(mktemp -d -t heloom-fair-XXXXXX)
cd "$work" || exit 1
status=0
"$h" loadtest --tenants 8 --rate 100 --closed-loop --duration "${CAL_SECS:-10}" --clients 64 --warmup 2 --out calibrate \
  >calibrate.log 2>&1
x=$(python3 -c 'import json,sys; print(json.load(open("calibrate/loadtest.json"))["overall"]["sustained_jobs_s"])')
heavy=$(python3 -c "print(round(0.85 * $x, 2))")
light=$(python3 -c "print(round(0.85 * $x / 11, 2))")
echo "X = $x jobs/s; heavy pair at $heavy, light alone at $light" >summary.txt
"$h" loadtest --tenants 2 --heavy 10 --duration "${FAIR_SECS:-30}" --rate "$heavy" --warmup 2 --out heavy-2 \
  >heavy-2.log 2>&1 || status=1
"$h" loadtest --tenants 1 --duration "${FAIR_SECS:-30}" --rate "$light" --warmup 2 --out light-alone \
  >light-alone.log 2>&1 || status=1
"$h" loadtest --tenants 8 --duration "${FAIR_SECS:-30}" --rate "$heavy" --warmup 2 --out fairness-8 \
  >fairness-8.log 2>&1 || status=1
for d in calibrate heavy-2 light-alone fairness-8; do
  echo "== $d"
  grep -E '^(tenant|all) |^(tenant|loadtest)-[0-9]+ |^throughput|^Jain|^outcome' "$d/loadtest.txt"
  gzip -9 "$d/jobs.csv" 2>/dev/null
done >>summary.txt
lscpu | grep -E 'Model name|^CPU\(s\)' >>summary.txt
cp summary.txt "$out/"
tar -czf "$out/all.tgz" . && cd / && rm -rf "$work"
cat "$out/summary.txt"
exit $status
