#!/usr/bin/env python3
"""Train an Embedding -> GRU -> Dense text classifier and export it in the secinfer format.

    python python/recipes/train_classifier.py --dataset imdb --activation relu --out /tmp/imdb-relu

Seeded and CPU-only (``--threads``, default 2). Prints the held-out float
accuracy and writes ``<out>/train.json`` (settings, timings, accuracy).
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
from secinfer.text import Vocab, encode_corpus, tokenize  # noqa: E402

# Per data set defaults: keep the end of a review (verdicts come last), the start of a message.
DEFAULTS = {
    "imdb": {"truncation": "pre"},
    "spam-assassin": {"truncation": "post"},
    "sms-spam": {"truncation": "post"},
}


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="imdb", choices=sorted(datasets.LOADERS))
    p.add_argument("--activation", default="relu", choices=["relu", "tanh"])
    p.add_argument("--vocab", type=int, default=2000, help="vocabulary size incl. <pad> and <unk>")
    p.add_argument("--embed", type=int, default=32)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--max-len", type=int, default=100, help="GRU steps T")
    p.add_argument("--truncation", choices=["pre", "post"], default=None)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--max-steps", type=int, default=None)
    p.add_argument("--formats", default="fx20,fx8", help="fixed-point presets to list in model.json")
    p.add_argument("--out", required=True)
    return p.parse_args(argv)


def main(argv=None):
    args = parse(argv)
    import torch

    from secinfer.modelio import export
    from secinfer.models import GRUClassifier
    from secinfer.train import accuracy, set_seed, train_classifier

    set_seed(args.seed, threads=args.threads)
    trunc = args.truncation or DEFAULTS[args.dataset]["truncation"]
    t0 = time.time()
    ds = datasets.load_text(args.dataset)
    vocab = Vocab.build((tokenize(t) for t in ds.train.texts), max_size=args.vocab)
    xtr = encode_corpus(ds.train.texts, vocab, args.max_len, "pre", trunc)
    xte = encode_corpus(ds.test.texts, vocab, args.max_len, "pre", trunc)
    print(f"{ds.name}: train {len(ds.train)} {ds.train.counts()}, test {len(ds.test)} {ds.test.counts()}, "
          f"vocab {len(vocab)}, T={args.max_len} ({time.time() - t0:.1f}s)")

    model = GRUClassifier(len(vocab), args.embed, args.hidden, len(ds.label_names), args.activation)
    hist = train_classifier(model, xtr, ds.train.labels, epochs=args.epochs, batch_size=args.batch,
                            lr=args.lr, seed=args.seed, max_steps=args.max_steps,
                            eval_fn=lambda m: round(accuracy(m, xte, ds.test.labels), 4))
    acc = accuracy(model, xte, ds.test.labels)
    print(f"held-out float accuracy {acc:.4f} on {len(ds.test)} ({hist.seconds:.0f}s training)")

    out = Path(args.out)
    export(model, out, vocab=vocab, max_len=args.max_len, labels=ds.label_names,
           formats=args.formats.split(","), padding="pre", truncation=trunc,
           metadata={"dataset": ds.name, "source": ds.source, "recipe": "python/recipes/train_classifier.py",
                     "args": vars(args) | {"out": None}, "float_test_accuracy": round(acc, 4),
                     "test_size": len(ds.test), "torch": torch.__version__})
    with open(out / "train.json", "w") as f:
        json.dump({"args": vars(args), "epochs": hist.epochs, "losses": hist.losses,
                   "seconds": round(hist.seconds, 1), "float_test_accuracy": acc}, f, indent=2)
    return model, ds, vocab, acc


if __name__ == "__main__":
    main()
