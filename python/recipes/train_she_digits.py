#!/usr/bin/env python3
"""Train SHE's digits MLP 64-128-128-10 (power-of-two weights, 5-bit activations, BatchNorm
folded) on scikit-learn's 8x8 digits and export it for `secinfer bench she`.

    python python/recipes/train_she_digits.py --keep 0.25 --out models/she-digits-mlp

The split is scikit-learn's ``train_test_split(test_size=0.25, random_state=0, stratify=y)``.
Prints the integer (bit-exact) test accuracy and writes it to she.json's ``meta``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

import numpy as np  # noqa: E402

from secinfer import she  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("models/she-digits-mlp"))
    ap.add_argument("--epochs", type=int, default=120)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", type=float, default=0.25, help="fraction of weights kept after BatchNorm folding")
    a = ap.parse_args()
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    x, y = load_digits(return_X_y=True)
    x = x.astype(np.int64)  # pixels 0..16: 5-bit unsigned inputs, exactly
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.25, random_state=0, stratify=y)
    t = time.time()
    cfg = she.TrainConfig(epochs=a.epochs, seed=a.seed, keep=a.keep)
    params = she.train_mlp(xtr, ytr, 10, cfg)
    offsets = she.choose_offsets(params, xtr, ytr)
    model = she.to_integer(params, offsets)
    train_s = time.time() - t
    acc = model.accuracy(xte, yte)
    nonzero = sum(int((l.sign != 0).sum()) for l in model.layers)
    total = sum(l.sign.size for l in model.layers)
    model.meta = {
        "dataset": "sklearn digits 8x8, train_test_split(test_size=0.25, random_state=0, stratify=y)",
        "test_accuracy": acc,
        "train_accuracy": model.accuracy(xtr, ytr),
        "test_samples": int(len(yte)),
        "nonzero_weights": nonzero,
        "weights": total,
        "train_s": round(train_s, 1),
        "seed": a.seed,
        "epochs": a.epochs,
        "keep": a.keep,
    }
    model.export(a.out, xte, yte)
    print(json.dumps(model.meta))


if __name__ == "__main__":
    main()
