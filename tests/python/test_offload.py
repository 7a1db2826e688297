"""Bulk AES over several devices (aes_encrypt / aes_decrypt), the device probe and the device
layer's comparisons, from Python."""

from __future__ import annotations

import random
from typing import Literal, TypeAlias

import pytest

import heloom

from conftest import run_example

Cipher: TypeAlias = Literal["aes-128-cbc", "aes-192-cbc", "aes-256-cbc", "aes-256-gcm"]
CIPHERS: list[Cipher] = ["aes-128-cbc", "aes-192-cbc", "aes-256-cbc", "aes-256-gcm"]
KEY_LEN: dict[str, int] = {
    "aes-128-cbc": 16,
    "aes-192-cbc": 24,
    "aes-256-cbc": 32,
    "aes-256-gcm": 32,
}
#: Every balancer, and each device on its own.
BALANCERS = ["round-robin", "polling", "pull", "heloom", "cpu", "soft"]
#: Item sizes around the block size and up to 20,000 bytes.
SIZES = [0, 1, 15, 16, 17, 31, 32, 100, 1000, 4095, 4096, 8193, 20000]

DEVICES = {d["kind"]: d for d in heloom.offload_devices()}
KERNEL = DEVICES["kernel"]["available"]
needs_kernel = pytest.mark.skipif(
    not KERNEL, reason="no kernel device (AF_ALG) here; see heloom.offload_devices()"
)


def make_items(seed: int, sizes: list[int] = SIZES, repeat: int = 3) -> list[bytes]:
    rng = random.Random(seed)
    items = [rng.randbytes(s) for s in sizes * repeat]
    rng.shuffle(items)
    return items


def ct_len(cipher: Cipher, n: int) -> int:
    return n + 16 if cipher.endswith("gcm") else (n // 16 + 1) * 16


def key_for(cipher: Cipher, seed: int = 7) -> bytes:
    return random.Random(seed).randbytes(KEY_LEN[cipher])


# ---------------------------------------------------------------- round trips


@pytest.mark.parametrize("balancer", BALANCERS)
@pytest.mark.parametrize("cipher", CIPHERS)
def test_round_trip(cipher: Cipher, balancer: str) -> None:
    items = make_items(1)
    key = key_for(cipher)
    enc = heloom.aes_encrypt(items, key, cipher=cipher, balancer=balancer)
    assert len(enc) == len(items)
    outputs = enc.outputs
    assert [len(c) for c in outputs] == [ct_len(cipher, len(p)) for p in items]
    ivs = enc.ivs
    assert all(isinstance(iv, bytes) and len(iv) == 16 for iv in ivs)
    assert len(set(ivs)) == len(ivs), "random IVs repeat"
    dec = heloom.aes_decrypt(outputs, key, ivs=ivs, cipher=cipher, balancer=balancer)
    assert dec.outputs == items
    assert dec.ivs == ivs
    for res, direction in ((enc, "encrypt"), (dec, "decrypt")):
        r = res.report
        assert r["cipher"] == cipher
        assert r["direction"] == direction
        assert r["items"] == len(items)
        assert sum(r["items_per_device"].values()) == len(items)
        assert list(r["items_per_device"]) == [d["name"] for d in r["devices"]]
        assert r["ms"] > 0
        if balancer in {"cpu", "soft"}:
            assert r["method"].startswith(balancer + ":")
            ran = [n for n, k in r["items_per_device"].items() if k]
            assert ran == [r["method"]]
        else:
            assert r["method"] == balancer
    assert sum(enc.report["bytes_per_device"].values()) == sum(map(len, items))
    assert enc.report["bytes"] == sum(map(len, items))


@needs_kernel
@pytest.mark.parametrize("cipher", CIPHERS)
def test_round_trip_with_the_kernel_device(cipher: Cipher) -> None:
    items = make_items(2)
    key = key_for(cipher)
    enc = heloom.aes_encrypt(items, key, cipher=cipher, devices="cpu:1,soft:1,kernel:1")
    dec = heloom.aes_decrypt(enc.outputs, key, ivs=enc.ivs, cipher=cipher, devices="kernel")
    assert dec.outputs == items
    assert sum(enc.report["items_per_device"].values()) == len(items)


@pytest.mark.parametrize("cipher", CIPHERS)
def test_outputs_do_not_depend_on_devices_or_balancer(cipher: Cipher) -> None:
    items = make_items(3)
    key = key_for(cipher)
    ivs = [random.Random(i).randbytes(16) for i in range(len(items))]
    device_lists = ["cpu,soft", "cpu:1,soft:1", "soft:2", "cpu", "soft,soft"]
    if KERNEL:
        device_lists.append("cpu:1,soft:1,kernel:1")
    want = heloom.aes_encrypt(items, key, cipher=cipher, ivs=ivs, devices="cpu:1").outputs
    for devices in device_lists:
        for balancer in ["round-robin", "polling", "pull", "heloom"]:
            got = heloom.aes_encrypt(
                items, key, cipher=cipher, ivs=ivs, devices=devices, balancer=balancer
            )
            assert got.outputs == want, (devices, balancer)
            assert got.ivs == ivs


# ---------------------------------------------------------------- known answers

SP800_38A_IV = bytes.fromhex("000102030405060708090a0b0c0d0e0f")
SP800_38A_PLAIN = bytes.fromhex(
    "6bc1bee22e409f96e93d7e117393172a ae2d8a571e03ac9c9eb76fac45af8e51"
    "30c81c46a35ce411e5fbc1191a0a52ef f69f2445df4f9b17ad2b417be66c3710"
)
#: NIST SP 800-38A F.2.1, F.2.3, F.2.5: CBC-AES128/192/256.Encrypt.
CBC_VECTORS: list[tuple[Cipher, str, str]] = [
    (
        "aes-128-cbc",
        "2b7e151628aed2a6abf7158809cf4f3c",
        "7649abac8119b246cee98e9b12e9197d 5086cb9b507219ee95db113a917678b2"
        "73bed6b8e3c1743b7116e69e22229516 3ff1caa1681fac09120eca307586e1a7",
    ),
    (
        "aes-192-cbc",
        "8e73b0f7da0e6452c810f32b809079e562f8ead2522c6b7b",
        "4f021db243bc633d7178183a9fa071e8 b4d9ada9ad7dedf4e5e738763f69145a"
        "571b242012fb7ae07fa9baac3df102e0 08b0e27988598881d920a9e64f5615cd",
    ),
    (
        "aes-256-cbc",
        "603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4",
        "f58c4c04d6e5f1ba779eabfb5f7bfbd6 9cfc4e967edb808d679f777bc6702c7d"
        "39f23369a9d9bacfa530e26304231461 b2eb05e2c39be9fcda6c19078c6a9d1b",
    ),
]
#: McGrew-Viega GCM test cases 13, 14, 15 (AES-256, no AAD): key, nonce, plaintext,
#: ciphertext, tag.
GCM_VECTORS = [
    ("00" * 32, "00" * 12, "", "", "530f8afbc74536b9a963b4f1c4cb738b"),
    (
        "00" * 32,
        "00" * 12,
        "00" * 16,
        "cea7403d4d606b6e074ec5d3baf39d18",
        "d0d1c8a799996bf0265b98b5d48ab919",
    ),
    (
        "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308",
        "cafebabefacedbaddecaf888",
        "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
        "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b391aafd255",
        "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"
        "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662898015ad",
        "b094dac5d93471bdec1a502270e3cc6c",
    ),
]
KAT_DEVICES = ["cpu", "soft", "cpu,soft", *(["kernel"] if KERNEL else [])]


@pytest.mark.parametrize("devices", KAT_DEVICES)
@pytest.mark.parametrize(("cipher", "key", "ct"), CBC_VECTORS)
def test_cbc_known_answers(devices: str, cipher: Cipher, key: str, ct: str) -> None:
    k = bytes.fromhex(key)
    # The 64-byte vector, on its own and as the first of many items (so both devices run).
    items = [SP800_38A_PLAIN] * 20
    enc = heloom.aes_encrypt(
        items, k, cipher=cipher, ivs=[SP800_38A_IV] * 20, devices=devices, balancer="pull"
    )
    want = bytes.fromhex(ct)
    for out in enc.outputs:
        # The vector, then one block of PKCS#7 padding.
        assert len(out) == 80
        assert out[:64] == want
    # The first block alone: 7649abac... for AES-128.
    first = heloom.aes_encrypt(
        [SP800_38A_PLAIN[:16]], k, cipher=cipher, ivs=[SP800_38A_IV], devices=devices
    )
    assert first.outputs[0][:16] == want[:16]
    assert len(first.outputs[0]) == 32
    dec = heloom.aes_decrypt(enc.outputs, k, ivs=enc.ivs, cipher=cipher, devices=devices)
    assert dec.outputs == items


@pytest.mark.parametrize("devices", KAT_DEVICES)
@pytest.mark.parametrize(("key", "nonce", "plain", "ct", "tag"), GCM_VECTORS)
def test_gcm_known_answers(
    devices: str, key: str, nonce: str, plain: str, ct: str, tag: str
) -> None:
    k, n, p = bytes.fromhex(key), bytes.fromhex(nonce), bytes.fromhex(plain)
    want = bytes.fromhex(ct + tag)
    # A 12-byte nonce, or a 16-byte IV whose first 12 bytes are the nonce.
    for iv in (n, n + b"\xff" * 4):
        enc = heloom.aes_encrypt([p], k, ivs=[iv], devices=devices)
        assert enc.outputs == [want]
        assert enc.ivs == [iv]
        dec = heloom.aes_decrypt([want], k, ivs=[iv], devices=devices)
        assert dec.outputs == [p]


# ---------------------------------------------------------------- failures


@pytest.mark.parametrize("devices", ["cpu", "soft", *(["kernel"] if KERNEL else [])])
def test_tampered_gcm_ciphertext_raises(devices: str) -> None:
    items = make_items(4, sizes=[0, 16, 1000], repeat=2)
    key = key_for("aes-256-gcm")
    enc = heloom.aes_encrypt(items, key)
    outputs = enc.outputs
    bad = bytearray(outputs[3])
    bad[len(bad) // 2] ^= 0x01
    outputs[3] = bytes(bad)
    with pytest.raises(heloom.CryptoError, match="item 3"):
        heloom.aes_decrypt(outputs, key, ivs=enc.ivs, devices=devices)
    with pytest.raises(heloom.CryptoError):
        heloom.aes_decrypt(enc.outputs, key_for("aes-256-gcm", 8), ivs=enc.ivs, devices=devices)
    ivs = enc.ivs
    ivs[0] = bytes(16)
    with pytest.raises(heloom.CryptoError, match="item 0"):
        heloom.aes_decrypt(enc.outputs, key, ivs=ivs, devices=devices)


def test_bad_cbc_padding_raises() -> None:
    key = key_for("aes-128-cbc")
    enc = heloom.aes_encrypt([bytes(16)], key, cipher="aes-128-cbc")
    ct = bytearray(enc.outputs[0])
    ct[15] ^= 0x01  # flips the last byte of the padding block's plaintext: 0x10 -> 0x11
    with pytest.raises(heloom.CryptoError, match="padding"):
        heloom.aes_decrypt([bytes(ct)], key, ivs=enc.ivs, cipher="aes-128-cbc")
    with pytest.raises(heloom.CryptoError):
        heloom.aes_decrypt([bytes(17)], key, ivs=enc.ivs, cipher="aes-128-cbc")


def test_error_classes() -> None:
    for cls in (heloom.CryptoError, heloom.DeviceUnavailableError):
        assert issubclass(cls, heloom.HeloomError)
        assert not issubclass(cls, ValueError)
        assert cls.__module__ == "heloom"
        assert cls.__doc__


@pytest.mark.parametrize("cipher", CIPHERS)
def test_wrong_key_length(cipher: Cipher) -> None:
    n = KEY_LEN[cipher]
    with pytest.raises(ValueError, match=f"{n}-byte key, got 20 bytes") as e:
        heloom.aes_encrypt([b"x"], bytes(20), cipher=cipher)
    assert isinstance(e.value, heloom.InputError)
    with pytest.raises(ValueError, match=f"{n}-byte key"):
        heloom.aes_decrypt([bytes(32)], bytes(n + 1), ivs=[bytes(16)], cipher=cipher)


def test_bad_arguments() -> None:
    key = bytes(32)
    with pytest.raises(ValueError, match="cpu,quantum"):
        heloom.aes_encrypt([b"x"], key, devices="cpu,quantum")
    with pytest.raises(ValueError, match="quantum"):
        heloom.offload_compare(devices="quantum", sizes=[16], items=4, reps=1)
    with pytest.raises(ValueError, match="no devices"):
        heloom.aes_encrypt([b"x"], key, devices=" , ")
    with pytest.raises(ValueError, match="unknown cipher"):
        heloom.aes_encrypt([b"x"], key, cipher="aes-256-ecb")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"round-robin, polling, pull, heloom.*cpu:1, soft:1"):
        heloom.aes_encrypt([b"x"], key, devices="cpu:1,soft:1", balancer="fastest")
    with pytest.raises(ValueError, match="several devices"):
        heloom.aes_encrypt([b"x"], key, devices="soft:1,soft:1", balancer="soft")
    # A device's full name picks one of two of a kind.
    res = heloom.aes_encrypt([b"x"] * 3, key, devices="soft:1,soft:1", balancer="soft:1#2")
    assert res.report["items_per_device"] == {"soft:1": 0, "soft:1#2": 3}
    with pytest.raises(ValueError, match="2 IVs for 3 items"):
        heloom.aes_encrypt([b"a", b"b", b"c"], key, ivs=[bytes(16)] * 2)
    with pytest.raises(ValueError, match=r"ivs\[1\] has 8 bytes"):
        heloom.aes_encrypt([b"a", b"b"], key, ivs=[bytes(16), bytes(8)])
    with pytest.raises(ValueError, match="16-byte IVs"):
        heloom.aes_encrypt([b"a"], bytes(16), cipher="aes-128-cbc", ivs=[bytes(12)])
    with pytest.raises(ValueError, match="nonce"):
        heloom.aes_encrypt([b"a", b"b"], key, ivs=[bytes(16), bytes(12) + b"abcd"])
    with pytest.raises(TypeError, match="ivs"):
        heloom.aes_decrypt([b"x" * 32], key)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="wrap one item in a list"):
        heloom.aes_encrypt(b"one file", key)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="encode text first"):
        heloom.aes_encrypt(["text"], key)  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"items\[1\] must be bytes"):
        heloom.aes_encrypt([b"a", 5], key)  # type: ignore[list-item]


def test_unavailable_devices() -> None:
    with pytest.raises(heloom.DeviceUnavailableError, match="gpu") as e:
        heloom.aes_encrypt([b"x"], bytes(32), devices="gpu")
    assert "devices=cpu,soft" in str(e.value)
    with pytest.raises(heloom.DeviceUnavailableError, match="gpu"):
        heloom.aes_encrypt([b"x"], bytes(32), devices="cpu,gpu")
    with pytest.raises(heloom.DeviceUnavailableError, match="gpu"):
        heloom.he_offload_compare(devices="gpu", log_n=11, jobs=1, reps=1)
    if not KERNEL:
        with pytest.raises(heloom.DeviceUnavailableError, match="kernel"):
            heloom.aes_encrypt([b"x"], bytes(32), devices="kernel")


def test_bytes_like_inputs_and_empty_items() -> None:
    key = key_for("aes-256-gcm")
    data: list[bytes | bytearray | memoryview] = [
        b"abc",
        bytearray(b"defg"),
        memoryview(b"hijkl"),
        b"",
    ]
    enc = heloom.aes_encrypt(data, bytearray(key))
    dec = heloom.aes_decrypt(enc.outputs, memoryview(key), ivs=[bytearray(iv) for iv in enc.ivs])
    assert dec.outputs == [b"abc", b"defg", b"hijkl", b""]
    assert all(type(o) is bytes for o in dec.outputs)
    # A generator of items works too.
    gen = heloom.aes_encrypt((bytes([i]) * i for i in range(5)), key)
    assert len(gen) == 5
    empty = heloom.aes_encrypt([], key)
    assert len(empty) == 0
    assert empty.outputs == []
    assert empty.ivs == []


def test_result_object() -> None:
    res = heloom.aes_encrypt([b"a"] * 10, bytes(32), devices="cpu:1,soft:1")
    assert "AesResult(items=10" in repr(res)
    assert "aes-256-gcm" in repr(res)
    r = res.report
    r["method"] = "changed"
    r["items_per_device"]["cpu:1"] = -1
    assert res.report["method"] == "heloom"
    outs = res.outputs
    outs.clear()
    assert len(res.outputs) == 10
    assert set(res.report) >= {
        "method",
        "cipher",
        "direction",
        "items",
        "bytes",
        "ms",
        "mb_per_s",
        "claims",
        "devices",
        "items_per_device",
        "bytes_per_device",
        "busy_ms_per_device",
        "finish_ms_per_device",
    }
    assert [d["name"] for d in res.report["devices"]] == ["cpu:1", "soft:1"]
    assert res.report["devices"][0]["kind"] == "cpu"
    with pytest.raises(AttributeError):
        res.outputs = []  # type: ignore[misc]


# ---------------------------------------------------------------- probes and comparisons


def test_offload_devices() -> None:
    devices = heloom.offload_devices()
    kinds = [(d["kind"], d["workload"]) for d in devices]
    assert kinds == [
        ("cpu", "aes"),
        ("soft", "aes"),
        ("kernel", "aes"),
        ("gpu", "aes"),
        ("cpu-pool", "he"),
        ("gpu", "he"),
    ]
    for d in devices:
        assert set(d) == {"kind", "workload", "available", "engine", "error"}
        if d["available"]:
            assert isinstance(d["engine"], str)
            assert d["error"] is None
        else:
            assert d["engine"] is None
            assert isinstance(d["error"], str)
            assert d["kind"] in d["error"]
    by_kind = {(d["kind"], d["workload"]): d for d in devices}
    assert by_kind[("cpu", "aes")]["available"]
    assert by_kind[("soft", "aes")]["available"]
    # No CUDA AES kernels exist; HE jobs run on a GPU wherever the CUDA backend finds one.
    assert not by_kind[("gpu", "aes")]["available"]
    assert by_kind[("cpu-pool", "he")]["available"]
    gpu_he = by_kind[("gpu", "he")]
    if not gpu_he["available"]:
        assert "GPU" in gpu_he["error"] or "NVRTC" in gpu_he["error"]


def test_offload_compare_small() -> None:
    calls: list[tuple[str, int, int]] = []
    report = heloom.offload_compare(
        devices="cpu:1,soft:1",
        sizes=[16, 1024],
        items=200,
        reps=1,
        progress=lambda label, done, total: calls.append((label, done, total)),
    )
    assert report["cipher"] == "aes-128-cbc"
    assert report["direction"] == "encrypt"
    assert [d["name"] for d in report["devices"]] == ["cpu:1", "soft:1"]
    methods = {"cpu:1", "soft:1", "round-robin", "polling", "pull", "heloom"}
    runs = report["runs"]
    assert {(r["size"], r["workload"]) for r in runs} == {
        (16, "uniform"),
        (1024, "uniform"),
        (0, "mixed"),
    }
    for size in (16, 1024, 0):
        rows = [r for r in runs if r["size"] == size]
        assert {r["method"] for r in rows} == methods
    for r in runs:
        assert r["efficiency"] > 0 < 2, r
        assert r["ms"] > 0
        assert len(r["ms_reps"]) == 1
        assert sum(r["items_per_device"].values()) == pytest.approx(r["items"])
        assert r["single"] == (r["method"] in {"cpu:1", "soft:1"})
    # 3 workloads x 6 methods x (1 warm-up + 1 rep)
    assert len(calls) == 36
    assert calls[-1][1:] == (36, 36)


def test_offload_compare_progress_errors_propagate() -> None:
    def boom(label: str, done: int, total: int) -> None:
        raise KeyError("stop")

    with pytest.raises(KeyError, match="stop"):
        heloom.offload_compare(devices="cpu:1,soft:1", sizes=[16], items=8, reps=1, progress=boom)


def test_offload_compare_arguments() -> None:
    with pytest.raises(ValueError, match="unknown balancer"):
        heloom.offload_compare(sizes=[16], items=4, reps=1, methods=["fastest"])
    with pytest.raises(ValueError, match="direction"):
        heloom.offload_compare(direction="sideways", sizes=[16], items=4, reps=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="reps must be at least 1"):
        heloom.offload_compare(sizes=[16], items=4, reps=0)
    with pytest.raises(ValueError, match="sizes"):
        heloom.offload_compare(sizes=[], items=4, reps=1)


def test_he_offload_compare_small() -> None:
    rows = heloom.he_offload_compare(log_n=11, jobs=4, reps=1)
    names = {r["method"] for r in rows}
    assert names == {"cpu-pool:1", "cpu-pool:1#2", "round-robin", "polling", "pull", "heloom"}
    for r in rows:
        assert r["max_error"] < 1e-4
        assert r["log_n"] == 11
        assert r["jobs"] == 4
        assert r["ms"] > 0
        assert r["efficiency"] > 0
        assert sum(r["items_per_device"].values()) == pytest.approx(4)
    with pytest.raises(ValueError, match="variant"):
        heloom.he_offload_compare(log_n=11, jobs=1, reps=1, variant="taylor")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="log_n"):
        heloom.he_offload_compare(log_n=30, jobs=1, reps=1)
    with pytest.raises(ValueError, match="AES engines"):
        heloom.he_offload_compare(devices="soft", log_n=11, jobs=1, reps=1)


def test_offload_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_example("offload.py", capsys)
    assert "every file matches" in out
    assert "tampered file refused" in out
    assert "heloom" in out.split("items per size")[1]
