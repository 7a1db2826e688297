#!/usr/bin/env bash
# heloom serve with and without the GPU on a machine with one (issue 18's "every device",
# seed 001's pull model): the same closed-loop `heloom loadtest` (e^x and polynomial jobs,
# every result decrypted and checked) against `heloom serve --gpu off` and `--gpu 0`, then the
# GPU's share of the jobs from /metrics. Run from the folder bench/gpu/pack.sh made:
#   ./serve-on-gpu.sh OUTDIR [SECONDS] [LOG_N]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
for z in "$here"/*.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
out=${1:-serve-gpu-out}
secs=${2:-20}
logn=${3:-14}
mkdir -p "$out"
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -z "${HELOOM_NVRTC:-}" ] && [ -e "$d/libnvrtc.so" ] && export HELOOM_NVRTC="$d/libnvrtc.so"
done
status=0
for gpu in off 0; do
  dir=$(mktemp -d -t heloom-serve-gpu-XXXXXX)
  mkdir -p "$out/gpu-$gpu"
  "$here/heloom" serve --data "$dir" --listen 127.0.0.1:0 --allow-insecure --gpu "$gpu" \
    2>"$out/serve-gpu-$gpu.log" &
  pid=$!
  url=""
  for _ in $(seq 600); do
    url=$(grep -so 'listening on http://[0-9.:]*' "$out/serve-gpu-$gpu.log" | head -1 | cut -d' ' -f3 || true)
    [ -n "$url" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$url" ]; then
    echo "serve --gpu $gpu did not start:" && cat "$out/serve-gpu-$gpu.log"
    status=1
    continue
  fi
  # The GPU's kernels compile in the background with --gpu auto; a named one is ready now.
  "$here/heloom" loadtest --url "$url" --data "$dir" --tenants 4 --rate 100 --duration "$secs" \
    --log-n "$logn" --clients 32 --warmup 3 --closed-loop --check-after --out "$out/gpu-$gpu" \
    --json >"$out/gpu-$gpu/loadtest-stdout.json" 2>"$out/loadtest-gpu-$gpu.log" || status=1
  curl -s "$url/metrics" | grep -E '^heloom_(gpu_|jobs_finished_total|device_)' >"$out/metrics-gpu-$gpu.txt"
  kill "$pid"; wait "$pid" 2>/dev/null
  rm -rf "$dir"
  echo "== --gpu $gpu: $(grep -o '"sustained_jobs_s": *[0-9.]*' "$out/gpu-$gpu/loadtest-stdout.json" | head -1)"
  grep -E '^heloom_gpu_(jobs|failures)_total' "$out/metrics-gpu-$gpu.txt" || true
done
exit $status
