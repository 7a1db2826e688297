"""One line per profiled kernel from Nsight Compute's `--csv --page details` output.

Usage: python3 ncu_summary.py ncu.csv
Lines that are not part of the CSV table (the profiled program's own output, ncu's ==PROF==
messages) are skipped.
"""

import contextlib
import csv
import sys

WANTED = [
    ("Duration", "us"),
    ("Compute (SM) Throughput", "sm%"),
    ("Memory Throughput", "mem%"),
    ("DRAM Throughput", "dram%"),
    ("L2 Hit Rate", "l2hit%"),
    ("Achieved Occupancy", "occ%"),
    ("Registers Per Thread", "regs"),
    ("Warp Cycles Per Issued Instruction", "cyc/issue"),
    ("Executed Ipc Active", "ipc"),
    ("Grid Size", "grid"),
    ("Block Size", "block"),
]


def main(path: str) -> None:
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = [line for line in f if line.startswith('"')]
    rows = list(csv.DictReader(lines))
    if not rows:
        print("no kernels in", path)
        return
    kernels: dict[str, dict[str, str]] = {}
    order = []
    for r in rows:
        key = r.get("ID", "")
        if key not in kernels:
            kernels[key] = {"name": r.get("Kernel Name", "?")}
            order.append(key)
        name = r.get("Metric Name", "")
        unit = r.get("Metric Unit", "")
        value = r.get("Metric Value", "")
        if name == "Duration":
            # Normalise to microseconds.
            scale = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0}
            scale |= {"msecond": 1e3, "ms": 1e3}
            with contextlib.suppress(ValueError):
                value = f"{float(value.replace(',', '')) * scale.get(unit, 1.0):.1f}"
        kernels[key].setdefault(name, value)
    header = ["id", "kernel"] + [short for _, short in WANTED]
    print("  ".join(f"{h:>10}" if i else h for i, h in enumerate(header)))
    total = 0.0
    for key in order:
        k = kernels[key]
        cells = [key, k["name"].split("(")[0][:28]]
        for long, _ in WANTED:
            cells.append(k.get(long, "-"))
        with contextlib.suppress(ValueError):
            total += float(k.get("Duration", "nan"))
        print(f"{cells[0]:>3} {cells[1]:<28} " + " ".join(f"{c:>10}" for c in cells[2:]))
    print(f"sum of kernel durations: {total:.1f} us over {len(order)} kernels")


if __name__ == "__main__":
    main(sys.argv[1])
