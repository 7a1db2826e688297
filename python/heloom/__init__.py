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
``ScaleError``, ``LevelError``, ``MissingKeyError``, ``GraphError``, ``DeviceUnavailableError``,
``CryptoError`` and ``InputError`` (also a ``ValueError``).

Threads: ``Evaluator(ctx, keys, threads=4)`` (or ``ev.with_threads(4)``) runs every heavy
operation on a budget of threads, with bit-identical results.

Submodules, one per layer above the scheme:

- ``heloom.runtime``: task graphs (``GraphBuilder``, ``TaskGraph``, ``exp_graph``,
  ``polynomial_graph``) and the scheduler's simulation (``simulate``, ``POLICIES``).
- ``heloom.offload``: bulk AES and HE jobs over devices pulling from one queue
  (``aes_encrypt``, ``aes_decrypt``, ``offload_compare``, ``he_offload_compare``).
- ``heloom.apps``: applications (``mnist``).
- ``heloom.client``: a client of ``heloom serve`` (``Client``, ``AsyncClient``, ``ApiError``,
  ``ClientError``; also importable from ``heloom``).

Their names are also importable from ``heloom`` itself, as before.
"""

from heloom import apps, client, offload, runtime
from heloom._heloom import (
    POLICIES,
    AesResult,
    Bootstrapper,
    Ciphertext,
    CkksParameters,
    Context,
    CryptoError,
    DeviceUnavailableError,
    EvaluationKeys,
    Evaluator,
    FormatError,
    GraphBuilder,
    GraphError,
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
    TaskGraph,
    Value,
    __version__,
    aes_decrypt,
    aes_encrypt,
    cores,
    exp_graph,
    he_offload_compare,
    mnist,
    offload_compare,
    offload_devices,
    polynomial_graph,
    profile_names,
    simulate,
    upgrade_v1,
)
from heloom.client import ApiError as ApiError
from heloom.client import AsyncClient as AsyncClient
from heloom.client import Client as Client
from heloom.client import ClientError as ClientError

# The CKKS API; the runtime, offload and application names stay importable from here too.
__all__ = [
    "Bootstrapper",
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
    "apps",
    "offload",
    "runtime",
    "upgrade_v1",
]
