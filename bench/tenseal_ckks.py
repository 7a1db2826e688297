#!/usr/bin/env python3
"""Times Microsoft SEAL's CKKS operations through TenSEAL's `sealapi` bindings (one thread).

Companion of `heloom bench ckks --vs tenseal`, which runs this script in a subprocess (same
run, same machine) with the same ring degrees and coefficient-modulus bit sizes, and merges the
JSON it prints on stdout. It can also be run by hand:

    python bench/tenseal_ckks.py --sets '[{"id": "n14", "log_n": 14, "bits": [50,48,48,50],
                                           "scale_bits": 48}]' --samples 9

`bits` lists the ciphertext primes q_0 .. q_L followed by SEAL's single special prime (SEAL
always uses the last prime of the coefficient modulus as its one key-switching prime, i.e.
dnum = L + 1).

Operations and what is timed (keys are generated outside the timed region):
  encode             CKKSEncoder.encode of N/2 doubles at the top level (includes the NTT)
  encrypt            Encryptor.encrypt of a plaintext with the public key
  decrypt            Decryptor.decrypt + CKKSEncoder.decode_double
  add                Evaluator.add (ct + ct)
  multiply           Evaluator.multiply (ct x ct -> 3 polynomials)
  relinearize        Evaluator.relinearize (3 -> 2 polynomials)
  rescale            Evaluator.rescale_to_next
  rotate             Evaluator.rotate_vector by 1 step
  mul_relin_rescale  multiply + relinearize_inplace + rescale_to_next_inplace

Python <-> C++ conversion: `encode` takes a Python list and `decode_double` returns one, and
pybind11 converts them element by element. That cost is not SEAL's, so it is measured and
subtracted: for encode, encode(N/2 values) - encode(1 value) (SEAL runs the same FFT and NTT
for both: it pads to N/2 slots); for decode, the time numpy takes to build a list of N/2 floats
(`ndarray.tolist()`, the same PyFloat_FromDouble + list fill pybind11 does). The raw times and
the subtracted overhead are both reported. Other calls convert no vectors; their per-call
binding overhead (~0.3 us) is left in.

Exit codes: 0 success, 3 TenSEAL cannot be imported (message on stderr), 2 bad arguments.
Progress lines go to stderr as `progress: <message>`.
"""

import argparse
import contextlib
import json
import math
import os
import struct
import sys
import tempfile
import time


def progress(msg):
    print(f"progress: {msg}", file=sys.stderr, flush=True)


CLOCKS = {
    # CPU time of this thread: time preempted by other processes is not counted.
    "thread_cpu": time.thread_time_ns,
    "wall": time.perf_counter_ns,
}


def median_us(samples, min_sample_us, f, clock):
    """Median microseconds per call of f: calls are batched so that one sample lasts at least
    min_sample_us, after a warm-up of at least 3 calls (the same rule as heloom's timer)."""
    t0 = clock()
    warm = 0
    while (clock() - t0) / 1e3 < max(min_sample_us, 200.0) or warm < 3:
        f()
        warm += 1
    per_call = (clock() - t0) / 1e3 / warm
    batch = max(1, math.ceil(min_sample_us / max(per_call, 1e-3)))
    times = []
    for _ in range(max(1, samples)):
        t = clock()
        for _ in range(batch):
            f()
        times.append((clock() - t) / 1e3 / batch)
    times.sort()
    return times[len(times) // 2]


def seal_version(sealapi, params):
    """SEAL's version from the header of a serialized EncryptionParameters (magic 0xA15E,
    header size, major, minor)."""
    fd, path = tempfile.mkstemp(suffix=".seal")
    os.close(fd)
    try:
        params.save(path)
        with open(path, "rb") as fh:
            head = fh.read(5)
        magic, _size, major, minor = struct.unpack("<HBBB", head)
        if magic != 0xA15E:
            return "unknown"
        return f"{major}.{minor}"
    except Exception:
        return "unknown"
    finally:
        with contextlib.suppress(OSError):
            os.remove(path)


def bench_set(sealapi, np, spec, samples, min_sample_us, seed, clock):
    log_n = int(spec["log_n"])
    n = 1 << log_n
    bits = [int(b) for b in spec["bits"]]
    scale = 2.0 ** float(spec["scale_bits"])
    set_id = spec["id"]

    params = sealapi.EncryptionParameters(sealapi.SCHEME_TYPE.CKKS)
    params.set_poly_modulus_degree(n)
    params.set_coeff_modulus(sealapi.CoeffModulus.Create(n, bits))
    log_qp = sum(bits)
    max_bits = sealapi.CoeffModulus.MaxBitCount(n, sealapi.SEC_LEVEL_TYPE.TC128)
    if max_bits > 0 and log_qp <= max_bits:
        sec = sealapi.SEC_LEVEL_TYPE.TC128
        sec_note = "tc128"
    else:
        # SEAL's table stops at N = 2^15; beyond it (or above its bound) SEAL must be told not
        # to check. heloom checks these sets against its own table (OpenFHE's 2^16 bound).
        sec = sealapi.SEC_LEVEL_TYPE.NONE
        sec_note = "none (SEAL's table has no entry for this N)" if max_bits == 0 else "none"
    ctx = sealapi.SEALContext(params, True, sec)
    if not ctx.parameters_set():
        raise RuntimeError(
            f"SEAL rejected the parameters {bits} at N=2^{log_n}: {ctx.parameters_error_message()}"
        )

    progress(f"SEAL N=2^{log_n} {set_id}: keygen")
    keygen = sealapi.KeyGenerator(ctx)
    sk = keygen.secret_key()
    pk = sealapi.PublicKey()
    keygen.create_public_key(pk)
    rk = sealapi.RelinKeys()
    keygen.create_relin_keys(rk)
    gk = sealapi.GaloisKeys()
    # sealapi resolves the list to Galois elements (not steps): 3 is a left rotation by one.
    gk_elt = 3
    keygen.create_galois_keys([gk_elt], gk)

    encoder = sealapi.CKKSEncoder(ctx)
    encryptor = sealapi.Encryptor(ctx, pk)
    decryptor = sealapi.Decryptor(ctx, sk)
    evaluator = sealapi.Evaluator(ctx)
    top = ctx.first_parms_id()
    slots = encoder.slot_count()

    rng = np.random.default_rng(seed)
    a = rng.uniform(-1.0, 1.0, slots)
    b = rng.uniform(-1.0, 1.0, slots)
    a_list = a.tolist()
    b_list = b.tolist()

    pa = sealapi.Plaintext()
    pb = sealapi.Plaintext()
    encoder.encode(a_list, top, scale, pa)
    encoder.encode(b_list, top, scale, pb)
    ca = sealapi.Ciphertext(ctx)
    cb = sealapi.Ciphertext(ctx)
    encryptor.encrypt(pa, ca)
    encryptor.encrypt(pb, cb)
    c3 = sealapi.Ciphertext(ctx)
    evaluator.multiply(ca, cb, c3)
    c2 = sealapi.Ciphertext(ctx)
    evaluator.relinearize(c3, rk, c2)

    # Correctness and precision of multiply + relinearize + rescale, and of the rotation.
    r = sealapi.Ciphertext(ctx)
    evaluator.multiply(ca, cb, r)
    evaluator.relinearize_inplace(r, rk)
    evaluator.rescale_to_next_inplace(r)
    pr = sealapi.Plaintext()
    decryptor.decrypt(r, pr)
    got = np.array(encoder.decode_double(pr))
    err = np.abs(got - a * b)
    mean_err = float(err.mean())
    max_err = float(err.max())
    rot = sealapi.Ciphertext(ctx)
    evaluator.rotate_vector(ca, 1, gk, rot)
    decryptor.decrypt(rot, pr)
    rot_err = float(np.abs(np.array(encoder.decode_double(pr)) - np.roll(a, -1)).max())
    if not (max_err < 0.25 and rot_err < 0.25):
        raise RuntimeError(
            f"SEAL results are wrong at N=2^{log_n} {set_id}: multiply error {max_err:.3g}, "
            f"rotation error {rot_err:.3g}"
        )

    out = []

    def record(op, us, raw=None, overhead=0.0):
        out.append(
            {
                "set": set_id,
                "op": op,
                "n": n,
                "us": us,
                "us_raw": us if raw is None else raw,
                "binding_overhead_us": overhead,
            }
        )

    def t(f):
        return median_us(samples, min_sample_us, f, clock)

    progress(f"SEAL N=2^{log_n} {set_id}: encode")
    pt = sealapi.Plaintext()
    enc_full = t(lambda: encoder.encode(a_list, top, scale, pt))
    one = a_list[:1]
    enc_one = t(lambda: encoder.encode(one, top, scale, pt))
    conv_in = max(0.0, enc_full - enc_one)
    record("encode", enc_full - conv_in, enc_full, conv_in)

    progress(f"SEAL N=2^{log_n} {set_id}: encrypt")
    ct = sealapi.Ciphertext(ctx)
    record("encrypt", t(lambda: encryptor.encrypt(pa, ct)))

    progress(f"SEAL N=2^{log_n} {set_id}: decrypt")
    pd = sealapi.Plaintext()
    dec_only = t(lambda: decryptor.decrypt(ca, pd))
    decode_raw = t(lambda: encoder.decode_double(pd))
    conv_out = min(decode_raw, t(lambda: a.tolist()))
    record("decrypt", dec_only + decode_raw - conv_out, dec_only + decode_raw, conv_out)

    progress(f"SEAL N=2^{log_n} {set_id}: add, multiply")
    dst = sealapi.Ciphertext(ctx)
    record("add", t(lambda: evaluator.add(ca, cb, dst)))
    dst3 = sealapi.Ciphertext(ctx)
    record("multiply", t(lambda: evaluator.multiply(ca, cb, dst3)))

    progress(f"SEAL N=2^{log_n} {set_id}: relinearize")
    record("relinearize", t(lambda: evaluator.relinearize(c3, rk, dst)))

    progress(f"SEAL N=2^{log_n} {set_id}: rescale")
    record("rescale", t(lambda: evaluator.rescale_to_next(c2, dst)))

    progress(f"SEAL N=2^{log_n} {set_id}: rotate")
    record("rotate", t(lambda: evaluator.rotate_vector(ca, 1, gk, dst)))

    progress(f"SEAL N=2^{log_n} {set_id}: multiply+relinearize+rescale")

    def mrr():
        evaluator.multiply(ca, cb, dst3)
        evaluator.relinearize_inplace(dst3, rk)
        evaluator.rescale_to_next_inplace(dst3)

    record("mul_relin_rescale", t(mrr))

    info = {
        "id": set_id,
        "n": n,
        "log_n": log_n,
        "bits": bits,
        "log_qp": log_qp,
        "dnum": len(bits) - 1,
        "special_primes": 1,
        "sec_level": sec_note,
        "precision": {
            "mean_abs_error": mean_err,
            "max_abs_error": max_err,
            "mean_bits": -math.log2(mean_err) if mean_err > 0 else None,
            "worst_bits": -math.log2(max_err) if max_err > 0 else None,
            "rotate_max_abs_error": rot_err,
        },
    }
    return info, out, params


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", required=True, help="JSON list of {id, log_n, bits, scale_bits}")
    ap.add_argument("--samples", type=int, default=9, help="timing samples (median reported)")
    ap.add_argument("--min-sample-us", type=float, default=2000.0, help="minimum sample length")
    ap.add_argument("--seed", type=int, default=1, help="seed of the random inputs")
    ap.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="thread_cpu",
        help="thread_cpu (default; ignores time preempted by other processes) or wall",
    )
    args = ap.parse_args()
    try:
        sets = json.loads(args.sets)
    except json.JSONDecodeError as e:
        print(f"--sets is not valid JSON: {e}", file=sys.stderr)
        return 2

    try:
        import numpy as np
        import tenseal
        import tenseal.sealapi as sealapi
    except Exception as e:
        print(
            f"cannot import tenseal/numpy with {sys.executable}: {e} "
            "(install them with `pip install tenseal numpy`)",
            file=sys.stderr,
        )
        return 3

    # SEAL is single-threaded; make sure numpy's BLAS is too (it is idle anyway).
    os.environ.setdefault("OMP_NUM_THREADS", "1")

    report = {
        "library": "Microsoft SEAL via TenSEAL sealapi",
        "tenseal_version": getattr(tenseal, "__version__", "unknown"),
        "seal_version": "unknown",
        "python": sys.version.split()[0],
        "threads": 1,
        "clock": args.clock,
        "samples": args.samples,
        "sets": [],
        "results": [],
        "errors": [],
    }
    for i, spec in enumerate(sets):
        try:
            info, res, params = bench_set(
                sealapi,
                np,
                spec,
                args.samples,
                args.min_sample_us,
                args.seed + i,
                CLOCKS[args.clock],
            )
        except Exception as e:
            report["errors"].append(f"{spec.get('id', '?')}: {type(e).__name__}: {e}")
            continue
        if report["seal_version"] == "unknown":
            report["seal_version"] = seal_version(sealapi, params)
        report["sets"].append(info)
        report["results"].extend(res)
    json.dump(report, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
