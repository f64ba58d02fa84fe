#!/usr/bin/env python3
"""Make the shipped GRU classifiers: models/imdb-relu-gru (the demo's IMDB ReLU-GRU),
models/imdb-tanh-gru (the same network with CryptoGRU's Baseline tanh candidate) and
models/spam-relu-gru (SpamAssassin e-mails, standing in for CryptoGRU's Enron).

    .venv/bin/python python/recipes/train_imdb.py                       # models/imdb-relu-gru
    .venv/bin/python python/recipes/train_imdb.py --model imdb-tanh-gru
    .venv/bin/python python/recipes/train_imdb.py --model spam-relu-gru
    .venv/bin/python python/recipes/train_imdb.py --samples-only   # only samples + vectors

Embedding(2000, 32) -> GRU(32 -> 64, candidate ReLU or tanh) -> Dense(64 -> 2), 100 steps
(IMDB: the last 100 tokens of a review; spam: the first 100 of a message; pre-padded),
3 epochs of Adam (spam: 5, it has a quarter of IMDB's items) on the training part of our
seeded split of the data set's package; seed 0.  Deviations from CryptoGRU (embedding 100,
30 steps) and why are in docs/accuracy.md.

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
COMMON = ["--vocab", "2000", "--embed", "32", "--hidden", "64", "--max-len", "100", "--seed", "0",
          "--formats", "fx20,fx8"]
# Shipped models: the recipe arguments of each (threads: 1 for the models trained while the
# machine was shared with compilers, which also fixes torch's reduction order).
PRESETS = {
    "imdb-relu-gru": COMMON + ["--dataset", "imdb", "--activation", "relu", "--epochs", "3",
                               "--threads", "2"],
    "imdb-tanh-gru": COMMON + ["--dataset", "imdb", "--activation", "tanh", "--epochs", "3",
                               "--threads", "1"],
    "spam-relu-gru": COMMON + ["--dataset", "spam-assassin", "--activation", "relu", "--epochs", "5",
                               "--threads", "1"],
}


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
    name = "imdb-relu-gru"
    if "--model" in argv:
        i = argv.index("--model")
        name = argv[i + 1]
        del argv[i:i + 2]
    if name not in PRESETS:
        raise SystemExit(f"unknown model {name!r}; known: {sorted(PRESETS)}")
    out = Path(argv[0]) if argv else REPO / "models" / name
    args = PRESETS[name]
    if samples_only:
        from secinfer import datasets
        from secinfer.modelio import load_torch

        model = load_torch(out)
        ds = datasets.load_text(args[args.index("--dataset") + 1])
        acc = json.loads((out / "model.json").read_text())["metadata"]["float_test_accuracy"]
    else:
        model, ds, vocab, acc = train_classifier.main(args + ["--out", str(out)])

    from secinfer.train import predict

    idx = pick_samples(ds)
    texts = [ds.test.texts[i] for i in idx]
    x = encode_for(out, texts)
    pf = predict(model, x)
    with open(out / "samples.jsonl", "w", encoding="utf-8") as f:
        for i, t, p in zip(idx, texts, pf):
            f.write(json.dumps({"text": t, "label": ds.label_names[ds.test.labels[i]],
                                "float_prediction": ds.label_names[p],
                                "source": f"{ds.source} row {int(ds.test.index[i])} (held-out split)"}) + "\n")
    vectors = {"model": f"models/{name}", "tokens": x.tolist(), "logits": {}}
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
