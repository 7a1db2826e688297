#!/usr/bin/env bash
# One lease's worth of GPU tuning evidence, from the folder bench/gpu/pack.sh made: the
# GPU tests (NVRTC, bit-exact, graphs, HE), `heloom bench gpu` with the default NTT radices
# (forward 8, inverse 4) and with 8 and 4 in both directions, examples/gpu_profile's wall times
# for every NTT radix pair at 256 threads a block, HE jobs shared by the CPU pool and the GPU,
# and an Nsight Compute profile of every kernel of one NTT, inverse NTT, multiply and
# relinearize at N = 2^16 x 30 limbs. Everything lands in OUTDIR/all.tgz (one file: a lease
# returns at most eight) and the key tables are printed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# pack.sh gzips the binaries (the lent device's carry limit): unpacked on first use.
for z in "$here"/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
out=${1:-gpu-out}
work=$(mktemp -d)
mkdir -p "$out" "$work/bench" "$work/bench-r4" "$work/bench-r8"
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -z "${HELOOM_NVRTC:-}" ] && [ -e "$d/libnvrtc.so" ] && export HELOOM_NVRTC="$d/libnvrtc.so"
done
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv >"$work/smi.txt" 2>&1
for t in nvrtc bit_exact graphs he bootstrap; do
  HELOOM_REQUIRE_NVRTC=1 timeout 120 "$here/test-$t" --test-threads 1 >>"$work/tests.txt" 2>&1
done
grep -E "^test result|FAILED|panicked" "$work/tests.txt"
timeout 150 "$here/heloom" bench gpu --out "$work/bench" >"$work/bench/bench.txt" 2>&1
grep -E "^(ntt|rescale |multiply|relinearize|rotate)|\[" "$work/bench/bench.txt"
for r in 8,4 8 4 16; do
  echo "== NTT radix $r, 256 threads"
  HELOOM_GPU_NTT_RADIX=$r HELOOM_PROFILE_WARM=3 timeout 60 "$here/gpu_profile"
done 2>&1 | tee "$work/profile.txt" | grep -E "==|round 3|gpu_profile:"
"$here/ncu-profile.sh" "$work" 150
for r in 8 4; do
  HELOOM_GPU_NTT_RADIX=$r timeout 150 "$here/heloom" bench gpu --out "$work/bench-r$r" \
    >"$work/bench-r$r/bench.txt" 2>&1
  echo "== bench with NTT radix $r"
  grep -E "^(ntt|multiply\+relin|relinearize|rescale )" "$work/bench-r$r/bench.txt"
done
echo "== heloom offload --he --devices cpu-pool,gpu"
timeout 90 "$here/heloom" offload --he --devices cpu-pool,gpu --log-n 14 --jobs 48 >"$work/offload.txt" 2>&1
tail -15 "$work/offload.txt"
tar czf "$out/all.tgz" -C "$work" .
