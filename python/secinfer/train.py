"""Seeded, CPU-friendly training loops for the GRU classifiers and language model (needs torch)."""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch
from torch import nn


def _print(msg: str) -> None:
    print(msg, flush=True)


def set_seed(seed: int, threads: int | None = None) -> None:
    """Seed Python, numpy and torch; optionally cap torch's threads (the CI machines have 2 cores)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if threads is not None:
        torch.set_num_threads(threads)


@dataclass
class History:
    losses: list[float] = field(default_factory=list)   # mean training loss per logged window
    epochs: list[dict] = field(default_factory=list)
    seconds: float = 0.0


def train_classifier(model: nn.Module, x: np.ndarray, y: np.ndarray, *, epochs: int = 1,
                     batch_size: int = 64, lr: float = 2e-3, clip: float = 1.0, seed: int = 0,
                     max_steps: int | None = None, log_every: int = 50,
                     eval_fn: Callable[[nn.Module], float] | None = None,
                     log: Callable[[str], None] | None = _print) -> History:
    """Adam + cross-entropy on int64 token ids ``x`` [N, T] and labels ``y`` [N]."""
    gen = torch.Generator().manual_seed(seed)
    xt, yt = torch.from_numpy(np.asarray(x, dtype=np.int64)), torch.from_numpy(np.asarray(y, dtype=np.int64))
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    hist, step, t0 = History(), 0, time.time()
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(len(xt), generator=gen)
        window = []
        for i in range(0, len(xt), batch_size):
            idx = perm[i:i + batch_size]
            opt.zero_grad()
            loss = loss_fn(model(xt[idx]), yt[idx])
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), clip)
            opt.step()
            window.append(loss.item())
            step += 1
            if len(window) == log_every or (max_steps is not None and step >= max_steps):
                hist.losses.append(float(np.mean(window)))
                if log:
                    log(f"epoch {epoch} step {step} loss {hist.losses[-1]:.4f} ({time.time() - t0:.0f}s)")
                window = []
            if max_steps is not None and step >= max_steps:
                break
        if window:
            hist.losses.append(float(np.mean(window)))
        rec = {"epoch": epoch, "steps": step, "seconds": round(time.time() - t0, 1)}
        if eval_fn is not None:
            rec["eval"] = eval_fn(model)
        hist.epochs.append(rec)
        if log:
            log(f"epoch {epoch} done: {rec}")
        if max_steps is not None and step >= max_steps:
            break
    hist.seconds = time.time() - t0
    return hist


@torch.no_grad()
def predict(model: nn.Module, x: np.ndarray, batch_size: int = 1024) -> np.ndarray:
    model.eval()
    xt = torch.from_numpy(np.asarray(x, dtype=np.int64))
    out = [model(xt[i:i + batch_size]).argmax(dim=1) for i in range(0, len(xt), batch_size)]
    return torch.cat(out).numpy() if out else np.zeros(0, dtype=np.int64)


def accuracy(model: nn.Module, x: np.ndarray, y: np.ndarray) -> float:
    return float((predict(model, x) == np.asarray(y)).mean())


# --------------------------------------------------------------------------- language model
def batchify(stream: np.ndarray, batch: int) -> torch.Tensor:
    """Cut a token stream into ``batch`` contiguous rows: [batch, len // batch]."""
    rows = len(stream) // batch
    return torch.from_numpy(np.asarray(stream[: rows * batch], dtype=np.int64).reshape(batch, rows))


def train_lm(model: nn.Module, stream: np.ndarray, *, epochs: int = 1, batch_size: int = 32,
             bptt: int = 30, lr: float = 2e-3, clip: float = 0.5, max_steps: int | None = None,
             log_every: int = 100, eval_fn: Callable[[nn.Module], float] | None = None,
             lr_decay: float = 1.0, decay_after: int = 0, max_seconds: float | None = None,
             plateau: bool = False, keep_best: bool = False,
             on_best: Callable[[nn.Module, float], None] | None = None,
             log: Callable[[str], None] | None = _print) -> History:
    """Truncated BPTT over ``bptt`` steps with the hidden state carried (detached) between windows.

    The learning rate is multiplied by ``lr_decay`` after every epoch past ``decay_after``, or
    with ``plateau`` after every epoch whose ``eval_fn`` (lower is better) did not improve.
    Training stops early after ``max_seconds`` of wall time (a budget on a shared machine); the
    state it stopped in is then evaluated too. With ``keep_best`` the weights of the best
    evaluation are restored at the end; ``on_best`` sees each new best (to checkpoint it, so a
    run killed from outside keeps its best so far). The data follows the model's device."""
    if (plateau or keep_best or on_best) and eval_fn is None:
        raise ValueError("plateau, keep_best and on_best need an eval_fn")
    device = next(model.parameters()).device
    data = batchify(stream, batch_size).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    hist, step, t0 = History(), 0, time.time()
    best, best_state, skipped = math.inf, None, 0
    V = model.fc.out_features

    def flush(window: list[torch.Tensor]) -> None:
        # One device sync per logged window rather than per step: the GPU runs ahead meanwhile.
        hist.losses.append(float(torch.stack(window).mean()))

    for epoch in range(epochs):
        model.train()
        h, window = None, []
        for s in range(0, data.shape[1] - 1, bptt):
            e = min(s + bptt, data.shape[1] - 1)
            opt.zero_grad()
            logits, h = model(data[:, s:e], h)
            h = h.detach()
            loss = loss_fn(logits.reshape(-1, V), data[:, s + 1:e + 1].reshape(-1))
            loss.backward()
            norm = nn.utils.clip_grad_norm_(model.parameters(), clip)
            step += 1
            if not torch.isfinite(norm):
                # A ReLU candidate is unbounded: a carried state can blow up. Skip the step and
                # restart the state rather than let one inf turn every weight into NaN.
                skipped, h = skipped + 1, None
                continue
            opt.step()
            window.append(loss.detach())
            if len(window) == log_every or (max_steps is not None and step >= max_steps):
                flush(window)
                if log:
                    log(f"epoch {epoch} step {step} loss {hist.losses[-1]:.3f} "
                        f"ppl {math.exp(min(hist.losses[-1], 700.0)):.1f} ({time.time() - t0:.0f}s)")
                window = []
            if max_steps is not None and step >= max_steps:
                break
            if max_seconds is not None and time.time() - t0 > max_seconds:
                break
        if window:
            flush(window)
        out_of_time = max_seconds is not None and time.time() - t0 > max_seconds
        rec = {"epoch": epoch, "steps": step, "seconds": round(time.time() - t0, 1),
               "lr": opt.param_groups[0]["lr"], "skipped": skipped}
        if out_of_time:
            rec["stopped"] = f"time budget of {max_seconds:.0f} s"
        if eval_fn is not None and (not out_of_time or keep_best):
            rec["eval"] = eval_fn(model)
            if rec["eval"] < best:
                best = rec["eval"]
                if keep_best:
                    best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
                if on_best is not None:
                    on_best(model, best)
            elif plateau:
                for g in opt.param_groups:
                    g["lr"] *= lr_decay
        hist.epochs.append(rec)
        if log:
            log(f"epoch {epoch} done: {rec}")
        if (max_steps is not None and step >= max_steps) or out_of_time:
            break
        if not plateau and epoch + 1 >= decay_after:
            for g in opt.param_groups:
                g["lr"] *= lr_decay
    if best_state is not None:
        model.load_state_dict(best_state)
        if log:
            log(f"restored the weights of the best evaluation ({best})")
    hist.seconds = time.time() - t0
    return hist


@torch.no_grad()
def lm_perplexity(model: nn.Module, stream: np.ndarray, batch_size: int = 32, bptt: int = 35) -> float:
    """Perplexity per word on a stream (same windows as fixedpoint.lm_perplexity)."""
    model.eval()
    data = batchify(stream, batch_size).to(next(model.parameters()).device)
    h, nll, count = None, 0.0, 0
    V = model.fc.out_features
    for s in range(0, data.shape[1] - 1, bptt):
        e = min(s + bptt, data.shape[1] - 1)
        logits, h = model(data[:, s:e], h)
        tgt = data[:, s + 1:e + 1]
        nll += nn.functional.cross_entropy(logits.reshape(-1, V).double(), tgt.reshape(-1),
                                           reduction="sum").item()
        count += tgt.numel()
    return math.exp(nll / count)
