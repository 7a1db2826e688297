"""Two builds of heloom side by side in one run: the same benchmarks, rounds alternating between
the builds so that a busy machine slows both alike; per measurement the fastest round of each,
and the ratio new / old.

    python3 bench/compare_builds.py OLD_HELOOM NEW_HELOOM OUT_DIR [--rounds 3] [--quick]

Runs `heloom bench ntt` (N = 2^14 and 2^16, every backend: NTTs and element-wise kernels),
`heloom bench ckks` (N = 2^14 and 2^15, 64-bit words: encode .. rotate,
multiply+relinearize+rescale), `heloom bench matmul --quick` (d = 16: plaintext x encrypted vector
by diagonals, encrypted x encrypted) and `heloom bench cryptonets` (a batch of 1000 held-out MNIST
images, 32- and 64-bit words: client encryption and decryption, each server stage), and writes
OUT_DIR/compare.json and OUT_DIR/compare.txt (a row per measurement, the worst ratios first).
A refactoring that should not change speed shows ratios near 1 (the run's noise, read from the
spread of the rounds, is printed with them).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import subprocess
import sys
import time
from pathlib import Path


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def bench(binary: str, args: list[str]) -> dict:
    out = subprocess.run(
        [binary, "bench", *args, "--json"],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout)


def ntt_rows(rep: dict) -> dict[str, float]:
    return {
        f"ntt {r['op']} N=2^{r['n'].bit_length() - 1} w{r['word_bits']} p{r['prime_bits']} "
        f"{r['backend']}": r["us"]
        for r in rep["results"]
    }


def ckks_rows(rep: dict) -> dict[str, float]:
    return {
        f"ckks {r['op']} {r['config']}": r["us"] for r in rep["results"] if r.get("us") is not None
    }


def matmul_rows(rep: dict) -> dict[str, float]:
    out: dict[str, float] = {}
    for r in rep["rows"]:
        key = f"{r['algo']} d={r['d']} w{r['word_bits']} t{r['threads']} l{r['input_level']}"
        for stage in ("encode_encrypt_ms", "product_ms", "rescale_ms", "total_ms"):
            out[f"matmul {key} {stage[:-3]}"] = r[stage] * 1000.0
    return out


def cryptonets_rows(rep: dict) -> dict[str, float]:
    out: dict[str, float] = {}
    for word in ("u32", "u64"):
        best = rep["comparison"][word]["best"]
        for stage in ("encrypt_s", "server_s", "decrypt_s"):
            out[f"cryptonets {word} {stage[:-2]}"] = best[stage] * 1e6
        for stage, seconds in best["stages"].items():
            out[f"cryptonets {word} {stage[:-2]}"] = seconds * 1e6
    return out


BENCHES = [
    ("ntt", ["ntt", "--log-n", "14,16", "--samples", "7"], ntt_rows),
    ("ckks", ["ckks", "--log-n", "14,15", "--word-bits", "64", "--samples", "5"], ckks_rows),
    ("matmul", ["matmul", "--quick", "--word-bits", "64"], matmul_rows),
    ("cryptonets", ["cryptonets", "--images", "1000", "--rounds", "1"], cryptonets_rows),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("out", type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--only", default="", help="comma-separated subset of ntt,ckks,matmul,cryptonets"
    )
    a = ap.parse_args()
    only = {x for x in a.only.split(",") if x}
    a.out.mkdir(parents=True, exist_ok=True)
    runs: dict[str, dict[str, list[float]]] = {"old": {}, "new": {}}
    started = time.time()
    for rnd in range(a.rounds):
        # Alternate which build goes first.
        order = [("old", a.old), ("new", a.new)]
        if rnd % 2:
            order.reverse()
        for name, args, rows in BENCHES:
            if only and name not in only:
                continue
            for label, binary in order:
                t = time.time()
                got = rows(bench(binary, args))
                for k, v in got.items():
                    runs[label].setdefault(k, []).append(v)
                print(
                    f"round {rnd + 1}/{a.rounds} {name} {label}: {time.time() - t:.0f} s",
                    file=sys.stderr,
                )
    table = []
    for k in sorted(set(runs["old"]) & set(runs["new"])):
        old, new = runs["old"][k], runs["new"][k]
        best_old, best_new = min(old), min(new)
        spread = max(max(old) / best_old, max(new) / best_new) - 1.0
        table.append(
            {
                "measurement": k,
                "old_us": best_old,
                "new_us": best_new,
                "new_over_old": best_new / best_old,
                "round_spread": spread,
            }
        )
    table.sort(key=lambda r: -r["new_over_old"])
    ratios = sorted(r["new_over_old"] for r in table)
    summary = {
        "cpu": cpu_model(),
        "old": a.old,
        "new": a.new,
        "rounds": a.rounds,
        "measurements": len(table),
        "median_ratio": ratios[len(ratios) // 2] if ratios else None,
        "geomean_ratio": (
            math.exp(sum(math.log(x) for x in ratios) / len(ratios)) if ratios else None
        ),
        "wall_s": time.time() - started,
        "rows": table,
    }
    (a.out / "compare.json").write_text(json.dumps(summary, indent=2))
    lines = [
        f"cpu: {summary['cpu']}; {a.rounds} rounds alternating; fastest round of each build",
        f"old: {a.old}",
        f"new: {a.new}",
        f"median new/old {summary['median_ratio']:.3f}, geometric mean "
        f"{summary['geomean_ratio']:.3f} over {len(table)} measurements",
        "",
        f"{'measurement':<70} {'old us':>10} {'new us':>10} {'new/old':>8} {'spread':>7}",
    ]
    for r in table:
        lines.append(
            f"{r['measurement']:<70} {r['old_us']:>10.1f} {r['new_us']:>10.1f} "
            f"{r['new_over_old']:>8.3f} {r['round_spread']:>7.1%}"
        )
    (a.out / "compare.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:5]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
