"""CkksParameters: construction, properties, the security check, summary."""

from __future__ import annotations

import math

import pytest

import heloom


def test_defaults_64() -> None:
    p = heloom.CkksParameters(poly_degree=2**13, levels=2)
    assert p.poly_degree == 8192
    assert p.slots == 4096
    assert p.levels == 2
    assert p.word_bits == 64
    assert p.scale == 2.0**40
    assert p.scale_bits == 40
    assert p.security == 128
    assert p.estimated_security == 128
    assert p.hamming_weight is None
    assert len(p.moduli) == 3
    assert len(p.special_moduli) == p.alpha >= 1
    assert p.dnum == math.ceil(len(p.moduli) / p.alpha)
    assert p.log_q == pytest.approx(sum(math.log2(q) for q in p.moduli))
    assert p.log_qp == pytest.approx(p.log_q + sum(math.log2(q) for q in p.special_moduli))
    assert p.log_qp <= 218  # the HE standard's 128-bit bound for N = 2^13
    # Scaling primes sit near 2^40; q_0 has 50 bits.
    assert all(abs(math.log2(q) - 40) < 0.01 for q in p.moduli[1:])
    assert p.moduli[0].bit_length() == 50
    assert all(q % (2 * 8192) == 1 for q in p.moduli + p.special_moduli)
    assert p.sigma == pytest.approx(3.2, abs=0.1)
    assert isinstance(p.backend, str)
    assert p.backend
    # The backend is the context's choice: the default one, or scalar on request; objects move
    # between them (same parameters, same fingerprint) and decrypt the same.
    fast = heloom.Context(p)
    assert fast.backend == p.backend
    slow = heloom.Context(p, backend="scalar")
    assert slow.backend == "scalar"
    keys = fast.keygen()
    ct = fast.encrypt([0.5, -0.25], keys.public_key)
    moved = heloom.Ciphertext.from_bytes(slow, ct.to_bytes())
    got = slow.decrypt(moved, keys.secret_key, real=True)[:2]
    assert got == pytest.approx([0.5, -0.25], abs=1e-6)
    with pytest.raises(heloom.HeloomError, match="backend"):
        heloom.Context(p, backend="neon")
    assert isinstance(p.fingerprint, int)


def test_defaults_32() -> None:
    p = heloom.CkksParameters(poly_degree=2**13, levels=4, word_bits=32)
    assert p.word_bits == 32
    assert p.scale == 2.0**28  # the 32-bit default
    assert all(q < 2**31 for q in p.moduli + p.special_moduli)


def test_contract_example_parameters() -> None:
    p = heloom.CkksParameters(poly_degree=2**14, levels=7, scale_bits=40, word_bits=64)
    assert (p.poly_degree, p.levels, p.scale_bits, p.security) == (16384, 7, 40, 128)
    assert p.log_qp <= 438


def test_explicit_options() -> None:
    p = heloom.CkksParameters(
        poly_degree=2**13,
        prime_bits=[45, 36, 36],
        special_bits=45,
        dnum=3,
        word_bits=64,
        scale_bits=36,
    )
    assert [q.bit_length() for q in p.moduli] == [45, 36, 36]
    assert [q.bit_length() for q in p.special_moduli] == [45]
    assert p.dnum == 3
    assert p.alpha == 1
    p = heloom.CkksParameters(2**13, 2, 40, first_bits=45, special_count=1)
    assert p.moduli[0].bit_length() == 45
    assert p.alpha == 1


def test_security_levels() -> None:
    p = heloom.CkksParameters(poly_degree=2**13, levels=1, scale_bits=30, security=192)
    assert p.security == 192
    assert p.log_qp <= 152
    p = heloom.CkksParameters(poly_degree=2**13, levels=1, scale_bits=30, security=256)
    assert p.security == 256
    assert p.log_qp <= 118
    with pytest.raises(heloom.ParameterError):
        heloom.CkksParameters(poly_degree=2**13, levels=2, security=256)
    for bad in (100, 0, -128):
        with pytest.raises(heloom.ParameterError, match="security"):
            heloom.CkksParameters(poly_degree=2**13, levels=1, security=bad)


def test_insecure_raises_parameter_error() -> None:
    with pytest.raises(heloom.ParameterError, match="insecure"):
        heloom.CkksParameters(poly_degree=2**13, levels=6, scale_bits=40)
    with pytest.raises(heloom.ParameterError, match="insecure"):
        heloom.Context(heloom.CkksParameters(poly_degree=2**12, levels=3))


def test_security_none_opts_out() -> None:
    p = heloom.CkksParameters(poly_degree=2**12, levels=3, security=None)
    assert p.security is None
    assert p.estimated_security is None  # beyond the table's 128-bit bound
    assert "INSECURE" in p.summary()
    heloom.Context(p)  # usable


def test_hamming_weight() -> None:
    p = heloom.CkksParameters(poly_degree=2**13, levels=2, hamming_weight=4096)
    assert p.hamming_weight == 4096
    with pytest.raises(heloom.ParameterError, match="sparse"):
        heloom.CkksParameters(poly_degree=2**13, levels=2, hamming_weight=64)
    p = heloom.CkksParameters(poly_degree=2**13, levels=2, hamming_weight=64, security=None)
    assert p.hamming_weight == 64


@pytest.mark.parametrize(
    "kwargs",
    [
        {"poly_degree": 3000},
        {"poly_degree": 2**9},
        {"poly_degree": 2**18},
        {"poly_degree": 2**13, "word_bits": 16},
        {"poly_degree": 2**13, "scale_bits": 62},
        {"poly_degree": 2**13, "scale_bits": 32, "word_bits": 32},  # 32-bit primes < 2^31
        {"poly_degree": 2**13, "prime_bits": []},
        {"poly_degree": 2**13, "levels": -1},
        {"poly_degree": 2**13, "dnum": 0},
        {"poly_degree": 2**13, "levels": 2, "dnum": 9},
        {"poly_degree": 2**13, "special_count": 0},
        {"poly_degree": 2**13, "hamming_weight": 0},
    ],
)
def test_invalid_parameters(kwargs: dict) -> None:
    with pytest.raises(heloom.ParameterError):
        heloom.CkksParameters(**kwargs)


def test_summary_and_repr() -> None:
    p = heloom.CkksParameters(poly_degree=2**13, levels=2)
    text = p.summary()
    assert text == str(p)
    assert text.startswith("CKKS parameters")
    assert "poly degree N      8192" in text
    assert "levels             2" in text
    assert "128-bit required" in text
    assert repr(p) == (
        "CkksParameters(poly_degree=8192, levels=2, scale_bits=40, word_bits=64, "
        f"dnum={p.dnum}, security=128)"
    )


def test_equality_and_context_params() -> None:
    a = heloom.CkksParameters(poly_degree=2**13, levels=2)
    b = heloom.CkksParameters(poly_degree=2**13, levels=2)
    c = heloom.CkksParameters(poly_degree=2**13, levels=1)
    assert a == b
    assert hash(a) == hash(b)
    assert a != c
    ctx = heloom.Context(a)
    assert ctx.params == a
    assert ctx.word_bits == 64
    assert ctx.slots == 4096
    assert repr(ctx) == "Context(poly_degree=8192, levels=2, word_bits=64)"
