"""heloom.apps: applications built on CKKS.

``mnist(images=2000, word_bits=32)`` classifies encrypted held-out MNIST images with
CryptoNets (seed 002) and reports accuracy, agreement with the network in f64 and images per
second.
"""

from heloom._heloom import mnist

__all__ = ["mnist"]
