"""Exceptions: the hierarchy, and each kind of error raised where it should be."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable

import numpy as np
import pytest

import heloom

from conftest import Setup, small_params


def raises_each(exc: type[Exception], *calls: Callable[[], object]) -> None:
    """Asserts that every call raises ``exc`` (a failure names the call's line)."""
    for call in calls:
        try:
            call()
        except exc:
            continue
        pytest.fail(f"line {call.__code__.co_firstlineno}: did not raise {exc.__name__}")


def test_hierarchy() -> None:
    for cls in (
        heloom.ParameterError,
        heloom.FormatError,
        heloom.ScaleError,
        heloom.LevelError,
        heloom.MissingKeyError,
        heloom.InputError,
        heloom.GraphError,
    ):
        assert issubclass(cls, heloom.HeloomError)
        assert cls.__module__ == "heloom"
        assert cls.__doc__
    assert issubclass(heloom.HeloomError, Exception)
    assert issubclass(heloom.InputError, ValueError)
    assert not issubclass(heloom.ParameterError, ValueError)
    assert not issubclass(heloom.GraphError, ValueError)
    err = heloom.InputError("message")
    assert str(err) == "message"


# ---------------------------------------------------------------- missing keys


def test_missing_rotation_key(s: Setup) -> None:
    a = s.enc(np.ones(8))
    with pytest.raises(heloom.MissingKeyError, match="rotation step 5"):
        s.ev.rotate(a, 5)
    with pytest.raises(heloom.MissingKeyError):
        s.ev.rotate_many(a, [1, 5])


def test_missing_conjugation_and_relinearization_keys(s: Setup) -> None:
    keys = s.ctx.keygen(rotations=[1])
    ev = heloom.Evaluator(s.ctx, keys.evaluation_keys)
    s.ctx.evaluator(s.keys.evaluation_keys)  # keep the shared default
    a = s.ctx.encrypt(np.ones(8), keys.public_key)
    with pytest.raises(heloom.MissingKeyError, match="conjugation"):
        ev.conjugate(a)
    keyless = s.ctx.evaluator()
    with pytest.raises(heloom.MissingKeyError):
        keyless.relinearize(keyless.square(a))
    with pytest.raises(heloom.MissingKeyError):
        keyless.rotate(a, 1)


# ---------------------------------------------------------------- mismatched contexts


@pytest.fixture(scope="module")
def other() -> Setup:
    from conftest import make_setup

    params = heloom.CkksParameters(poly_degree=2**13, levels=1, word_bits=64)
    return make_setup(64, params)


def test_mismatched_contexts(s: Setup, other: Setup) -> None:
    a = s.enc(np.ones(8))
    b = other.enc(np.ones(8))
    raises_each(
        heloom.ParameterError,
        lambda: s.ev.add(a, b),
        lambda: s.ev.multiply(a, b),
        lambda: a + b,
        lambda: a * b,
        lambda: other.ev.rotate(a, 1),
        lambda: s.ctx.decrypt(a, other.sk),
        lambda: other.ctx.decrypt(a, other.sk),
        lambda: s.ctx.encrypt(np.ones(4), other.pk),
        lambda: s.ctx.evaluator(other.keys.evaluation_keys),
        lambda: s.ev.add_plain(a, other.ctx.encode(np.ones(8))),
        lambda: s.ctx.decode(other.ctx.encode(np.ones(8))),
    )


def test_same_parameters_interoperate(s: Setup) -> None:
    ctx2 = heloom.Context(s.params)
    a = ctx2.encrypt(np.arange(4.0), s.pk)
    got = s.ctx.decrypt(s.ev.add(a, a), s.sk, real=True)
    assert np.max(np.abs(got - 2 * np.arange(4.0))) < s.tol


# ---------------------------------------------------------------- inputs


@pytest.mark.parametrize(
    "bad",
    [
        np.ones((2, 4)),
        [[1.0, 2.0], [3.0, 4.0]],
        np.ones((1, 1, 1)),
        [],
        np.array([1.0, np.nan]),
        np.array([np.inf]),
        [[1.0], [2.0, 3.0]],  # ragged
        ["a", "b"],
        "abc",
        1.5,
    ],
)
def test_wrong_inputs_encrypt_encode(s: Setup, bad: object) -> None:
    with pytest.raises(heloom.InputError):
        s.ctx.encrypt(bad, s.pk)
    with pytest.raises(heloom.InputError):
        s.ctx.encode(bad)


def test_too_many_values(s: Setup) -> None:
    with pytest.raises(heloom.InputError, match="do not fit"):
        s.ctx.encrypt(np.zeros(s.params.slots + 1), s.pk)
    with pytest.raises(ValueError, match="do not fit"):  # InputError is a ValueError
        s.ctx.encrypt(np.zeros(s.params.slots + 1), s.sk)


def test_wrong_operand_shapes_and_types(s: Setup) -> None:
    a = s.enc(np.ones(8))
    two_d = np.ones((2, 4))
    with pytest.raises(heloom.InputError, match="1-D"):
        s.ev.add(a, two_d)
    raises_each(
        heloom.InputError,
        lambda: s.ev.multiply_plain(a, two_d),
        lambda: a + two_d,
        lambda: a * two_d,
        lambda: s.ev.multiply_plain(a, 2.0),  # a number: multiply_const
        lambda: s.ev.add_const(a, [1.0, 2.0]),
        lambda: s.ev.multiply_const(a, np.ones(3)),
        lambda: s.ev.add(a, np.array([np.nan])),
        lambda: s.ev.multiply_const(a, 1e300),  # does not fit at the scale
    )
    raises_each(
        TypeError,
        lambda: s.ev.add(a, "x"),
        lambda: s.ev.add(a, None),
        lambda: s.ev.multiply_plain(a, a),  # two ciphertexts: multiply
        lambda: s.ev.multiply(a, 2.0),
        lambda: s.ctx.encrypt(np.ones(4), "not a key"),
    )
    with pytest.raises(heloom.InputError):
        s.ev.rotate_and_sum(a, 3)
    with pytest.raises(TypeError):
        s.ev.rotate(a, 1.5)


# ---------------------------------------------------------------- scales and levels


def test_scale_mismatch(s: Setup) -> None:
    a = s.enc(np.ones(8))
    unrescaled = s.ev.relinearize(s.ev.multiply(a, a))  # scale^2, same level
    with pytest.raises(heloom.ScaleError, match="scale"):
        s.ev.add(unrescaled, a)
    raises_each(
        heloom.ScaleError,
        lambda: a + unrescaled,  # moving scale^2 onto scale needs a factor ~1: impossible
        lambda: s.ev.add_plain(a, s.ctx.encode(np.ones(8), scale=2.0**20)),
        lambda: s.ev.sub(a, a.with_scale(a.scale * 1.5)),
    )


def test_level_errors(s: Setup) -> None:
    a = s.enc(np.ones(8))
    bottom = s.ev.drop_to_level(a, 0)
    raises_each(
        heloom.LevelError,
        lambda: s.ev.rescale(bottom),
        lambda: s.ev.drop_level(bottom),
        lambda: s.ev.drop_to_level(bottom, 1),
        lambda: s.ev.multiply_const(bottom, 0.5),
        lambda: bottom * 0.5,
        lambda: bottom * bottom,
        lambda: s.ctx.encode(np.ones(4), level=s.params.levels + 1),
    )
    # Integers need no level.
    out = bottom * 3
    assert out.level == 0
    assert np.max(np.abs(s.dec(out, 8) - 3)) < 3 * s.tol


# ---------------------------------------------------------------- secret key handling


def test_secret_key_is_not_pickled_and_hidden(s: Setup) -> None:
    sk = s.keys.secret_key
    with pytest.raises(TypeError, match="pickle"):
        pickle.dumps(sk)
    with pytest.raises(TypeError):
        pickle.dumps(s.keys)
    with pytest.raises(TypeError):
        copy.deepcopy(sk)
    assert repr(sk) == f"SecretKey(<hidden>, word_bits={s.word_bits})"
    assert "hidden" in repr(s.keys)
    assert sk.word_bits == s.word_bits


def test_objects_are_not_constructible_directly() -> None:
    for cls in (heloom.Ciphertext, heloom.Plaintext, heloom.SecretKey, heloom.KeySet):
        with pytest.raises(TypeError):
            cls()


def test_word_size_mismatch() -> None:
    from conftest import make_setup

    s32 = make_setup(32, small_params(32, levels=2))
    s64 = make_setup(64, small_params(64))
    a32 = s32.enc(np.ones(4))
    a64 = s64.enc(np.ones(4))
    with pytest.raises(heloom.ParameterError, match="32-bit"):
        s64.ev.add(a64, a32)
    raises_each(
        heloom.ParameterError,
        lambda: a64 + a32,
        lambda: s64.ctx.decrypt(a32, s64.sk),
        lambda: s32.ctx.decrypt(a32, s64.sk),
        lambda: s64.ctx.evaluator(s32.keys.evaluation_keys),
    )
