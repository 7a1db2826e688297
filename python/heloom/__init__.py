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

Threads and task graphs: ``Evaluator(ctx, keys, threads=4)`` (or ``ev.with_threads(4)``) runs
every heavy operation on a budget of threads, with bit-identical results. ``GraphBuilder``
records operations on symbolic ``Value`` objects into a ``TaskGraph`` of the paper's fused
task kinds; ``exp_graph`` and ``polynomial_graph`` build the runtime's graphs;
``TaskGraph.run`` executes one, ``TaskGraph.work_ms`` prices it, and ``simulate`` runs the
scheduler's discrete-event simulation of a stream of e^x jobs under a thread policy
(``POLICIES``) and a cost profile (``profile_names()``).

Devices: ``aes_encrypt`` and ``aes_decrypt`` run bulk AES (CBC or GCM) of many items over
several devices (``"cpu,soft"``: AES-NI and constant-time software AES; ``kernel``: the Linux
kernel crypto API) pulling from one queue under a balancer, and return an ``AesResult``
(outputs, IVs, report)::

    key = os.urandom(32)
    enc = heloom.aes_encrypt(files, key)               # aes-256-gcm, random IVs
    dec = heloom.aes_decrypt(enc.outputs, key, ivs=enc.ivs)
    assert dec.outputs == files

``offload_devices()`` says which devices this machine has; ``offload_compare`` times every
device and balancer on AES items (seed 001's tables) and ``he_offload_compare`` on a stream of
HE jobs.

Applications: ``mnist(images=2000, word_bits=32)`` classifies encrypted held-out MNIST images
with CryptoNets and reports accuracy, agreement with the network in f64 and images per second.
"""

from heloom._heloom import (
    POLICIES,
    AesResult,
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

__all__ = [
    "POLICIES",
    "AesResult",
    "Ciphertext",
    "CkksParameters",
    "Context",
    "CryptoError",
    "DeviceUnavailableError",
    "EvaluationKeys",
    "Evaluator",
    "FormatError",
    "GraphBuilder",
    "GraphError",
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
    "TaskGraph",
    "Value",
    "__version__",
    "aes_decrypt",
    "aes_encrypt",
    "cores",
    "exp_graph",
    "he_offload_compare",
    "mnist",
    "offload_compare",
    "offload_devices",
    "polynomial_graph",
    "profile_names",
    "simulate",
    "upgrade_v1",
]
