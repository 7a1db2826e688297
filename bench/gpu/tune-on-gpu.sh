#!/usr/bin/env bash
# One lease's worth of GPU tuning evidence, from the folder bench/gpu/pack.sh made: the
# bit-exact and graph tests on the GPU, `heloom bench gpu` with the default NTT radix and with
# radix 4 and 16, examples/gpu_profile's wall times for every NTT radix at 256 and 128 threads
# a block, and an Nsight Compute profile of every kernel of one NTT, inverse NTT, multiply and
# relinearize at N = 2^16 x 30 limbs. Everything lands in OUTDIR/all.tgz (one file: a lease
# returns at most eight) and the key tables are printed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-gpu-out}
work=$(mktemp -d)
mkdir -p "$out" "$work/bench" "$work/bench-r4" "$work/bench-r16"
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -z "${HELOOM_NVRTC:-}" ] && [ -e "$d/libnvrtc.so" ] && export HELOOM_NVRTC="$d/libnvrtc.so"
done
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv >"$work/smi.txt" 2>&1
for t in bit_exact graphs; do
  HELOOM_REQUIRE_NVRTC=1 timeout 120 "$here/test-$t" --test-threads 1 >>"$work/tests.txt" 2>&1
done
grep -E "^test result|FAILED|panicked" "$work/tests.txt"
timeout 150 "$here/heloom" bench gpu --out "$work/bench" >"$work/bench/bench.txt" 2>&1
grep -E "^(ntt|rescale |multiply|relinearize|rotate)|\[" "$work/bench/bench.txt"
for r in 4 8 16; do
  for th in 256 128; do
    echo "== NTT radix $r, $th threads"
    HELOOM_GPU_NTT_RADIX=$r HELOOM_GPU_NTT_THREADS=$th HELOOM_PROFILE_WARM=3 timeout 90 "$here/gpu_profile"
  done
done 2>&1 | tee "$work/profile.txt" | grep -E "==|round 3|gpu_profile:"
"$here/ncu-profile.sh" "$work" 150
for r in 4 16; do
  HELOOM_GPU_NTT_RADIX=$r timeout 150 "$here/heloom" bench gpu --out "$work/bench-r$r" \
    >"$work/bench-r$r/bench.txt" 2>&1
  echo "== bench with NTT radix $r"
  grep -E "^(ntt|multiply\+relin|relinearize|rescale )" "$work/bench-r$r/bench.txt"
done
tar czf "$out/all.tgz" -C "$work" .
