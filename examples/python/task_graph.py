"""heloom task graphs: record a computation as a graph of the paper's fused HE tasks, run it on a
thread budget, decrypt; then simulate the scheduler on seed 000's Xeon Phi.

Run after building the package (``maturin develop --release`` or ``pip install .``)::

    python examples/python/task_graph.py
"""

from __future__ import annotations

import math
import time

import numpy as np

import heloom


def main() -> None:
    # 128-bit secure parameters: ring degree 2^14, 7 rescalings at scale 2^40.
    params = heloom.CkksParameters(poly_degree=2**14, levels=7, scale_bits=40)
    ctx = heloom.Context(params)
    keys = ctx.keygen()
    threads = min(2, heloom.runtime.cores())
    ev = heloom.Evaluator(ctx, keys.evaluation_keys, threads=threads)
    print(f"{ev} on a machine with {heloom.runtime.cores()} cores")

    rng = np.random.default_rng(0)
    x = rng.uniform(-1.0, 1.0, params.slots)
    y = rng.uniform(-1.0, 1.0, params.slots)
    cx = ctx.encrypt(x, keys.public_key)
    cy = ctx.encrypt(y, keys.public_key)

    def dec(ct: heloom.Ciphertext) -> np.ndarray:
        return ctx.decrypt(ct, keys.secret_key, real=True)

    # A custom graph: (x*y relinearized and rescaled) * 0.5 rescaled, plus x^2, plus 1. Levels
    # and scales are tracked while recording: mistakes raise here, before any ciphertext.
    b = heloom.runtime.GraphBuilder(ctx, name="custom")
    vx, vy = b.input_like(cx), b.input_like(cy)
    prod = b.mul_relin_rescale(vx, vy)  # task kind: mul-relin-rescale
    half = b.mul_plain_rescale(prod, 0.5)  # fused with the product unless it ends its task
    sq = b.square_relin_rescale(vx)  # square-relin-rescale
    total = b.add_plain(b.add(half, sq), 1.0)  # add (levels aligned by dropping)
    print(f"recorded output: {total}")
    graph = b.finish([total])
    print(graph)

    t = time.perf_counter()
    (out,) = graph.run(ev, [cx, cy], threads=threads)
    ms = 1e3 * (time.perf_counter() - t)
    err = np.max(np.abs(dec(out) - (0.5 * x * y + x * x + 1.0)))
    print(f"custom graph on {threads} threads: {ms:.1f} ms, max error {err:.2e}")

    # The built-in e^x job (degree-6 Maclaurin polynomial) in its three shapes.
    want = sum(x**k / math.factorial(k) for k in range(7))
    for variant in ("paper-fig3", "bsgs", "horner"):
        g = heloom.runtime.exp_graph(ctx, variant)
        t = time.perf_counter()
        (out,) = g.run(ev, [cx])
        ms = 1e3 * (time.perf_counter() - t)
        err = np.max(np.abs(dec(out) - want))
        print(
            f"  e^x {variant:<10} {len(g):>2} tasks, {g.work_ms():7.1f} ms of Xeon Phi work; "
            f"here {ms:6.1f} ms, max error {err:.2e}"
        )

    # The scheduler's discrete-event simulation: 2,300 e^x jobs at a mean gap of 60 ms on the
    # Xeon Phi 7230F cost profile (seed 000's Tables 1-5), under each thread policy.
    print(f"\nsimulated on {heloom.runtime.profile_names()[0]}, gap 60 ms, 2300 jobs:")
    for policy in heloom.runtime.POLICIES:
        r = heloom.runtime.simulate(policy, gap_ms=60.0, jobs=2300)
        print(
            f"  {policy:<14} makespan {r['makespan_ms'] / 1e3:7.1f} s  "
            f"p50 {r['p50_ms']:8.1f} ms  p99 {r['p99_ms']:8.1f} ms  "
            f"utilisation {100 * r['utilisation']:5.1f}%"
        )


if __name__ == "__main__":
    main()
