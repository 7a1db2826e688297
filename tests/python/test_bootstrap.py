"""Bootstrapping from Python (``heloom.Bootstrapper``) at a small, insecure ring (N = 2^10,
chosen so the test takes about a second), and the 2^16 preset's parameters.

Bound: the Rust tests measure 2^-25 to 2^-26.5 at these settings; 2^-18 leaves room.
"""

import numpy as np
import pytest

import heloom


def small_params(
    hamming_weight: int | None, *, q0: int = 50, arcsine: int = 0
) -> heloom.CkksParameters:
    # q_0, one computation level, SlotToCoeff (3), EvalMod (8 for K = 8, 2 more for a degree-3
    # arcsine), CoeffToSlot (3).
    bits = [q0, 40] + [45] * 3 + [60] * (11 + arcsine)
    return heloom.CkksParameters(
        1 << 10,
        prime_bits=bits,
        special_bits=60,
        hamming_weight=hamming_weight,
        security=None,
    )


@pytest.mark.parametrize(
    ("dense", "fewer_keys", "compact"),
    [(False, False, False), (True, False, False), (False, True, False), (False, False, True)],
)
def test_bootstrapping_restores_the_values(dense: bool, fewer_keys: bool, compact: bool) -> None:
    ctx = heloom.Context(small_params(None if dense else 16))
    boot = heloom.Bootstrapper(
        ctx,
        sparse_weight=16 if dense else None,
        fewer_keys=fewer_keys,
        compact_diagonals=compact,
    )
    assert boot.output_level == 1
    assert boot.sparse_weight == (16 if dense else None)
    assert f"fewer_keys={fewer_keys}" in repr(boot)
    assert f"compact_diagonals={compact}" in repr(boot)
    if fewer_keys:
        # Power-of-two baby steps only: fewer keys than the hoisted baby steps need.
        full = heloom.Bootstrapper(ctx, sparse_weight=16 if dense else None)
        assert len(boot.rotations) < len(full.rotations)
    keys = ctx.keygen(rotations=boot.rotations, conjugate=True)
    boot.set_keys(keys)
    rng = np.random.default_rng(5)
    z = rng.uniform(-1, 1, ctx.slots) + 1j * rng.uniform(-1, 1, ctx.slots)
    ct = ctx.encrypt(z, keys.public_key)
    low = ctx.evaluator(keys.evaluation_keys).drop_to_level(ct, 0)
    out = boot.bootstrap(low)
    assert out.level == 1
    got = ctx.decrypt(out, keys.secret_key)
    assert np.max(np.abs(got - z)) < 2.0**-18


def test_a_dense_secret_needs_encapsulation_and_its_keys() -> None:
    ctx = heloom.Context(small_params(None))
    with pytest.raises(heloom.InputError, match="sparse_weight"):
        heloom.Bootstrapper(ctx)
    boot = heloom.Bootstrapper(ctx, sparse_weight=16)
    keys = ctx.keygen(rotations=boot.rotations, conjugate=True)
    ct = ctx.encrypt(np.zeros(ctx.slots), keys.public_key)
    with pytest.raises(heloom.InputError, match="set_keys"):
        boot.bootstrap(ct)


def test_the_preset() -> None:
    p = heloom.CkksParameters.bootstrappable(16)
    assert p.poly_degree == 1 << 16
    assert p.security == 128
    assert p.log_qp <= 1747
    with pytest.raises(heloom.ParameterError, match="2\\^15"):
        heloom.CkksParameters.bootstrappable(14)


def test_ensure_levels_bootstraps_only_when_the_levels_run_out() -> None:
    ctx = heloom.Context(small_params(16))
    boot = heloom.Bootstrapper(ctx)
    keys = ctx.keygen(rotations=boot.rotations, conjugate=True)
    rng = np.random.default_rng(9)
    z = rng.uniform(-1, 1, ctx.slots)
    ct = ctx.encrypt(z, keys.public_key)
    ev = ctx.evaluator(keys.evaluation_keys)
    # Enough levels: the very same ciphertext back.
    assert boot.ensure_levels(ct, 1) is ct
    low = ev.drop_to_level(ct, 0)
    fresh = boot.ensure_levels(low, 1)
    assert fresh.level == boot.output_level == 1
    assert np.max(np.abs(ctx.decrypt(fresh, keys.secret_key).real - z)) < 2.0**-18
    with pytest.raises(heloom.LevelError, match="split it"):
        boot.ensure_levels(low, 2)


def test_the_arcsine_correction_with_the_message_near_q0() -> None:
    # The N = 2^16 preset's EvalMod at N = 2^10: a 60-bit q_0, the message brought to q_0 / 2^4,
    # the sine's cubic term undone by a degree-3 arcsine (2 more levels).
    ctx = heloom.Context(small_params(16, q0=60, arcsine=2))
    boot = heloom.Bootstrapper(ctx, arcsine_degree=3, message_ratio_bits=4)
    assert boot.output_level == 1
    keys = ctx.keygen(rotations=boot.rotations, conjugate=True)
    rng = np.random.default_rng(7)
    z = rng.uniform(-1, 1, ctx.slots) + 1j * rng.uniform(-1, 1, ctx.slots)
    low = ctx.evaluator(keys.evaluation_keys).drop_to_level(ctx.encrypt(z, keys.public_key), 0)
    out = boot.bootstrap(low)
    assert np.max(np.abs(ctx.decrypt(out, keys.secret_key) - z)) < 2.0**-18
    with pytest.raises(heloom.InputError, match="odd"):
        heloom.Bootstrapper(ctx, arcsine_degree=2)


def test_sparse_packing_bootstraps_fewer_slots() -> None:
    # 64 of the 512 slots, with the arcsine correction (fewer slots make larger coefficients,
    # whose sine error it removes): smaller transforms, one EvalMod, the same bound.
    ctx = heloom.Context(small_params(16, q0=60, arcsine=2))
    boot = heloom.Bootstrapper(ctx, arcsine_degree=3, message_ratio_bits=4, slots=64)
    assert boot.slots == 64
    assert "slots=64" in repr(boot)
    keys = ctx.keygen(rotations=boot.rotations, conjugate=True)
    rng = np.random.default_rng(9)
    z = rng.uniform(-1, 1, 64) + 1j * rng.uniform(-1, 1, 64)
    ct = ctx.encrypt(z, keys.public_key)
    assert ct.slots == 64
    low = ctx.evaluator(keys.evaluation_keys).drop_to_level(ct, 0)
    out = boot.bootstrap(low)
    assert out.level == 1
    assert out.slots == 64
    assert np.max(np.abs(ctx.decrypt(out, keys.secret_key) - z)) < 2.0**-18
    full = ctx.encrypt(rng.uniform(-1, 1, ctx.slots), keys.public_key)
    with pytest.raises(heloom.InputError, match="with_slots"):
        boot.bootstrap(full)
    with pytest.raises(heloom.InputError, match="power-of-two slot count"):
        heloom.Bootstrapper(ctx, arcsine_degree=3, message_ratio_bits=4, slots=4)
