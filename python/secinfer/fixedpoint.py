"""Fixed-point reference of an exported model (numpy only, no torch).

This module *is* the arithmetic specification that docs/model-format.md
("Fixed-point semantics") writes out in words; the Rust plaintext fixed-point
evaluator (``secinfer._core.eval_fixed_point``) must agree with it bit for bit whenever it reports no
overflow.  Summary:

* A format ``(bits, frac)`` holds integers in ``[-2^(bits-1), 2^(bits-1) - 1]``
  meaning ``X / 2^frac``.  The main format (``fixed_point.bits/frac_bits``) is
  used for weights, biases, embeddings and every intermediate value.
* ``quantize(v) = clamp(floor(v * 2^frac + 1/2))``: round to nearest, ties
  upwards, saturating (saturated weights are counted and reported).
* Products of two main-format values are exact, then truncated with an
  arithmetic shift right by ``frac`` (floor).  Matrix-vector products
  accumulate exactly, truncate once, then add the bias:
  ``linear(W, x, b) = (sum_j W_ij x_j) >> frac + b_i``.
* Every named intermediate is reduced to the main format's range by two's
  complement wrap-around (what a ring Z_{2^bits} does); every wrap is counted
  as an overflow.  A conforming model has no overflow on its test data.
* Activations: ``sigmoid``, ``tanh``: ``Y = clamp(floor(f(X / 2^fi) * 2^fo + 1/2))``
  evaluated in IEEE binary64 as ``1 / (1 + exp(-x))`` and ``tanh(x)``; ``relu``
  is exact ``max(X, 0)``.  An activation may have its own (narrower) input and
  output formats (the "8-bit activations" of CryptoGRU's CG-2): its input is
  first rescaled ``X >> (frac - fi)`` and saturated to the input format, its
  output is saturated to the output format and shifted back ``Y << (frac - fo)``.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

MAX_BITS = 24  # keeps every product and every sum of <= 2^15 products exact in int64 and float64


@dataclass(frozen=True)
class Format:
    bits: int
    frac: int

    def __post_init__(self):
        if not (2 <= self.bits <= MAX_BITS):
            raise ValueError(f"bits must be in [2, {MAX_BITS}], got {self.bits}")
        if not (0 <= self.frac < self.bits):
            raise ValueError(f"frac_bits must be in [0, bits-1], got {self.frac} for bits={self.bits}")

    @property
    def lo(self) -> int:
        return -(1 << (self.bits - 1))

    @property
    def hi(self) -> int:
        return (1 << (self.bits - 1)) - 1

    @classmethod
    def from_json(cls, obj: Mapping) -> "Format":
        return cls(int(obj["bits"]), int(obj["frac_bits"]))

    def to_json(self) -> dict:
        return {"bits": self.bits, "frac_bits": self.frac}


@dataclass(frozen=True)
class ActFormat:
    input: Format
    output: Format


@dataclass(frozen=True)
class FixedPointConfig:
    main: Format
    activations: Mapping[str, ActFormat]  # keys: "sigmoid", "candidate"

    @classmethod
    def from_json(cls, obj: Mapping) -> "FixedPointConfig":
        main = Format.from_json(obj)
        acts = {}
        for key, a in (obj.get("activations") or {}).items():
            if key not in ("sigmoid", "candidate"):
                raise ValueError(f"fixed_point.activations: unknown key {key!r} (sigmoid, candidate)")
            af = ActFormat(Format.from_json(a["input"]), Format.from_json(a["output"]))
            for which, f in (("input", af.input), ("output", af.output)):
                if f.bits > main.bits or f.frac > main.frac:
                    raise ValueError(f"fixed_point.activations.{key}.{which}: {f} must not be wider "
                                     f"or finer than the main format {main}")
            if af.output.bits - af.output.frac > main.bits - main.frac:
                raise ValueError(f"fixed_point.activations.{key}.output has more integer bits "
                                 "than the main format")
            acts[key] = af
        return cls(main, acts)

    def to_json(self) -> dict:
        out = self.main.to_json()
        if self.activations:
            out["activations"] = {k: {"input": a.input.to_json(), "output": a.output.to_json()}
                                  for k, a in self.activations.items()}
        return out


# Presets used by export(formats=...) and the accuracy tables.
PRESETS: dict[str, dict] = {
    # CryptoGRU Baseline / CG-1: 20-bit values everywhere, activations included.
    "fx20": {"bits": 20, "frac_bits": 12},
    # CG-2: 20-bit linear layers (the HE plaintext), 8-bit activations in the GC.
    "fx8": {"bits": 20, "frac_bits": 12, "activations": {
        "sigmoid": {"input": {"bits": 8, "frac_bits": 4}, "output": {"bits": 8, "frac_bits": 7}},
        "candidate": {"input": {"bits": 8, "frac_bits": 4}, "output": {"bits": 8, "frac_bits": 4}},
    }},
}
# tanh's 8-bit candidate: input [-4, 4) in steps of 1/32, output [-1, 1) in steps of 1/128.
TANH_FX8_CANDIDATE = {"input": {"bits": 8, "frac_bits": 5}, "output": {"bits": 8, "frac_bits": 7}}


def preset(name: str, activation: str = "relu") -> dict:
    """The fixed-point section for preset ``name`` ("fx20", "fx8") and a candidate activation."""
    if name not in PRESETS:
        raise ValueError(f"unknown fixed-point preset {name!r}; known: {sorted(PRESETS)}")
    obj = json.loads(json.dumps(PRESETS[name]))
    if name == "fx8" and activation == "tanh":
        obj["activations"]["candidate"] = dict(TANH_FX8_CANDIDATE)
    return obj


# --------------------------------------------------------------------------- primitives
class Counters:
    def __init__(self):
        self.overflows = 0
        self.saturated_weights = 0
        self.saturated_activations = 0


def quantize(v: np.ndarray, fmt: Format, counters: Counters | None = None) -> np.ndarray:
    """Round to nearest (ties up) at ``fmt.frac`` and saturate to ``fmt``: float -> int64."""
    x = np.floor(np.asarray(v, dtype=np.float64) * float(1 << fmt.frac) + 0.5)
    q = np.clip(x, fmt.lo, fmt.hi)
    if counters is not None:
        counters.saturated_weights += int(np.count_nonzero(q != x))
    return q.astype(np.int64)


def wrap(x: np.ndarray, fmt: Format, counters: Counters | None = None) -> np.ndarray:
    """Two's complement reduction to ``fmt.bits`` bits; counts values that did not fit."""
    m = 1 << fmt.bits
    y = ((x - fmt.lo) & (m - 1)) + fmt.lo
    if counters is not None:
        counters.overflows += int(np.count_nonzero(y != x))
    return y


def trunc(x: np.ndarray, s: int) -> np.ndarray:
    """Arithmetic shift right (floor division by 2^s)."""
    return x >> s if s > 0 else x


def matvec(x: np.ndarray, w: np.ndarray, fmt: Format) -> np.ndarray:
    """Exact ``x @ w.T`` for int64 ``x`` [.., I] and ``w`` [O, I] of format ``fmt``.

    Uses binary64 BLAS when every partial sum is provably below 2^53 (exact),
    int64 otherwise.
    """
    fan_in = w.shape[1]
    if 2 * (fmt.bits - 1) + math.ceil(math.log2(max(fan_in, 1))) <= 52:
        return (x.astype(np.float64) @ w.astype(np.float64).T).astype(np.int64)
    return x @ w.T


def linear(x, w, b, fmt: Format, c: Counters) -> np.ndarray:
    return wrap(trunc(matvec(x, w, fmt), fmt.frac) + b, fmt, c)


def _real_fn(kind: str):
    if kind == "sigmoid":
        def f(x):
            with np.errstate(over="ignore"):
                return 1.0 / (1.0 + np.exp(-x))
        return f
    if kind == "tanh":
        return np.tanh
    raise ValueError(kind)


def activation(kind: str, x: np.ndarray, main: Format, af: ActFormat | None, c: Counters) -> np.ndarray:
    """``kind`` in sigmoid/tanh/relu applied to main-format ``x``; result in the main format."""
    fi, fo = (af.input, af.output) if af is not None else (main, main)
    xa = trunc(x, main.frac - fi.frac)
    xs = np.clip(xa, fi.lo, fi.hi)
    c.saturated_activations += int(np.count_nonzero(xs != xa))
    if kind == "relu":
        if fo.frac != fi.frac:
            raise ValueError("relu needs equal input and output frac_bits")
        y = np.maximum(xs, 0)
    else:
        real = _real_fn(kind)(xs.astype(np.float64) / float(1 << fi.frac))
        y = np.floor(real * float(1 << fo.frac) + 0.5).astype(np.int64)
    ys = np.clip(y, fo.lo, fo.hi)
    c.saturated_activations += int(np.count_nonzero(ys != y))
    return ys << (main.frac - fo.frac)


# --------------------------------------------------------------------------- model
class FixedPointModel:
    """The quantised Embedding -> GRU -> Dense model of a model directory."""

    def __init__(self, config: Mapping, weights: Mapping[str, np.ndarray], fixed_point: Mapping | None = None):
        self.config = dict(config)
        layers = {l["type"]: l for l in config["layers"]}
        self.task = config["task"]
        self.gru_layer = layers["gru"]
        self.act = self.gru_layer.get("activation", "tanh")
        self.hidden = int(self.gru_layer["hidden"])
        fp = FixedPointConfig.from_json(fixed_point if fixed_point is not None else config["fixed_point"])
        self.fp = fp
        self.fmt = fp.main
        self.counters = Counters()
        q = lambda name: quantize(weights[name], self.fmt, self.counters)  # noqa: E731
        e, g, d = layers["embedding"]["name"], self.gru_layer["name"], layers["dense"]["name"]
        self.embed = q(f"{e}.weight")
        self.w_ih, self.w_hh = q(f"{g}.weight_ih"), q(f"{g}.weight_hh")
        self.b_ih, self.b_hh = q(f"{g}.bias_ih"), q(f"{g}.bias_hh")
        self.w_fc, self.b_fc = q(f"{d}.weight"), q(f"{d}.bias")

    @classmethod
    def load(cls, model_dir: str | os.PathLike, fixed_point: str | Mapping | None = None) -> "FixedPointModel":
        """Load a model directory; ``fixed_point`` may name a variant in ``fixed_point_variants``."""
        from .modelio import load_model_dir

        config, weights = load_model_dir(model_dir)
        if isinstance(fixed_point, str):
            variants = config.get("fixed_point_variants", {})
            if fixed_point in variants:
                fixed_point = variants[fixed_point]
            else:
                fixed_point = preset(fixed_point, config_activation(config))
        return cls(config, weights, fixed_point)

    # ---- GRU
    def step(self, gi: np.ndarray, h: np.ndarray) -> np.ndarray:
        f, c, H = self.fmt, self.counters, self.hidden
        gh = linear(h, self.w_hh, self.b_hh, f, c)
        sig_f = self.fp.activations.get("sigmoid")
        cand_f = self.fp.activations.get("candidate")
        r = activation("sigmoid", wrap(gi[:, :H] + gh[:, :H], f, c), f, sig_f, c)
        z = activation("sigmoid", wrap(gi[:, H:2 * H] + gh[:, H:2 * H], f, c), f, sig_f, c)
        rh = wrap(trunc(r * gh[:, 2 * H:], f.frac), f, c)
        n = activation(self.act, wrap(gi[:, 2 * H:] + rh, f, c), f, cand_f, c)
        zd = wrap(trunc(z * wrap(h - n, f, c), f.frac), f, c)
        return wrap(n + zd, f, c)

    def run_gru(self, tokens: np.ndarray, h0: np.ndarray | None = None):
        """tokens [B, T] -> (hidden states [B, T, H], h_T) as main-format int64."""
        tokens = np.asarray(tokens, dtype=np.int64)
        if tokens.ndim != 2:
            raise ValueError("tokens must be [batch, steps]")
        if tokens.min(initial=0) < 0 or tokens.max(initial=0) >= self.embed.shape[0]:
            raise ValueError("token id out of range")
        x = self.embed[tokens]  # [B, T, E]
        gi_all = linear(x, self.w_ih, self.b_ih, self.fmt, self.counters)
        h = np.zeros((tokens.shape[0], self.hidden), dtype=np.int64) if h0 is None else h0
        outs = np.empty(tokens.shape + (self.hidden,), dtype=np.int64)
        for t in range(tokens.shape[1]):
            h = self.step(gi_all[:, t], h)
            outs[:, t] = h
        return outs, h

    def logits(self, tokens: np.ndarray) -> np.ndarray:
        """Classification: main-format int64 logits [B, C] from the last hidden state."""
        _, h = self.run_gru(tokens)
        return linear(h, self.w_fc, self.b_fc, self.fmt, self.counters)

    def predict(self, tokens: np.ndarray, batch: int = 2048) -> np.ndarray:
        tokens = np.asarray(tokens)
        out = [np.argmax(self.logits(tokens[i:i + batch]), axis=1) for i in range(0, len(tokens), batch)]
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)

    def lm_logits(self, tokens: np.ndarray, h0: np.ndarray | None = None):
        """Language model: int64 logits [B, T, V] for every step and the final state."""
        outs, h = self.run_gru(tokens, h0)
        return linear(outs, self.w_fc, self.b_fc, self.fmt, self.counters), h

    def to_float(self, x: np.ndarray) -> np.ndarray:
        return x.astype(np.float64) / float(1 << self.fmt.frac)


def config_activation(config: Mapping) -> str:
    for l in config["layers"]:
        if l["type"] == "gru":
            return l.get("activation", "tanh")
    raise ValueError("model has no gru layer")


def lm_perplexity(model: FixedPointModel, stream: np.ndarray, batch: int = 32, bptt: int = 35) -> float:
    """Perplexity per word of a fixed-point language model on a token stream.

    The stream is cut into ``batch`` contiguous rows read in windows of ``bptt``
    steps, carrying the hidden state across windows (as in training).  Softmax
    runs in binary64 on the dequantised logits (the client's side of a secure run).
    """
    rows = len(stream) // batch
    data = np.asarray(stream[: rows * batch], dtype=np.int64).reshape(batch, rows)
    h = np.zeros((batch, model.hidden), dtype=np.int64)
    nll, count = 0.0, 0
    for s in range(0, rows - 1, bptt):
        e = min(s + bptt, rows - 1)
        logits, h = model.lm_logits(data[:, s:e], h)
        z = model.to_float(logits)
        z -= z.max(axis=-1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
        tgt = data[:, s + 1:e + 1]
        nll -= np.take_along_axis(logp, tgt[..., None], axis=-1).sum()
        count += tgt.size
    return float(math.exp(nll / count))


def load_config(model_dir: str | os.PathLike) -> dict:
    with open(Path(model_dir) / "model.json", encoding="utf-8") as f:
        return json.load(f)
