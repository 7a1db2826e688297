"""heloom: RNS-CKKS homomorphic encryption (Rust) for Python.

Encrypt numpy arrays of real or complex numbers and compute on them encrypted::

    import numpy as np
    import heloom

    params = heloom.CkksParameters(poly_degree=2**14, levels=7, scale_bits=40)
    ctx = heloom.Context(params)
    keys = ctx.keygen(rotations=[1, -1])
    a = ctx.encrypt(np.array([0.5, -0.25, 1.0]), keys.public_key)
    b = a * a + 1.0                      # relinearized and rescaled for you
    print(ctx.decrypt(b, keys.secret_key, real=True)[:3])

Every class and exception lives in the extension module ``heloom._heloom`` and is re-exported
here. Exceptions: ``HeloomError`` is the base of ``ParameterError``, ``FormatError``,
``ScaleError``, ``LevelError``, ``MissingKeyError`` and ``InputError`` (also a ``ValueError``).
"""

from heloom._heloom import (
    Ciphertext,
    CkksParameters,
    Context,
    EvaluationKeys,
    Evaluator,
    FormatError,
    HeloomError,
    InputError,
    KeySet,
    LevelError,
    MissingKeyError,
    ParameterError,
    Plaintext,
    PublicKey,
    ScaleError,
    SecretKey,
    __version__,
)

__all__ = [
    "Ciphertext",
    "CkksParameters",
    "Context",
    "EvaluationKeys",
    "Evaluator",
    "FormatError",
    "HeloomError",
    "InputError",
    "KeySet",
    "LevelError",
    "MissingKeyError",
    "ParameterError",
    "Plaintext",
    "PublicKey",
    "ScaleError",
    "SecretKey",
    "__version__",
]
