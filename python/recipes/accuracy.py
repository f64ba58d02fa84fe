#!/usr/bin/env python3
"""Accuracy of exported classifiers: float (PyTorch), fixed-point fx20 and fx8 (numpy reference).

    python python/recipes/accuracy.py models/imdb-relu-gru /tmp/imdb-tanh ...

Each model is evaluated on the *full* held-out split of its data set
(``metadata.dataset`` in model.json, the loaders' seeded split).  Prints one
JSON line per model and a Markdown row; ``--json FILE`` also writes them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from secinfer import datasets  # noqa: E402
from secinfer.modelio import encode_for, load_model_dir  # noqa: E402
from secinfer.fixedpoint import FixedPointModel  # noqa: E402


def float_predict(model_dir: Path, x: np.ndarray) -> np.ndarray:
    try:
        import torch  # noqa: F401
    except ImportError:
        return None
    from secinfer.modelio import load_torch
    from secinfer.train import predict

    return predict(load_torch(model_dir), x)


def rust_logits(model_dir: Path, x: np.ndarray, fmt: str):
    try:
        from secinfer import core

        c = core()
    except ImportError:
        return None
    if not hasattr(c, "eval_fixed_point"):
        return None
    return np.array(c.eval_fixed_point(str(model_dir), x.tolist(), fmt), dtype=np.int64)


def evaluate(model_dir: Path, formats=("fx20", "fx8"), limit: int | None = None) -> dict:
    config, _ = load_model_dir(model_dir)
    meta = config.get("metadata", {})
    ds = datasets.load_text(meta["dataset"])
    texts, labels = ds.test.texts, ds.test.labels
    if limit:
        texts, labels = texts[:limit], labels[:limit]
    x = encode_for(model_dir, texts)
    act = next(l for l in config["layers"] if l["type"] == "gru")["activation"]
    rec = {"model": str(model_dir), "dataset": ds.name, "activation": act, "n": len(labels),
           "layers": config["layers"]}
    t = time.time()
    pf = float_predict(model_dir, x)
    if pf is not None:
        rec["float"] = float((pf == labels).mean())
    rec["float_seconds"] = round(time.time() - t, 1)
    for fmt in formats:
        t = time.time()
        m = FixedPointModel.load(model_dir, fmt)
        p = m.predict(x)
        rec[fmt] = float((p == labels).mean())
        if pf is not None:
            rec[f"{fmt}_agree_float"] = float((p == pf).mean())
        rec[f"{fmt}_overflows"] = m.counters.overflows
        rec[f"{fmt}_saturated_weights"] = m.counters.saturated_weights
        rec[f"{fmt}_saturated_activations"] = m.counters.saturated_activations
        rec[f"{fmt}_seconds"] = round(time.time() - t, 1)
        rust = rust_logits(model_dir, x, fmt)
        if rust is not None:
            # the Rust plaintext fixed-point evaluator through the bindings
            rec[f"rust_{fmt}_identical_logits"] = float((rust == m.logits(x)).all(axis=1).mean())
            if pf is not None:
                rec[f"rust_{fmt}_agree_float"] = float((rust.argmax(axis=1) == pf).mean())
    return rec


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("models", nargs="+")
    p.add_argument("--limit", type=int, default=None, help="evaluate only the first N held-out items")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    recs = []
    for d in args.models:
        rec = evaluate(Path(d), limit=args.limit)
        recs.append(rec)
        print(json.dumps(rec))
        pct = lambda k: f"{100 * rec[k]:.1f}" if k in rec else "-"  # noqa: E731
        print(f"| {rec['dataset']} | {rec['activation']} | {rec['n']} | {pct('float')} | {pct('fx20')} | "
              f"{pct('fx8')} |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            for r in recs:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
