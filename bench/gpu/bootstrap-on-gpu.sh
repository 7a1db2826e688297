#!/usr/bin/env bash
# Issue 21's step 4 on a lent GPU machine, from the repository root after bench/gpu/pack.sh:
# the GPU bootstrapping tests (N = 2^10, against the CPU), then `heloom bench bootstrap --gpu`
# at the N = 2^16 preset beside the CPU on every core (and, with SLOTS set, sparse packing).
# Everything lands in OUTDIR (bootstrap.{txt,json}, tests.txt).
#   bench/gpu/bootstrap-on-gpu.sh OUTDIR [REPS]
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?OUTDIR}
reps=${2:-3}
pack=.device-pack
for z in "$pack"/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -z "${HELOOM_NVRTC:-}" ] && [ -e "$d/libnvrtc.so" ] && export HELOOM_NVRTC="$d/libnvrtc.so"
done
mkdir -p "$out"
status=0
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv || true
  lscpu | grep -E 'Model name|^CPU\(s\)'
  for t in ${TESTS:-bootstrap}; do
    [ -x "$pack/test-$t" ] || { echo "== test $t: not carried, skipped"; continue; }
    echo "== test $t"
    HELOOM_REQUIRE_NVRTC=1 "$pack/test-$t" --test-threads 1 --nocapture 2>&1 |
      grep -E '^test |test result|max error|panicked|assert' || status=1
  done
} >"$out/tests.txt" 2>&1
cat "$out/tests.txt"
cores=$(nproc)
"$pack/heloom" bench bootstrap --gpu --threads "${THREADS:-$cores}" --reps "$reps" \
  --out "$out" >"$out/bench.log" 2>&1 || status=1
tail -n 25 "$out/bench.log"
if [ -n "${SLOTS:-}" ]; then
  mkdir -p "$out/sparse"
  "$pack/heloom" bench bootstrap --gpu --threads "${THREADS:-$cores}" --reps "$reps" \
    --slots "$SLOTS" --out "$out/sparse" >"$out/sparse/bench.log" 2>&1 || status=1
  tail -n 12 "$out/sparse/bench.log"
fi
exit $status
