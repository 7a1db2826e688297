"""CryptoNets on encrypted MNIST images: a client encrypts held-out test images, a server
classifies them without seeing them, the client decrypts the answers.

Run with ``./run.sh python examples/python/mnist.py [images] [word_bits]``.
"""

import sys

import heloom


def main() -> None:
    images = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    word_bits = int(sys.argv[2]) if len(sys.argv) > 2 else 32
    report = heloom.apps.mnist(
        images=images,
        word_bits=word_bits,
        progress=lambda msg: print(f"  {msg}", file=sys.stderr),
    )
    print(
        f"{report['images']} images, {word_bits}-bit words: "
        f"plain accuracy {100 * report['plain_accuracy']:.2f}%, "
        f"encrypted accuracy {100 * report['encrypted_accuracy']:.2f}%, "
        f"agreement {100 * report['agreement']:.2f}%"
    )
    print(
        f"server {report['seconds']:.2f} s ({report['images_per_s']:.0f} images/s), "
        f"client encrypt {report['encrypt_s']:.2f} s, decrypt {report['decrypt_s']:.2f} s, "
        f"peak memory {report['peak_memory_bytes'] / 2**30:.2f} GiB"
    )


if __name__ == "__main__":
    main()
