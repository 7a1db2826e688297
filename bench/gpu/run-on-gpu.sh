#!/usr/bin/env bash
# Runs on a machine with an NVIDIA GPU, from the folder bench/gpu/pack.sh made: the GPU tests
# (every kernel bit-exact with the CPU, now on real hardware), `heloom bench gpu`, HE jobs
# shared between the CPU pool and the GPU, and `heloom serve` with and without its GPU.
# Writes its reports to OUTDIR (default ./gpu-out).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# pack.sh gzips the binaries (the lent device's carry limit): unpacked on first use.
for z in "$here"/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
out=${1:-gpu-out}
mkdir -p "$out"
# NVRTC: the CUDA toolkit's, or a pip wheel's (set HELOOM_NVRTC to its libnvrtc.so.*).
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -z "${HELOOM_NVRTC:-}" ] && [ -e "$d/libnvrtc.so" ] && export HELOOM_NVRTC="$d/libnvrtc.so"
done
status=0
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv || true
  echo "HELOOM_NVRTC=${HELOOM_NVRTC:-unset}"
  for t in nvrtc bit_exact graphs he bootstrap; do
    echo "== test $t"
    HELOOM_REQUIRE_NVRTC=1 "$here/test-$t" --test-threads 1 2>&1 || status=1
  done
  echo "== heloom offload --he --devices cpu-pool,gpu"
  "$here/heloom" offload --he --devices cpu-pool,gpu --log-n 14 --jobs 48 2>&1 || status=1
} >"$out/tests.txt" 2>&1
"$here/heloom" bench gpu --out "$out" >"$out/bench.txt" 2>&1 || status=1
# The server with and without the GPU pulling jobs beside the CPU lanes (serve-on-gpu.sh).
"$here/serve-on-gpu.sh" "$out/serve" 20 14 >"$out/serve.txt" 2>&1 || status=1
# Nsight Compute, where installed (ncu-profile.sh).
"$here/ncu-profile.sh" "$out" 300 || status=1
tail -40 "$out/tests.txt"
cat "$out/bench.txt"
cat "$out/serve.txt"
exit $status
