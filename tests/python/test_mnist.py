"""Encrypted CryptoNets on held-out MNIST images from Python."""

import pytest

import heloom


def test_mnist_small_batch_agrees_with_plaintext() -> None:
    messages: list[str] = []
    report = heloom.mnist(images=16, word_bits=32, progress=messages.append)
    assert report["images"] == 16
    assert report["agreement"] == 1.0
    assert report["encrypted_accuracy"] == report["plain_accuracy"]
    assert report["plain_accuracy"] >= 0.8
    assert report["max_logit_error"] < 1e-2
    assert report["seconds"] > 0
    assert report["images_per_s"] > 0
    assert report["batch_capacity"] == 8192
    assert set(report["stages"]) >= {"conv_s", "dense1_s", "dense2_s"}
    assert any("encrypting" in m for m in messages)


def test_mnist_single_image_packing() -> None:
    report = heloom.mnist(images=2, packing="single", word_bits=64)
    assert report["packing"] == "single"
    assert report["batch_capacity"] == 1
    assert report["agreement"] == 1.0
    assert report["batch_latency_s"] > 0


def test_mnist_bad_arguments() -> None:
    with pytest.raises(heloom.InputError):
        heloom.mnist(images=0)
    with pytest.raises(heloom.InputError):
        heloom.mnist(images=10, packing="diagonal")
    with pytest.raises(heloom.InputError):
        heloom.mnist(images=10, word_bits=48)
    with pytest.raises(OSError, match="nonexistent"):
        heloom.mnist(images=10, weights="/nonexistent/weights.bin")
