"""Type stubs of heloom's extension module (re-exported by ``heloom``)."""

import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, SupportsFloat, SupportsIndex, TypeAlias, final, overload

import numpy as np
import numpy.typing as npt

__all__ = [
    "POLICIES",
    "AesResult",
    "Bootstrapper",
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

__version__: str

#: A real or complex number.
_Number: TypeAlias = int | float | complex | np.number
#: Slot values: a 1-D array (or sequence) of real or complex numbers.
_Values: TypeAlias = npt.ArrayLike
#: What the mixed-operand methods and the Ciphertext operators accept as second operand.
_Operand: TypeAlias = Ciphertext | Plaintext | _Number | npt.ArrayLike
#: Polynomial bases of ``Evaluator.evaluate_polynomial``.
_Basis: TypeAlias = Literal["power", "chebyshev"]
#: Shapes of the built-in e^x graph (``exp_graph``).
_ExpVariant: TypeAlias = Literal["paper-fig3", "bsgs", "horner"]
#: Thread policies of the scheduler (``POLICIES``).
_Policy: TypeAlias = Literal["fixed-1", "fixed-half", "fixed-full", "paper-dynamic", "heloom"]

#: Bytes-like items, keys and IVs of the AES functions.
_Bytes: TypeAlias = bytes | bytearray | memoryview
#: Ciphers and modes of the AES functions.
_Cipher: TypeAlias = Literal["aes-128-cbc", "aes-192-cbc", "aes-256-cbc", "aes-256-gcm"]
#: Graph variants of an HE job stream (``he_offload_compare``).
_HeVariant: TypeAlias = Literal["paper-fig3", "bsgs", "horner", "mixed"]
#: Progress callbacks: ``progress(label, done, total)`` after every run.
_Progress: TypeAlias = Callable[[str, int, int], object]

#: Names of the scheduler's thread policies, for ``simulate``: ``"fixed-1"``,
#: ``"fixed-half"``, ``"fixed-full"``, ``"paper-dynamic"`` (seed 000's four) and ``"heloom"``.
POLICIES: tuple[_Policy, ...]

class HeloomError(Exception):
    """Base class of every error heloom raises."""

class ParameterError(HeloomError):
    """Invalid or insecure parameters, or objects made for different parameters (or keys)
    combined."""

class FormatError(HeloomError):
    """Bytes that are not a valid heloom object (raised by deserialization)."""

class ScaleError(HeloomError):
    """Operands whose scales cannot be aligned exactly."""

class LevelError(HeloomError):
    """The operation needs more levels than the ciphertext has left."""

class MissingKeyError(HeloomError):
    """A relinearization or Galois (rotation/conjugation) key needed by the operation was not
    generated."""

class InputError(HeloomError, ValueError):
    """An input value or argument that cannot be used: NaN or infinite values, too many values
    for the slots, a wrong array shape or type, a constant too large for the scale. Also a
    ValueError."""

class GraphError(HeloomError):
    """A task graph that cannot be built or run: a GraphBuilder used after finish, a Value of
    another builder, a graph without outputs, or job inputs that do not fit the graph (their
    number, level or scale)."""

class DeviceUnavailableError(HeloomError):
    """A device this machine or this build of heloom cannot use (no GPU driver, no kernel
    crypto API, ...); the message says what is missing and which devices to use instead
    (``heloom.offload_devices()`` lists what is available)."""

class CryptoError(HeloomError):
    """An AES operation failed on an item: for decryption, a wrong key or IV, or a corrupted
    or tampered ciphertext (a GCM tag or CBC padding that does not check). The message names
    the item."""

@final
class CkksParameters:
    """A validated CKKS parameter set: ring degree, modulus chain, special primes for hybrid
    key switching, word size, checked against the Homomorphic Encryption Standard's security
    table.

    Only ``poly_degree`` is required. ``levels`` is the number of rescalings available (the
    chain has ``levels + 1`` primes), ``scale_bits`` the default scale ``2**scale_bits``
    (default 40 for 64-bit words, 28 for 32-bit words), ``word_bits`` 32 or 64. Keyword-only:
    ``first_bits`` (size of ``q_0``), ``prime_bits`` (explicit prime sizes
    ``[q_0, q_1, ...]``, overriding ``levels`` and ``first_bits``), ``special_bits``,
    ``special_count`` and ``dnum`` (hybrid key switching), ``hamming_weight`` (fixed-weight
    secret), ``security`` (128, 192, 256, or None to opt out explicitly).

    Raises ParameterError for invalid or insecure parameters.
    """

    def __new__(
        cls,
        poly_degree: int,
        levels: int = 3,
        scale_bits: int | None = None,
        word_bits: Literal[32, 64] = 64,
        *,
        first_bits: int | None = None,
        prime_bits: Sequence[int] | None = None,
        special_bits: int | None = None,
        special_count: int | None = None,
        dnum: int | None = None,
        hamming_weight: int | None = None,
        security: Literal[128, 192, 256] | None = 128,
    ) -> CkksParameters: ...
    @staticmethod
    def bootstrappable(log_n: int = 16) -> CkksParameters:
        """The 128-bit bootstrappable preset for N = 2^log_n with a dense ternary secret
        (``heloom.Bootstrapper``): 16 leaves 9 levels of scale 2^45 (27.5 bits worst, 29.4
        mean); 15 leaves 1 (22.1 bits worst, 24.0 mean); smaller rings are refused."""
    @property
    def poly_degree(self) -> int:
        """Ring degree N (a power of two)."""
    @property
    def slots(self) -> int:
        """Slots of a fully packed ciphertext (N/2)."""
    @property
    def levels(self) -> int:
        """Levels: rescalings available to a fresh ciphertext (number of primes minus one)."""
    @property
    def scale(self) -> float:
        """Default scale of fresh encodings and encryptions."""
    @property
    def scale_bits(self) -> float:
        """log2 of the default scale."""
    @property
    def log_q(self) -> float:
        """log2 of the ciphertext modulus Q at the top level."""
    @property
    def log_qp(self) -> float:
        """log2 of the key-switching modulus Q*P (what the security table bounds)."""
    @property
    def word_bits(self) -> int:
        """Word size in bits: 32 or 64."""
    @property
    def dnum(self) -> int:
        """Decomposition number (digits) of hybrid key switching."""
    @property
    def alpha(self) -> int:
        """Primes per key-switching digit (= number of special primes)."""
    @property
    def security(self) -> int | None:
        """Requested security in bits (128, 192, 256), or None when opted out."""
    @property
    def estimated_security(self) -> int | None:
        """Security the parameters meet by the HE standard's table (128, 192, 256), or None
        when below 128 bits."""
    @property
    def moduli(self) -> list[int]:
        """Ciphertext primes ``[q_0, ..., q_L]``."""
    @property
    def special_moduli(self) -> list[int]:
        """Special primes ``[p_0, ...]`` of key switching."""
    @property
    def hamming_weight(self) -> int | None:
        """Nonzero coefficients of a fixed-weight secret, or None for the uniform ternary
        secret."""
    @property
    def sigma(self) -> float:
        """Standard deviation of the error distribution."""
    @property
    def backend(self) -> str:
        """The SIMD backend a ``Context`` picks for these parameters on this CPU (the fastest that
        runs their primes); ``Context(params, backend=...)`` chooses another and
        ``Context.backend`` says which one runs."""
    @property
    def fingerprint(self) -> int:
        """Fingerprint of (N, word size, primes, dnum): objects made for different
        fingerprints are never combined."""
    def summary(self) -> str:
        """A multi-line human-readable summary (the same as ``str(params)``)."""
    def to_bytes(self) -> bytes:
        """The parameter set in heloom's binary format (the primes themselves)."""
    @staticmethod
    def from_bytes(data: bytes) -> CkksParameters:
        """Loads a parameter set, checking primes and security again; bad bytes raise
        FormatError, insecure or invalid parameters ParameterError."""
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class Context:
    """The CKKS context: parameters and everything precomputed from them. Encrypts,
    decrypts, encodes, decodes, generates keys and makes evaluators. Objects of contexts with
    equal parameters can be mixed; objects of different parameters raise ParameterError."""

    def __new__(cls, params: CkksParameters, backend: str | None = None) -> Context:
        """Precomputes everything for ``params`` (NTT tables, RNS bases, key-switching
        converters, the encoder) on the fastest SIMD backend of this CPU, or on ``backend``
        (``"scalar"``, ``"avx2"``, ``"avx512"``, ``"avx512-ifma"``): an execution choice, so
        objects move freely between contexts of equal parameters on different backends."""
    @property
    def backend(self) -> str:
        """The SIMD backend the kernels of this context run on."""
    @property
    def params(self) -> CkksParameters:
        """The parameters."""
    @property
    def word_bits(self) -> int:
        """Word size in bits: 32 or 64."""
    @property
    def slots(self) -> int:
        """Slots of a fully packed ciphertext (N/2)."""
    @property
    def default_evaluator(self) -> Evaluator | None:
        """The evaluator ciphertext operators fall back on (see ``Context.evaluator``), or
        None."""
    def keygen(self, rotations: Sequence[int] | None = None, conjugate: bool = False) -> KeySet:
        """Generates a fresh key set: secret key, public key, and evaluation keys
        (relinearization, a Galois key per rotation step in ``rotations`` (negative = right),
        and conjugation when ``conjugate``). Until ``Context.evaluator`` is called, ciphertext
        operators use these evaluation keys."""
    def encrypt(self, values: _Values | Plaintext, key: PublicKey | SecretKey) -> Ciphertext:
        """Encrypts ``values`` (a 1-D array or list of real or complex numbers, at most N/2 of
        them; padded with zeros to a power of two) at the top level and the default scale.
        With a PublicKey: public-key encryption; with the SecretKey: symmetric encryption (the
        ciphertext is then compressible). ``values`` may also be a Plaintext (public key
        only)."""
    @overload
    def decrypt(
        self, ciphertext: Ciphertext, secret_key: SecretKey, real: Literal[False] = False
    ) -> npt.NDArray[np.complex128]: ...
    @overload
    def decrypt(
        self, ciphertext: Ciphertext, secret_key: SecretKey, real: Literal[True]
    ) -> npt.NDArray[np.float64]: ...
    @overload
    def decrypt(
        self, ciphertext: Ciphertext, secret_key: SecretKey, real: bool
    ) -> npt.NDArray[np.complex128] | npt.NDArray[np.float64]:
        """Decrypts and decodes: a numpy array of ``ciphertext.slots`` values, complex128, or
        float64 (the real parts) with ``real=True``."""
    def encode(
        self, values: _Values, level: int | None = None, scale: float | None = None
    ) -> Plaintext:
        """Encodes ``values`` (1-D, real or complex) into a Plaintext at ``level`` (default:
        the top) and ``scale`` (default: the parameters' scale)."""
    @overload
    def decode(
        self, plaintext: Plaintext, real: Literal[False] = False
    ) -> npt.NDArray[np.complex128]: ...
    @overload
    def decode(self, plaintext: Plaintext, real: Literal[True]) -> npt.NDArray[np.float64]: ...
    @overload
    def decode(
        self, plaintext: Plaintext, real: bool
    ) -> npt.NDArray[np.complex128] | npt.NDArray[np.float64]:
        """Decodes a Plaintext: a numpy array of ``plaintext.slots`` values, complex128, or
        float64 with ``real=True``."""
    def evaluator(self, keys: EvaluationKeys | None = None, threads: int = 1) -> Evaluator:
        """An Evaluator with ``keys`` (the key set's ``evaluation_keys``), or without keys (no
        relinearization or rotations) when None, running every heavy op on at most ``threads``
        threads (at least 1, else InputError). It becomes the evaluator the ciphertext
        operators use for ciphertexts no evaluator has produced."""

@final
class SecretKey:
    """The secret key. Stays with the client: it cannot be pickled, its repr hides it, and
    its bytes (``to_bytes``, for the client's own storage) are refused by every loader of a
    public object."""

    @property
    def word_bits(self) -> int:
        """Word size in bits: 32 or 64."""
    def to_bytes(self) -> bytes:
        """The key in heloom's binary format, for the client's own storage only."""
    @staticmethod
    def from_bytes(ctx: Context, data: bytes) -> SecretKey:
        """Loads a secret key saved by ``to_bytes`` for ``ctx``'s parameters; bad bytes raise
        FormatError, keys of other parameters ParameterError."""

@final
class PublicKey:
    """The public key: anyone holding it can encrypt."""

    @property
    def word_bits(self) -> int:
        """Word size in bits: 32 or 64."""
    def to_bytes(self) -> bytes:
        """The key in heloom's binary format (its uniform half as a 32-byte seed)."""
    @staticmethod
    def from_bytes(ctx: Context, data: bytes) -> PublicKey:
        """Loads a public key made for ``ctx``'s parameters; bad bytes raise FormatError,
        keys of other parameters ParameterError."""

@final
class EvaluationKeys:
    """Evaluation keys: the relinearization key and the Galois keys (rotations,
    conjugation). What the server needs; give them to ``Context.evaluator``."""

    @property
    def word_bits(self) -> int:
        """Word size in bits: 32 or 64."""
    @property
    def has_relinearization(self) -> bool:
        """Whether the relinearization key is present."""
    @property
    def rotations(self) -> list[int]:
        """Rotation steps with a key, sorted, in ``(-slots/2, slots/2]`` (a step and the same
        step minus ``slots`` share one key)."""
    @property
    def conjugate(self) -> bool:
        """Whether the conjugation key is present."""
    @property
    def galois_elements(self) -> list[int]:
        """Galois elements with a key."""
    @property
    def memory_bytes(self) -> int:
        """Size of the keys in memory, in bytes."""
    def to_bytes(self) -> bytes:
        """The keys in heloom's binary format (bit-packed, uniform halves as seeds)."""
    @staticmethod
    def from_bytes(ctx: Context, data: bytes) -> EvaluationKeys:
        """Loads evaluation keys made for ``ctx``'s parameters; bad bytes raise
        FormatError."""

@final
class KeySet:
    """What ``Context.keygen`` returns: ``secret_key``, ``public_key``,
    ``evaluation_keys``."""

    @property
    def secret_key(self) -> SecretKey:
        """The secret key (decryption; stays with the client)."""
    @property
    def public_key(self) -> PublicKey:
        """The public key (encryption)."""
    @property
    def evaluation_keys(self) -> EvaluationKeys:
        """The evaluation keys (relinearization, rotations, conjugation)."""

@final
class Plaintext:
    """An encoded message (NTT form) at a level and a scale. Made by ``Context.encode``."""

    @property
    def level(self) -> int:
        """Level (number of primes above q_0)."""
    @property
    def scale(self) -> float:
        """Scale the values were multiplied by."""
    @property
    def slots(self) -> int:
        """Number of slots encoded (a power of two)."""
    @property
    def word_bits(self) -> int:
        """Word size in bits: 32 or 64."""
    @property
    def context(self) -> Context:
        """The context it was made with."""
    def to_bytes(self) -> bytes:
        """The plaintext in heloom's binary format."""
    @staticmethod
    def from_bytes(ctx: Context, data: bytes) -> Plaintext:
        """Loads a plaintext made for ``ctx``'s parameters; bad bytes raise FormatError."""

@final
class Ciphertext:
    """A CKKS ciphertext at a level and a scale. Made by ``Context.encrypt`` and the
    Evaluator.

    Operators ``+ - *`` (and their reflected forms, unary ``-``, ``/`` by a number) take a
    Ciphertext, a Plaintext, a number or a 1-D array, and manage the scale for you:
    ``ct * ct`` relinearizes and rescales, ``ct * float`` and ``ct * array`` rescale,
    ``ct * int`` is exact and keeps the level. Adding or subtracting two ciphertexts at one
    level whose scales differ (a product and a fresh ciphertext, say) aligns them at the cost
    of one level, where ``Evaluator.add`` raises ScaleError. Operators use the evaluator that
    produced an operand, else the context's default evaluator (see ``Context.evaluator``).
    """

    __array_ufunc__: None
    @property
    def level(self) -> int:
        """Level: rescalings left."""
    @property
    def scale(self) -> float:
        """Scale of the encrypted values."""
    @property
    def size(self) -> int:
        """Number of polynomials: 2, or 3 after a multiplication before relinearization."""
    @property
    def slots(self) -> int:
        """Number of slots in use (a power of two; decryption returns this many values)."""
    @property
    def word_bits(self) -> int:
        """Word size in bits: 32 or 64."""
    @property
    def is_seeded(self) -> bool:
        """Whether it is a fresh symmetric encryption (stored at half size)."""
    @property
    def context(self) -> Context:
        """The context it was made with."""
    def with_scale(self, scale: float) -> Ciphertext:
        """A copy whose recorded scale is ``scale`` (the caller takes responsibility, as with
        SEAL's scale setter): for after multiplying by a constant chosen to hit a target
        scale."""
    def __add__(self, other: _Operand, /) -> Ciphertext:
        """``self + other``."""
    def __radd__(self, other: _Operand, /) -> Ciphertext:
        """``other + self``."""
    def __sub__(self, other: _Operand, /) -> Ciphertext:
        """``self - other``."""
    def __rsub__(self, other: _Operand, /) -> Ciphertext:
        """``other - self``."""
    def __mul__(self, other: _Operand, /) -> Ciphertext:
        """``self * other``: relinearized and rescaled (integers: exact, no rescale)."""
    def __rmul__(self, other: _Operand, /) -> Ciphertext:
        """``other * self``."""
    def __truediv__(self, other: _Number, /) -> Ciphertext:
        """``self / c`` for a nonzero number ``c``: multiplication by ``1/c``, rescaled."""
    def __neg__(self) -> Ciphertext:
        """``-self``."""
    def __pos__(self) -> Ciphertext:
        """``+self`` (the same ciphertext)."""
    def to_bytes(self) -> bytes:
        """The ciphertext in heloom's binary format: versioned, checked on load, limbs
        bit-packed, and ``c_1`` stored as a seed after a fresh secret-key encryption."""
    @staticmethod
    def from_bytes(ctx: Context, data: bytes) -> Ciphertext:
        """Loads a ciphertext made for ``ctx``'s parameters. Malformed bytes raise
        FormatError; a ciphertext of other parameters raises ParameterError."""

@final
class Bootstrapper:
    """Refreshes ciphertexts: a ciphertext at level 0 comes back at ``output_level`` with the
    same values (full packing: N/2 slots, or ``slots`` fewer: sparse packing). Built once per
    context (it encodes the homomorphic
    DFT's transforms); then ``ctx.keygen(rotations=boot.rotations, conjugate=True)`` and
    ``boot.set_keys(keys)`` (on the client: with a dense secret it derives the sparse-secret
    encapsulation keys from the secret key; they are public, like the other evaluation keys).

    With a preset (``CkksParameters.bootstrappable(16)`` or ``(15)``) the settings are the
    preset's.
    Otherwise the secret's Hamming weight (``hamming_weight`` of the parameters) or
    ``sparse_weight`` (encapsulation under a sparse secret of that weight, for a dense secret)
    chooses the interval ``K`` and the sine's degree; ``k``, ``degree``, ``cts_levels``,
    ``stc_levels``, ``double_angle``, ``arcsine_degree`` (an odd degree, 0 for none: the arcsine
    correction after the sine) and ``message_ratio_bits`` (0, or ``r`` to bring the message to
    ``q_0 / 2^r`` before ModRaise; with a 60-bit ``q_0`` and the arcsine, as the N = 2^16
    preset) override them. ``fewer_keys=True`` trades time for memory: rotation keys for
    power-of-two baby steps only (at N = 2^16, 15 keys instead of 27; the bootstrap about 6%
    slower). ``compact_diagonals=True`` keeps every key and stores the transforms' diagonals
    with one word per coefficient instead of one per prime, expanded at each use (at N = 2^16
    about 3 GB less; the same result, a little slower). ``slots``: sparse packing on that many
    slots (a power of two from
    ``2^max(cts_levels, stc_levels)``): the raised ciphertext is projected onto their subring,
    the transforms are smaller and one EvalMod serves both halves. ``threads``: for encoding the
    transforms (default: every core; the bootstrap itself runs on its evaluator's budget).
    """

    def __new__(
        cls,
        context: Context,
        *,
        sparse_weight: int | None = None,
        k: float | None = None,
        degree: int | None = None,
        cts_levels: int | None = None,
        stc_levels: int | None = None,
        double_angle: int | None = None,
        arcsine_degree: int | None = None,
        message_ratio_bits: int | None = None,
        fewer_keys: bool = False,
        compact_diagonals: bool = False,
        slots: int | None = None,
        threads: int | None = None,
    ) -> Bootstrapper: ...
    @property
    def slots(self) -> int:
        """The slot count it bootstraps: ``N/2`` (full packing) or fewer (sparse packing)."""
    @property
    def rotations(self) -> list[int]:
        """Rotation steps whose Galois keys bootstrapping needs (pass them to ``Context.keygen``
        with ``conjugate=True``)."""
    @property
    def output_level(self) -> int:
        """The level a bootstrapped ciphertext comes out at."""
    @property
    def depth(self) -> int:
        """Levels bootstrapping uses (CoeffToSlot, EvalMod, SlotToCoeff)."""
    @property
    def sparse_weight(self) -> int | None:
        """The sparse secret's Hamming weight when ModRaise runs under encapsulation, else
        None."""
    def set_keys(self, keys: KeySet) -> None:
        """Attaches what bootstrapping needs from ``keys`` (a KeySet of this context, made with
        ``rotations`` and ``conjugate=True``): with encapsulation, the switching keys to and
        from a fresh sparse secret, derived from its secret key here on the client."""
    def bootstrap(self, ct: Ciphertext, evaluator: Evaluator | None = None) -> Ciphertext:
        """Bootstraps ``ct`` (full packing, two polynomials, any level) with ``evaluator`` (it
        needs the relinearization, conjugation and ``rotations`` keys; default: the context's
        default evaluator, that of the last ``keygen``): the same values at ``output_level``,
        with ``ct``'s scale."""
    def ensure_levels(
        self, ct: Ciphertext, levels: int, evaluator: Evaluator | None = None
    ) -> Ciphertext:
        """``ct`` itself when it holds at least ``levels`` levels, else ``ct`` bootstrapped (as
        ``bootstrap``): call it before each step of a computation that outlasts the levels.
        Asking for more than ``output_level`` is an error that says to split the step."""

@final
class Evaluator:
    """Homomorphic operations on ciphertexts, with (optionally) evaluation keys. Made by
    ``Context.evaluator(keys)`` or ``Evaluator(context, keys)``.

    Every method returns a new Ciphertext and leaves scale management explicit: ``multiply``
    returns an unrelinearized (size 3) product at the product of the scales; call
    ``relinearize`` and ``rescale``. (The Ciphertext operators do that for you.) Operands at
    different levels are brought to the lower level; scales that differ are aligned when that
    is exact, else ScaleError.
    """

    def __new__(
        cls, context: Context, keys: EvaluationKeys | None = None, threads: SupportsIndex = 1
    ) -> Evaluator:
        """An evaluator for ``context`` with ``keys`` (or without keys); the same as
        ``context.evaluator(keys)``. ``threads`` is the budget of every heavy operation it
        runs (split over at most that many threads of heloom's shared pool; at least 1, else
        InputError). Results are bit-identical whatever the budget."""
    @property
    def has_keys(self) -> bool:
        """Whether it holds evaluation keys (needed by relinearize, rotations, conjugate)."""
    @property
    def context(self) -> Context:
        """The context."""
    @property
    def threads(self) -> int:
        """Thread budget of every heavy operation (1 unless set by ``threads=`` or
        ``with_threads``)."""
    def with_threads(self, threads: SupportsIndex) -> Evaluator:
        """The same evaluator (same context and keys, shared) with a budget of ``threads``
        threads (at least 1, else InputError; more than ``heloom.cores()`` gains nothing).
        Results are bit-identical whatever the budget."""
    def add(self, a: Ciphertext, b: _Operand) -> Ciphertext:
        """``a + b``: ``b`` a Ciphertext, a Plaintext, a number (int, float, complex) or a 1-D
        array (encoded at ``a``'s level and scale)."""
    def sub(self, a: Ciphertext, b: _Operand) -> Ciphertext:
        """``a - b``: ``b`` a Ciphertext, a Plaintext, a number or a 1-D array."""
    def negate(self, a: Ciphertext) -> Ciphertext:
        """``-a``."""
    def add_plain(self, a: Ciphertext, p: Plaintext | _Values) -> Ciphertext:
        """``a + p`` for a Plaintext ``p`` (its scale must match ``a``'s) or a 1-D array
        (encoded at ``a``'s level and scale)."""
    def sub_plain(self, a: Ciphertext, p: Plaintext | _Values) -> Ciphertext:
        """``a - p`` for a Plaintext or a 1-D array."""
    def add_const(self, a: Ciphertext, c: _Number) -> Ciphertext:
        """``a + c`` in every slot, for a number ``c`` (real or complex). Exact: no level
        used."""
    def multiply(self, a: Ciphertext, b: Ciphertext) -> Ciphertext:
        """``a * b`` for ciphertexts: a size-3 ciphertext at the product of the scales (call
        ``relinearize`` then ``rescale``). Levels are aligned by dropping."""
    def multiply_relin_rescale(self, a: Ciphertext, b: Ciphertext) -> Ciphertext:
        """``a * b`` relinearized and rescaled (what ``a * b`` on ciphertexts does)."""
    def square(self, a: Ciphertext) -> Ciphertext:
        """``a * a``: size 3, scale squared (cheaper than ``multiply(a, a)``)."""
    def relinearize(self, a: Ciphertext) -> Ciphertext:
        """Relinearizes a size-3 ciphertext back to size 2 (needs the relinearization key)."""
    def rescale(self, a: Ciphertext) -> Ciphertext:
        """Divides by the last prime and drops it: one level down, scale divided by that
        prime."""
    def relinearize_rescale(self, a: Ciphertext) -> Ciphertext:
        """``relinearize`` then ``rescale`` in one step: the rescale merged into the key
        switch's mod-down (one division by ``q_l P``, one rounding, two NTT passes fewer). One
        level down, scale divided by the last prime; a size-2 ciphertext is only rescaled."""
    def drop_level(self, a: Ciphertext) -> Ciphertext:
        """Drops one level (exact; the scale is unchanged)."""
    def drop_to_level(self, a: Ciphertext, level: int) -> Ciphertext:
        """Drops to ``level`` (at most ``a.level``; exact, scale unchanged)."""
    def multiply_plain(self, a: Ciphertext, p: Plaintext | _Values) -> Ciphertext:
        """``a * p`` slot-wise, not rescaled. ``p`` a Plaintext (the scales multiply) or a 1-D
        array (encoded at the scale of ``a``'s last prime, so ``rescale`` afterwards restores
        ``a``'s scale)."""
    def multiply_values(self, a: Ciphertext, values: _Values) -> Ciphertext:
        """``a * values`` slot-wise for a 1-D array, encoded at the scale of ``a``'s last
        prime (``rescale`` afterwards restores ``a``'s scale). Not rescaled."""
    def multiply_const(self, a: Ciphertext, c: _Number) -> Ciphertext:
        """``a * c`` for a number ``c`` (real or complex), encoded at the scale of ``a``'s
        last prime: ``rescale`` afterwards restores ``a``'s scale. Not rescaled."""
    def multiply_int(self, a: Ciphertext, k: SupportsIndex) -> Ciphertext:
        """``a * k`` for an integer ``k``: exact, no level used, scale unchanged."""
    def rotate(self, a: Ciphertext, step: SupportsIndex) -> Ciphertext:
        """Rotates the slots left by ``step`` (right when negative). Needs the Galois key for
        ``step`` (``keygen(rotations=[...])``), else MissingKeyError."""
    def rotate_many(self, a: Ciphertext, steps: Sequence[int]) -> list[Ciphertext]:
        """Hoisted rotations: one decomposition shared by every step. Returns a list of
        ciphertexts in the order of ``steps``."""
    def conjugate(self, a: Ciphertext) -> Ciphertext:
        """Conjugates every slot (needs ``keygen(conjugate=True)``)."""
    def rotate_and_sum(self, a: Ciphertext, n: SupportsIndex) -> Ciphertext:
        """Sum of ``n`` consecutive slots in every slot: slot ``i`` gets
        ``x[i] + ... + x[i+n-1]`` (indices mod slots). ``n`` a power of two; needs rotation
        keys for 1, 2, 4, ..., n/2 (see ``Evaluator.rotate_and_sum_steps``)."""
    @staticmethod
    def rotate_and_sum_steps(n: SupportsIndex) -> list[int]:
        """The rotation steps ``rotate_and_sum(_, n)`` needs keys for."""
    def align(self, a: Ciphertext, b: Ciphertext) -> tuple[Ciphertext, Ciphertext]:
        """Brings two ciphertexts to one level and one scale; returns the pair."""
    def evaluate_polynomial(
        self,
        a: Ciphertext,
        coeffs: Sequence[SupportsFloat] | npt.ArrayLike,
        basis: _Basis = "power",
        interval: tuple[float, float] | None = None,
    ) -> Ciphertext:
        """Evaluates the polynomial with real ``coeffs`` (lowest degree first) at every slot
        (baby-step giant-step). ``basis``: ``"power"`` (``sum c_k x^k``) or ``"chebyshev"``
        (``sum c_k T_k(y)`` with ``y`` the affine map of ``interval``, default ``(-1, 1)``, to
        ``[-1, 1]``). The result has ``a``'s scale and ``polynomial_depth`` fewer levels."""
    @staticmethod
    def polynomial_depth(
        degree: SupportsIndex, basis: _Basis = "power", interval: tuple[float, float] | None = None
    ) -> int:
        """Levels ``evaluate_polynomial`` consumes for a polynomial of ``degree`` in
        ``basis``."""
    def scales_match(self, a: float, b: float) -> bool:
        """Whether two scales are equal within the tolerance ``add``/``sub`` accept."""

@final
class Value:
    """A symbolic ciphertext recorded by a ``GraphBuilder``: what the ciphertext at that point
    of the graph will look like (level, scale, size). Only usable with the builder that made
    it."""

    @property
    def level(self) -> int:
        """Level of the ciphertext this value stands for."""
    @property
    def scale(self) -> float:
        """Its scale."""
    @property
    def size(self) -> int:
        """Its number of polynomials: 2, or 3 after a multiplication before
        relinearization."""

@final
class GraphBuilder:
    """Records CKKS operations on symbolic values (``Value``) into a ``TaskGraph``, without
    keys or ciphertexts: every level, scale and size is known while recording, so level and
    scale errors are raised here (LevelError, ScaleError, InputError), as the evaluator would
    raise them when running.

    ``GraphBuilder(context, name="job")`` needs only the context's modulus chain. Record
    inputs with ``input`` or ``input_like``, operations with the methods below, then call
    ``finish`` with the outputs: consecutive operations are fused into the paper's task kinds
    (a multiplication with its relinearization and rescale is one task, a multiplication by a
    constant with its rescale another, additions their own tasks). ``end_task`` forces a
    value to end its task. After ``finish`` the builder cannot be used again (GraphError).
    """

    def __new__(cls, context: Context, name: str = "job") -> GraphBuilder:
        """A builder for ciphertexts of ``context``'s parameters (only the modulus chain is
        used), recording a graph called ``name``."""
    @property
    def name(self) -> str:
        """The graph's name."""
    @property
    def finished(self) -> bool:
        """Whether ``finish`` was called (the builder is then unusable)."""
    def input(self, level: SupportsIndex | None = None, scale: float | None = None) -> Value:
        """The next job input: a fresh (size-2) ciphertext at ``level`` (default: the top
        level) with ``scale`` (default: the parameters' scale). ``TaskGraph.run`` takes the
        inputs in the order they were declared."""
    def input_like(self, ciphertext: Ciphertext) -> Value:
        """The next job input, at ``ciphertext``'s level and scale (its parameters must have
        this builder's modulus chain, else ParameterError)."""
    def add(self, a: Value, b: Value) -> Value:
        """``a + b`` (levels aligned by dropping; scales that differ are aligned exactly when
        possible, recorded as explicit operations, else ScaleError)."""
    def sub(self, a: Value, b: Value) -> Value:
        """``a - b`` (as ``add``)."""
    def add_const(self, a: Value, c: float) -> Value:
        """``a + c`` in every slot for a real constant ``c`` (exact, no level used)."""
    def add_plain(self, a: Value, c: float) -> Value:
        """``a + c`` for a real constant ``c``: the paper's plaintext addition (the same as
        ``add_const``)."""
    def multiply_int(self, a: Value, k: SupportsIndex) -> Value:
        """``a * k`` for an integer ``k`` (exact, no level used, scale unchanged)."""
    def multiply_const(self, a: Value, c: float) -> Value:
        """``a * c`` for a real constant ``c`` encoded at the scale of ``a``'s last prime, not
        rescaled (``rescale`` afterwards restores ``a``'s scale). LevelError at level 0."""
    def multiply_plain_slots(self, a: Value, values: _Values) -> Value:
        """``a * values`` slot-wise for real ``values`` (1 to N/2 of them; a shorter vector
        is padded with zeros to a power of two and repeats with that period over the slots),
        encoded at the scale of ``a``'s last prime, not rescaled. LevelError at level 0;
        InputError for an empty or non-finite vector (a too long one when the graph runs)."""
    def rotate(self, a: Value, step: SupportsIndex) -> Value:
        """Slots rotated left by ``step`` (right when negative); ``a`` must be size 2
        (running it needs the Galois key of the step, ``keygen(rotations=[...])``)."""
    def multiply(self, a: Value, b: Value) -> Value:
        """``a * b``: size 3, at the product of the scales (both operands must be size 2)."""
    def square(self, a: Value) -> Value:
        """``a * a``: size 3, scale squared."""
    def relinearize(self, a: Value) -> Value:
        """Relinearization back to size 2 (running it needs the relinearization key)."""
    def rescale(self, a: Value) -> Value:
        """Rescale by the last prime: one level down (LevelError at level 0)."""
    def drop_to_level(self, a: Value, level: SupportsIndex) -> Value:
        """Drops to ``level`` (at most ``a.level``, else LevelError; exact, scale
        unchanged)."""
    def mul_relin_rescale(self, a: Value, b: Value) -> Value:
        """``a * b`` relinearized and rescaled: the paper's multiplication task (a squaring
        when ``a`` and ``b`` are the same value)."""
    def square_relin_rescale(self, a: Value) -> Value:
        """``a * a`` relinearized and rescaled: the paper's squaring task (the same as
        ``mul_relin_rescale(a, a)``)."""
    def mul_plain_rescale(self, a: Value, c: float) -> Value:
        """``a * c`` for a real constant ``c``, rescaled, keeping ``a``'s scale: the paper's
        multiply-plain task (one level used)."""
    def end_task(self, v: Value) -> None:
        """Makes ``v`` the output of its own task: it is not fused into the task that reads
        it."""
    def finish(self, outputs: Sequence[Value]) -> TaskGraph:
        """Fuses the recorded operations into tasks and returns the TaskGraph whose results
        are ``outputs`` (at least one, else GraphError). The builder cannot be used
        afterwards."""

@final
class TaskGraph:
    """A DAG of HE tasks (fused CKKS operations) computing a job's outputs from its inputs.
    Made by ``GraphBuilder.finish``, ``heloom.exp_graph`` or ``heloom.polynomial_graph``.

    ``len(graph)`` is the number of tasks; ``str(graph)`` lists them. ``run`` executes it
    with an evaluator of a context with the same modulus chain; ``work_ms`` prices it with a
    cost profile.
    """

    def to_bytes(self) -> bytes:
        """The graph in heloom's binary format (checksummed; what a client sends a server)."""
    @staticmethod
    def from_bytes(data: bytes) -> TaskGraph:
        """Loads a graph written by ``to_bytes``; every node is replayed and checked, and bad
        bytes raise FormatError."""

    @property
    def name(self) -> str:
        """The graph's name (the variant for the built-in e^x graphs)."""
    @property
    def num_inputs(self) -> int:
        """Number of input ciphertexts ``run`` takes."""
    @property
    def tasks(self) -> list[dict[str, Any]]:
        """The tasks in topological order, each a dict: ``index``, ``kind`` (one of
        ``"mul-relin-rescale"``, ``"square-relin-rescale"``, ``"mul-plain-rescale"``,
        ``"add"``, ``"other"``), ``nq`` (RNS limbs of its main input), ``deps`` (indices of
        the tasks it reads) and ``ops`` (the fused operations, in order)."""
    def run(
        self,
        evaluator: Evaluator,
        inputs: Sequence[Ciphertext],
        threads: SupportsIndex | None = None,
    ) -> list[Ciphertext]:
        """Runs the graph on ``inputs`` (as many ciphertexts as ``num_inputs``, at the levels
        and scales the graph was built for, else GraphError) with ``evaluator``, one task
        after another, each on ``threads`` threads (default: the evaluator's budget). Returns
        the outputs in the order given to ``finish``. The evaluator's context must have the
        graph's modulus chain (else ParameterError); multiplication tasks need its
        relinearization key. Runs without the GIL."""
    def work_ms(self, profile: str = "xeon-phi-7230f") -> float:
        """Total single-thread work of the graph in milliseconds under the cost ``profile``
        (a built-in name from ``heloom.profile_names()`` or a profile JSON file written by
        ``heloom profile``), task start overheads included. Ops are priced by their RNS limb
        count at the profile's ring degree. Unknown profiles raise InputError."""
    def __len__(self) -> int:
        """Number of tasks."""

def exp_graph(
    context: Context,
    variant: _ExpVariant = "paper-fig3",
    level: SupportsIndex | None = None,
    scale: float | None = None,
) -> TaskGraph:
    """The built-in degree-6 e^x Maclaurin job (``sum x^k / k!`` for k <= 6) as a task graph
    on one input at ``level`` (default: the top) with ``scale`` (default: the parameters'
    scale). ``variant``: ``"paper-fig3"`` (seed 000's Fig. 3: every power, each scaled by
    1/k! in its own task, then a tree of additions; 4 levels), ``"bsgs"`` (the evaluator's
    baby-step giant-step; 3 levels) or ``"horner"`` (the fewest products; 4 levels). The
    result has the input's scale. Too few levels raise LevelError, unknown variants
    InputError."""

def polynomial_graph(
    context: Context,
    coeffs: Sequence[SupportsFloat] | npt.ArrayLike,
    basis: _Basis = "power",
    interval: tuple[float, float] | None = None,
    level: SupportsIndex | None = None,
    scale: float | None = None,
) -> TaskGraph:
    """``Evaluator.evaluate_polynomial`` as a task graph on one input at ``level`` (default:
    the top) with ``scale`` (default: the parameters' scale): running it gives exactly (bit
    for bit) what ``evaluate_polynomial(x, coeffs, basis, interval)`` gives. ``coeffs`` are
    real, lowest degree first; ``basis`` ``"power"`` or ``"chebyshev"`` (``interval``
    default ``(-1, 1)``, Chebyshev only)."""

def cores() -> int:
    """Number of cores heloom's thread pool uses (``HELOOM_THREADS`` when set): the most
    threads a budget can use at once."""

def profile_names() -> list[str]:
    """Names of the built-in cost profiles (for ``simulate`` and ``TaskGraph.work_ms``)."""

def simulate(
    policy: _Policy = "heloom",
    gap_ms: float = 60.0,
    jobs: SupportsIndex = 2300,
    profile: str = "xeon-phi-7230f",
    seed: SupportsIndex = 1,
) -> dict[str, Any]:
    """Simulates a stream of ``jobs`` e^x jobs (the runtime's workload: N = 2^14, 8 RNS
    limbs, the three graph variants) arriving as a Poisson process with mean gap ``gap_ms``
    (reproducible from ``seed``), list-scheduled under the thread ``policy`` (one of
    ``heloom.POLICIES``) on the machine described by the cost ``profile`` (a built-in name or
    a profile JSON file), with the discrete-event simulator of ``heloom schedule
    --simulate``.

    Returns the run's summary as a dict: ``policy``, ``gap_ms``, ``executor``, ``capacity``,
    ``jobs``, ``window`` (the measured job ids, first and last: the paper's jobs 301..1900 of
    2,300, scaled), ``measured``, ``makespan_ms``, ``p50_ms``, ``p95_ms``, ``p99_ms``,
    ``max_ms``, ``mean_ms`` (latencies of the measured jobs), ``throughput_jobs_per_s``,
    ``utilisation``, ``tasks``, ``mean_task_ms``, ``sched_overhead_ms``,
    ``sched_overhead_pct``, ``dispatch_latency_ms`` and ``correct`` (None: nothing is
    decrypted in a simulation). Unknown policies or profiles and non-positive ``gap_ms`` or
    ``jobs`` raise InputError. Runs without the GIL."""

@final
class AesResult:
    """What bulk AES returns: ``outputs`` (one ``bytes`` per item, in item order: ciphertexts
    with PKCS#7 padding (CBC) or the 16-byte tag appended (GCM) after ``aes_encrypt``,
    plaintexts after ``aes_decrypt``), ``ivs`` (the IV of every item; keep them with the
    ciphertexts, ``aes_decrypt`` needs them) and ``report`` (how the run went, a dict).
    ``len(result)`` is the number of items."""

    @property
    def outputs(self) -> list[bytes]:
        """The outputs, one ``bytes`` per item in item order (a new list on every access)."""
    @property
    def ivs(self) -> list[bytes]:
        """The IV of every item, in item order: 16 bytes each (GCM uses the first 12 as its
        nonce), or the 12-byte GCM nonces given to the call."""
    @property
    def report(self) -> dict[str, Any]:
        """How the run went (a copy): ``method`` (the balancer, or the device's name when one
        device ran alone), ``cipher``, ``direction``, ``items``, ``bytes`` (input bytes),
        ``ms`` (from the start signal to the last worker's finish), ``mb_per_s``, ``claims``
        (queue claims), ``devices`` (a dict per device: ``name``, ``kind``, ``workers``,
        ``engine``, ``uses_cpu``) and, keyed by device name, ``items_per_device``,
        ``bytes_per_device``, ``busy_ms_per_device`` (time inside items, summed over the
        device's workers) and ``finish_ms_per_device``."""
    def __len__(self) -> int:
        """Number of items."""

def aes_encrypt(
    items: Iterable[_Bytes],
    key: _Bytes,
    *,
    cipher: _Cipher = "aes-256-gcm",
    devices: str = "cpu,soft",
    balancer: str = "heloom",
    ivs: Iterable[_Bytes] | None = None,
) -> AesResult:
    """Encrypts many items ("files") under one ``key`` on several devices that pull from one
    queue; returns an ``AesResult`` with the ciphertexts in item order, their IVs and a
    report.

    ``cipher``: ``"aes-128-cbc"``, ``"aes-192-cbc"``, ``"aes-256-cbc"`` (PKCS#7 padding: each
    ciphertext is 1 to 16 bytes longer than its item) or ``"aes-256-gcm"`` (12-byte nonce,
    the 16-byte tag appended); the key has 16, 24, 32 or 32 bytes. Each item gets its own IV:
    16 random bytes from the operating system's CSPRNG (GCM uses the first 12 as the nonce)
    unless ``ivs`` gives one per item (to reproduce a result; never use a GCM nonce twice
    with one key). ``devices``: a comma-separated list of ``cpu`` (AES-NI/VAES), ``soft``
    (constant-time software AES), ``kernel`` (the Linux kernel crypto API) and ``gpu``, each
    optionally ``:threads`` (see ``offload_devices()``). ``balancer``: ``"round-robin"``,
    ``"polling"``, ``"pull"``, ``"heloom"`` (learned pull, the default), or a device's name
    (``"cpu"``, ``"soft:1"``) to run on that device alone. Outputs are the same whichever
    devices and balancer run. Bad arguments raise InputError (a ValueError), devices this
    machine lacks DeviceUnavailableError. Runs without the GIL."""

def aes_decrypt(
    items: Iterable[_Bytes],
    key: _Bytes,
    *,
    ivs: Iterable[_Bytes],
    cipher: _Cipher = "aes-256-gcm",
    devices: str = "cpu,soft",
    balancer: str = "heloom",
) -> AesResult:
    """Decrypts many items encrypted by ``aes_encrypt`` (or any tool using the same modes:
    CBC with PKCS#7 padding, or GCM with the 16-byte tag appended) under one ``key``, with
    the ``ivs`` they were encrypted with (one per item; 12-byte nonces are accepted for GCM),
    on several devices pulling from one queue. Returns an ``AesResult`` with the plaintexts
    in item order. ``cipher``, ``devices`` and ``balancer`` as for ``aes_encrypt``. A wrong
    key or IV, or a corrupted or tampered ciphertext (a GCM tag or CBC padding that does not
    check), raises CryptoError naming the item; no partial results are returned. Runs
    without the GIL."""

def offload_devices() -> list[dict[str, Any]]:
    """The device kinds and whether this machine (and this build) can use them: a dict per
    kind with ``kind`` (``"cpu"``, ``"soft"``, ``"kernel"``, ``"gpu"`` for AES items,
    ``"cpu-pool"`` and ``"gpu"`` (heloom's CUDA backend) for HE jobs), ``workload``
    (``"aes"`` or ``"he"``), ``available``, ``engine`` (what runs the work, or None) and
    ``error`` (why it cannot be used and what to do, or None). Each device is opened with
    one worker to find out."""

def offload_compare(
    *,
    devices: str = "cpu,soft",
    cipher: _Cipher = "aes-128-cbc",
    direction: Literal["encrypt", "decrypt"] = "encrypt",
    sizes: Sequence[SupportsIndex] = (8, 16, 64, 256, 1024, 4096, 8192, 16384),
    items: SupportsIndex = 4000,
    reps: SupportsIndex = 5,
    methods: Sequence[str] = ("round-robin", "polling", "pull", "heloom"),
    mixed: bool = True,
    seed: SupportsIndex = 1,
    progress: _Progress | None = None,
) -> dict[str, Any]:
    """Times every device alone and every balancer in ``methods`` on the same AES workloads
    (seed 001's Tables 2 and 3): for each item size in ``sizes`` a queue of ``items`` items
    of that size, and with ``mixed`` one more queue holding ``items / len(sizes)`` items of
    every size, shuffled. Each method runs ``reps`` times after an untimed warm-up, in
    rotating order; the ideal combined time is ``1 / sum(1 / T_d)`` over the single devices
    and each method's efficiency is ideal / measured. Every output of every run is checked
    against the reference engine. ``progress(label, done, total)``, when given, is called
    after every run.

    Returns a dict: ``devices`` (name, kind, workers, engine, uses_cpu), ``cipher``,
    ``direction``, ``items``, ``reps`` and ``runs``, one dict per method and workload:
    ``method``, ``single``, ``cipher``, ``direction``, ``size`` (0 for the mixed queue),
    ``workload`` (``"uniform"`` or ``"mixed"``), ``items``, ``ms`` (best of the repetitions, the
    statistic ``efficiency`` uses), ``ms_mean``, ``ms_median``, ``ms_min``,
    ``ms_max``, ``ms_reps``, ``ideal_ms``, ``efficiency``, ``mb_per_s``,
    ``items_per_device`` and ``finish_ms_per_device`` (keyed by device name) and ``claims``.
    Runs without the GIL."""

def he_offload_compare(
    *,
    devices: str = "cpu-pool:1,cpu-pool:1",
    log_n: SupportsIndex = 12,
    jobs: SupportsIndex = 12,
    reps: SupportsIndex = 2,
    variant: _HeVariant = "mixed",
    methods: Sequence[str] = ("round-robin", "polling", "pull", "heloom"),
    seed: SupportsIndex = 1,
    progress: _Progress | None = None,
) -> list[dict[str, Any]]:
    """Runs a stream of ``jobs`` e^x jobs (the runtime's HE task graphs, each on its own
    encrypted input, at ring degree ``2**log_n`` with 8 RNS limbs) on every device alone and
    under every balancer in ``methods``, ``reps`` times after an untimed warm-up.
    ``devices``: a list of ``cpu-pool:threads`` shares of heloom's thread pool (``cpu:t``
    means the same) and ``gpu`` (heloom's CUDA backend; DeviceUnavailableError where there is
    no GPU).
    ``variant``: ``"paper-fig3"``, ``"bsgs"``, ``"horner"`` or ``"mixed"`` (the three in
    turn, so jobs differ in weight). Every result is decrypted and checked against e^x.
    ``progress(label, done, total)``, when given, is called after every run.

    Returns one dict per method: ``method``, ``single``, ``log_n``, ``jobs``, ``ms`` (mean),
    ``ms_reps``, ``ideal_ms``, ``efficiency``, ``jobs_per_s``, ``items_per_device`` (keyed by
    device name) and ``max_error`` (the largest decryption error of any job). Runs without
    the GIL."""

def upgrade_v1(data: bytes, ctx: Context | None = None) -> bytes:
    """Converts an object of heloom's format version 1 (no checksum) to version 2.
    Parameters need no context, every other kind the ``Context`` it was made for. Every field
    is re-validated, but version 1 has no checksum: convert only bytes from a source you
    trust."""

def mnist(
    *,
    images: int = 2000,
    packing: str = "batch",
    word_bits: int = 32,
    threads: int | None = None,
    weights: str | os.PathLike[str] | None = None,
    progress: Callable[[str], object] | None = None,
) -> dict[str, Any]:
    """Classifies ``images`` held-out MNIST test images (test images 5000 on, never used in
    training) with heloom's CryptoNets: the client encrypts them (one image per slot with
    ``packing="batch"``, one image per ciphertext with ``"single"``), the server runs the
    network on the ciphertexts, the client decrypts; the same network in f64 gives the
    reference. ``word_bits``: 32 (bit-reduced) or 64; ``threads``: a thread budget (default
    every core); ``weights``: a weight file instead of the network trained in the repository;
    ``progress(message)`` hears each step.

    Returns a dict: ``plain_accuracy``, ``encrypted_accuracy``, ``agreement``, ``images``,
    ``seconds`` (server), ``images_per_s``, ``batch_latency_s``, ``encrypt_s``,
    ``decrypt_s``, ``stages`` (per layer), ``max_logit_error``, ``peak_memory_bytes``, the
    parameters and the CPU. Runs without the GIL."""
