#!/usr/bin/env bash
# One lease's NTT launch-shape sweep, from the folder bench/gpu/pack.sh made: the bit-exact GPU
# tests (every shape the test knows, on the GPU), examples/ntt_sweep (every tile, upper tile,
# row length and block size, side by side in one process, each checked against the CPU), and
# `heloom bench gpu` with the sweep's best shape for the 2^16 relinearize next to the default.
# Everything lands in OUTDIR/all.tgz and the key tables are printed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# pack.sh gzips the binaries (the lent device's carry limit): unpacked on first use.
for z in "$here"/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
out=${1:-gpu-out}
work=$(mktemp -d)
mkdir -p "$out" "$work/bench-default" "$work/bench-best"
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -z "${HELOOM_NVRTC:-}" ] && [ -e "$d/libnvrtc.so" ] && export HELOOM_NVRTC="$d/libnvrtc.so"
done
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv >"$work/smi.txt" 2>&1
HELOOM_REQUIRE_NVRTC=1 timeout 150 "$here/test-bit_exact" --test-threads 1 >"$work/tests.txt" 2>&1
grep -E "^test result|FAILED|panicked" "$work/tests.txt"
timeout 240 "$here/ntt_sweep" "$work/sweep.json" >"$work/sweep.txt" 2>&1
echo "ntt_sweep exit $?"
sed -n '/^best shapes/,$p' "$work/sweep.txt"
# The best shape for the 2^16 x 30 relinearize, as HELOOM_GPU_NTT_TILE and _THREADS values.
best=$(grep -E "2\^16 x 30 relin_us" "$work/sweep.txt" | grep -o '\[.*\]' | tr -d '[]')
if [ -n "$best" ]; then
  IFS=, read -r t u r th <<<"$best"
  for kind in default best; do
    if [ $kind = best ]; then export HELOOM_GPU_NTT_TILE="$t,$u,$r" HELOOM_GPU_NTT_THREADS="$th"; fi
    timeout 100 "$here/heloom" bench gpu --out "$work/bench-$kind" >"$work/bench-$kind/bench.txt" 2>&1
    echo "== bench gpu, $kind shape ${HELOOM_GPU_NTT_TILE:-auto} x ${HELOOM_GPU_NTT_THREADS:-256}"
    grep -E "^(ntt|multiply\+relin|relinearize|rescale |rotate) " "$work/bench-$kind/bench.txt"
  done
  unset HELOOM_GPU_NTT_TILE HELOOM_GPU_NTT_THREADS
fi
tar czf "$out/all.tgz" -C "$work" .
