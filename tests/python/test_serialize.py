"""Serialization from Python: round trips that decrypt to the same values, and bad bytes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import heloom

from conftest import Setup, small_params


def test_ciphertext_round_trip(s: Setup, rng: np.random.Generator) -> None:
    v = rng.uniform(-1, 1, 256)
    ct = s.enc(v)
    data = ct.to_bytes()
    assert isinstance(data, bytes)
    back = heloom.Ciphertext.from_bytes(s.ctx, data)
    assert (back.level, back.scale, back.size, back.slots) == (
        ct.level,
        ct.scale,
        ct.size,
        ct.slots,
    )
    np.testing.assert_array_equal(
        s.ctx.decrypt(back, s.sk, real=True), s.ctx.decrypt(ct, s.sk, real=True)
    )
    # The reloaded ciphertext computes like the original.
    prod = back * back
    assert np.abs(s.ctx.decrypt(prod, s.sk, real=True)[:256] - v * v).max() < s.tol


def test_seeded_ciphertext_is_half_size(s: Setup, rng: np.random.Generator) -> None:
    v = rng.uniform(-1, 1, 64)
    sym = s.ctx.encrypt(v, s.sk)
    asym = s.enc(v)
    assert sym.is_seeded
    assert not asym.is_seeded
    ratio = len(sym.to_bytes()) / len(asym.to_bytes())
    assert 0.45 < ratio < 0.55
    back = heloom.Ciphertext.from_bytes(s.ctx, sym.to_bytes())
    assert np.abs(s.ctx.decrypt(back, s.sk, real=True)[:64] - v).max() < s.tol


def test_keys_plaintext_params_round_trip(s: Setup, rng: np.random.Generator) -> None:
    v = rng.uniform(-1, 1, 32)
    params = heloom.CkksParameters.from_bytes(s.params.to_bytes())
    assert params.fingerprint == s.params.fingerprint
    pk = heloom.PublicKey.from_bytes(s.ctx, s.pk.to_bytes())
    ct = s.ctx.encrypt(v, pk)
    assert np.abs(s.ctx.decrypt(ct, s.sk, real=True)[:32] - v).max() < s.tol
    ek = heloom.EvaluationKeys.from_bytes(s.ctx, s.keys.evaluation_keys.to_bytes())
    ev = s.ctx.evaluator(ek)
    rot = ev.rotate(ct, 1)
    assert np.abs(s.ctx.decrypt(rot, s.sk, real=True)[:31] - v[1:]).max() < s.tol
    pt = s.ctx.encode(v)
    back = heloom.Plaintext.from_bytes(s.ctx, pt.to_bytes())
    np.testing.assert_array_equal(s.ctx.decode(back), s.ctx.decode(pt))
    # A server rebuilds the client's context from the parameter bytes alone.
    server = heloom.Context(params)
    ct2 = heloom.Ciphertext.from_bytes(server, ct.to_bytes())
    assert ct2.level == ct.level


def test_bad_bytes_raise_format_error(s: Setup, rng: np.random.Generator) -> None:
    data = s.enc(rng.uniform(-1, 1, 16)).to_bytes()
    with pytest.raises(heloom.FormatError):
        heloom.Ciphertext.from_bytes(s.ctx, b"")
    with pytest.raises(heloom.FormatError):
        heloom.Ciphertext.from_bytes(s.ctx, b"XXXX" + data[4:])
    with pytest.raises(heloom.FormatError):
        heloom.Ciphertext.from_bytes(s.ctx, data[: len(data) // 2])
    with pytest.raises(heloom.FormatError):
        heloom.Ciphertext.from_bytes(s.ctx, data + b"\0")
    with pytest.raises(heloom.FormatError):
        heloom.CkksParameters.from_bytes(data)  # a ciphertext is not a parameter set
    with pytest.raises(heloom.HeloomError):
        heloom.PublicKey.from_bytes(s.ctx, data)
    # The report: the last 8 bytes overwritten with 0xff.
    with pytest.raises(heloom.FormatError, match="checksum mismatch"):
        heloom.Ciphertext.from_bytes(s.ctx, data[:-8] + b"\xff" * 8)
    # Any single bit flip is refused (the checksum covers header and payload).
    for _ in range(200):
        b = bytearray(data)
        i = int(rng.integers(0, len(b)))
        b[i] ^= 1 << int(rng.integers(0, 8))
        with pytest.raises(heloom.FormatError):
            heloom.Ciphertext.from_bytes(s.ctx, bytes(b))


def test_other_parameters_are_refused(s: Setup) -> None:
    other = heloom.Context(small_params(s.word_bits, levels=1))
    ct = other.encrypt(np.ones(4), other.keygen().public_key)
    with pytest.raises(heloom.ParameterError):
        heloom.Ciphertext.from_bytes(s.ctx, ct.to_bytes())


# ----- secret keys -----


def test_secret_key_round_trip_and_refusal(s: Setup, rng: np.random.Generator) -> None:
    v = rng.uniform(-1, 1, 32)
    data = s.sk.to_bytes()
    back = heloom.SecretKey.from_bytes(s.ctx, data)
    assert back.to_bytes() == data
    ct = s.enc(v)
    np.testing.assert_array_equal(
        s.ctx.decrypt(ct, back, real=True), s.ctx.decrypt(ct, s.sk, real=True)
    )
    # A server never takes a secret key for a public object.
    for load in (
        lambda b: heloom.PublicKey.from_bytes(s.ctx, b),
        lambda b: heloom.EvaluationKeys.from_bytes(s.ctx, b),
        lambda b: heloom.Ciphertext.from_bytes(s.ctx, b),
        lambda b: heloom.Plaintext.from_bytes(s.ctx, b),
        heloom.CkksParameters.from_bytes,
    ):
        with pytest.raises(heloom.FormatError, match="never leaves the client"):
            load(data)
    with pytest.raises(heloom.FormatError, match="not a SecretKey"):
        heloom.SecretKey.from_bytes(s.ctx, s.pk.to_bytes())


# ----- every byte checked -----

#: Tiny parameters (N = 2^10, one level, security opted out) for exhaustive bit flips.
TINY = {
    64: heloom.CkksParameters(
        poly_degree=2**10, levels=1, scale_bits=40, word_bits=64, security=None
    ),
    32: heloom.CkksParameters(
        poly_degree=2**10, levels=1, scale_bits=25, word_bits=32, security=None
    ),
}


def tiny_objects(word_bits: int) -> tuple[heloom.Context, dict[str, tuple[bytes, object]]]:
    """Valid small objects of every kind, as ``name -> (bytes, loader)``."""
    params = TINY[word_bits]
    ctx = heloom.Context(params)
    keys = ctx.keygen(rotations=[1], conjugate=False)
    v = np.array([0.5, -0.25, 0.125, 1.0])
    return ctx, {
        "params": (params.to_bytes(), heloom.CkksParameters.from_bytes),
        "ciphertext": (
            ctx.encrypt(v, keys.public_key).to_bytes(),
            lambda b: heloom.Ciphertext.from_bytes(ctx, b),
        ),
        "seeded ciphertext": (
            ctx.encrypt(v, keys.secret_key).to_bytes(),
            lambda b: heloom.Ciphertext.from_bytes(ctx, b),
        ),
        "plaintext": (ctx.encode(v).to_bytes(), lambda b: heloom.Plaintext.from_bytes(ctx, b)),
        "public key": (
            keys.public_key.to_bytes(),
            lambda b: heloom.PublicKey.from_bytes(ctx, b),
        ),
        "secret key": (
            keys.secret_key.to_bytes(),
            lambda b: heloom.SecretKey.from_bytes(ctx, b),
        ),
        "evaluation keys": (
            keys.evaluation_keys.to_bytes(),
            lambda b: heloom.EvaluationKeys.from_bytes(ctx, b),
        ),
    }


@pytest.mark.parametrize("word_bits", [64, 32])
def test_every_single_bit_flip_is_refused(word_bits: int) -> None:
    _, objects = tiny_objects(word_bits)
    flips = 0
    for name, (data, load) in objects.items():
        load(data)
        b = bytearray(data)
        for i in range(len(b)):
            for bit in range(8):
                b[i] ^= 1 << bit
                try:
                    load(bytes(b))
                except heloom.FormatError:
                    pass
                else:
                    pytest.fail(f"{name}: flipping bit {bit} of byte {i} still loaded")
                b[i] ^= 1 << bit
                flips += 1
    assert flips > 500_000


def test_random_corruptions_and_splices(s: Setup, rng: np.random.Generator) -> None:
    """Flips, overwrites, truncations, extensions and splices of two valid objects of the same
    kind: each raises FormatError or loads as one of the originals."""
    v = rng.uniform(-1, 1, 64)
    kinds = {
        "ciphertext": ([s.enc(v).to_bytes(), s.enc(v).to_bytes()], heloom.Ciphertext),
        "plaintext": ([s.ctx.encode(v).to_bytes(), s.ctx.encode(-v).to_bytes()], heloom.Plaintext),
        "public key": ([s.pk.to_bytes(), s.ctx.keygen().public_key.to_bytes()], heloom.PublicKey),
    }
    for name, (pair, cls) in kinds.items():
        a, other = pair
        for trial in range(300):
            b = bytearray(a)
            op = trial % 5
            i = int(rng.integers(0, len(b)))
            if op == 0:
                b[i] ^= 1 << int(rng.integers(0, 8))
            elif op == 1:
                b[i] = (b[i] + int(rng.integers(1, 256))) % 256
            elif op == 2:
                del b[i:]
            elif op == 3:
                b[i:i] = rng.integers(0, 256, int(rng.integers(1, 64)), dtype=np.uint8).tobytes()
            else:
                j = int(rng.integers(0, len(other)))
                b = bytearray(a[:i] + other[j:])
            try:
                got = cls.from_bytes(s.ctx, bytes(b)).to_bytes()
            except heloom.FormatError:
                continue
            assert got in (a, other), f"{name}: corruption {op} at {i} loaded as another object"


# ----- version 1 -----

V1 = Path(__file__).resolve().parents[2] / "crates" / "heloom-ckks" / "tests" / "data" / "v1"


def test_version_1_is_refused_then_upgraded() -> None:
    params_v1 = (V1 / "params64.bin").read_bytes()
    with pytest.raises(heloom.FormatError, match="version 1"):
        heloom.CkksParameters.from_bytes(params_v1)
    params = heloom.CkksParameters.from_bytes(heloom.upgrade_v1(params_v1))
    ctx = heloom.Context(params)
    old = (V1 / "plaintext64.bin").read_bytes()
    with pytest.raises(heloom.FormatError, match="upgrade_v1"):
        heloom.Plaintext.from_bytes(ctx, old)
    pt = heloom.Plaintext.from_bytes(ctx, heloom.upgrade_v1(old, ctx))
    np.testing.assert_allclose(ctx.decode(pt, real=True)[:4], [0.5, -0.25, 0.125, 1.0], atol=1e-6)
    ct = heloom.Ciphertext.from_bytes(
        ctx, heloom.upgrade_v1((V1 / "ciphertext64.bin").read_bytes(), ctx)
    )
    assert ct.size == 2
    ek = heloom.EvaluationKeys.from_bytes(
        ctx, heloom.upgrade_v1((V1 / "evaluation_keys64.bin").read_bytes(), ctx)
    )
    assert ek.has_relinearization
    # Version-2 bytes need no upgrade.
    with pytest.raises(heloom.FormatError, match="no upgrade is needed"):
        heloom.upgrade_v1(params.to_bytes())


# ----- task graphs -----


def test_task_graph_round_trip_and_bit_flips(deep: Setup, rng: np.random.Generator) -> None:
    g = heloom.exp_graph(deep.ctx, "bsgs")
    data = g.to_bytes()
    back = heloom.TaskGraph.from_bytes(data)
    assert back.to_bytes() == data
    assert (len(back), back.name, back.num_inputs) == (len(g), g.name, g.num_inputs)
    v = rng.uniform(-1, 1, 64)
    ct = deep.enc(v)
    a = g.run(deep.ev, [ct])[0]
    b = back.run(deep.ev, [ct])[0]
    np.testing.assert_array_equal(deep.ctx.decrypt(a, deep.sk), deep.ctx.decrypt(b, deep.sk))
    flipped = bytearray(data)
    for i in range(len(flipped)):
        for bit in range(8):
            flipped[i] ^= 1 << bit
            with pytest.raises(heloom.FormatError):
                heloom.TaskGraph.from_bytes(bytes(flipped))
            flipped[i] ^= 1 << bit
