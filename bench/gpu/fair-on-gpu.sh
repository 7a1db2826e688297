#!/usr/bin/env bash
# Issue 18's fairness targets on a many-core machine (the lent GPU host, 16 cores), from the
# repository root after bench/gpu/pack.sh: bench/serve/fair.sh (capacity X, then ROUNDS pairs
# of one tenant at 10x another's rate at 0.85 X against the light tenant alone, then 8 equal
# tenants) twice: with the servers' built-in cost profile, and with this machine's profile
# measured once (`heloom profile`), at the same X. N = 2^13, every result decrypted and
# checked. Everything lands in OUTDIR/all.tgz and OUTDIR/summary.txt.
#   bench/gpu/fair-on-gpu.sh OUTDIR          (env: ROUNDS=2 SECS=20)
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?OUTDIR}
root=$(pwd)
pack=.device-pack
for z in "$pack"/heloom.gz; do [ -e "$z" ] && gunzip -f "$z" && chmod +x "${z%.gz}"; done
h=$root/$pack/heloom
work=$(mktemp -d -t heloom-fair-XXXXXX)
export ROUNDS=${ROUNDS:-2} SECS=${SECS:-20}
status=0
bash bench/serve/fair.sh "$work/builtin" "$h" || status=1
x=$(sed -nE 's/^X = ([0-9.]+) jobs.*/\1/p' "$work/builtin/summary.txt" 2>/dev/null)
"$h" profile --out "$work/profile.json" >"$work/profile.log" 2>&1 || status=1
if [ -n "$x" ] && [ -s "$work/profile.json" ]; then
  X=$x PROFILE=$work/profile.json bash bench/serve/fair.sh "$work/measured" "$h" || status=1
fi
{
  echo "== built-in profile"; cat "$work/builtin/summary.txt" 2>/dev/null
  echo "== measured profile"; cat "$work/measured/summary.txt" 2>/dev/null
} >"$out/summary.txt"
cd "$work" && tar -czf "$out/all.tgz" . && cd / && rm -rf "$work"
cat "$out/summary.txt"
exit $status
