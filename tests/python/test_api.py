"""The public surface: exports, docstrings, and the type stubs kept in step with the module."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import heloom
from heloom import _heloom

STUB = Path(heloom.__file__).with_name("_heloom.pyi")

CLASSES = [
    "CkksParameters",
    "Context",
    "SecretKey",
    "PublicKey",
    "EvaluationKeys",
    "KeySet",
    "Plaintext",
    "Ciphertext",
    "Evaluator",
    "Bootstrapper",
    "GraphBuilder",
    "Value",
    "TaskGraph",
    "AesResult",
]
EXCEPTIONS = [
    "HeloomError",
    "ParameterError",
    "FormatError",
    "ScaleError",
    "LevelError",
    "MissingKeyError",
    "InputError",
    "GraphError",
    "DeviceUnavailableError",
    "CryptoError",
]
FUNCTIONS = [
    "cores",
    "exp_graph",
    "polynomial_graph",
    "profile_names",
    "simulate",
    "aes_encrypt",
    "aes_decrypt",
    "offload_devices",
    "offload_compare",
    "he_offload_compare",
    "mnist",
    "upgrade_v1",
]
CONSTANTS = ["POLICIES"]


def public_members(cls: type) -> set[str]:
    """Methods and properties defined by the extension class itself (not inherited)."""
    names = set()
    for name, value in vars(cls).items():
        if name.startswith("__") and name not in {
            "__add__",
            "__radd__",
            "__sub__",
            "__rsub__",
            "__mul__",
            "__rmul__",
            "__truediv__",
            "__neg__",
            "__pos__",
            "__len__",
            "__array_ufunc__",
        }:
            continue
        if name.startswith("_") and not name.startswith("__"):
            continue
        del value
        names.add(name)
    return names


def stub_members() -> dict[str, set[str]]:
    tree = ast.parse(STUB.read_text())
    out: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names = set()
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    names.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.add(item.target.id)
            out[node.name] = names
    return out


SUBMODULES = ("runtime", "offload", "apps")


def test_exports() -> None:
    everything = set(CLASSES) | set(EXCEPTIONS) | set(FUNCTIONS) | set(CONSTANTS)
    layered: set[str] = set()
    for module in SUBMODULES:
        sub = getattr(heloom, module)
        assert inspect.getdoc(sub), module
        assert set(sub.__all__) <= everything, module
        assert not layered & set(sub.__all__), f"{module} repeats another submodule's names"
        layered |= set(sub.__all__)
        for name in sub.__all__:
            # The same object in the submodule, at the top level (old imports keep working)
            # and in the extension module.
            assert getattr(sub, name) is getattr(heloom, name) is getattr(_heloom, name)
    # The top level lists the CKKS API and the submodules; together they cover every name.
    assert set(heloom.__all__) == (everything - layered) | {"__version__"} | set(SUBMODULES)
    for name in set(heloom.__all__) - set(SUBMODULES):
        assert getattr(heloom, name) is getattr(_heloom, name)
    assert "simulate" in heloom.runtime.__all__
    assert "aes_encrypt" in heloom.offload.__all__
    assert "mnist" in heloom.apps.__all__
    assert isinstance(heloom.__version__, str)
    assert STUB.exists()
    assert STUB.with_name("py.typed").exists()


@pytest.mark.parametrize("name", CLASSES)
def test_docstrings(name: str) -> None:
    cls = getattr(heloom, name)
    assert cls.__module__ == "heloom"
    assert inspect.getdoc(cls), name
    for member in public_members(cls) - {"__array_ufunc__"}:
        doc = inspect.getdoc(getattr(cls, member))
        assert doc, f"{name}.{member} has no docstring"


@pytest.mark.parametrize("name", FUNCTIONS)
def test_function_docstrings_and_stubs(name: str) -> None:
    assert inspect.getdoc(getattr(heloom, name)), name
    tree = ast.parse(STUB.read_text())
    stubbed = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert name in stubbed, f"{name} missing from {STUB.name}"


def test_policies_constant() -> None:
    assert isinstance(heloom.POLICIES, tuple)
    assert set(heloom.POLICIES) == {
        "fixed-1",
        "fixed-half",
        "fixed-full",
        "paper-dynamic",
        "heloom",
    }


@pytest.mark.parametrize("name", CLASSES)
def test_stubs_match_the_module(name: str) -> None:
    stubs = stub_members()
    assert name in stubs, f"{name} missing from {STUB.name}"
    runtime = public_members(getattr(heloom, name))
    stubbed = {m for m in stubs[name] if m not in {"__new__", "__eq__", "__hash__"}}
    assert runtime == stubbed


def test_stub_exceptions() -> None:
    stubs = stub_members()
    for name in EXCEPTIONS:
        assert name in stubs


def test_stubtest() -> None:
    """mypy's stubtest finds the stubs consistent with the module (when mypy is installed)."""
    pytest.importorskip("mypy")
    import subprocess
    import sys

    allowlist = Path(__file__).with_name("stubtest_allowlist.txt")
    proc = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "heloom._heloom", "--allowlist", str(allowlist)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
