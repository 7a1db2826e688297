"""heloom.client: a Python client of ``heloom serve``, heloom's multi-tenant HTTP service.

The API is described in ``docs/serve-api.md``; this module mirrors the Rust client
(``heloom_serve::client``) and uses the standard library only::

    import numpy as np
    import heloom
    from heloom.client import Client, exp, polynomial

    params = heloom.CkksParameters(2**14, levels=7, scale_bits=40, first_bits=50)
    ctx = heloom.Context(params)
    keys = ctx.keygen()                          # the secret key never leaves this machine
    client = Client("http://127.0.0.1:8787", token)
    key = client.upload_keys(ctx, keys.evaluation_keys)
    x = client.upload_ciphertext(ctx.encrypt(np.linspace(-1, 1, ctx.slots), keys.public_key))
    job = client.submit(key.id, [x.id], exp())
    job = client.wait(job.id, progress=True)     # a progress bar on stderr
    (y,) = client.result(job.id, ctx)
    print(ctx.decrypt(y, keys.secret_key, real=True)[:4])

``Client`` is blocking and thread-safe (every request opens its own connection).
``AsyncClient`` has the same methods as coroutines; each runs the blocking method in a worker
thread (``asyncio.to_thread``), so it suits asyncio programs with a handful of concurrent
calls rather than thousands.

Errors: the server's answers other than 2xx raise ``ApiError`` (``status``, ``code``,
``message``, ``retry_after``); a server that cannot be reached, a broken connection or an answer
that is not what the API defines raise its base class ``ClientError``; ``wait`` raises
``WaitTimeoutError`` (a ``ClientError`` and a ``TimeoutError``) when its timeout runs out.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import importlib
import json
import os
import ssl
import sys
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Literal, TypeAlias, TypedDict, TypeVar

import numpy as np

from heloom._heloom import (
    Ciphertext,
    CkksParameters,
    Context,
    EvaluationKeys,
    KeySet,
    TaskGraph,
    __version__,
)

_T = TypeVar("_T")

__all__ = [
    "FINAL_STATES",
    "ApiError",
    "AsyncClient",
    "Client",
    "ClientError",
    "CryptonetsTask",
    "ExpTask",
    "GraphTask",
    "Job",
    "MatmulEncryptedTask",
    "MatmulTask",
    "ObjectInfo",
    "PolynomialTask",
    "Progress",
    "Task",
    "WaitTimeoutError",
    "cryptonets",
    "exp",
    "graph",
    "matmul",
    "matmul_encrypted",
    "pack_matrix",
    "polynomial",
    "split_objects",
    "unpack_matrix",
]

#: Job states after which a job never changes again.
FINAL_STATES: frozenset[str] = frozenset({"done", "failed", "cancelled"})

#: Bytes sent per write when a file is uploaded (the file is never read whole).
_CHUNK = 1 << 20
#: Size of an object's header and of its trailing checksum in heloom's binary format.
_HEADER = 32
_CHECKSUM = 8
#: Longest long poll per request: without and with a progress bar (as the Rust client).
_WAIT_STEP = 30.0
_WAIT_STEP_PROGRESS = 1.0

_Buffer: TypeAlias = bytes | bytearray | memoryview


# ---------------------------------------------------------------------------------------------
# Errors


_SUBMIT_FIELDS = frozenset(
    {"key_id", "inputs", "task", "idempotency_key", "priority", "deadline_unix", "result_level"}
)


def _submit_request(
    key_id: str | ObjectInfo,
    inputs: Sequence[str | ObjectInfo],
    task: Task | Mapping[str, Any],
    idempotency_key: str | None,
    priority: int,
    deadline_unix: int | None,
    result_level: int | None,
) -> dict[str, Any]:
    """One ``SubmitRequest`` (the JSON ``POST /v1/jobs`` takes)."""
    req: dict[str, Any] = {
        "idempotency_key": str(uuid.uuid4()) if idempotency_key is None else idempotency_key,
        "key_id": _object_id(key_id),
        "inputs": [_object_id(i) for i in inputs],
        "task": dict(task),
        "priority": priority,
    }
    if deadline_unix is not None:
        req["deadline_unix"] = deadline_unix
    if result_level is not None:
        req["result_level"] = result_level
    return req


class ClientError(Exception):
    """Talking to the server failed: it could not be reached, the connection broke, or its
    answer was not what the API defines. ``ApiError`` (the server answered with an error) and
    ``WaitTimeoutError`` are subclasses."""


class ApiError(ClientError):
    """The server answered with an error status.

    ``status`` is the HTTP status, ``code`` the API's stable error code (``not_found``,
    ``idempotency_conflict``, ``queue_full``, ...; ``""`` for the few answers the web framework
    gives in plain text, such as a 405), ``message`` what the server said to do, and
    ``retry_after`` the seconds to wait before retrying when the server said so (429), else
    None.
    """

    status: int
    code: str
    message: str
    retry_after: float | None

    def __init__(
        self, status: int, code: str, message: str, retry_after: float | None = None
    ) -> None:
        super().__init__(status, code, message, retry_after)
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after

    def __str__(self) -> str:
        return f"server said {self.status} {self.code or '(no code)'}: {self.message}"


class WaitTimeoutError(ClientError, TimeoutError):
    """``wait`` ran out of time before the job ended; ``job`` is the job as last seen (the job
    itself goes on: wait again, or cancel it)."""

    job: Job
    waited: float

    def __init__(self, job: Job, waited: float) -> None:
        super().__init__(job, waited)
        self.job = job
        self.waited = waited

    def __str__(self) -> str:
        return f"job {self.job.id} is still {self.job.state} after {self.waited:.1f} s"


# ---------------------------------------------------------------------------------------------
# What the API returns


@dataclass(frozen=True)
class ObjectInfo:
    """A stored object (``GET /v1/objects/{id}``): a key set, a ciphertext, a task graph or a
    job's result."""

    #: SHA-256 of the object's bytes, 64 lowercase hex digits (its address in the tenant).
    id: str
    #: ``"keys"``, ``"ciphertext"``, ``"graph"`` or ``"result"``.
    kind: str
    #: Size in bytes.
    bytes: int
    #: Fingerprint of its CKKS parameters, 16 hex digits (``""`` for a task graph).
    parameters: str
    #: A kind-specific summary (ring degree and keys; level, scale and slots; task count).
    info: dict[str, Any] = field(default_factory=dict)
    #: Unix time (seconds) when the tenant first stored these bytes.
    created_unix: int = 0

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ObjectInfo:
        """An ``ObjectInfo`` from the API's JSON object."""
        return cls(
            id=str(d["id"]),
            kind=str(d["kind"]),
            bytes=int(d["bytes"]),
            parameters=str(d["parameters"]),
            info=dict(d.get("info") or {}),
            created_unix=int(d.get("created_unix") or 0),
        )


@dataclass(frozen=True)
class Progress:
    """A running job's progress: task-graph tasks finished out of the total."""

    tasks_done: int
    tasks_total: int

    @property
    def fraction(self) -> float:
        """``tasks_done / tasks_total`` (0.0 when the total is 0)."""
        return self.tasks_done / self.tasks_total if self.tasks_total else 0.0


@dataclass(frozen=True)
class Job:
    """A job as the server shows it (``JobView``)."""

    #: Job id (unique across the server).
    id: int
    #: ``"accepted"``, ``"running"``, ``"done"``, ``"failed"`` or ``"cancelled"``.
    state: str
    #: ``"exp"``, ``"polynomial"``, ``"graph"``, ``"matmul"`` or ``"cryptonets"``.
    kind: str = ""
    #: The idempotency key it was submitted with.
    idempotency_key: str = ""
    #: Priority among the tenant's queued jobs (higher runs first).
    priority: int = 0
    #: Unix time after which the result is of no use (stored, not enforced), or None.
    deadline_unix: int | None = None
    #: How many times a worker took the job.
    attempts: int = 0
    #: Unix time in milliseconds when the job was accepted.
    created_ms: int = 0
    #: Unix time in milliseconds of the latest start, or None.
    started_ms: int | None = None
    #: Unix time in milliseconds when the job ended, or None.
    finished_ms: int | None = None
    #: Tasks done and total, while ``running`` (after the first report); else None.
    progress: Progress | None = None
    #: The result object's id once ``done``, else None.
    result_id: str | None = None
    #: Why the job failed, else None.
    error: str | None = None

    @property
    def done(self) -> bool:
        """Whether the job has ended: ``done``, ``failed`` or ``cancelled`` (like
        ``concurrent.futures.Future.done``). ``succeeded`` tells whether it has a result."""
        return self.state in FINAL_STATES

    @property
    def succeeded(self) -> bool:
        """Whether the job is ``done`` (its result can be fetched)."""
        return self.state == "done"

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Job:
        """A ``Job`` from the API's ``JobView`` JSON object."""
        p = d.get("progress")
        return cls(
            id=int(d["id"]),
            state=str(d["state"]),
            kind=str(d.get("kind") or ""),
            idempotency_key=str(d.get("idempotency_key") or ""),
            priority=int(d.get("priority") or 0),
            deadline_unix=_opt_int(d.get("deadline_unix")),
            attempts=int(d.get("attempts") or 0),
            created_ms=int(d.get("created_ms") or 0),
            started_ms=_opt_int(d.get("started_ms")),
            finished_ms=_opt_int(d.get("finished_ms")),
            progress=None if p is None else Progress(int(p["tasks_done"]), int(p["tasks_total"])),
            result_id=None if d.get("result_id") is None else str(d["result_id"]),
            error=None if d.get("error") is None else str(d["error"]),
        )


def _opt_int(v: Any) -> int | None:
    return None if v is None else int(v)


# ---------------------------------------------------------------------------------------------
# Tasks


class _ExpKind(TypedDict):
    kind: Literal["exp"]


class ExpTask(_ExpKind, total=False):
    """``{"kind": "exp", "variant": ...}``: e^x slot-wise (degree-6 Maclaurin polynomial) on
    one input; ``variant`` (``"horner"``, the default, ``"bsgs"`` or ``"paper-fig3"``) only
    chooses the shape of the task graph."""

    variant: str | None


class PolynomialTask(TypedDict):
    """``{"kind": "polynomial", "coefficients": [...]}``: sum of ``c_i * x**i`` slot-wise on
    one input, 1 to 65 finite coefficients, lowest degree first."""

    kind: Literal["polynomial"]
    coefficients: list[float]


class GraphTask(TypedDict):
    """``{"kind": "graph", "graph_id": ...}``: the tenant's uploaded task graph on the job's
    inputs."""

    kind: Literal["graph"]
    graph_id: str


class MatmulTask(TypedDict):
    """``{"kind": "matmul", "matrix": [[...], ...]}``: a plaintext square matrix (its rows)
    times each input, an encrypted vector packed in exactly ``D`` slots (``d`` rounded up to a
    power of two); output ``k`` is ``M x_k`` in its first ``d`` slots. Needs Galois keys for
    the matrix's baby and giant steps (docs/serve-api.md)."""

    kind: Literal["matmul"]
    matrix: list[list[float]]


class MatmulEncryptedTask(TypedDict):
    """``{"kind": "matmul_encrypted", "side": d}``: an encrypted ``d x d`` matrix ``A`` (input
    0) times an encrypted ``d x d`` matrix ``B`` (input 1), each packed row-major in exactly
    ``D * D`` slots (``pack_matrix``); one output, ``A B``, three levels lower
    (``unpack_matrix``). Needs the relinearization key and Galois keys for the steps the
    server names when they are missing (docs/serve-api.md)."""

    kind: Literal["matmul_encrypted"]
    side: int


class CryptonetsTask(TypedDict):
    """``{"kind": "cryptonets", "packing": "batch" | "single"}``: MNIST inference with the
    server's built-in CryptoNets: ``batch`` takes 784 pixel ciphertexts (image ``s`` in slot
    ``s``) and returns 10 logit ciphertexts; ``single`` takes one 8192-slot ciphertext per
    image and returns its 10 logits in slots 0..9 (docs/serve-api.md)."""

    kind: Literal["cryptonets"]
    packing: Literal["batch", "single"]


#: What ``submit`` computes: one of the task dicts (``exp()``, ``polynomial(...)``,
#: ``graph(...)``, ``matmul(...)``, ``matmul_encrypted(...)``, ``cryptonets(...)`` build them).
Task: TypeAlias = (
    ExpTask | PolynomialTask | GraphTask | MatmulTask | MatmulEncryptedTask | CryptonetsTask
)


def exp(variant: Literal["horner", "bsgs", "paper-fig3"] | None = None) -> ExpTask:
    """The ``exp`` task: e^x slot-wise on one input ciphertext, as a degree-6 Maclaurin
    polynomial; ``variant`` chooses the task graph's shape (the server's default: horner)."""
    task: ExpTask = {"kind": "exp"}
    if variant is not None:
        task["variant"] = variant
    return task


def polynomial(coefficients: Iterable[float]) -> PolynomialTask:
    """The ``polynomial`` task: ``sum(c[i] * x**i)`` slot-wise on one input ciphertext, for 1
    to 65 finite coefficients, **lowest degree first**."""
    return {"kind": "polynomial", "coefficients": [float(c) for c in coefficients]}


def graph(graph_id: str | ObjectInfo) -> GraphTask:
    """The ``graph`` task: the tenant's uploaded task graph (``Client.upload_graph``) run on
    the job's inputs, in the order the graph declares them."""
    return {"kind": "graph", "graph_id": _object_id(graph_id)}


def matmul(matrix: Iterable[Iterable[float]]) -> MatmulTask:
    """The ``matmul`` task: the plaintext square ``matrix`` (rows of ``d`` numbers) times each
    input ciphertext, an encrypted ``d``-vector zero-padded to ``D`` slots (``D`` = ``d``
    rounded up to a power of two)."""
    return {"kind": "matmul", "matrix": [[float(x) for x in row] for row in matrix]}


def matmul_encrypted(side: int) -> MatmulEncryptedTask:
    """The ``matmul_encrypted`` task: the product of two encrypted ``side x side`` matrices,
    the job's two inputs in order (JKLS18); ``side`` from 1 to 256."""
    if isinstance(side, bool) or not isinstance(side, int) or not 1 <= side <= 256:
        raise ValueError(f"matmul_encrypted: side {side!r}; give the matrices' side, 1 to 256")
    return {"kind": "matmul_encrypted", "side": side}


def _padded(d: int) -> int:
    return 1 << max(d - 1, 0).bit_length()


def pack_matrix(m: Iterable[Iterable[float]]) -> np.ndarray:
    """The ``D * D`` values to encrypt for a square matrix of side ``d`` (``D`` = ``d`` rounded
    up to a power of two): row-major, zero-padded, for ``matmul_encrypted``."""
    a = np.asarray([list(row) for row in m], dtype=np.float64)
    if a.ndim != 2 or a.shape[0] != a.shape[1] or a.shape[0] == 0:
        raise ValueError(f"pack_matrix: a square, non-empty matrix, not shape {a.shape}")
    size = _padded(a.shape[0])
    out = np.zeros((size, size))
    out[: a.shape[0], : a.shape[1]] = a
    return out.reshape(-1)


def unpack_matrix(slots: Iterable[float], d: int) -> np.ndarray:
    """The ``d x d`` matrix in the first ``D * D`` decrypted slots of a ``matmul_encrypted``
    result."""
    v = np.asarray(list(slots), dtype=np.float64)
    size = _padded(d)
    if d < 1 or v.size < size * size:
        raise ValueError(
            f"unpack_matrix: {v.size} slots cannot hold a {d} x {d} matrix packed in "
            f"{size} x {size}"
        )
    return v[: size * size].reshape(size, size)[:d, :d].copy()


def cryptonets(packing: Literal["batch", "single"]) -> CryptonetsTask:
    """The ``cryptonets`` task: MNIST inference with the server's built-in network, with
    ``"batch"`` (784 pixel inputs, one image per slot) or ``"single"`` (one 8192-slot input)
    packing."""
    if packing not in ("batch", "single"):
        raise ValueError(f"packing {packing!r}: use 'batch' or 'single'")
    return {"kind": "cryptonets", "packing": packing}


# ---------------------------------------------------------------------------------------------
# Helpers


def split_objects(data: _Buffer) -> list[bytes]:
    """Splits concatenated heloom objects (a job's result, a key set) into one ``bytes`` per
    object: each is a 32-byte header whose bytes 24..32 hold the little-endian payload length,
    the payload, and an 8-byte checksum (checked by the loader, not here). Raises
    ``ClientError`` when the bytes end inside an object."""
    view = memoryview(data).cast("B")
    out: list[bytes] = []
    at = 0
    while at < len(view):
        if len(view) - at < _HEADER:
            raise ClientError(
                f"unexpected answer from the server: {len(view) - at} bytes at offset {at} "
                "are too few for a heloom object header"
            )
        n = _HEADER + int.from_bytes(view[at + 24 : at + 32], "little") + _CHECKSUM
        if len(view) - at < n:
            raise ClientError(
                f"unexpected answer from the server: the object at offset {at} needs {n} "
                f"bytes, {len(view) - at} are left"
            )
        out.append(bytes(view[at : at + n]))
        at += n
    return out


def _object_id(obj: str | ObjectInfo) -> str:
    return obj.id if isinstance(obj, ObjectInfo) else obj


def _job_id(job: int | Job) -> int:
    return job.id if isinstance(job, Job) else int(job)


class _Bar:
    """A job's progress on stderr: tqdm's bar when tqdm is installed, else one line redrawn
    with a carriage return."""

    def __init__(self, job_id: int) -> None:
        self._label = f"job {job_id}"
        self._tqdm: Any = None
        self._width = 0
        self._last: Progress | None = None
        try:
            tqdm = importlib.import_module("tqdm")
        except ImportError:
            return
        self._tqdm = tqdm.tqdm(total=None, desc=self._label, unit="task", file=sys.stderr)

    def update(self, job: Job) -> None:
        if job.progress is not None:
            self._last = job.progress
        elif job.state == "done" and self._last is not None:
            self._last = Progress(self._last.tasks_total, self._last.tasks_total)
        p = self._last
        if self._tqdm is not None:
            bar = self._tqdm
            if p is not None:
                if bar.total != p.tasks_total:
                    bar.total = p.tasks_total
                bar.n = p.tasks_done
            bar.set_postfix_str(job.state, refresh=False)
            bar.refresh()
            return
        if p is not None:
            filled = int(20 * p.fraction)
            line = (
                f"{self._label} [{'#' * filled}{'.' * (20 - filled)}] "
                f"{p.tasks_done}/{p.tasks_total} tasks, {job.state}"
            )
        else:
            line = f"{self._label}: {job.state}"
        self._width = max(self._width, len(line))
        sys.stderr.write("\r" + line.ljust(self._width))
        sys.stderr.flush()

    def close(self) -> None:
        if self._tqdm is not None:
            self._tqdm.close()
        elif self._width:
            sys.stderr.write("\n")
            sys.stderr.flush()


# ---------------------------------------------------------------------------------------------
# The client


class Client:
    """A blocking client of one ``heloom serve`` server with one tenant's bearer token.

    ``url`` is the server's base URL (``http://127.0.0.1:8787``; ``https://`` for a server
    started with ``--tls-cert``/``--tls-key`` or behind a TLS proxy, a path prefix is kept),
    ``token`` the tenant's token (``heloom serve token create``), ``timeout`` the seconds a
    connection attempt or a read may block (None: no limit; ``wait`` adds its long-poll time to
    it), ``ca`` a PEM file of the CA certificate(s) to trust for ``https://`` (a private CA or
    a self-signed server certificate; default: the system's trust store).

    Thread-safe: every request opens its own connection.
    """

    def __init__(
        self,
        url: str,
        token: str,
        timeout: float | None = 60.0,
        ca: str | os.PathLike[str] | None = None,
    ) -> None:
        parts = urllib.parse.urlsplit(url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{url!r}: give the server's URL, such as http://127.0.0.1:8787")
        self.url = url.strip().rstrip("/")
        self.token = token.strip()
        self.timeout = timeout
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._prefix = parts.path.rstrip("/")
        self._tls = ssl.create_default_context(cafile=os.fspath(ca) if ca is not None else None)

    def __repr__(self) -> str:
        return f"Client({self.url!r})"

    # -- transport ----------------------------------------------------------------------------

    def _connection(self, timeout: float | None) -> http.client.HTTPConnection:
        if self._https:
            return http.client.HTTPSConnection(
                self._host, self._port, timeout=timeout, context=self._tls
            )
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _unreachable(self, e: BaseException) -> ClientError:
        return ClientError(
            f"cannot reach the server at {self.url}: {type(e).__name__}: {e}; "
            "is `heloom serve` running there?"
        )

    def _request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Sequence[_Buffer] | IO[bytes] | None = None,
        length: int | None = None,
        content_type: str = "application/octet-stream",
        timeout: float | None = None,
    ) -> tuple[int, bytes]:
        """Sends one request and reads the whole answer; raises ``ApiError`` for a status
        other than 2xx and ``ClientError`` when the server cannot be reached."""
        target = self._prefix + path
        if query:
            target += "?" + urllib.parse.urlencode(query)
        headers = {
            "Authorization": f"Bearer {self.token}",
            "User-Agent": f"heloom-python/{__version__}",
            "Accept": "application/json, application/octet-stream",
            "Connection": "close",
        }
        if body is not None:
            headers["Content-Type"] = content_type
            if length is None and isinstance(body, Sequence):
                length = sum(memoryview(b).nbytes for b in body)
            # (a file body always comes with its length: ``upload`` takes it from fstat)
            headers["Content-Length"] = str(length)
        conn = self._connection(self.timeout if timeout is None else timeout)
        try:
            try:
                conn.putrequest(method, target, skip_accept_encoding=True)
                for k, v in headers.items():
                    conn.putheader(k, v)
                conn.endheaders()
                if isinstance(body, Sequence):
                    for chunk in body:
                        conn.send(chunk)
                elif body is not None:
                    while chunk := body.read(_CHUNK):
                        conn.send(chunk)
            except (OSError, http.client.HTTPException) as e:
                # The server may have answered early (413, 401) and closed the connection:
                # read its answer if there is one.
                if conn.sock is None:  # not connected
                    raise self._unreachable(e) from e
                try:
                    resp = conn.getresponse()
                except (OSError, http.client.HTTPException):
                    raise self._unreachable(e) from e
            else:
                resp = conn.getresponse()
            status = resp.status
            data = resp.read()
            retry_after = resp.getheader("Retry-After")
        except (OSError, http.client.HTTPException) as e:
            raise self._unreachable(e) from e
        finally:
            conn.close()
        if 200 <= status < 300:
            return status, data
        raise _api_error(status, resp.reason, data, retry_after)

    def _json(self, method: str, path: str, **kw: Any) -> Any:
        _, data = self._request(method, path, **kw)
        try:
            return json.loads(data)
        except ValueError as e:
            raise ClientError(f"unexpected answer from the server: {e}") from e

    def _object(self, method: str, path: str, **kw: Any) -> ObjectInfo:
        d = self._json(method, path, **kw)
        try:
            return ObjectInfo.from_json(d)
        except (KeyError, TypeError, ValueError) as e:
            raise ClientError(f"unexpected answer from the server: {e!r} in {d!r}") from e

    def _job(self, method: str, path: str, **kw: Any) -> Job:
        d = self._json(method, path, **kw)
        try:
            return Job.from_json(d)
        except (KeyError, TypeError, ValueError) as e:
            raise ClientError(f"unexpected answer from the server: {e!r} in {d!r}") from e

    # -- the API ------------------------------------------------------------------------------

    def version(self) -> dict[str, Any]:
        """``GET /v1``: the API's name and version and the server's heloom version (needs no
        valid token: a cheap check that the server is there)."""
        d = self._json("GET", "/v1")
        if not isinstance(d, dict):
            raise ClientError(f"unexpected answer from the server: {d!r}")
        return d

    def upload(self, data: _Buffer | str | os.PathLike[str]) -> ObjectInfo:
        """Uploads one object: a key set (parameters followed by evaluation keys), a ciphertext
        or a task graph, as ``bytes`` (or another buffer), or a file path, which is streamed in
        1 MiB chunks and never read whole. Returns the stored object (the same one again when
        this tenant already stores these bytes)."""
        if isinstance(data, (bytes, bytearray, memoryview)):
            return self._object("POST", "/v1/objects", body=[data])
        with open(data, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            return self._object("POST", "/v1/objects", body=f, length=size)

    def upload_keys(
        self,
        context_or_params: Context | CkksParameters,
        evaluation_keys: EvaluationKeys | KeySet,
    ) -> ObjectInfo:
        """Uploads a key set: the parameters (of a ``Context`` or a ``CkksParameters``)
        followed by the evaluation keys made for them (a ``KeySet``'s ``evaluation_keys`` are
        taken; its secret key is never sent). Jobs run with its ``id`` as ``key_id``."""
        params = (
            context_or_params.params
            if isinstance(context_or_params, Context)
            else context_or_params
        )
        keys = (
            evaluation_keys.evaluation_keys
            if isinstance(evaluation_keys, KeySet)
            else evaluation_keys
        )
        return self._object("POST", "/v1/objects", body=[params.to_bytes(), keys.to_bytes()])

    def upload_ciphertext(self, ciphertext: Ciphertext) -> ObjectInfo:
        """Uploads one ciphertext (64-bit words); the tenant must have uploaded the key set of
        its parameters first."""
        return self.upload(ciphertext.to_bytes())

    def upload_graph(self, task_graph: TaskGraph) -> ObjectInfo:
        """Uploads a task graph, for ``graph(...)`` tasks."""
        return self.upload(task_graph.to_bytes())

    def objects(self, limit: int | None = None, before: int | None = None) -> list[ObjectInfo]:
        """One page of this tenant's objects, newest first: at most ``limit`` (the server's
        default 1000, at most 10 000), only those before the cursor ``before`` (opaque, from
        the server). ``iter_objects`` goes through every page."""
        return self._objects_page(limit, before)[0]

    def iter_objects(self) -> Iterator[ObjectInfo]:
        """Every object of this tenant, newest first, fetched a page of 1000 at a time."""
        before: int | None = None
        while True:
            objects, before = self._objects_page(1000, before)
            yield from objects
            if before is None:
                return

    def _objects_page(
        self, limit: int | None, before: int | None
    ) -> tuple[list[ObjectInfo], int | None]:
        return self._page("objects", ObjectInfo.from_json, {"limit": limit, "before": before})

    def _page(
        self, what: str, parse: Callable[[Mapping[str, Any]], _T], query: Mapping[str, Any]
    ) -> tuple[list[_T], int | None]:
        """One page of ``GET /v1/{what}`` (the query's None values left out): its entries and
        its ``next_before``."""
        q = {k: str(v) for k, v in query.items() if v is not None}
        d = self._json("GET", f"/v1/{what}", query=q)
        try:
            nb = d.get("next_before")
            return [parse(x) for x in d[what]], None if nb is None else int(nb)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ClientError(f"unexpected answer from the server: {e!r}") from e

    def object_info(self, object_id: str | ObjectInfo) -> ObjectInfo:
        """One of this tenant's objects."""
        return self._object("GET", f"/v1/objects/{_quote(_object_id(object_id))}")

    def object_data(self, object_id: str | ObjectInfo) -> bytes:
        """An object's stored bytes."""
        return self._request("GET", f"/v1/objects/{_quote(_object_id(object_id))}/data")[1]

    def delete_object(self, object_id: str | ObjectInfo) -> None:
        """Deletes one of this tenant's objects (jobs that still need it fail)."""
        self._request("DELETE", f"/v1/objects/{_quote(_object_id(object_id))}")

    def submit(
        self,
        key_id: str | ObjectInfo,
        inputs: Sequence[str | ObjectInfo],
        task: Task | Mapping[str, Any],
        idempotency_key: str | None = None,
        priority: int = 0,
        deadline_unix: int | None = None,
        result_level: int | None = None,
    ) -> Job:
        """Submits a job: ``task`` (``exp()``, ``polynomial(coefficients)``, ``graph(id)`` or
        such a dict) on the ciphertext objects ``inputs``, with the key set ``key_id``.

        ``idempotency_key`` (1 to 128 printable ASCII characters) names the job within the
        tenant: submitting the same key and job again returns the existing job, the same key
        with another job raises ``ApiError`` 409. When None, a fresh uuid4 is used, so pass
        your own key to make retries safe. ``priority``: higher runs first among the tenant's
        queued jobs. ``deadline_unix``: a job the queue predicts to end after it is refused
        with 429, and one not started by then fails. ``result_level``: the result is dropped to
        at most this level before it is stored (exact; fewer bytes to store and fetch); 0 keeps
        only the first prime q0, so every slot value must stay below q0 / (2 * scale). Raises
        ``ApiError`` 429 (``retry_after`` set) when the tenant's queue is full.
        """
        req = _submit_request(
            key_id, inputs, task, idempotency_key, priority, deadline_unix, result_level
        )
        body = json.dumps(req).encode()
        return self._job("POST", "/v1/jobs", body=[body], content_type="application/json")

    def submit_many(self, jobs: Iterable[Mapping[str, Any]]) -> list[Job]:
        """Submits several jobs in one request and one commit (``POST /v1/jobs/batch``): all
        are accepted, or none (``ApiError`` names the first bad job by its position). Each job
        is a mapping of ``submit``'s arguments: ``key_id``, ``inputs``, ``task`` and, optional,
        ``idempotency_key`` (a fresh uuid4 when absent), ``priority``, ``deadline_unix``,
        ``result_level``. At most 1000 jobs per call; returns the jobs in order.
        """
        reqs = []
        for j in jobs:
            unknown = set(j) - _SUBMIT_FIELDS
            if unknown:
                raise ValueError(
                    f"unknown job fields {sorted(unknown)}: use {sorted(_SUBMIT_FIELDS)}"
                )
            reqs.append(
                _submit_request(
                    j["key_id"],
                    j["inputs"],
                    j["task"],
                    j.get("idempotency_key"),
                    int(j.get("priority", 0)),
                    j.get("deadline_unix"),
                    j.get("result_level"),
                )
            )
        body = json.dumps({"jobs": reqs}).encode()
        d = self._json("POST", "/v1/jobs/batch", body=[body], content_type="application/json")
        try:
            return [Job.from_json(v) for v in d["jobs"]]
        except (KeyError, TypeError, ValueError) as e:
            raise ClientError(f"unexpected answer from the server: {e!r} in {d!r}") from e

    def delete_job(self, job_id: int | Job, result: bool = False) -> None:
        """Deletes the record of one of this tenant's ended jobs (``ApiError`` 409 while it
        has not ended: cancel it first); its idempotency key is free again. Its result object
        stays unless ``result`` is true (both go in one request, even if another job names
        the same result object)."""
        query = {"result": "true"} if result else None
        self._request("DELETE", f"/v1/jobs/{_job_id(job_id)}", query=query)

    def job(self, job_id: int | Job) -> Job:
        """One of this tenant's jobs, as it is now."""
        return self._job("GET", f"/v1/jobs/{_job_id(job_id)}")

    def jobs(
        self, state: str | None = None, limit: int | None = None, before: int | None = None
    ) -> list[Job]:
        """One page of this tenant's jobs, newest first: only those in ``state`` when given,
        only those with an id below ``before`` when given, at most ``limit`` (the server's
        default 1000, at most 10 000). ``iter_jobs`` goes through every page."""
        return self._jobs_page(state, limit, before)[0]

    def iter_jobs(self, state: str | None = None) -> Iterator[Job]:
        """Every job of this tenant (only those in ``state`` when given), newest first,
        fetched a page of 1000 at a time."""
        before: int | None = None
        while True:
            jobs, before = self._jobs_page(state, 1000, before)
            yield from jobs
            if before is None:
                return

    def _jobs_page(
        self, state: str | None, limit: int | None, before: int | None
    ) -> tuple[list[Job], int | None]:
        return self._page("jobs", Job.from_json, {"state": state, "limit": limit, "before": before})

    def cancel(self, job_id: int | Job) -> Job:
        """Cancels a job that has not ended (one that has is returned unchanged)."""
        return self._job("POST", f"/v1/jobs/{_job_id(job_id)}/cancel")

    def wait(self, job_id: int | Job, timeout: float | None = None, progress: bool = False) -> Job:
        """Waits until the job ends (``done``, ``failed`` or ``cancelled``) and returns it; a
        failed job is returned, not raised (see ``Job.error``).

        Long-polls ``GET /v1/jobs/{id}/wait``: the server holds each request until the job
        ends, up to 30 s (1 s with ``progress``), so there is no busy polling. ``timeout``:
        the most seconds to wait in all (None: no limit), after which ``WaitTimeoutError``
        is raised. ``progress=True`` shows the tasks done out of the total on stderr (a tqdm
        bar when tqdm is installed, else one line redrawn in place).
        """
        jid = _job_id(job_id)
        most = _WAIT_STEP_PROGRESS if progress else _WAIT_STEP
        start = time.monotonic()
        bar = _Bar(jid) if progress else None
        try:
            while True:
                job = self._poll(jid, _step(start, timeout, most))
                if bar is not None:
                    bar.update(job)
                if job.done:
                    return job
                _check_timeout(job, start, timeout)
        finally:
            if bar is not None:
                bar.close()

    def _poll(self, job_id: int, step: float) -> Job:
        """One long poll: the job once it has ended, or after ``step`` seconds."""
        return self._job(
            "GET",
            f"/v1/jobs/{job_id}/wait",
            query={"timeout_s": f"{step:.3f}"},
            timeout=None if self.timeout is None else self.timeout + step,
        )

    def result_bytes(self, job_id: int | Job, wait: float | None = None) -> bytes:
        """A ``done`` job's result: its output ciphertexts' bytes, one after another (raises
        ``ApiError`` 409 ``no_result`` for a job that failed, was cancelled or, without
        ``wait``, has not ended).

        ``wait``: the most seconds to wait for the job to end first, in the same requests
        (``GET /v1/jobs/{id}/result?timeout_s=``: the server holds each up to 30 s), so a
        submit is followed by one request instead of a wait and a fetch; ``WaitTimeoutError``
        when it has not ended by then."""
        jid = _job_id(job_id)
        if wait is None:
            return self._request("GET", f"/v1/jobs/{jid}/result")[1]
        start = time.monotonic()
        while True:
            step = _step(start, wait, _WAIT_STEP)
            try:
                return self._request(
                    "GET",
                    f"/v1/jobs/{jid}/result",
                    query={"timeout_s": f"{step:.3f}"},
                    timeout=None if self.timeout is None else self.timeout + step,
                )[1]
            except ApiError as e:
                if e.code != "not_ended":
                    raise
            _check_timeout(self.job(jid), start, wait)

    def result(
        self, job_id: int | Job, context: Context, wait: float | None = None
    ) -> list[Ciphertext]:
        """A ``done`` job's output ciphertexts, in the order of the task's outputs, loaded for
        ``context`` (a context of the key set's parameters); decrypt them with the secret
        key. ``exp`` and ``polynomial`` jobs have one output. ``wait`` as in
        ``result_bytes``."""
        data = self.result_bytes(job_id, wait)
        return [Ciphertext.from_bytes(context, b) for b in split_objects(data)]


def _step(start: float, timeout: float | None, most: float) -> float:
    """Seconds of the next long poll: ``most``, or what is left of ``timeout``."""
    if timeout is None:
        return most
    return max(0.0, min(most, timeout - (time.monotonic() - start)))


def _check_timeout(job: Job, start: float, timeout: float | None) -> None:
    """Raises ``WaitTimeoutError`` once ``timeout`` seconds have passed since ``start``."""
    waited = time.monotonic() - start
    if timeout is not None and waited >= timeout:
        raise WaitTimeoutError(job, waited)


def _quote(s: str) -> str:
    return urllib.parse.quote(s, safe="")


def _api_error(status: int, reason: str, data: bytes, retry_after: str | None) -> ApiError:
    """The ``ApiError`` of an answer with an error status: the API's
    ``{"error": {"code", "message"}}``, or the framework's plain text."""
    code, message = "", ""
    try:
        err = json.loads(data)["error"]
        code, message = str(err["code"]), str(err["message"])
    except (ValueError, KeyError, TypeError):
        message = data.decode("utf-8", "replace").strip()[:1000] or reason or "(no message)"
    after: float | None = None
    if retry_after is not None:
        with contextlib.suppress(ValueError):
            after = float(retry_after)
    return ApiError(status, code, message, after)


# ---------------------------------------------------------------------------------------------
# asyncio


class AsyncClient:
    """The asyncio variant of ``Client``: the same methods, as coroutines.

    Each coroutine runs the blocking ``Client`` method in a worker thread with
    ``asyncio.to_thread``, so the event loop stays free while a request (or a long poll of
    ``wait``) is in flight; concurrency is bounded by the loop's default thread pool. The
    blocking client is ``AsyncClient.sync``.
    """

    def __init__(
        self,
        url: str,
        token: str,
        timeout: float | None = 60.0,
        ca: str | os.PathLike[str] | None = None,
    ) -> None:
        self.sync = Client(url, token, timeout, ca)

    def __repr__(self) -> str:
        return f"AsyncClient({self.sync.url!r})"

    @property
    def url(self) -> str:
        """The server's base URL."""
        return self.sync.url

    async def version(self) -> dict[str, Any]:
        """``Client.version`` in a worker thread."""
        return await asyncio.to_thread(self.sync.version)

    async def upload(self, data: _Buffer | str | os.PathLike[str]) -> ObjectInfo:
        """``Client.upload`` in a worker thread."""
        return await asyncio.to_thread(self.sync.upload, data)

    async def upload_keys(
        self,
        context_or_params: Context | CkksParameters,
        evaluation_keys: EvaluationKeys | KeySet,
    ) -> ObjectInfo:
        """``Client.upload_keys`` in a worker thread."""
        return await asyncio.to_thread(self.sync.upload_keys, context_or_params, evaluation_keys)

    async def upload_ciphertext(self, ciphertext: Ciphertext) -> ObjectInfo:
        """``Client.upload_ciphertext`` in a worker thread."""
        return await asyncio.to_thread(self.sync.upload_ciphertext, ciphertext)

    async def upload_graph(self, task_graph: TaskGraph) -> ObjectInfo:
        """``Client.upload_graph`` in a worker thread."""
        return await asyncio.to_thread(self.sync.upload_graph, task_graph)

    async def objects(
        self, limit: int | None = None, before: int | None = None
    ) -> list[ObjectInfo]:
        """``Client.objects`` in a worker thread."""
        return await asyncio.to_thread(self.sync.objects, limit, before)

    async def object_info(self, object_id: str | ObjectInfo) -> ObjectInfo:
        """``Client.object_info`` in a worker thread."""
        return await asyncio.to_thread(self.sync.object_info, object_id)

    async def object_data(self, object_id: str | ObjectInfo) -> bytes:
        """``Client.object_data`` in a worker thread."""
        return await asyncio.to_thread(self.sync.object_data, object_id)

    async def delete_object(self, object_id: str | ObjectInfo) -> None:
        """``Client.delete_object`` in a worker thread."""
        await asyncio.to_thread(self.sync.delete_object, object_id)

    async def submit(
        self,
        key_id: str | ObjectInfo,
        inputs: Sequence[str | ObjectInfo],
        task: Task | Mapping[str, Any],
        idempotency_key: str | None = None,
        priority: int = 0,
        deadline_unix: int | None = None,
        result_level: int | None = None,
    ) -> Job:
        """``Client.submit`` in a worker thread."""
        return await asyncio.to_thread(
            self.sync.submit,
            key_id,
            inputs,
            task,
            idempotency_key,
            priority,
            deadline_unix,
            result_level,
        )

    async def submit_many(self, jobs: Iterable[Mapping[str, Any]]) -> list[Job]:
        """``Client.submit_many`` in a worker thread."""
        return await asyncio.to_thread(self.sync.submit_many, list(jobs))

    async def delete_job(self, job_id: int | Job, result: bool = False) -> None:
        """``Client.delete_job`` in a worker thread."""
        await asyncio.to_thread(self.sync.delete_job, job_id, result)

    async def job(self, job_id: int | Job) -> Job:
        """``Client.job`` in a worker thread."""
        return await asyncio.to_thread(self.sync.job, job_id)

    async def jobs(
        self, state: str | None = None, limit: int | None = None, before: int | None = None
    ) -> list[Job]:
        """``Client.jobs`` in a worker thread."""
        return await asyncio.to_thread(self.sync.jobs, state, limit, before)

    async def cancel(self, job_id: int | Job) -> Job:
        """``Client.cancel`` in a worker thread."""
        return await asyncio.to_thread(self.sync.cancel, job_id)

    async def wait(
        self, job_id: int | Job, timeout: float | None = None, progress: bool = False
    ) -> Job:
        """``Client.wait``, one long poll at a time in a worker thread: cancelling the
        coroutine stops waiting (the poll in flight, at most 30 s, or 1 s with ``progress``,
        finishes in its thread)."""
        jid = _job_id(job_id)
        most = _WAIT_STEP_PROGRESS if progress else _WAIT_STEP
        start = time.monotonic()
        bar = _Bar(jid) if progress else None
        try:
            while True:
                job = await asyncio.to_thread(self.sync._poll, jid, _step(start, timeout, most))
                if bar is not None:
                    bar.update(job)
                if job.done:
                    return job
                _check_timeout(job, start, timeout)
        finally:
            if bar is not None:
                bar.close()

    async def result_bytes(self, job_id: int | Job, wait: float | None = None) -> bytes:
        """``Client.result_bytes`` in a worker thread."""
        return await asyncio.to_thread(self.sync.result_bytes, job_id, wait)

    async def result(
        self, job_id: int | Job, context: Context, wait: float | None = None
    ) -> list[Ciphertext]:
        """``Client.result`` in a worker thread."""
        return await asyncio.to_thread(self.sync.result, job_id, context, wait)
