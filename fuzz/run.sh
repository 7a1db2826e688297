#!/usr/bin/env bash
# Fuzzes one target on nightly Rust with AddressSanitizer and debug assertions for a fixed
# time, minimizes its corpus in place (fuzz/corpus/<target>, committed) and writes the run's
# statistics to bench/results/fuzz-<target>.txt.
#
#   fuzz/run.sh TARGET [SECONDS=3600]
#
# Seed the corpus first (valid objects of every kind):
#   HELOOM_FUZZ_CORPUS=1 cargo test --release -p heloom-ckks --test serialize write_fuzz_corpus
set -euo pipefail
target=${1:?usage: fuzz/run.sh TARGET [SECONDS]}
secs=${2:-3600}
cd "$(dirname "$0")"
out=../bench/results/fuzz-$target.txt
log=$(mktemp)
mkdir -p "corpus/$target"
before=$(ls "corpus/$target" | wc -l)
start=$(date -u +%FT%TZ)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
cargo +nightly fuzz build -O -a "$target" >/dev/null 2>&1
set +e
cargo +nightly fuzz run -O -a "$target" "corpus/$target" -- \
    -max_total_time="$secs" -max_len=200000 -rss_limit_mb=4096 -timeout=30 \
    -print_final_stats=1 >"$log" 2>&1
rc=$?
set -e
end=$(date -u +%FT%TZ)
cargo +nightly fuzz cmin -O -a "$target" "corpus/$target" >/dev/null 2>&1 || true
after=$(ls "corpus/$target" | wc -l)
{
    echo "fuzz target:   $target (fuzz/fuzz_targets/$target.rs)"
    echo "loader:        $(grep -m1 '^//!' "fuzz_targets/$target.rs" | sed 's|^//! ||')"
    echo "code:          commit $commit (heloom-ckks, heloom-runtime and fuzz/ as built at the start)"
    echo "started:       $start"
    echo "ended:         $end"
    echo "duration:      ${secs} s requested (-max_total_time), one libFuzzer job on one core"
    echo "cpu:           $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
    echo "toolchain:     $(rustc +nightly --version)"
    echo "build:         cargo +nightly fuzz build -O -a (release, debug assertions, -Zsanitizer=address)"
    echo "flags:         -max_len=200000 -rss_limit_mb=4096 -timeout=30"
    echo "exit code:     $rc ($([ "$rc" = 0 ] && echo 'no crash, leak, timeout or OOM' || echo 'FAILURE: see fuzz/artifacts'))"
    echo "crashes:       $(ls "artifacts/$target" 2>/dev/null | wc -l) files in fuzz/artifacts/$target"
    echo "corpus:        $before inputs before, $after after cmin (fuzz/corpus/$target)"
    echo
    echo "libFuzzer's last status line and final statistics:"
    grep -E '^#[0-9]+' "$log" | tail -1
    grep -E '^(stat::|Done )' "$log" || true
    if [ "$rc" != 0 ]; then
        echo
        echo "last 40 lines of the log:"
        tail -40 "$log"
    fi
} >"$out"
cat "$out"
rm -f "$log"
exit "$rc"
