#!/usr/bin/env python3
"""Post-training quantisation of the shipped MNIST MLP to a narrow fixed-point format, for
family choco's small-plaintext profile (one plaintext prime per layer).

    python scripts/choco/quantize_mlp.py --bits 6 --out models/mnist-mlp-q6

A ReLU network is positively homogeneous: scaling a dense layer's weights by c > 0 and every
later bias by the product of the scales so far scales the logits by a positive constant and
changes no class. The script searches those per-layer scales c1, c2, c3 (powers of 2^(1/2))
and the fraction bits F on the 10,000 *validation* images so that the weights and the
activations use the narrow format's range without wrapping, then writes the rescaled float
weights with the chosen (bits, F). The model is defined by its fixed-point reference (the Rust
`secinfer infer --plaintext`), which the script imitates exactly in float64 (every product and
sum is an integer below 2^53) to score the search; the reported test accuracy is then checked
with the Rust reference itself (README.md of the output).

Single-threaded numpy (OPENBLAS_NUM_THREADS=1) so that it does not starve a shared machine.
"""
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from safetensors.numpy import load_file, save_file  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from secinfer import datasets  # noqa: E402

LAYERS = ("fc1", "fc2", "fc3")
# secinfer_he::choco::MAX_SINGLE_T_BITS: the widest single plaintext prime family choco uses.
MAX_SINGLE_T_BITS = 23


def one_prime(bits, frac, fan_ins=(784, 128, 128)):
    """Whether every layer's accumulator bound (the Rust `Schedule`'s: fc1 reads the input,
    clamped to [0, 1] = [0, 2^F]) fits one plaintext prime of MAX_SINGLE_T_BITS bits."""
    half = 1 << (bits - 1)
    x_first = min(1 << frac, half)
    bound = max(n * half * (x_first if i == 0 else half) + (half << frac)
                for i, n in enumerate(fan_ins))
    return math.log2(2 * bound + 1) < MAX_SINGLE_T_BITS - 0.01


def quantize(v, bits, frac):
    """The reference's round-to-nearest, saturating quantisation."""
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return np.clip(np.floor(np.asarray(v, np.float64) * (1 << frac) + 0.5), lo, hi)


def wrap(x, bits):
    """Two's-complement wrap to `bits` bits, as the reference applies to activations."""
    m = 1 << bits
    return ((x.astype(np.int64) + (m >> 1)) % m - (m >> 1)).astype(np.float64)


def dense(x, w, b, bits, frac):
    """wrap((Σ W·x ≫ F) + b): the reference's dense rule on integer-valued float64 arrays."""
    acc = x @ w.T
    return wrap(np.floor(acc / (1 << frac)) + b, bits)


def scaled(weights, c, layers=LAYERS):
    """Layer l's weights times c_l and its bias times c_1 ⋯ c_l (the same classes)."""
    out, cum = {}, 1.0
    for name, cl in zip(layers, c):
        cum *= cl
        out[f"{name}.weight"] = (weights[f"{name}.weight"] * cl).astype(np.float32)
        out[f"{name}.bias"] = (weights[f"{name}.bias"] * cum).astype(np.float32)
    return out


def input_fixed(images, bits, frac):
    """The input quantised and clamped into the stated range [0, 1]."""
    return np.clip(quantize(images, bits, frac), 0, quantize(1.0, bits, frac))


def classes(weights, images, bits, frac):
    h = input_fixed(images, bits, frac)
    for i, name in enumerate(LAYERS):
        w = quantize(weights[f"{name}.weight"], bits, frac)
        b = quantize(weights[f"{name}.bias"], bits, frac)
        h = dense(h, w, b, bits, frac)
        if i < len(LAYERS) - 1:
            h = np.maximum(h, 0)
    return h.argmax(axis=1)


def search(weights, images, labels, bits):
    """The (F, c1, c2, c3) of the best validation accuracy, layer by layer cached."""
    grid = [2.0 ** (k / 2) for k in range(-6, 9)]
    best = (-1.0, None)
    for frac in range(1, bits - 1):
        if not one_prime(bits, frac):
            continue
        x = input_fixed(images, bits, frac)
        for c1 in grid:
            w1 = quantize(weights["fc1.weight"] * c1, bits, frac)
            b1 = quantize(weights["fc1.bias"] * c1, bits, frac)
            h1 = np.maximum(dense(x, w1, b1, bits, frac), 0)
            for c2 in grid:
                w2 = quantize(weights["fc2.weight"] * c2, bits, frac)
                b2 = quantize(weights["fc2.bias"] * c1 * c2, bits, frac)
                h2 = np.maximum(dense(h1, w2, b2, bits, frac), 0)
                for c3 in grid:
                    w3 = quantize(weights["fc3.weight"] * c3, bits, frac)
                    b3 = quantize(weights["fc3.bias"] * c1 * c2 * c3, bits, frac)
                    acc = float((dense(h2, w3, b3, bits, frac).argmax(1) == labels).mean())
                    if acc > best[0]:
                        best = (acc, (frac, c1, c2, c3))
    return best


def float_classes(weights, images):
    h = images.astype(np.float64)
    for i, name in enumerate(LAYERS):
        h = h @ weights[f"{name}.weight"].T.astype(np.float64) + weights[f"{name}.bias"]
        if i < len(LAYERS) - 1:
            h = np.maximum(h, 0)
    return h.argmax(axis=1)


def test_record(src, bits, frac, scales, labels, pf, pq, t0):
    """quantize.json's fields: the test split's float and fixed-point accuracy."""
    return {
        "source": src,
        "fixed_point": [bits, frac],
        "layer_scales": list(scales),
        "n_test": int(len(labels)),
        "float_accuracy": float((pf == labels).mean()),
        "fixed_point_accuracy": float((pq == labels).mean()),
        "fixed_point_agree_float": float((pq == pf).mean()),
        "search_seconds": round(time.time() - t0, 1),
        "threads": 1,
    }


def write_quantized(src, out, bits, frac, weights, rec, metadata):
    """The source model directory with the narrow format, the rescaled weights, the source's
    samples and quantize.json (`rec`)."""
    src, out = Path(src), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = json.loads((src / "model.json").read_text())
    cfg["fixed_point"] = {"bits": bits, "frac_bits": frac}
    # Other formats' variants would not fit the narrow profile's single prime.
    cfg.pop("variants", None)
    cfg.pop("fixed_point_variants", None)
    cfg["metadata"] = {"dataset": "mnist", **metadata, "source": str(src),
                       "layer_scales": rec["layer_scales"]}
    (out / "model.json").write_text(json.dumps(cfg, indent=1) + "\n")
    save_file(weights, str(out / "weights.safetensors"))
    shutil.copy(src / "samples.jsonl", out / "samples.jsonl")
    (out / "quantize.json").write_text(json.dumps(rec, indent=1) + "\n")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--src", default="models/mnist-mlp")
    p.add_argument("--bits", type=int, required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--samples", type=int, default=8)
    args = p.parse_args(argv)
    t0 = time.time()
    src = Path(args.src)
    weights = load_file(str(src / "weights.safetensors"))
    data = datasets.load_mnist()
    va, te = data["valid"], data["test"]
    val_acc, (frac, c1, c2, c3) = search(weights, va.images, va.labels, args.bits)
    q = scaled(weights, (c1, c2, c3))
    pf = float_classes(weights, te.images)
    pq = classes(q, te.images, args.bits, frac)
    rec = test_record(args.src, args.bits, frac, [c1, c2, c3], te.labels, pf, pq, t0)
    rec["valid_fixed_point_accuracy"] = val_acc
    write_quantized(args.src, args.out, args.bits, frac, q, rec,
                    {"recipe": "scripts/choco/quantize_mlp.py", "arch": "mlp"})
    print(json.dumps(rec))
    return 0


if __name__ == "__main__":
    sys.exit(main())
