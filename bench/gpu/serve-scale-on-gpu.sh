#!/usr/bin/env bash
# One lease's issue-18 work on the lent 16-core GPU machine, from the repository root after
# bench/gpu/pack.sh: the GPU tests (bit-exact on the hardware), `heloom serve --gpu off`
# against `--gpu 0` (serve-on-gpu.sh), then the local-nodes scaling shapes 4 x 3 and 4 x 4
# (bench/ray/scale.sh). Everything lands in OUTDIR/all.tgz (a lease returns at most eight
# files) and a short OUTDIR/summary.txt. Test binaries not carried are skipped (the carry limit:
# the tracked tree is about 50 MB); SERVE_SECONDS 0 skips the serve comparison.
#   bench/gpu/serve-scale-on-gpu.sh OUTDIR [SERVE_SECONDS] [SCALE_SECONDS]
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?OUTDIR}
serve_secs=${2:-20}
scale_secs=${3:-25}
pack=.device-pack
for z in "$pack"/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
work=$(mktemp -d -t heloom-lease-XXXXXX)
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -z "${HELOOM_NVRTC:-}" ] && [ -e "$d/libnvrtc.so" ] && export HELOOM_NVRTC="$d/libnvrtc.so"
done
status=0
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv || true
  lscpu | grep -E 'Model name|^CPU\(s\)'
  for t in nvrtc bit_exact graphs he bootstrap; do
    [ -x "$pack/test-$t" ] || { echo "== test $t: not carried, skipped"; continue; }
    echo "== test $t"
    HELOOM_REQUIRE_NVRTC=1 "$pack/test-$t" --test-threads 1 2>&1 | grep -E '^test |test result' || status=1
  done
} >"$work/gpu-tests.txt" 2>&1
if [ "$serve_secs" -gt 0 ]; then
  "$pack/serve-on-gpu.sh" "$work/serve-gpu" "$serve_secs" 14 >"$work/serve-gpu.txt" 2>&1 || status=1
fi
for cpus in 3 4; do
  HELOOM_BIN=$pack/heloom BACKEND=local CPUS=$cpus DURATION=$scale_secs OUT=$work/s4x$cpus \
    bench/ray/scale.sh >"$work/scale4x$cpus.txt" 2>&1 || status=1
done
{
  grep -h 'test result' "$work/gpu-tests.txt"
  cat "$work/serve-gpu.txt" 2>/dev/null
  tail -n 3 "$work/scale4x3.txt" "$work/scale4x4.txt"
  echo "front log lines about lost nodes: $(cat "$work"/s4x*/*/front.log 2>/dev/null | grep -c lost)"
} >"$out/summary.txt" 2>&1
tar -C "$work" -czf "$out/all.tgz" . && rm -rf "$work"
cat "$out/summary.txt"
exit $status
