"""heloom devices: encrypt 2,000 small "files" with AES-256-GCM over two devices (AES-NI and
constant-time software AES) pulling from one queue, decrypt them back, then compare the
balancers on a small version of seed 001's workload.

Run after building the package (``maturin develop --release`` or ``pip install .``)::

    python examples/python/offload.py        # or: ./run.sh python examples/python/offload.py
"""

from __future__ import annotations

import os
import random
import textwrap

import heloom


def main() -> None:
    print("devices on this machine:")
    for d in heloom.offload.offload_devices():
        print(f"  {d['kind']:<8} {d['workload']:<3}  {d['engine'] or 'unavailable'}")
        if not d["available"]:
            print(textwrap.indent(textwrap.fill(d["error"], 90), " " * 16))

    # 2,000 "files" of 16 bytes to 16 KiB, one key, a fresh random IV per file.
    rng = random.Random(1)
    files = [rng.randbytes(rng.choice([16, 256, 1024, 4096, 16384])) for _ in range(2000)]
    key = os.urandom(32)
    enc = heloom.offload.aes_encrypt(files, key, cipher="aes-256-gcm", devices="cpu,soft")
    r = enc.report
    print(
        f"\nencrypted {r['items']} files ({r['bytes'] / 1e6:.1f} MB) with {r['cipher']} "
        f"under the {r['method']} balancer in {r['ms']:.1f} ms ({r['mb_per_s']:.0f} MB/s)"
    )
    for d in r["devices"]:
        name = d["name"]
        print(
            f"  {name:<8} {r['items_per_device'][name]:>5} files "
            f"{r['bytes_per_device'][name] / 1e6:6.2f} MB  finished at "
            f"{r['finish_ms_per_device'][name]:6.1f} ms  ({d['engine']})"
        )

    dec = heloom.offload.aes_decrypt(enc.outputs, key, ivs=enc.ivs, devices="cpu,soft")
    assert dec.outputs == files
    print(f"decrypted them back in {dec.report['ms']:.1f} ms: every file matches")

    # A tampered ciphertext is refused, naming the file.
    tampered = enc.outputs
    tampered[7] = bytes([tampered[7][0] ^ 1]) + tampered[7][1:]
    try:
        heloom.offload.aes_decrypt(tampered, key, ivs=enc.ivs)
    except heloom.offload.CryptoError as e:
        print(f"tampered file refused: {e}")

    # Every device alone, then every balancer, on the same items (small settings).
    report = heloom.offload.offload_compare(
        devices="cpu,soft", sizes=(64, 1024, 8192), items=1000, reps=2
    )
    print(f"\n{report['cipher']} {report['direction']}, {report['items']} items per size:")
    print(f"  {'size':>6}  {'method':<12} {'ms':>8} {'efficiency':>10}  items per device")
    for run in report["runs"]:
        size = "mixed" if run["workload"] == "mixed" else f"{run['size']} B"
        split = " / ".join(f"{n} {v:.0f}" for n, v in run["items_per_device"].items())
        print(
            f"  {size:>6}  {run['method']:<12} {run['ms']:8.2f} {run['efficiency']:10.2f}  {split}"
        )


if __name__ == "__main__":
    main()
