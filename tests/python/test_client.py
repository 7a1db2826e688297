"""heloom.client against a real ``heloom serve`` (target/release/heloom): keys, ciphertexts,
e^x and polynomial jobs decrypted and checked, idempotency, tenant isolation, errors, and the
asyncio client."""

from __future__ import annotations

import asyncio
import math
import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import heloom
from heloom.client import (
    ApiError,
    AsyncClient,
    Client,
    ClientError,
    Job,
    cryptonets,
    exp,
    matmul,
    matmul_encrypted,
    pack_matrix,
    polynomial,
    unpack_matrix,
)

from conftest import create_token

ROOT = Path(__file__).resolve().parents[2]
BINARY = Path(os.environ.get("HELOOM_BIN", ROOT / "target" / "release" / "heloom"))

if not BINARY.exists():
    pytest.skip(
        f"{BINARY} does not exist: build it with `cargo build --release -p heloom-cli` "
        "to test heloom.client against a real `heloom serve`",
        allow_module_level=True,
    )

#: Error bound of a decrypted result at N = 2^12 with a 40-bit scale (as the Rust API test).
TOL = 1e-4
#: Coefficients of the polynomial job, lowest degree first.
COEFFS = [0.5, -1.0, 0.25, 0.125]


@dataclass
class Server:
    """A running ``heloom serve`` and one client per tenant."""

    url: str
    alice: Client
    bob: Client


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``heloom serve`` on a free loopback port in a temporary data directory (insecure
    parameters allowed), with tokens for tenants alice and bob; killed at teardown."""
    data = tmp_path_factory.mktemp("serve")
    binary, dirname = str(BINARY), str(data)

    alice, bob = create_token(BINARY, data, "alice"), create_token(BINARY, data, "bob")
    log = data / "serve.log"
    with open(log, "wb") as err:
        args = ["serve", "--data", dirname, "--listen", "127.0.0.1:0", "--threads", "2"]
        proc = subprocess.Popen(
            [binary, *args, "--allow-insecure"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        url = None
        deadline = time.monotonic() + 30
        while url is None and time.monotonic() < deadline:
            m = re.search(r"listening on (http://\S+)", log.read_text(errors="replace"))
            if m:
                url = m.group(1)
            elif proc.poll() is not None:
                break
            else:
                time.sleep(0.05)
        if url is None:
            pytest.fail(f"heloom serve did not start:\n{log.read_text(errors='replace')}")
        yield Server(url, Client(url, alice, timeout=30), Client(url, bob, timeout=30))
    finally:
        proc.kill()
        proc.wait(timeout=10)


@dataclass
class Keys:
    """A small insecure context (N = 2^12, 7 levels at scale 2^40) and its keys."""

    ctx: heloom.Context
    keys: heloom.KeySet

    def encrypt(self, x: np.ndarray) -> heloom.Ciphertext:
        return self.ctx.encrypt(x, self.keys.public_key)

    def decrypt(self, ct: heloom.Ciphertext) -> np.ndarray:
        return self.ctx.decrypt(ct, self.keys.secret_key, real=True)


@pytest.fixture(scope="module")
def keys() -> Keys:
    params = heloom.CkksParameters(2**12, levels=7, scale_bits=40, first_bits=50, security=None)
    ctx = heloom.Context(params)
    return Keys(ctx, ctx.keygen())


@pytest.fixture(scope="module")
def x(keys: Keys) -> np.ndarray:
    return np.random.default_rng(7).uniform(-1.0, 1.0, keys.ctx.slots)


def exp6(x: np.ndarray) -> np.ndarray:
    """The degree-6 Maclaurin polynomial of e^x (what the server's exp task computes)."""
    return poly([1.0 / math.factorial(k) for k in range(7)], x)


def poly(c: list[float], x: np.ndarray) -> np.ndarray:
    return np.asarray(np.polynomial.polynomial.polyval(x, c), dtype=np.float64)


def test_jobs_end_to_end(
    server: Server,
    keys: Keys,
    x: np.ndarray,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    c = server.alice
    assert c.version()["api"] == "heloom"
    key = c.upload_keys(keys.ctx, keys.keys.evaluation_keys)
    assert key.kind == "keys"
    assert len(key.id) == 64
    assert c.upload_keys(keys.ctx.params, keys.keys).id == key.id, "content-addressed"
    ct = c.upload_ciphertext(keys.encrypt(x))
    assert ct.kind == "ciphertext"
    assert ct.parameters == key.parameters
    # A path is streamed and stores the same object.
    path = tmp_path / "x.ct"
    path.write_bytes(keys.encrypt(x).to_bytes())
    ct2 = c.upload(path)
    assert ct2.kind == "ciphertext"
    assert ct2.bytes == path.stat().st_size
    assert {o.id for o in c.objects()} >= {key.id, ct.id, ct2.id}

    job_exp = c.submit(key.id, [ct.id], exp())
    job_poly = c.submit(key, [ct2], polynomial(COEFFS), priority=1, deadline_unix=2**40)
    assert job_exp.kind == "exp"
    assert job_poly.kind == "polynomial"
    assert job_poly.deadline_unix == 2**40
    assert job_exp.state in {"accepted", "running"}

    done = c.wait(job_exp.id, timeout=60, progress=True)
    assert done.state == "done", done.error
    assert done.done
    assert done.succeeded
    assert done.result_id
    assert f"job {job_exp.id}" in capsys.readouterr().err
    done_poly = c.wait(job_poly, timeout=60)
    assert done_poly.state == "done", done_poly.error

    (y,) = c.result(done.id, keys.ctx)
    assert np.max(np.abs(keys.decrypt(y) - exp6(x))) < TOL
    (p,) = c.result(done_poly, keys.ctx)
    assert np.max(np.abs(keys.decrypt(p) - poly(COEFFS, x))) < TOL
    assert c.result_bytes(done.id) == c.object_data(done.result_id)

    assert c.job(done.id) == done
    listed = c.jobs()
    assert [j.id for j in listed][:2] == [job_poly.id, job_exp.id], "newest first"
    assert all(isinstance(j, Job) for j in listed)
    # A page at a time: the second page of one starts right after the first.
    (newest,) = c.jobs(limit=1)
    (older,) = c.jobs(limit=1, before=newest.id)
    assert [newest.id, older.id] == [j.id for j in listed][:2]
    assert [j.id for j in c.iter_jobs()] == [j.id for j in listed]
    assert {j.id for j in c.iter_jobs(state="done")} >= {done.id, done_poly.id}
    with pytest.raises(ApiError, match="unknown job state"):
        c.jobs(state="finished")
    objects = c.objects()
    assert len(objects) >= 2
    assert c.objects(limit=1) == objects[:1]
    assert list(c.iter_objects()) == objects
    # Cancelling a finished job changes nothing.
    assert c.cancel(done.id).state == "done"
    # Deleting an ended job's record: gone for the tenant, its result object stays.
    c.delete_job(done_poly)
    with pytest.raises(ApiError, match="does not exist"):
        c.job(done_poly.id)
    assert done_poly.result_id in {o.id for o in c.iter_objects()}
    # With result=True its result object goes in the same request.
    c.delete_job(done, result=True)
    with pytest.raises(ApiError, match="does not exist"):
        c.job(done.id)
    assert done.result_id not in {o.id for o in c.iter_objects()}
    # Waited for and fetched in one go, right after the submission.
    again = c.submit(key.id, [ct.id], polynomial([0.5, 0.25]))
    (q,) = c.result(again, keys.ctx, wait=60)
    assert np.max(np.abs(keys.decrypt(q) - poly([0.5, 0.25], x))) < TOL


def test_idempotency(server: Server, keys: Keys, x: np.ndarray) -> None:
    c = server.alice
    key = c.upload_keys(keys.ctx, keys.keys.evaluation_keys)
    ct = c.upload_ciphertext(keys.encrypt(x))
    first = c.submit(key.id, [ct.id], exp("bsgs"), idempotency_key="idem-1")
    again = c.submit(key.id, [ct.id], exp("bsgs"), idempotency_key="idem-1")
    assert again.id == first.id
    assert again.idempotency_key == "idem-1"
    with pytest.raises(ApiError) as e:
        c.submit(key.id, [ct.id], polynomial([1.0, 2.0]), idempotency_key="idem-1")
    assert e.value.status == 409
    assert e.value.code == "idempotency_conflict"
    # Without a key, every submission is a new job.
    a = c.submit(key.id, [ct.id], {"kind": "polynomial", "coefficients": [1.0]})
    b = c.submit(key.id, [ct.id], {"kind": "polynomial", "coefficients": [1.0]})
    assert a.id != b.id
    for j in (first, a, b):
        assert c.wait(j, timeout=60).done


def test_submit_many(server: Server, keys: Keys, x: np.ndarray) -> None:
    c = server.alice
    key = c.upload_keys(keys.ctx, keys.keys.evaluation_keys)
    ct = c.upload_ciphertext(keys.encrypt(x))
    first, second = c.submit_many(
        [
            {"key_id": key, "inputs": [ct], "task": exp(), "idempotency_key": "many-0"},
            {"key_id": key.id, "inputs": [ct.id], "task": polynomial(COEFFS), "result_level": 0},
        ]
    )
    assert first.kind == "exp"
    assert second.kind == "polynomial"
    (y,) = c.result(c.wait(first, timeout=60), keys.ctx)
    assert np.max(np.abs(keys.decrypt(y) - exp6(x))) < TOL
    (p,) = c.result(c.wait(second, timeout=60), keys.ctx)
    assert p.level == 0
    assert np.max(np.abs(keys.decrypt(p) - poly(COEFFS, x))) < TOL
    # All or none: a bad second job keeps the first out too.
    before = len(c.jobs())
    with pytest.raises(ApiError, match="job 1: "):
        c.submit_many(
            [
                {"key_id": key, "inputs": [ct], "task": exp(), "idempotency_key": "many-1"},
                {"key_id": key, "inputs": ["0" * 64], "task": exp()},
            ]
        )
    assert len(c.jobs()) == before
    with pytest.raises(ValueError, match="unknown job fields"):
        c.submit_many([{"key_id": key, "inputs": [ct], "task": exp(), "prio": 1}])


def test_tenants_are_isolated(server: Server, keys: Keys, x: np.ndarray) -> None:
    alice, bob = server.alice, server.bob
    key = alice.upload_keys(keys.ctx, keys.keys.evaluation_keys)
    ct = alice.upload_ciphertext(keys.encrypt(x))
    job = alice.wait(alice.submit(key.id, [ct.id], exp()), timeout=60)
    assert job.state == "done", job.error
    for call in (bob.job, bob.result_bytes, bob.cancel):
        with pytest.raises(ApiError) as e:
            call(job.id)
        assert e.value.status == 404
        assert e.value.code == "not_found"
    with pytest.raises(ApiError) as e:
        bob.object_info(key.id)
    assert e.value.status == 404
    with pytest.raises(ApiError) as e:
        bob.submit(key.id, [ct.id], exp())
    assert e.value.status == 400
    assert bob.jobs() == []
    assert bob.objects() == []
    assert alice.job(job.id).state == "done", "bob's cancel left alice's job alone"


def test_errors(server: Server, keys: Keys) -> None:
    bad = Client(server.url, "hlm_" + "0" * 64)
    with pytest.raises(ApiError) as e:
        bad.jobs()
    assert e.value.status == 401
    assert e.value.code == "unauthorized"
    assert "401" in str(e.value)

    with pytest.raises(ApiError) as e:
        server.alice.upload(keys.keys.secret_key.to_bytes())
    assert e.value.status == 400
    assert "secret key" in e.value.message

    with pytest.raises(ApiError) as e:
        server.alice.job(2**62)
    assert e.value.status == 404

    # No server at this URL: a ClientError that says so, not an ApiError.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ClientError) as unreachable:
        Client(f"http://127.0.0.1:{port}", "hlm_x", timeout=5).objects()
    assert not isinstance(unreachable.value, ApiError)
    assert "heloom serve" in str(unreachable.value)


def test_app_tasks(server: Server, keys: Keys, x: np.ndarray) -> None:
    """The matmul and cryptonets builders, and the server's checks of their inputs (the jobs
    themselves run in crates/heloom-serve/tests/apps.rs)."""
    assert matmul([[1, 2], [3, 4]]) == {"kind": "matmul", "matrix": [[1.0, 2.0], [3.0, 4.0]]}
    assert cryptonets("single") == {"kind": "cryptonets", "packing": "single"}
    with pytest.raises(ValueError, match="batch"):
        cryptonets("triple")  # type: ignore[arg-type]
    c = server.alice
    key = c.upload_keys(keys.ctx, keys.keys.evaluation_keys)
    ct = c.upload_ciphertext(keys.encrypt(x))
    with pytest.raises(ApiError) as e:
        c.submit(key, [ct], cryptonets("batch"))
    assert e.value.status == 400
    assert "784" in e.value.message
    with pytest.raises(ApiError) as e:
        c.submit(key, [ct], matmul([[1.0, 0.0], [0.0, 1.0]]))
    assert e.value.status == 400
    assert "exactly 2 slots" in e.value.message
    # The encrypted product: its builder, the packing, and the server's checks.
    assert matmul_encrypted(3) == {"kind": "matmul_encrypted", "side": 3}
    for bad in (0, 257, 2.0, True):
        with pytest.raises(ValueError, match="1 to 256"):
            matmul_encrypted(bad)  # type: ignore[arg-type]
    m = np.arange(9.0).reshape(3, 3)
    packed = pack_matrix(m)
    assert packed.shape == (16,)
    assert packed.tolist() == [0, 1, 2, 0, 3, 4, 5, 0, 6, 7, 8, 0, 0, 0, 0, 0]
    assert np.array_equal(unpack_matrix(packed, 3), m)
    with pytest.raises(ValueError, match="square"):
        pack_matrix([[1.0, 2.0]])
    with pytest.raises(ValueError, match="cannot hold"):
        unpack_matrix(packed[:8], 3)
    with pytest.raises(ApiError) as e:
        c.submit(key, [ct], matmul_encrypted(3))
    assert e.value.status == 400
    assert "two input ciphertexts" in e.value.message


def test_async_client(server: Server, keys: Keys, x: np.ndarray) -> None:
    token = server.alice.token

    async def run() -> np.ndarray:
        c = AsyncClient(server.url, token, timeout=30)
        key = await c.upload_keys(keys.ctx, keys.keys.evaluation_keys)
        ct = await c.upload_ciphertext(keys.encrypt(x))
        job = await c.submit(key.id, [ct.id], polynomial(COEFFS), result_level=0)
        done = await c.wait(job.id, timeout=60)
        assert done.state == "done", done.error
        assert (await c.job(job.id)).result_id == done.result_id
        assert job.id in {j.id for j in await c.jobs()}
        (y,) = await c.result(done.id, keys.ctx)
        assert y.level == 0, "result_level=0 keeps only q0"
        return keys.decrypt(y)

    got = asyncio.run(run())
    assert np.max(np.abs(got - poly(COEFFS, x))) < TOL


def test_https_with_a_private_ca(tmp_path: Path) -> None:
    """``heloom serve --tls-cert --tls-key`` and ``Client(..., ca=...)``: the client trusts the
    self-signed certificate it is given; without it the connection is refused."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed: no certificate to test HTTPS with")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            *(openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"),
            *("-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2"),
            *("-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost"),
        ],
        capture_output=True,
        check=True,
        timeout=60,
    )
    data = tmp_path / "data"
    token = subprocess.run(
        [str(BINARY), "serve", "token", "create", "--data", str(data), "--tenant", "tls"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout.strip()
    log = tmp_path / "serve.log"
    with open(log, "wb") as err:
        proc = subprocess.Popen(
            [
                *(str(BINARY), "serve", "--data", str(data), "--listen", "127.0.0.1:0"),
                *("--threads", "1", "--tls-cert", str(cert), "--tls-key", str(key)),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        port = None
        deadline = time.monotonic() + 30
        while port is None and time.monotonic() < deadline:
            m = re.search(
                r"listening on https://127\.0\.0\.1:(\d+)", log.read_text(errors="replace")
            )
            if m:
                port = int(m.group(1))
            elif proc.poll() is not None:
                break
            else:
                time.sleep(0.05)
        assert port is not None, log.read_text(errors="replace")
        url = f"https://localhost:{port}"
        assert Client(url, token, timeout=30, ca=cert).jobs() == []
        with pytest.raises(ClientError) as e:
            Client(url, token, timeout=30).jobs()
        assert not isinstance(e.value, ApiError)
    finally:
        proc.kill()
        proc.wait(timeout=10)
