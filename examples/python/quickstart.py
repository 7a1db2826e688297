"""heloom quickstart: encrypt numpy arrays, compute on them encrypted, decrypt.

Run after building the package (``maturin develop --release`` or ``pip install .``)::

    python examples/python/quickstart.py
"""

from __future__ import annotations

import time

import numpy as np

import heloom


def main() -> None:
    # 128-bit secure parameters: ring degree 2^14, 7 rescalings at scale 2^40, 64-bit words.
    params = heloom.CkksParameters(poly_degree=2**14, levels=7, scale_bits=40, word_bits=64)
    print(params.summary())

    ctx = heloom.Context(params)
    t = time.perf_counter()
    keys = ctx.keygen(rotations=[1, -1, 8], conjugate=True)
    print(f"keygen: {1e3 * (time.perf_counter() - t):.1f} ms")

    rng = np.random.default_rng(0)
    x = rng.uniform(-1.0, 1.0, 1024)
    y = rng.uniform(-1.0, 1.0, 1024)

    a = ctx.encrypt(x, keys.public_key)  # anyone with the public key can encrypt
    b = ctx.encrypt(y, keys.secret_key)  # symmetric: half-size ciphertext
    print(f"fresh ciphertext: {a}")

    ev = ctx.evaluator(keys.evaluation_keys)

    # Explicit evaluator calls: multiply, relinearize, rescale.
    c = ev.rescale(ev.relinearize(ev.multiply(a, b)))
    # Operators do the same for you, and align levels and scales of mixed operands.
    d = a * b + 0.5 * a - y
    rotated = ev.rotate(a, 1)  # slot i <- slot i + 1
    taylor = [1.0, 1.0, 1 / 2, 1 / 6, 1 / 24, 1 / 120, 1 / 720]  # e^x to degree 6
    e = ev.evaluate_polynomial(a, taylor)

    def dec(ct: heloom.Ciphertext) -> np.ndarray:
        return ctx.decrypt(ct, keys.secret_key, real=True)[: len(x)]

    checks = {
        "x * y": (dec(c), x * y),
        "x * y + 0.5 x - y": (dec(d), x * y + 0.5 * x - y),
        "rotate(x, 1)": (dec(rotated), np.roll(x, -1)),
        "exp(x) (degree 6)": (dec(e), np.polynomial.polynomial.polyval(x, taylor)),
    }
    for name, (got, want) in checks.items():
        print(f"{name:20s} max error {np.max(np.abs(got - want)):.2e}")
    taylor_err = np.max(np.abs(dec(e) - np.exp(x)))
    print(f"e^x vs np.exp:       max error {taylor_err:.2e} (the Taylor remainder)")
    print(f"levels left: c={c.level} d={d.level} e={e.level}")

    try:
        ev.rotate(a, 3)
    except heloom.MissingKeyError as err:
        print(f"as expected: {err}")


if __name__ == "__main__":
    main()
