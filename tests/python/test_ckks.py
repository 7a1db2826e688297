"""Encryption, every evaluator operation and every Ciphertext operator, checked against numpy.

Bounds: 64-bit words at scale 2^40 within 2^-20, 32-bit words at scale 2^28 within 2^-10
(results after at most one multiplication); see ``conftest.TOL``.
"""

from __future__ import annotations

import numpy as np
import pytest

import heloom

from conftest import ROTATIONS, Setup, max_err, run_example

N_VALUES = 64


@pytest.fixture
def x(rng: np.random.Generator) -> np.ndarray:
    return rng.uniform(-1.0, 1.0, N_VALUES)


@pytest.fixture
def y(rng: np.random.Generator) -> np.ndarray:
    rng.uniform(size=N_VALUES)  # decorrelate from x
    return rng.uniform(-1.0, 1.0, N_VALUES)


@pytest.fixture
def z(rng: np.random.Generator) -> np.ndarray:
    re = rng.uniform(-1.0, 1.0, N_VALUES)
    im = rng.uniform(-1.0, 1.0, N_VALUES)
    return re + 1j * im


# ---------------------------------------------------------------- encryption and encoding


def test_public_key_roundtrip(s: Setup, x: np.ndarray) -> None:
    ct = s.enc(x)
    assert ct.level == s.params.levels
    assert ct.scale == s.params.scale
    assert ct.size == 2
    assert ct.slots == N_VALUES
    assert ct.word_bits == s.word_bits
    assert not ct.is_seeded
    out = s.ctx.decrypt(ct, s.sk)
    assert out.dtype == np.complex128
    assert out.shape == (N_VALUES,)
    assert max_err(out, x) < s.tol
    real = s.ctx.decrypt(ct, s.sk, real=True)
    assert real.dtype == np.float64
    assert max_err(real, x) < s.tol


def test_secret_key_roundtrip(s: Setup, x: np.ndarray) -> None:
    ct = s.ctx.encrypt(x, s.sk)
    assert ct.is_seeded
    assert ct.level == s.params.levels
    assert max_err(s.dec(ct, N_VALUES), x) < s.tol


def test_complex_roundtrip(s: Setup, z: np.ndarray) -> None:
    for key in (s.pk, s.sk):
        ct = s.ctx.encrypt(z, key)
        assert max_err(s.dec(ct, N_VALUES), z) < s.tol


def test_lists_ints_and_padding(s: Setup) -> None:
    ct = s.ctx.encrypt([1, 2, 3], s.pk)
    assert ct.slots == 4  # padded to a power of two
    assert max_err(s.dec(ct, 4), [1, 2, 3, 0]) < s.tol
    ct = s.ctx.encrypt(np.array([-3, 5], dtype=np.int64), s.pk)
    assert max_err(s.dec(ct, 2), [-3, 5]) < s.tol
    ct = s.ctx.encrypt(np.array([True, False]), s.pk)
    assert max_err(s.dec(ct, 2), [1, 0]) < s.tol
    ct = s.ctx.encrypt(np.arange(8, dtype=np.float32) / 8, s.pk)
    assert max_err(s.dec(ct, 8), np.arange(8) / 8) < s.tol


#: Fully packed ciphertexts after public-key encryption or a rotation: the same stated bound
#: (the centered mod-down keeps that noise unbiased; test_full_slots_stated_bound checks it).
FULL_SLOTS_SLACK = 1


def test_full_slots(s: Setup, rng: np.random.Generator) -> None:
    v = rng.uniform(-1, 1, s.params.slots)
    ct = s.ctx.encrypt(v, s.sk)
    assert ct.slots == s.params.slots
    assert max_err(s.ctx.decrypt(ct, s.sk, real=True), v) < s.tol
    ct = s.enc(v)
    assert max_err(s.ctx.decrypt(ct, s.sk, real=True), v) < FULL_SLOTS_SLACK * s.tol


def test_full_slots_stated_bound(s: Setup, rng: np.random.Generator) -> None:
    v = rng.uniform(-1, 1, s.params.slots)
    for _ in range(4):
        assert max_err(s.ctx.decrypt(s.enc(v), s.sk, real=True), v) < s.tol
        rot = s.ev.rotate(s.ctx.encrypt(v, s.sk), 1)
        assert max_err(s.ctx.decrypt(rot, s.sk, real=True), np.roll(v, -1)) < s.tol


def test_encode_decode(s: Setup, x: np.ndarray, z: np.ndarray) -> None:
    pt = s.ctx.encode(x)
    assert pt.level == s.params.levels
    assert pt.scale == s.params.scale
    assert pt.slots == N_VALUES
    assert pt.word_bits == s.word_bits
    assert max_err(s.ctx.decode(pt), x) < s.tol
    assert s.ctx.decode(pt, real=True).dtype == np.float64
    pt = s.ctx.encode(z, level=1, scale=2.0**20)
    assert (pt.level, pt.scale) == (1, 2.0**20)
    assert max_err(s.ctx.decode(pt), z) < 2.0**-10


def test_encrypt_plaintext(s: Setup, x: np.ndarray) -> None:
    pt = s.ctx.encode(x, level=1)
    ct = s.ctx.encrypt(pt, s.pk)
    assert ct.level == 1
    assert max_err(s.dec(ct, N_VALUES), x) < s.tol
    with pytest.raises(TypeError):
        s.ctx.encrypt(pt, s.sk)


# ---------------------------------------------------------------- additive operations


def test_add_sub_ciphertexts(s: Setup, x: np.ndarray, y: np.ndarray) -> None:
    a, b = s.enc(x), s.enc(y)
    assert max_err(s.dec(s.ev.add(a, b), N_VALUES), x + y) < s.tol
    assert max_err(s.dec(s.ev.sub(a, b), N_VALUES), x - y) < s.tol
    assert max_err(s.dec(s.ev.negate(a), N_VALUES), -x) < s.tol


@pytest.mark.parametrize("c", [3, -2, 0.375, -1.5, 0.25 - 0.5j, np.float64(0.5), np.int32(2)])
def test_add_sub_scalars(s: Setup, x: np.ndarray, c: complex) -> None:
    a = s.enc(x)
    got = s.ev.add(a, c)
    assert got.level == a.level
    assert got.scale == a.scale
    assert max_err(s.dec(got, N_VALUES), x + c) < s.tol
    assert max_err(s.dec(s.ev.sub(a, c), N_VALUES), x - c) < s.tol
    assert max_err(s.dec(s.ev.add_const(a, c), N_VALUES), x + c) < s.tol


def test_add_sub_arrays_and_plaintexts(s: Setup, x: np.ndarray, y: np.ndarray, z) -> None:
    a = s.enc(x)
    for v in (y, z, list(y)):
        want = x + np.asarray(v)
        assert max_err(s.dec(s.ev.add(a, v), N_VALUES), want) < s.tol
        assert max_err(s.dec(s.ev.add_plain(a, v), N_VALUES), want) < s.tol
        assert max_err(s.dec(s.ev.sub(a, v), N_VALUES), x - np.asarray(v)) < s.tol
        assert max_err(s.dec(s.ev.sub_plain(a, v), N_VALUES), x - np.asarray(v)) < s.tol
    pt = s.ctx.encode(y)
    assert max_err(s.dec(s.ev.add_plain(a, pt), N_VALUES), x + y) < s.tol
    assert max_err(s.dec(s.ev.sub_plain(a, pt), N_VALUES), x - y) < s.tol
    assert max_err(s.dec(s.ev.add(a, pt), N_VALUES), x + y) < s.tol
    # Fewer values than slots: zero-padded.
    assert max_err(s.dec(s.ev.add(a, [1.0, 2.0]), 3), x[:3] + np.array([1.0, 2.0, 0.0])) < s.tol


# ---------------------------------------------------------------- multiplicative operations


def test_multiply_relinearize_rescale(s: Setup, x: np.ndarray, y: np.ndarray) -> None:
    a, b = s.enc(x), s.enc(y)
    m = s.ev.multiply(a, b)
    assert m.size == 3
    assert m.level == a.level
    assert m.scale == pytest.approx(a.scale * b.scale, rel=1e-12)
    # A size-3 ciphertext decrypts too.
    assert max_err(s.dec(m, N_VALUES), x * y) < s.tol
    r = s.ev.relinearize(m)
    assert r.size == 2
    assert r.level == a.level
    assert max_err(s.dec(r, N_VALUES), x * y) < s.tol
    q = s.ev.rescale(r)
    last = s.params.moduli[a.level]
    assert q.level == a.level - 1
    assert q.scale == pytest.approx(a.scale * b.scale / last, rel=1e-12)
    assert max_err(s.dec(q, N_VALUES), x * y) < s.tol
    mrr = s.ev.multiply_relin_rescale(a, b)
    assert (mrr.level, mrr.size) == (q.level, 2)
    assert max_err(s.dec(mrr, N_VALUES), x * y) < s.tol
    # Relinearize and rescale merged into one mod-down: the same level, scale and values.
    merged = s.ev.relinearize_rescale(m)
    assert (merged.level, merged.size) == (q.level, 2)
    assert merged.scale == pytest.approx(q.scale, rel=1e-12)
    assert max_err(s.dec(merged, N_VALUES), x * y) < s.tol
    # A size-2 ciphertext is only rescaled.
    assert s.ev.relinearize_rescale(r).level == q.level


def test_square(s: Setup, x: np.ndarray) -> None:
    a = s.enc(x)
    sq = s.ev.square(a)
    assert sq.size == 3
    out = s.ev.rescale(s.ev.relinearize(sq))
    assert max_err(s.dec(out, N_VALUES), x * x) < s.tol


def test_complex_multiply(s: Setup, z: np.ndarray, x: np.ndarray) -> None:
    a, b = s.enc(z), s.enc(x)
    out = s.ev.multiply_relin_rescale(a, b)
    assert max_err(s.dec(out, N_VALUES), z * x) < s.tol


def test_multiply_plain_values(s: Setup, x: np.ndarray, y: np.ndarray, z) -> None:
    a = s.enc(x)
    for v in (y, z):
        m = s.ev.multiply_plain(a, v)
        assert m.level == a.level
        assert m.scale == pytest.approx(a.scale * s.params.moduli[a.level], rel=1e-12)
        r = s.ev.rescale(m)
        assert r.scale == pytest.approx(a.scale, rel=1e-12)
        assert max_err(s.dec(r, N_VALUES), x * v) < s.tol
        r = s.ev.rescale(s.ev.multiply_values(a, v))
        assert max_err(s.dec(r, N_VALUES), x * v) < s.tol


def test_multiply_plain_plaintext(s: Setup, x: np.ndarray, y: np.ndarray) -> None:
    a = s.enc(x)
    pt = s.ctx.encode(y)
    m = s.ev.multiply_plain(a, pt)
    assert m.scale == pytest.approx(a.scale * pt.scale, rel=1e-12)
    r = s.ev.rescale(m)
    assert max_err(s.dec(r, N_VALUES), x * y) < s.tol


@pytest.mark.parametrize("c", [0.5, -1.75, 3, 0.5 + 0.25j])
def test_multiply_const(s: Setup, x: np.ndarray, c: complex) -> None:
    a = s.enc(x)
    m = s.ev.multiply_const(a, c)
    assert m.level == a.level
    r = s.ev.rescale(m)
    assert r.scale == pytest.approx(a.scale, rel=1e-12)
    assert max_err(s.dec(r, N_VALUES), x * c) < s.tol


@pytest.mark.parametrize("k", [0, 1, 3, -7])
def test_multiply_int(s: Setup, x: np.ndarray, k: int) -> None:
    a = s.enc(x)
    m = s.ev.multiply_int(a, k)
    assert (m.level, m.scale) == (a.level, a.scale)
    assert max_err(s.dec(m, N_VALUES), x * k) < s.tol * max(1, abs(k))


def test_levels(s: Setup, x: np.ndarray) -> None:
    a = s.enc(x)
    d = s.ev.drop_level(a)
    assert (d.level, d.scale) == (a.level - 1, a.scale)
    assert max_err(s.dec(d, N_VALUES), x) < s.tol
    d0 = s.ev.drop_to_level(a, 0)
    assert d0.level == 0
    assert max_err(s.dec(d0, N_VALUES), x) < s.tol
    assert s.ev.drop_to_level(a, a.level).level == a.level


def test_mixed_levels_and_align(s: Setup, x: np.ndarray, y: np.ndarray) -> None:
    a, b = s.enc(x), s.enc(y)
    ab = s.ev.multiply_relin_rescale(a, b)  # one level down, scale ~ 2^40 but not exactly
    assert ab.level == a.level - 1
    # add: aligned exactly (the higher operand is moved to the lower level's scale).
    out = s.ev.add(ab, a)
    assert out.level == ab.level
    assert max_err(s.dec(out, N_VALUES), x * y + x) < s.tol
    out = s.ev.sub(a, ab)
    assert max_err(s.dec(out, N_VALUES), x - x * y) < s.tol
    p, q = s.ev.align(a, ab)
    assert p.level == q.level == ab.level
    assert s.ev.scales_match(p.scale, q.scale)
    assert max_err(s.dec(p, N_VALUES), x) < s.tol
    # multiply: levels aligned by dropping.
    out = s.ev.multiply_relin_rescale(ab, a)
    assert out.level == ab.level - 1
    assert max_err(s.dec(out, N_VALUES), x * y * x) < 4 * s.tol


# ---------------------------------------------------------------- rotations and conjugation


@pytest.mark.parametrize("step", ROTATIONS)
def test_rotate_each_key(s: Setup, x: np.ndarray, step: int) -> None:
    a = s.enc(x)
    r = s.ev.rotate(a, step)
    assert (r.level, r.scale, r.slots) == (a.level, a.scale, a.slots)
    assert max_err(s.dec(r, N_VALUES), np.roll(x, -step)) < s.tol


def test_rotate_full_slots(s: Setup, rng: np.random.Generator) -> None:
    v = rng.uniform(-1, 1, s.params.slots)
    a = s.ctx.encrypt(v, s.sk)
    bound = FULL_SLOTS_SLACK * s.tol
    for step in (1, -1, 16):
        out = s.ctx.decrypt(s.ev.rotate(a, step), s.sk, real=True)
        assert max_err(out, np.roll(v, -step)) < bound
    # Step 0 (and a whole turn) needs no key.
    assert max_err(s.ctx.decrypt(s.ev.rotate(a, 0), s.sk, real=True), v) < s.tol
    turn = s.ev.rotate(a, s.params.slots)
    assert max_err(s.ctx.decrypt(turn, s.sk, real=True), v) < s.tol


def test_rotate_many_hoisted(s: Setup, x: np.ndarray) -> None:
    a = s.enc(x)
    steps = [1, -1, 8, 0, 3]
    outs = s.ev.rotate_many(a, steps)
    assert isinstance(outs, list)
    assert len(outs) == len(steps)
    for step, r in zip(steps, outs, strict=True):
        assert max_err(s.dec(r, N_VALUES), np.roll(x, -step)) < s.tol


def test_rotate_and_sum(s: Setup, x: np.ndarray) -> None:
    a = s.enc(x)
    assert heloom.Evaluator.rotate_and_sum_steps(8) == [1, 2, 4]
    r = s.ev.rotate_and_sum(a, 8)
    want = sum(np.roll(x, -k) for k in range(8))
    assert max_err(s.dec(r, N_VALUES), want) < 8 * s.tol
    # Summing all 64 slots needs step 32: not generated.
    with pytest.raises(heloom.MissingKeyError):
        s.ev.rotate_and_sum(a, 64)


def test_conjugate(s: Setup, z: np.ndarray) -> None:
    a = s.enc(z)
    c = s.ev.conjugate(a)
    assert max_err(s.dec(c, N_VALUES), np.conj(z)) < s.tol


def test_evaluation_keys_info(s: Setup) -> None:
    ek = s.keys.evaluation_keys
    assert ek.has_relinearization
    assert ek.conjugate
    assert ek.rotations == sorted(ROTATIONS)
    assert len(ek.galois_elements) == len(ROTATIONS) + 1
    assert ek.memory_bytes > 0
    assert ek.word_bits == s.word_bits


# ---------------------------------------------------------------- operators


def test_operators_ciphertexts(s: Setup, x: np.ndarray, y: np.ndarray) -> None:
    a, b = s.enc(x), s.enc(y)
    prod = a * b
    assert (prod.level, prod.size) == (a.level - 1, 2)
    assert prod.scale == pytest.approx(s.params.scale, rel=0.01)
    assert max_err(s.dec(prod, N_VALUES), x * y) < s.tol
    assert max_err(s.dec(a + b, N_VALUES), x + y) < s.tol
    assert max_err(s.dec(a - b, N_VALUES), x - y) < s.tol
    assert max_err(s.dec(-a, N_VALUES), -x) < s.tol
    assert max_err(s.dec(+a, N_VALUES), x) < s.tol
    # Mixed levels and scales: a * b + a, (a * b) * a.
    assert max_err(s.dec(a * b + a, N_VALUES), x * y + x) < s.tol
    assert max_err(s.dec(a - a * b, N_VALUES), x - x * y) < s.tol
    assert max_err(s.dec((a * b) * a, N_VALUES), x * y * x) < 4 * s.tol


def test_operators_align_same_level_scales(s: Setup, x: np.ndarray, y: np.ndarray) -> None:
    a, b = s.enc(x), s.enc(y)
    prod = a * b  # scale s^2 / q_L: not exactly s
    half = 0.5 * a  # multiply_const at q_L, rescaled: exactly s
    assert prod.level == half.level == a.level - 1
    assert prod.scale != half.scale
    with pytest.raises(heloom.ScaleError):
        s.ev.add(prod, half)  # the evaluator leaves this to the caller
    out = prod + half - y  # the operator spends one level to align
    assert out.level == a.level - 2
    assert out.scale == pytest.approx(prod.scale, rel=1e-12)
    assert max_err(s.dec(out, N_VALUES), x * y + 0.5 * x - y) < s.tol
    out = half - prod
    assert max_err(s.dec(out, N_VALUES), 0.5 * x - x * y) < s.tol


@pytest.mark.parametrize("c", [3, -2, np.int64(5)])
def test_operators_int(s: Setup, x: np.ndarray, c: int) -> None:
    a = s.enc(x)
    for out in (a * c, c * a):
        assert (out.level, out.scale) == (a.level, a.scale)  # exact, no rescale
        assert max_err(s.dec(out, N_VALUES), x * c) < s.tol * abs(c)
    assert max_err(s.dec(a + c, N_VALUES), x + c) < s.tol
    assert max_err(s.dec(c + a, N_VALUES), x + c) < s.tol
    assert max_err(s.dec(a - c, N_VALUES), x - c) < s.tol
    assert max_err(s.dec(c - a, N_VALUES), c - x) < s.tol


@pytest.mark.parametrize("c", [0.5, -1.25, np.float64(0.75), 0.5 - 1j])
def test_operators_float_complex(s: Setup, x: np.ndarray, c: complex) -> None:
    a = s.enc(x)
    for out in (a * c, c * a):
        assert out.level == a.level - 1  # multiply_const + rescale
        assert out.scale == pytest.approx(a.scale, rel=1e-12)
        assert max_err(s.dec(out, N_VALUES), x * c) < s.tol
    assert max_err(s.dec(a + c, N_VALUES), x + c) < s.tol
    assert max_err(s.dec(c + a, N_VALUES), x + c) < s.tol
    assert max_err(s.dec(a - c, N_VALUES), x - c) < s.tol
    assert max_err(s.dec(c - a, N_VALUES), c - x) < s.tol
    out = a / c
    assert max_err(s.dec(out, N_VALUES), x / c) < s.tol / min(1.0, abs(c))


def test_operators_arrays(s: Setup, x: np.ndarray, y: np.ndarray, z: np.ndarray) -> None:
    a = s.enc(x)
    for v in (y, z):
        for out in (a * v, v * a):
            assert isinstance(out, heloom.Ciphertext)
            assert out.level == a.level - 1
            assert out.scale == pytest.approx(a.scale, rel=1e-12)
            assert max_err(s.dec(out, N_VALUES), x * v) < s.tol
        for out in (a + v, v + a):
            assert isinstance(out, heloom.Ciphertext)
            assert max_err(s.dec(out, N_VALUES), x + v) < s.tol
        assert max_err(s.dec(a - v, N_VALUES), x - v) < s.tol
        rs = v - a
        assert isinstance(rs, heloom.Ciphertext)
        assert max_err(s.dec(rs, N_VALUES), v - x) < s.tol
    assert max_err(s.dec(a + list(y), N_VALUES), x + y) < s.tol


def test_operators_plaintext(s: Setup, x: np.ndarray, y: np.ndarray) -> None:
    a = s.enc(x)
    pt = s.ctx.encode(y)
    assert max_err(s.dec(a + pt, N_VALUES), x + y) < s.tol
    assert max_err(s.dec(a - pt, N_VALUES), x - y) < s.tol
    prod = a * pt
    assert prod.level == a.level - 1
    assert max_err(s.dec(prod, N_VALUES), x * y) < s.tol


def test_operators_unsupported(s: Setup, x: np.ndarray) -> None:
    a = s.enc(x)
    with pytest.raises(TypeError):
        a + "1"
    with pytest.raises(TypeError):
        a * None
    with pytest.raises(TypeError):
        a / a
    with pytest.raises(ZeroDivisionError):
        a / 0


def test_operators_use_keygen_keys_without_evaluator(x: np.ndarray, y: np.ndarray) -> None:
    from conftest import TOL, small_params

    ctx = heloom.Context(small_params(64))
    assert ctx.default_evaluator is None
    # No keys at all: additions work, products need the relinearization key.
    other = heloom.Context(small_params(64)).keygen()
    a = ctx.encrypt(x, other.public_key)
    assert max_err(ctx.decrypt(a + a, other.secret_key)[:N_VALUES], 2 * x) < TOL[64]
    keys = ctx.keygen()
    assert ctx.default_evaluator is not None
    assert ctx.default_evaluator.has_keys
    a, b = ctx.encrypt(x, keys.public_key), ctx.encrypt(y, keys.public_key)
    got = ctx.decrypt(a * b, keys.secret_key)[:N_VALUES]
    assert max_err(got, x * y) < TOL[64]


def test_operators_without_any_keys(x: np.ndarray) -> None:
    from conftest import small_params

    p = small_params(64)
    ctx = heloom.Context(p)
    keys = heloom.Context(p).keygen()  # same parameters, another context: compatible
    a = ctx.encrypt(x, keys.public_key)
    assert ctx.default_evaluator is None
    with pytest.raises(heloom.MissingKeyError):
        a * a
    keyless = ctx.evaluator()
    assert not keyless.has_keys
    with pytest.raises(heloom.MissingKeyError):
        keyless.relinearize(keyless.multiply(a, a))


def test_evaluator_results_keep_their_evaluator(s: Setup, x: np.ndarray) -> None:
    # A second key set on the same context: ciphertexts produced by its evaluator use it in
    # operators even though the context's default is another one.
    ctx = s.ctx
    keys2 = ctx.keygen(rotations=[5])
    ev2 = heloom.Evaluator(ctx, keys2.evaluation_keys)
    ctx.evaluator(s.keys.evaluation_keys)  # restore the default to the shared fixture's keys
    a = ev2.add(ctx.encrypt(x, keys2.public_key), 0)
    got = ctx.decrypt(a * a, keys2.secret_key)[:N_VALUES]
    assert max_err(got, x * x) < s.tol
    assert ctx.default_evaluator is not None


def test_numpy_scalar_on_the_left(s: Setup, x: np.ndarray) -> None:
    a = s.enc(x)
    out = np.float64(0.5) * a
    assert isinstance(out, heloom.Ciphertext)
    assert max_err(s.dec(out, N_VALUES), 0.5 * x) < s.tol
    out = np.float64(0.5) + a
    assert isinstance(out, heloom.Ciphertext)
    assert max_err(s.dec(out, N_VALUES), 0.5 + x) < s.tol


# ---------------------------------------------------------------- polynomial evaluation


#: Polynomial evaluation is several multiplications deep: twice the one-multiplication bound.
POLY_SLACK = 2


def test_exp_degree6_power_basis(deep: Setup, rng: np.random.Generator) -> None:
    s = deep
    v = rng.uniform(-1.0, 1.0, 256)
    coeffs = [1.0, 1.0, 1 / 2, 1 / 6, 1 / 24, 1 / 120, 1 / 720]  # e^x, Taylor degree 6
    a = s.enc(v)
    out = s.ev.evaluate_polynomial(a, coeffs)
    depth = heloom.Evaluator.polynomial_depth(6)
    assert depth == 3  # ceil(log2(6 + 1)): optimal
    # At most `depth` levels consumed (see test_polynomial_depth_is_exact).
    assert s.params.levels - depth <= out.level < s.params.levels
    assert out.scale == pytest.approx(a.scale, rel=1e-9)
    got = s.ctx.decrypt(out, s.sk, real=True)[:256]
    want = np.polynomial.polynomial.polyval(v, coeffs)
    assert max_err(got, want) < POLY_SLACK * s.tol
    assert max_err(got, np.exp(v)) < 2e-3  # the Taylor remainder e/7! ~ 5.4e-4, plus noise


def test_chebyshev_basis(deep: Setup, rng: np.random.Generator) -> None:
    s = deep
    lo, hi = -2.0, 3.0
    v = rng.uniform(lo, hi, 256)
    cheb = np.polynomial.Chebyshev.interpolate(np.exp, 6, domain=[lo, hi])
    a = s.enc(v)
    out = s.ev.evaluate_polynomial(a, cheb.coef, basis="chebyshev", interval=(lo, hi))
    depth = heloom.Evaluator.polynomial_depth(6, "chebyshev", (lo, hi))
    assert depth == 4  # one more than on [-1, 1]: the affine map
    assert s.params.levels - depth <= out.level < s.params.levels
    assert out.scale == pytest.approx(a.scale, rel=1e-9)
    got = s.ctx.decrypt(out, s.sk, real=True)[:256]
    # Values up to e^3 ~ 20 and coefficients up to ~8: the bound relative to the magnitude.
    want = cheb(v)
    assert max_err(got, want) < POLY_SLACK * s.tol * np.max(np.abs(want))
    assert max_err(got, np.exp(v)) < 0.05  # interpolation error of degree 6 on [-2, 3]
    # On [-1, 1] (the default interval) no affine map.
    w = rng.uniform(-1.0, 1.0, 256)
    c2 = np.polynomial.Chebyshev.interpolate(np.sin, 5)
    out = s.ev.evaluate_polynomial(s.enc(w), c2.coef, basis="chebyshev")
    assert out.level >= s.params.levels - heloom.Evaluator.polynomial_depth(5, "chebyshev")
    assert max_err(s.ctx.decrypt(out, s.sk, real=True)[:256], c2(w)) < POLY_SLACK * s.tol
    assert max_err(s.ctx.decrypt(out, s.sk, real=True)[:256], np.sin(w)) < 1e-4 + s.tol


@pytest.mark.parametrize(
    "coeffs",
    [[0.5], [0.25, -2.0], [1.0, 0.0, -0.5], [0, 0, 0, 1.0], [0.1, -0.2, 0.3, -0.4, 0.5]],
)
def test_low_degree_polynomials(deep: Setup, x: np.ndarray, coeffs: list[float]) -> None:
    s = deep
    a = s.enc(x)
    out = s.ev.evaluate_polynomial(a, coeffs)
    assert out.level >= s.params.levels - heloom.Evaluator.polynomial_depth(len(coeffs) - 1)
    want = np.polynomial.polynomial.polyval(x, coeffs)
    assert max_err(s.ctx.decrypt(out, s.sk, real=True)[:N_VALUES], want) < POLY_SLACK * s.tol


@pytest.mark.parametrize("degree", [2, 3, 6])
def test_polynomial_depth_is_exact(deep: Setup, x: np.ndarray, degree: int) -> None:
    s = deep
    out = s.ev.evaluate_polynomial(s.enc(x), [0.5] * (degree + 1))
    assert out.level == s.params.levels - heloom.Evaluator.polynomial_depth(degree)


def test_polynomial_errors(s: Setup, x: np.ndarray) -> None:
    a = s.enc(x)
    with pytest.raises(heloom.LevelError):
        s.ev.evaluate_polynomial(a, [1.0] * 32)  # degree 31: more levels than there are
    with pytest.raises(heloom.InputError):
        s.ev.evaluate_polynomial(a, [])
    with pytest.raises(heloom.InputError):
        s.ev.evaluate_polynomial(a, [1.0, float("nan")])
    with pytest.raises(heloom.InputError):
        s.ev.evaluate_polynomial(a, [1.0, 2.0], basis="legendre")
    with pytest.raises(heloom.InputError):
        s.ev.evaluate_polynomial(a, [1.0, 2.0], interval=(0.0, 1.0))  # power basis
    with pytest.raises(heloom.InputError):
        s.ev.evaluate_polynomial(a, [1.0, 2.0], basis="chebyshev", interval=(1.0, 0.0))
    with pytest.raises(heloom.InputError):
        s.ev.evaluate_polynomial(a, [1.0, 2.0j])
    with pytest.raises(heloom.InputError):
        s.ev.evaluate_polynomial(s.ev.multiply(a, a), [1.0, 2.0])  # size 3


# ---------------------------------------------------------------- threads (GIL released)


def test_threads(s: Setup, x: np.ndarray, y: np.ndarray) -> None:
    from concurrent.futures import ThreadPoolExecutor

    a, b = s.enc(x), s.enc(y)

    def work(i: int) -> np.ndarray:
        c = s.ev.rotate(s.ev.multiply_relin_rescale(a, b), 1)
        return s.ctx.decrypt(c, s.sk)[:N_VALUES]

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(work, range(8)))
    for r in results:
        assert max_err(r, np.roll(x * y, -1)) < s.tol


# ---------------------------------------------------------------- the documented flow


def test_contract_example() -> None:
    """The usage the package documents, end to end, at N = 2^14 with 7 levels."""
    params = heloom.CkksParameters(poly_degree=2**14, levels=7, scale_bits=40, word_bits=64)
    ctx = heloom.Context(params)
    keys = ctx.keygen(rotations=[1, -1, 8])
    x = np.linspace(-1.0, 1.0, 100)
    y = np.cos(3 * x)
    a = ctx.encrypt(np.array(x), keys.public_key)
    b = ctx.encrypt(y, keys.secret_key)
    ev = ctx.evaluator(keys.evaluation_keys)
    c = ev.rescale(ev.relinearize(ev.multiply(a, b)))
    assert (c.level, c.size) == (6, 2)
    assert c.scale == pytest.approx(2.0**40, rel=1e-4)
    got = ctx.decrypt(c, keys.secret_key)
    assert got.dtype == np.complex128
    assert max_err(got[:100], x * y) < 2.0**-20
    real = ctx.decrypt(c, keys.secret_key, real=True)
    assert real.dtype == np.float64
    # 100 values occupy 128 slots (zero-padded); a rotation turns all 128.
    rotated = ctx.decrypt(ev.rotate(a, 8), keys.secret_key, real=True)
    assert max_err(rotated, np.roll(np.pad(x, (0, 28)), -8)) < 2.0**-20
    e = ev.evaluate_polynomial(a, [1, 1, 1 / 2, 1 / 6, 1 / 24, 1 / 120, 1 / 720])
    assert max_err(ctx.decrypt(e, keys.secret_key, real=True)[:100], np.exp(x)) < 1e-3


def test_quickstart_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_example("quickstart.py", capsys)
    assert "CKKS parameters" in out
    assert "as expected: missing key" in out
