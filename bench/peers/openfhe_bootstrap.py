#!/usr/bin/env python3
"""OpenFHE's full-slot CKKS bootstrapping, timed for `heloom bench bootstrap --vs openfhe`
(issue 19), which runs it; it also runs on its own.

Needs the PyPI `openfhe` wheel, which loads only on Python 3.10:

    ~/.pyenv/versions/3.10.13/bin/python -m venv .venv-openfhe
    .venv-openfhe/bin/pip install openfhe numpy
    .venv-openfhe/bin/python bench/peers/openfhe_bootstrap.py --threads 1,2

The setup is OpenFHE's own simple-ckks-bootstrapping example at 128-bit security
(HEStd_128_classic, uniform ternary secret, FLEXIBLEAUTO, 59-bit scaling primes, 60-bit first
prime, level budget {4, 4}, 10 levels left after bootstrapping), with full slots and the
complex data type (the inputs are complex). OpenFHE picks the ring dimension for that chain
itself unless --ring-dim asks for one (it refuses one too small for the chain's log QP).
--insecure-ring-dim N is a SMOKE TEST only: HEStd_NotSet at ring dimension N, not a
benchmark.

Then as the Lattigo program does: N/2 uniform complex inputs (real and imaginary parts in
[-1, 1], seeded), encrypted at the level the example gives bootstrapping, one warm-up
bootstrap, one timed bootstrap (fastest of --reps) per thread budget (omp_set_num_threads),
precision as heloom measures it (per slot |got - want|: worst bits -log2(max), mean bits
-log2(mean)), levels left, the serialized evaluation keys' bytes, peak resident memory
(VmHWM). One JSON object on stdout, `progress: ...` lines on stderr.

The work runs in a forked child under RLIMIT_AS (--max-gb, default 20) so that running out of
memory ends in a JSON record {"error": "out of memory: ...", ...} and exit status 2 instead of
taking the machine down: an allocation failing inside an OpenMP region aborts the process
rather than raising, and the parent reports that. A refusal of the parameters is reported
the same way. Exit status 3: openfhe is not importable.
"""

import argparse
import contextlib
import ctypes
import json
import math
import os
import resource
import signal
import sys
import tempfile
import threading
import time

LEVELS_AFTER = 10  # the example's levels_available_after_bootstrap
LEVEL_BUDGET = [4, 4]
SCALING_MOD_BITS = 59
FIRST_MOD_BITS = 60


def progress(msg):
    print(f"progress: openfhe: {msg}", file=sys.stderr, flush=True)


def vm_hwm_bytes():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def set_omp_threads(n):
    """omp_set_num_threads in the libgomp OpenFHE loaded (the binding does not expose it)."""
    try:
        with open("/proc/self/maps") as f:
            libs = {ln.split()[-1] for ln in f if "libgomp" in ln or "libomp" in ln}
    except OSError:
        libs = set()
    for path in sorted(libs):
        try:
            lib = ctypes.CDLL(path)
            lib.omp_set_num_threads(ctypes.c_int(n))
            return int(lib.omp_get_max_threads())
        except (OSError, AttributeError):
            continue
    return None


def count_bytes(serialize):
    """Bytes that `serialize(path)` writes, through a FIFO so that gigabytes of keys never
    touch the disk; None when the serializer fails."""
    with tempfile.TemporaryDirectory() as d:
        fifo = os.path.join(d, "keys")
        os.mkfifo(fifo)
        total = [0]

        def drain():
            with open(fifo, "rb") as f:
                while True:
                    b = f.read(1 << 20)
                    if not b:
                        break
                    total[0] += len(b)

        t = threading.Thread(target=drain, daemon=True)
        t.start()
        ok = serialize(fifo)
        if not ok:
            # Unblock the reader if the writer never opened the FIFO.
            with open(fifo, "wb"):
                pass
        t.join()
        return total[0] if ok else None


def is_oom(e):
    s = str(e).lower()
    return isinstance(e, MemoryError) or any(
        m in s for m in ("bad_alloc", "cannot allocate", "failed to map segment")
    )


def worker(args, state, out, keep):
    """Runs the benchmark; `state` collects what an error record should carry, and `keep`
    hands it to the parent at each stage."""

    def stage(name):
        state["stage"] = name
        keep()
        progress(name)

    try:
        import numpy as np
        import numpy.random  # loaded now, not lazily under a tight cap
        import openfhe as fhe
    except ImportError as e:
        print(f"openfhe is not importable: {e}", file=sys.stderr)
        return 3

    state.update({"peer": "openfhe", "version": fhe.__version__, "python": sys.version.split()[0]})
    insecure = args.insecure_ring_dim > 0
    skd = fhe.SecretKeyDist.UNIFORM_TERNARY
    depth = LEVELS_AFTER + fhe.CryptoContext.GetBootstrapDepth(LEVEL_BUDGET, skd)

    def params(ring_dim):
        p = fhe.CCParamsCKKSRNS()
        p.SetSecretKeyDist(skd)
        if insecure:
            p.SetSecurityLevel(fhe.SecurityLevel.HEStd_NotSet)
        else:
            p.SetSecurityLevel(fhe.SecurityLevel.HEStd_128_classic)
        if ring_dim:
            p.SetRingDim(ring_dim)
        p.SetScalingModSize(SCALING_MOD_BITS)
        p.SetScalingTechnique(fhe.ScalingTechnique.FLEXIBLEAUTO)
        p.SetFirstModSize(FIRST_MOD_BITS)
        p.SetMultiplicativeDepth(depth)
        p.SetCKKSDataType(fhe.CKKSDataType.COMPLEX)
        return p

    state.update(
        {
            "params": "simple-ckks-bootstrapping, level budget {4, 4}, "
            + ("INSECURE HEStd_NotSet (smoke test)" if insecure else "HEStd_128_classic"),
            "security_bits": 0 if insecure else 128,
            "insecure": insecure,
            "depth": depth,
            "level_budget": LEVEL_BUDGET,
            "scale_bits": SCALING_MOD_BITS,
            # Nominal: FLEXIBLEAUTO picks primes of about these sizes; P is not exposed.
            "log_q": FIRST_MOD_BITS + depth * SCALING_MOD_BITS,
            "hamming_weight": None,
            "secret": "uniform ternary (dense)",
        }
    )
    want_dim = args.insecure_ring_dim or args.ring_dim
    stage(f"creating the context (ring dimension {want_dim or 'chosen by OpenFHE'}, depth {depth})")
    try:
        cc = fhe.GenCryptoContext(params(want_dim))
    except Exception as e:
        if is_oom(e):
            raise
        msg = str(e).split("):", 1)[-1].strip() or str(e)
        state["error"] = f"OpenFHE refused the parameters: {msg}"
        if want_dim and not insecure:
            # What it picks by itself: a cheap context, no keys.
            with contextlib.suppress(Exception):
                state["default_ring_dim"] = fhe.GenCryptoContext(params(0)).GetRingDimension()
        return 2
    for feature in ("PKE", "KEYSWITCH", "LEVELEDSHE", "ADVANCEDSHE", "FHE"):
        cc.Enable(getattr(fhe.PKESchemeFeature, feature))
    n = cc.GetRingDimension()
    slots = n // 2
    state.update({"ring_dim": n, "log_n": int(math.log2(n)), "slots": slots})

    stage(f"N = 2^{int(math.log2(n))}: encoding the transforms (EvalBootstrapSetup)")
    t = time.perf_counter()
    cc.EvalBootstrapSetup(LEVEL_BUDGET)
    state["setup_s"] = time.perf_counter() - t

    stage("generating keys")
    t = time.perf_counter()
    keys = cc.KeyGen()
    cc.EvalMultKeyGen(keys.secretKey)
    cc.EvalBootstrapKeyGen(keys.secretKey, slots)
    state["keygen_s"] = time.perf_counter() - t
    tag = keys.secretKey.GetKeyTag()
    state["rotations"] = len(cc.GetExistingEvalAutomorphismKeyIndices(tag))

    stage("measuring the serialized keys")
    mult = count_bytes(lambda p: fhe.CryptoContext.SerializeEvalMultKey(p, fhe.BINARY, tag))
    auto = count_bytes(lambda p: fhe.CryptoContext.SerializeEvalAutomorphismKey(p, fhe.BINARY, tag))
    state["key_bytes"] = None if mult is None or auto is None else mult + auto

    rng = np.random.default_rng(args.seed)
    want = rng.uniform(-1, 1, slots) + 1j * rng.uniform(-1, 1, slots)
    # As the example: encoded at depth - 1, one level left, where it bootstraps from.
    pt = cc.MakeCKKSPackedPlaintext(want, 1, depth - 1, None, slots)
    ct = cc.Encrypt(keys.publicKey, pt)

    rows = []
    for i, threads in enumerate(args.threads):
        omp = set_omp_threads(threads)
        if i == 0:
            stage("warm-up bootstrap")
            t = time.perf_counter()
            cc.EvalBootstrap(ct)
            state["warmup_s"] = time.perf_counter() - t
        best, boot = math.inf, None
        for r in range(args.reps):
            stage(f"bootstrap on {threads} thread(s), run {r + 1}")
            t = time.perf_counter()
            o = cc.EvalBootstrap(ct)
            s = time.perf_counter() - t
            if s < best:
                best, boot = s, o
        dec = cc.Decrypt(boot, keys.secretKey)
        dec.SetLength(slots)
        got = np.array(dec.GetCKKSPackedValue(), dtype=complex)
        err = np.abs(got - want)
        rows.append(
            {
                "threads": threads,
                "omp_threads": omp,
                "total_s": best,
                "worst_bits": float(-np.log2(err.max())),
                "mean_bits": float(-np.log2(err.mean())),
                # The example's count of levels remaining.
                "levels_left": depth - boot.GetLevel() - (boot.GetNoiseScaleDeg() - 1),
            }
        )
    state["rows"] = rows
    state["cores"] = os.cpu_count()
    state["peak_rss_bytes"] = vm_hwm_bytes()
    state.pop("stage", None)
    out.write(json.dumps(state) + "\n")
    out.flush()
    return 0


def child_main(args, report_fd):
    """In the forked child: the cap, stdout kept for the JSON only, the work."""
    cap = int(args.max_gb * (1 << 30))
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # whatever the library prints goes to stderr
    state = {}
    report = os.fdopen(report_fd, "w")

    def keep():
        report.write(json.dumps(state) + "\n")
        report.flush()

    try:
        rc = worker(args, state, out, keep)
    except BaseException as e:  # every failure becomes the error record
        kind = "out of memory" if is_oom(e) else "failed"
        state["error"] = f"{kind}: {type(e).__name__}: {e} (during {state.get('stage', '?')})"
        rc = 2
    if rc == 2:
        state.setdefault("peak_rss_bytes", vm_hwm_bytes())
        state.pop("stage", None)
        out.write(json.dumps(state) + "\n")
        out.flush()
    keep()
    return rc


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", default="1", help="comma-separated thread budgets")
    ap.add_argument("--reps", type=int, default=1, help="bootstraps per budget, fastest reported")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--ring-dim", type=int, default=0, help="ask for this ring dimension (0: OpenFHE's choice)"
    )
    ap.add_argument(
        "--insecure-ring-dim",
        type=int,
        default=0,
        help="SMOKE TEST ONLY: HEStd_NotSet at this ring dimension (e.g. 4096)",
    )
    ap.add_argument("--max-gb", type=float, default=20.0, help="address-space cap (RLIMIT_AS), GiB")
    args = ap.parse_args()
    try:
        args.threads = [int(t) for t in args.threads.split(",")]
        if min(args.threads) < 1:
            raise ValueError
    except ValueError:
        ap.error(f"--threads {args.threads!r}: want a comma-separated list of positive integers")
    args.reps = max(1, args.reps)

    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        rc = 2
        try:
            rc = child_main(args, wfd)
        finally:
            os._exit(rc)
    os.close(wfd)
    last = {}
    with os.fdopen(rfd) as r:
        for line in r:
            with contextlib.suppress(ValueError):
                last = json.loads(line)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        why = (
            f"an allocation failed under the {args.max_gb:g} GB cap (RLIMIT_AS)"
            if sig == signal.SIGABRT
            else "killed, e.g. by the kernel's out-of-memory killer"
            if sig == signal.SIGKILL
            else "crashed"
        )
        stage = last.pop("stage", None) or "start-up"
        rec = dict(last)
        rec["error"] = (
            f"out of memory: the OpenFHE process died of {name} during {stage} ({why})"
            if sig in (signal.SIGABRT, signal.SIGKILL)
            else f"the OpenFHE process died of {name} during {stage}"
        )
        rec.setdefault("peer", "openfhe")
        rec["max_gb"] = args.max_gb
        print(json.dumps(rec), flush=True)
        print(f"openfhe_bootstrap: {rec['error']}", file=sys.stderr)
        return 2
    return os.WEXITSTATUS(status)


if __name__ == "__main__":
    sys.exit(main())
