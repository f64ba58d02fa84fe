#!/usr/bin/env python3
"""Post-training quantisation of the shipped MNIST CNN to a narrow fixed-point format, for
family choco's small-plaintext profile (one plaintext prime for every layer).

    python scripts/choco/quantize_cnn.py --bits 7 --out models/mnist-cnn-q7

The same method as quantize_mlp.py, on MiniONN's CNN (conv1 5x5x16, ReLU, max-pool 2, conv2
5x5x16, ReLU, max-pool 2, fc1 256-100, ReLU, fc2 100-10): a ReLU / max-pool network is
positively homogeneous, so scaling each linear layer's weights by c_l > 0 and its bias by
c_1 ⋯ c_l keeps every class. The script picks the fraction bits F (among those whose
accumulator bounds fit one prime) and the scales (powers of 2^(1/2), coordinate descent from
the source scales) by the accuracy of the fixed-point reference, imitated exactly in float64,
on validation images, then scores the test split.

Single-threaded numpy (OPENBLAS_NUM_THREADS=1) so that it does not starve a shared machine.
"""
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from numpy.lib.stride_tricks import sliding_window_view  # noqa: E402
from safetensors.numpy import load_file  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from quantize_mlp import (MAX_SINGLE_T_BITS, input_fixed, quantize, scaled,  # noqa: E402
                          test_record, wrap, write_quantized)
from secinfer import datasets  # noqa: E402

LAYERS = ("conv1", "conv2", "fc1", "fc2")
# Each linear layer's fan-in (c·kh·kw for a convolution): the accumulator bound's factor.
FAN_INS = (25, 400, 256, 100)


def one_prime(bits, frac):
    """Whether every layer's accumulator bound (the Rust `Schedule`'s: conv1 reads the input,
    clamped to [0, 1] = [0, 2^F]) fits one plaintext prime of MAX_SINGLE_T_BITS bits."""
    half = 1 << (bits - 1)
    x_first = min(1 << frac, half)
    bound = max(n * half * (x_first if i == 0 else half) + (half << frac)
                for i, n in enumerate(FAN_INS))
    return math.log2(2 * bound + 1) < MAX_SINGLE_T_BITS - 0.01


def shift(acc, b, bits, frac):
    """wrap((acc ≫ F) + b): the reference's rule for every linear layer."""
    return wrap(np.floor(acc / (1 << frac)) + b, bits)


def conv(x, w, b, bits, frac):
    """Valid, stride-1 convolution of (N, C, H, W) by (O, C, kh, kw), then `shift`."""
    win = sliding_window_view(x, w.shape[2:], axis=(2, 3))  # N, C, OH, OW, kh, kw
    acc = np.einsum("nchwij,ocij->nohw", win, w, optimize=True)
    return shift(acc, b[None, :, None, None], bits, frac)


def pool(x):
    n, c, h, w = x.shape
    return x.reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))


def layer(i, h, w, b, bits, frac):
    """Layer i of LAYERS with the client's layers after it (ReLU, pool, flatten)."""
    if i < 2:
        return pool(np.maximum(conv(h, w, b, bits, frac), 0))
    if i == 2:
        h = h.reshape(len(h), -1)
    y = shift(h @ w.reshape(len(w), -1).T, b, bits, frac)
    return np.maximum(y, 0) if i < 3 else y


def run(weights, c, images, bits, frac, start=0, stop=len(LAYERS), h=None):
    """The fixed-point output of layer `stop` − 1 (the logits by default), from layer `start`
    on (h: that layer's cached input)."""
    if h is None:
        h = input_fixed(images, bits, frac).reshape(-1, 1, 28, 28)
    cum = float(np.prod(c[:start]))
    for i in range(start, stop):
        cum *= c[i]
        name = LAYERS[i]
        w = quantize(weights[f"{name}.weight"] * c[i], bits, frac)
        b = quantize(weights[f"{name}.bias"] * cum, bits, frac)
        h = layer(i, h, w, b, bits, frac)
    return h


def accuracy(weights, c, images, labels, bits, frac, start=0, h=None):
    return float((run(weights, c, images, bits, frac, start, h=h).argmax(1) == labels).mean())


def search(weights, images, labels, bits, rounds, fracs):
    """Coordinate descent over (c1..c4) for each admissible F; the best (acc, F, c)."""
    steps = [2.0 ** (k / 2) for k in range(-8, 9)]
    best = (-1.0, None, None)
    for frac in fracs or range(1, bits - 1):
        if not one_prime(bits, frac):
            continue
        c = [1.0] * len(LAYERS)
        acc = accuracy(weights, c, images, labels, bits, frac)
        for _ in range(rounds):
            moved = False
            for i in range(len(LAYERS)):
                h = run(weights, c, images, bits, frac, stop=i)
                for s in steps:
                    trial = c[:i] + [c[i] * s] + c[i + 1:]
                    a = accuracy(weights, trial, images, labels, bits, frac, i, h)
                    if a > acc:
                        acc, c, moved = a, trial, True
            if not moved:
                break
        print(json.dumps({"frac": frac, "valid_accuracy": acc, "scales": c}), flush=True)
        if acc > best[0]:
            best = (acc, frac, c)
    return best


def float_classes(weights, images):
    h = images.reshape(-1, 1, 28, 28).astype(np.float64)
    for i, name in enumerate(LAYERS):
        w = weights[f"{name}.weight"].astype(np.float64)
        b = weights[f"{name}.bias"].astype(np.float64)
        if i < 2:
            win = sliding_window_view(h, w.shape[2:], axis=(2, 3))
            h = np.einsum("nchwij,ocij->nohw", win, w, optimize=True) + b[None, :, None, None]
            h = pool(np.maximum(h, 0))
        else:
            h = h.reshape(len(h), -1) @ w.T + b
            if i < 3:
                h = np.maximum(h, 0)
    return h.argmax(axis=1)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--src", default="models/mnist-cnn")
    p.add_argument("--bits", type=int, required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--valid", type=int, default=10000,
                   help="validation images the search scores (the first N)")
    p.add_argument("--rounds", type=int, default=2, help="coordinate-descent rounds")
    p.add_argument("--frac", type=int, action="append",
                   help="fraction bits to try (repeatable; default every one that fits)")
    args = p.parse_args(argv)
    t0 = time.time()
    weights = load_file(str(Path(args.src) / "weights.safetensors"))
    data = datasets.load_mnist()
    va, te = data["valid"], data["test"]
    val_acc, frac, c = search(weights, va.images[:args.valid], va.labels[:args.valid],
                              args.bits, args.rounds, args.frac)
    if frac is None:
        raise SystemExit(f"no fraction bits fit one prime at {args.bits} bits")
    q = scaled(weights, c, LAYERS)
    pf = float_classes(weights, te.images)
    pq = run(q, [1.0] * len(LAYERS), te.images, args.bits, frac).argmax(1)
    rec = test_record(args.src, args.bits, frac, c, te.labels, pf, pq, t0)
    rec["n_valid"] = int(min(args.valid, len(va.labels)))
    rec["valid_fixed_point_accuracy"] = val_acc
    write_quantized(args.src, args.out, args.bits, frac, q, rec,
                    {"recipe": "scripts/choco/quantize_cnn.py", "arch": "cnn"})
    print(json.dumps(rec))
    return 0


if __name__ == "__main__":
    sys.exit(main())
