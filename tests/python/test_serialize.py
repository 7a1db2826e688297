"""Serialization from Python: round trips that decrypt to the same values, and bad bytes."""

from __future__ import annotations

import contextlib

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
    # Random mutations never crash: either an error or (coefficient bits) a valid object.
    for _ in range(200):
        b = bytearray(data)
        i = int(rng.integers(0, len(b)))
        b[i] ^= 1 << int(rng.integers(0, 8))
        with contextlib.suppress(heloom.HeloomError):
            heloom.Ciphertext.from_bytes(s.ctx, bytes(b))


def test_other_parameters_are_refused(s: Setup) -> None:
    other = heloom.Context(small_params(s.word_bits, levels=1))
    ct = other.encrypt(np.ones(4), other.keygen().public_key)
    with pytest.raises(heloom.ParameterError):
        heloom.Ciphertext.from_bytes(s.ctx, ct.to_bytes())
