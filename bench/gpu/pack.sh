#!/usr/bin/env bash
# Builds everything a GPU machine needs to check and benchmark heloom's CUDA backend and collects
# it in .device-pack/ (git-ignored): the `heloom` binary, the GPU test binaries, the profiling
# examples (`gpu_profile`, `ntt_sweep`) and the scripts that run them there.
# The GPU machine needs no Rust toolchain and no network: copy the folder there (or carry it to a
# lent device) and run `./run-on-gpu.sh OUTDIR`.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$HOME/.cargo/bin:$PATH"
pack=.device-pack
rm -rf "$pack" && mkdir -p "$pack"
cargo build --release -q -p heloom-cli
cargo build --release -q -p heloom-gpu --example gpu_profile --example ntt_sweep
cp target/release/heloom target/release/examples/gpu_profile target/release/examples/ntt_sweep "$pack/"
# Test binaries: cargo prints their paths as JSON when asked to build without running.
cargo test --release -q -p heloom-gpu -p heloom-devices --no-run --message-format=json 2>/dev/null |
  python3 -c '
import json, shutil, sys
want = {"bit_exact", "graphs", "nvrtc", "he", "bootstrap"}
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] in want:
        if "test" in m["target"]["kind"]:
            shutil.copy(m["executable"], sys.argv[1] + "/test-" + m["target"]["name"])
' "$pack"
cp bench/gpu/run-on-gpu.sh bench/gpu/bootstrap-on-gpu.sh bench/gpu/serve-on-gpu.sh bench/gpu/tune-on-gpu.sh bench/gpu/shape-on-gpu.sh bench/gpu/ncu-profile.sh bench/gpu/ncu_summary.py "$pack/"
strip "$pack"/heloom "$pack"/gpu_profile "$pack"/ntt_sweep "$pack"/test-* 2>/dev/null || true
# Gzipped: a lent device carries at most 64 MiB with the tracked tree (about 43 MB); the run
# scripts unpack them there.
gzip -9 "$pack"/heloom "$pack"/gpu_profile "$pack"/ntt_sweep "$pack"/test-*
ls -la "$pack"
echo "carry $pack to the GPU machine and run: $pack/run-on-gpu.sh OUTDIR"
