"""Shared fixtures: one small context and key set per word size (module-independent)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import heloom

#: Rotation steps every test key set has (each is tested on its own).
ROTATIONS = [1, -1, 2, 3, 4, 8, -8, 16]

#: Error bounds for results after at most one multiplication (the task's stated bounds):
#: 64-bit words at scale 2^40, 32-bit words at scale 2^28.
TOL = {64: 2.0**-20, 32: 2.0**-10}


@dataclass
class Setup:
    """A context with keys, an evaluator and the error bound for its word size."""

    word_bits: int
    params: heloom.CkksParameters
    ctx: heloom.Context
    keys: heloom.KeySet
    ev: heloom.Evaluator
    tol: float

    @property
    def sk(self) -> heloom.SecretKey:
        return self.keys.secret_key

    @property
    def pk(self) -> heloom.PublicKey:
        return self.keys.public_key

    def enc(self, values: np.ndarray) -> heloom.Ciphertext:
        return self.ctx.encrypt(values, self.pk)

    def dec(self, ct: heloom.Ciphertext, n: int) -> np.ndarray:
        """The first ``n`` decrypted slots (complex)."""
        return self.ctx.decrypt(ct, self.sk)[:n]


def small_params(word_bits: int, levels: int | None = None) -> heloom.CkksParameters:
    """N = 2^13: 2 levels at scale 2^40 on 64-bit words, 4 levels at 2^28 on 32-bit words."""
    if word_bits == 64:
        return heloom.CkksParameters(poly_degree=2**13, levels=levels or 2, word_bits=64)
    return heloom.CkksParameters(poly_degree=2**13, levels=levels or 4, scale_bits=28, word_bits=32)


def make_setup(word_bits: int, params: heloom.CkksParameters | None = None) -> Setup:
    params = params or small_params(word_bits)
    ctx = heloom.Context(params)
    keys = ctx.keygen(rotations=ROTATIONS, conjugate=True)
    ev = ctx.evaluator(keys.evaluation_keys)
    return Setup(word_bits, params, ctx, keys, ev, TOL[word_bits])


@pytest.fixture(scope="session", params=[64, 32], ids=["w64", "w32"])
def s(request: pytest.FixtureRequest) -> Setup:
    """Small parameters, for each word size."""
    return make_setup(request.param)


@pytest.fixture(scope="session", params=[64, 32], ids=["w64", "w32"])
def deep(request: pytest.FixtureRequest) -> Setup:
    """N = 2^14 and 7 levels (polynomial evaluation), for each word size."""
    wb = request.param
    params = heloom.CkksParameters(
        poly_degree=2**14, levels=7, scale_bits=40 if wb == 64 else 28, word_bits=wb
    )
    return make_setup(wb, params)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


def run_example(name: str, capsys: pytest.CaptureFixture[str]) -> str:
    """Runs ``examples/python/<name>`` as a script; returns what it printed."""
    import runpy
    from pathlib import Path

    script = Path(__file__).parents[2] / "examples" / "python" / name
    runpy.run_path(str(script), run_name="__main__")
    return capsys.readouterr().out


def max_err(got: np.ndarray, want: np.ndarray) -> float:
    """Largest absolute error between two arrays of one length."""
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    return float(np.max(np.abs(got - want)))


def create_token(binary: Path, data: Path, tenant: str) -> str:
    """A new bearer token for ``tenant`` in the ``heloom serve`` data directory ``data``."""
    out = subprocess.run(
        [str(binary), "serve", "token", "create", "--data", str(data), "--tenant", tenant],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return out.stdout.strip()
