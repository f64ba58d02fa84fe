#!/usr/bin/env python3
"""Times a shipped MNIST model run locally in float by torch on one thread: the client's local
baseline for `secinfer bench choco` (CHOCO compares its client's cost with a local TFLite run).

    python scripts/choco/local_torch.py models/mnist-cnn [--reps 2000]

Prints one JSON line: the per-inference seconds (median of 5 batches) and whether torch's
class equals the sample's label. Reads model.json, weights.safetensors and samples.jsonl.
"""
import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from safetensors.torch import load_file


def build(cfg, w):
    mods = []
    for l in cfg["layers"][1:]:
        t, n = l["type"], l.get("name")
        if t == "conv2d":
            m = torch.nn.Conv2d(l["in_channels"], l["out_channels"], tuple(l["kernel"]),
                                stride=tuple(l["stride"]), padding=tuple(l["padding"]))
            m.weight.data, m.bias.data = w[f"{n}.weight"], w[f"{n}.bias"]
        elif t == "dense":
            m = torch.nn.Linear(l["input"], l["output"])
            m.weight.data, m.bias.data = w[f"{n}.weight"].reshape(l["output"], l["input"]), w[f"{n}.bias"]
        elif t == "relu":
            m = torch.nn.ReLU()
        elif t == "maxpool2d":
            m = torch.nn.MaxPool2d(tuple(l["kernel"]), stride=tuple(l["stride"]))
        elif t == "flatten":
            m = torch.nn.Flatten()
        elif t == "argmax":
            continue
        else:
            sys.exit(f"local_torch: layer type {t} not handled")
        mods.append(m)
    return torch.nn.Sequential(*mods).eval()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", type=Path)
    ap.add_argument("--reps", type=int, default=2000)
    a = ap.parse_args()
    torch.set_num_threads(1)
    cfg = json.loads((a.model / "model.json").read_text())
    net = build(cfg, load_file(str(a.model / "weights.safetensors")))
    shape = cfg["layers"][0]["shape"]
    sample = json.loads((a.model / "samples.jsonl").read_text().splitlines()[0])
    x = torch.tensor(sample["input"], dtype=torch.float32).reshape(1, *shape)
    with torch.inference_mode():
        cls = int(net(x).argmax())
        for _ in range(100):
            net(x)
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(a.reps):
                net(x)
            times.append((time.perf_counter() - t0) / a.reps)
    print(json.dumps({
        "model": str(a.model), "torch": torch.__version__, "threads": 1,
        "local_torch_s": statistics.median(times), "class": cls,
        "label_match": str(cls) == str(sample["label"]),
    }))


if __name__ == "__main__":
    main()
