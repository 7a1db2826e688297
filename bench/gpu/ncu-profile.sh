#!/usr/bin/env bash
# Nsight Compute, where installed: every kernel of one NTT, inverse NTT, multiply and
# relinearize at N = 2^16 x 30 limbs (examples/gpu_profile.rs), at the card's own clocks.
# Usage: ncu-profile.sh OUTDIR [TIMEOUT_S]; writes ncu.csv, ncu-log.txt and ncu-summary.txt
# and prints the summary. Exit 0 when ncu is not installed (nothing to do), else ncu's status.
here=$(cd "$(dirname "$0")" && pwd)
out=$1
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$ncu" ] || { echo "ncu not installed: no kernel profile"; exit 0; }
HELOOM_PROFILE_WARM=0 timeout "${2:-300}" "$ncu" --clock-control none --kernel-name regex:hk_ \
  --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
  --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --csv --page details \
  "$here/gpu_profile" >"$out/ncu.csv" 2>"$out/ncu-log.txt"
status=$?
python3 "$here/ncu_summary.py" "$out/ncu.csv" >"$out/ncu-summary.txt" 2>&1
cat "$out/ncu-summary.txt"
exit $status
