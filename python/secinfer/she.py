"""SHE models: power-of-two weights, 5-bit activations, BatchNorm folded (SHE, Lou & Jiang,
NeurIPS 2019, §3.2), trained with numpy and exported for the ``secinfer-tfhe`` crate.

A Dense layer's weight is ``sign * 2**exp`` (sign in {-1, 0, 1}: 5 bits with a 4-bit exponent
window per layer). The integer forward pass here is the crate's reference arithmetic exactly:
each term is ``x * 2**(exp + offset)`` with a floor for negative shifts, the accumulator adds
the integer bias, and ``requant`` floors by ``2**shift`` then clips ReLU outputs to 5 bits.
Training is quantisation-aware: float weights are projected to powers of two in the forward
pass (straight-through gradients), activations are floored to their 5-bit grid, and the
BatchNorm of each hidden layer is folded into the weights before the projection.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

FORMAT = "secinfer-she"
VERSION = 1
ACT_BITS = 5
EXP_LEVELS = 16  # a 4-bit exponent per weight, plus the sign bit: SHE's 5-bit weights
BN_EPS = 1e-5


def pow2_project(w: np.ndarray, emax: int) -> tuple[np.ndarray, np.ndarray]:
    """(sign, exp) of the nearest power of two in log scale within [emax-15, emax]; weights
    below half the smallest level are pruned (sign 0)."""
    mag = np.abs(w)
    emin = emax - (EXP_LEVELS - 1)
    with np.errstate(divide="ignore"):
        e = np.round(np.log2(np.maximum(mag, 1e-30)))
    e = np.clip(e, emin, emax).astype(np.int64)
    sign = np.sign(w).astype(np.int64)
    sign[mag < 2.0 ** (emin - 1)] = 0
    return sign, e


def pow2_values(w: np.ndarray, emax: int) -> np.ndarray:
    s, e = pow2_project(w, emax)
    return s * np.exp2(e)


def layer_emax(w: np.ndarray) -> int:
    return int(np.ceil(np.log2(max(float(np.abs(w).max()), 1e-12))))


def shift_floor(x: np.ndarray, k: np.ndarray) -> np.ndarray:
    """``x * 2**k`` on integers, floor for k < 0 (an arithmetic right shift)."""
    x = x.astype(np.int64)
    k = k.astype(np.int64)
    return np.where(k >= 0, x << np.maximum(k, 0), x >> np.maximum(-k, 0))


@dataclass
class Pow2Dense:
    name: str
    sign: np.ndarray  # int [out, in]
    exp: np.ndarray  # int [out, in]
    bias: np.ndarray  # int [out], at the accumulator's scale
    offset: int

    def forward(self, x: np.ndarray) -> np.ndarray:
        """Integer accumulators for a batch ``x`` [n, in]: the crate's reference, exactly."""
        # Terms of one shift at a time, summed by a product with the signs that use it (exact
        # in float64: every partial sum is far below 2**53).
        k = self.exp + self.offset
        out = np.zeros((x.shape[0], self.sign.shape[0]))
        for kk in np.unique(k[self.sign != 0]):
            xs = shift_floor(x, np.full(x.shape, kk)).astype(np.float64)
            out += xs @ np.where(k == kk, self.sign, 0).T.astype(np.float64)
        return np.rint(out).astype(np.int64) + self.bias[None, :]


@dataclass
class SheMlp:
    """Dense layers with a ReLU requantisation between them (the last layer's accumulators
    are the logits)."""

    input_bits: int
    layers: list[Pow2Dense]
    shifts: list[int]  # requant shift after every layer but the last
    meta: dict = field(default_factory=dict)

    def forward(self, x: np.ndarray) -> np.ndarray:
        a = np.asarray(x, dtype=np.int64)
        for i, layer in enumerate(self.layers):
            a = layer.forward(a)
            if i < len(self.shifts):
                a = np.clip(a >> self.shifts[i], 0, (1 << ACT_BITS) - 1)
        return a

    def accuracy(self, x: np.ndarray, y: np.ndarray) -> float:
        return float((self.forward(x).argmax(axis=1) == y).mean())

    def export(self, out: Path, test_x: np.ndarray, test_y: np.ndarray) -> None:
        """Writes ``she.json``, ``weights.safetensors`` and ``test.safetensors`` to ``out``."""
        from safetensors.numpy import save_file

        out.mkdir(parents=True, exist_ok=True)
        layers, tensors = [], {}
        for i, l in enumerate(self.layers):
            layers.append({"kind": "dense", "name": l.name, "outputs": int(l.sign.shape[0]), "offset": int(l.offset)})
            if i < len(self.shifts):
                layers.append({"kind": "requant", "shift": int(self.shifts[i]), "bits": ACT_BITS, "relu": True})
            tensors[f"{l.name}.sign"] = np.ascontiguousarray(l.sign, dtype=np.int8)
            tensors[f"{l.name}.exp"] = np.ascontiguousarray(l.exp, dtype=np.int8)
            tensors[f"{l.name}.bias"] = np.ascontiguousarray(l.bias, dtype=np.int64)
        desc = {
            "format": FORMAT,
            "version": VERSION,
            "input": {"shape": {"c": int(self.layers[0].sign.shape[1]), "h": 1, "w": 1},
                      "bits": self.input_bits, "signed": False},
            "layers": layers,
            "meta": self.meta,
        }
        (out / "she.json").write_text(json.dumps(desc, indent=1) + "\n")
        save_file(tensors, str(out / "weights.safetensors"))
        save_file({"x": np.ascontiguousarray(test_x, dtype=np.int64),
                   "y": np.ascontiguousarray(test_y, dtype=np.int64)}, str(out / "test.safetensors"))


def load(out: Path) -> SheMlp:
    """Reads back a model written by :meth:`SheMlp.export` (Dense/ReLU-requant stacks only)."""
    from safetensors.numpy import load_file

    desc = json.loads((out / "she.json").read_text())
    if desc.get("format") != FORMAT or desc.get("version") != VERSION:
        raise ValueError(f"not a {FORMAT} v{VERSION} model: {out}")
    t = load_file(str(out / "weights.safetensors"))
    layers, shifts = [], []
    for l in desc["layers"]:
        if l["kind"] == "dense":
            n = l["name"]
            layers.append(Pow2Dense(n, t[f"{n}.sign"].astype(np.int64), t[f"{n}.exp"].astype(np.int64),
                                    t[f"{n}.bias"].astype(np.int64), int(l["offset"])))
        elif l["kind"] == "requant" and l["relu"] and l["bits"] == ACT_BITS:
            shifts.append(int(l["shift"]))
        else:
            raise ValueError(f"unsupported layer {l}")
    return SheMlp(int(desc["input"]["bits"]), layers, shifts, desc.get("meta", {}))


# ---------------------------------------------------------------- training (numpy, float)

class _Adam:
    def __init__(self, params: list[np.ndarray], lr: float):
        self.p, self.lr, self.t = params, lr, 0
        self.m = [np.zeros_like(p) for p in params]
        self.v = [np.zeros_like(p) for p in params]

    def step(self, grads: list[np.ndarray]) -> None:
        self.t += 1
        for p, g, m, v in zip(self.p, grads, self.m, self.v):
            m *= 0.9
            m += 0.1 * g
            v *= 0.999
            v += 0.001 * g * g
            p -= self.lr * (m / (1 - 0.9**self.t)) / (np.sqrt(v / (1 - 0.999**self.t)) + 1e-8)


@dataclass
class TrainConfig:
    hidden: tuple[int, ...] = (128, 128)
    epochs: int = 120
    batch: int = 64
    lr: float = 3e-3
    seed: int = 0
    input_scale_bits: int = 4  # digits pixels are 0..16: real value = pixel / 2**4
    act_scale_bits: tuple[int, ...] = (3, 3)  # 5-bit activation grids: a / 2**s, a in 0..31
    # Fraction of each layer's weights kept (largest magnitudes) once BatchNorm is folded: a
    # pruned weight costs no gate at all, so gates fall in proportion.
    keep: float = 1.0


def _keep_mask(w: np.ndarray, keep: float) -> np.ndarray:
    if keep >= 1.0:
        return np.ones_like(w)
    k = max(1, int(round(keep * w.size)))
    thr = np.partition(np.abs(w).ravel(), w.size - k)[w.size - k]
    return (np.abs(w) >= thr).astype(w.dtype)


def _fold(w, b, gamma, beta, mean, var):
    s = gamma / np.sqrt(var + BN_EPS)
    return w * s[None, :], (b - mean) * s + beta


def train_mlp(x: np.ndarray, y: np.ndarray, classes: int, cfg: TrainConfig) -> dict:
    """Quantisation-aware training of Dense-BN-ReLU stacks; returns folded float parameters.

    Hidden layers train with BatchNorm for the first half of the epochs; it is then folded into
    the weights and the rest of training runs on the folded weights, projected to powers of two
    in the forward pass, with activations floored to their 5-bit grids.
    """
    rng = np.random.default_rng(cfg.seed)
    dims = [x.shape[1], *cfg.hidden, classes]
    W = [rng.normal(0, np.sqrt(2.0 / dims[i]), (dims[i], dims[i + 1])) for i in range(len(dims) - 1)]
    B = [np.zeros(dims[i + 1]) for i in range(len(dims) - 1)]
    nh = len(cfg.hidden)
    G = [np.ones(d) for d in cfg.hidden]
    Be = [np.zeros(d) for d in cfg.hidden]
    RM = [np.zeros(d) for d in cfg.hidden]
    RV = [np.ones(d) for d in cfg.hidden]
    xs = x / 2.0**cfg.input_scale_bits
    n = len(xs)
    bn_epochs = cfg.epochs // 2
    opt = _Adam(W + B + G + Be, cfg.lr)
    masks = [np.ones_like(w) for w in W]
    for epoch in range(cfg.epochs):
        bn = epoch < bn_epochs
        if epoch == bn_epochs:
            for i in range(nh):
                W[i], B[i] = _fold(W[i], B[i], G[i], Be[i], RM[i], RV[i])
            opt = _Adam(W + B, cfg.lr / 3)
            masks = [_keep_mask(w, cfg.keep) for w in W]
        quant = not bn
        perm = rng.permutation(n)
        for s in range(0, n, cfg.batch):
            idx = perm[s:s + cfg.batch]
            a, yb = xs[idx], y[idx]
            cache = []
            for i in range(len(W)):
                Wq = pow2_values(W[i] * masks[i], layer_emax(W[i])) if quant else W[i]
                z = a @ Wq + B[i]
                if i == len(W) - 1:
                    cache.append((a, Wq, None))
                    break
                if bn:
                    mu, var = z.mean(0), z.var(0)
                    RM[i] = 0.9 * RM[i] + 0.1 * mu
                    RV[i] = 0.9 * RV[i] + 0.1 * var
                    zh = (z - mu) / np.sqrt(var + BN_EPS)
                    zz = zh * G[i] + Be[i]
                    bn_c = (zh, var)
                else:
                    zz, bn_c = z, None
                scale = 2.0 ** cfg.act_scale_bits[i]
                top = ((1 << ACT_BITS) - 1) / scale
                out = np.clip(np.floor(zz * scale) / scale, 0, top) if quant else np.clip(zz, 0, top)
                mask = (zz > 0) & (zz < top)
                cache.append((a, Wq, (mask, bn_c)))
                a = out
            logits = z
            p = np.exp(logits - logits.max(1, keepdims=True))
            p /= p.sum(1, keepdims=True)
            g = p
            g[np.arange(len(yb)), yb] -= 1
            g /= len(yb)
            gW = [None] * len(W)
            gB = [None] * len(W)
            gG = [np.zeros_like(v) for v in G]
            gBe = [np.zeros_like(v) for v in Be]
            for i in range(len(W) - 1, -1, -1):
                a_in, Wq, extra = cache[i]
                if extra is not None:
                    mask, bn_c = extra
                    g = g * mask
                    if bn_c is not None:
                        zh, var = bn_c
                        gG[i] = (g * zh).sum(0)
                        gBe[i] = g.sum(0)
                        gzh = g * G[i]
                        g = (gzh - gzh.mean(0) - zh * (gzh * zh).mean(0)) / np.sqrt(var + BN_EPS)
                gW[i] = (a_in.T @ g) * masks[i]
                gB[i] = g.sum(0)
                g = g @ Wq.T
            grads = gW + gB + (gG + gBe if bn else [])
            opt.step(grads)
    W = [w * m for w, m in zip(W, masks)]
    return {"W": W, "B": B, "act_scale_bits": cfg.act_scale_bits, "input_scale_bits": cfg.input_scale_bits}


def to_integer(params: dict, offsets: list[int], name_prefix: str = "fc") -> SheMlp:
    """The integer model of folded float parameters: per layer, the accumulator has the input's
    fraction bits plus ``offset``; biases round to that scale and requant shifts bring the
    accumulators to the next layer's 5-bit grid."""
    W, B = params["W"], params["B"]
    s_in = params["input_scale_bits"]
    layers, shifts = [], []
    for i, (w, b) in enumerate(zip(W, B)):
        sign, exp = pow2_project(w, layer_emax(w))
        sign, exp = sign.T.copy(), exp.T.copy()  # [out, in]
        off = offsets[i]
        s_acc = s_in + off
        # An unsigned 5-bit input shifted right by 5 or more is always 0: prune those weights.
        sign[exp + off <= -ACT_BITS] = 0
        exp[sign == 0] = 0
        bias = np.round(b * 2.0**s_acc).astype(np.int64)
        layers.append(Pow2Dense(f"{name_prefix}{i + 1}", sign, exp, bias, off))
        if i < len(W) - 1:
            s_out = params["act_scale_bits"][i]
            if s_acc < s_out:
                raise ValueError(f"layer {i}: offset {off} leaves {s_acc} fraction bits, fewer than {s_out}")
            shifts.append(s_acc - s_out)
            s_in = s_out
    return SheMlp(ACT_BITS, layers, shifts)


def choose_offsets(params: dict, x: np.ndarray, y: np.ndarray, candidates=range(-2, 8)) -> list[int]:
    """Per layer, the smallest shift offset (narrowest adder words) whose integer model keeps
    the best training accuracy found, chosen greedily layer by layer."""
    n = len(params["W"])
    emax = [layer_emax(w) for w in params["W"]]
    offs = [max(c for c in candidates) - emax[i] for i in range(n)]
    for i in range(n):
        scored = []
        for c in candidates:
            trial = offs.copy()
            trial[i] = c - emax[i]
            try:
                acc = to_integer(params, trial).accuracy(x, y)
            except ValueError:
                continue
            scored.append((acc, c))
        best = max(a for a, _ in scored)
        offs[i] = min(c for a, c in scored if a >= best - 0.002) - emax[i]
    return offs


# ---------------------------------------------------------------- convolutional networks

@dataclass
class Pow2Conv:
    """A convolution with power-of-two weights (sign/exp [out, in, k, k]); square kernel,
    zero padding, the crate's reference arithmetic (each term floored on its own)."""

    name: str
    sign: np.ndarray
    exp: np.ndarray
    bias: np.ndarray
    offset: int
    stride: int
    padding: int

    def forward(self, x: np.ndarray) -> np.ndarray:
        """Integer accumulators [n, out, oh, ow] of ``x`` [n, in, h, w]. Each term is floored
        on its own, so the input is shifted once per distinct shift and the terms of that
        shift summed by a product with the signs that use it (exact in float64: every partial
        sum is far below 2**53)."""
        n, c, h, w = x.shape
        k, s, p = self.sign.shape[2], self.stride, self.padding
        oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
        sh = (self.exp + self.offset).reshape(self.sign.shape[0], -1)
        sg = self.sign.reshape(self.sign.shape[0], -1)
        out = np.zeros((n * oh * ow, self.sign.shape[0]))
        for kk in np.unique(sh[sg != 0]):
            xp = np.pad(shift_floor(x, np.full(x.shape, kk)), ((0, 0), (0, 0), (p, p), (p, p)))
            cols = np.empty((n, oh * ow, c, k, k))
            for ky in range(k):
                for kx in range(k):
                    win = xp[:, :, ky:ky + s * oh:s, kx:kx + s * ow:s].reshape(n, c, oh * ow)
                    cols[:, :, :, ky, kx] = win.transpose(0, 2, 1)
            out += cols.reshape(n * oh * ow, -1) @ np.where(sh == kk, sg, 0).T.astype(np.float64)
        out = np.rint(out).astype(np.int64).reshape(n, oh * ow, -1).transpose(0, 2, 1)
        return (out + self.bias[None, :, None]).reshape(n, -1, oh, ow)


def maxpool_int(x: np.ndarray, k: int, s: int, p: int) -> np.ndarray:
    """Max over each window's in-bounds positions (padding never wins), as the crate pools."""
    lo = np.iinfo(np.int64).min
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=lo)
    oh, ow = (x.shape[2] + 2 * p - k) // s + 1, (x.shape[3] + 2 * p - k) // s + 1
    out = np.full((x.shape[0], x.shape[1], oh, ow), lo, dtype=np.int64)
    for ky in range(k):
        for kx in range(k):
            out = np.maximum(out, xp[:, :, ky:ky + s * oh:s, kx:kx + s * ow:s])
    return out


@dataclass
class SheNet:
    """A layer list in the crate's vocabulary: ``("conv", Pow2Conv)``, ``("dense", Pow2Dense)``,
    ``("requant", shift, relu)``, ``("maxpool", k, s, p)``, ``("flatten",)``."""

    input_shape: tuple[int, int, int]
    layers: list[tuple]
    meta: dict = field(default_factory=dict)

    def forward(self, x: np.ndarray, batch: int = 500) -> np.ndarray:
        return np.concatenate([self._forward(x[i:i + batch]) for i in range(0, len(x), batch)])

    def _forward(self, x: np.ndarray) -> np.ndarray:
        a = np.asarray(x, dtype=np.int64).reshape((-1, *self.input_shape))
        for l in self.layers:
            if l[0] in ("conv", "dense"):
                a = l[1].forward(a)
            elif l[0] == "requant":
                lo, hi = (0, (1 << ACT_BITS) - 1) if l[2] else (-(1 << (ACT_BITS - 1)), (1 << (ACT_BITS - 1)) - 1)
                a = np.clip(a >> l[1], lo, hi)
            elif l[0] == "maxpool":
                a = maxpool_int(a, *l[1:])
            elif l[0] == "flatten":
                a = a.reshape(a.shape[0], -1)
        return a

    def accuracy(self, x: np.ndarray, y: np.ndarray) -> float:
        return float((self.forward(x).argmax(axis=1) == y).mean())

    def export(self, out: Path, test_x: np.ndarray, test_y: np.ndarray) -> None:
        """Writes ``she.json``, ``weights.safetensors`` and ``test.safetensors`` (with the
        integer logits of the test samples, which the Rust reference must equal)."""
        from safetensors.numpy import save_file

        out.mkdir(parents=True, exist_ok=True)
        layers, tensors = [], {}
        for l in self.layers:
            if l[0] in ("conv", "dense"):
                m = l[1]
                if l[0] == "conv":
                    layers.append({"kind": "conv2d", "name": m.name, "out_ch": int(m.sign.shape[0]),
                                   "kernel": int(m.sign.shape[2]), "stride": m.stride, "padding": m.padding,
                                   "offset": int(m.offset)})
                else:
                    layers.append({"kind": "dense", "name": m.name, "outputs": int(m.sign.shape[0]),
                                   "offset": int(m.offset)})
                tensors[f"{m.name}.sign"] = np.ascontiguousarray(m.sign, dtype=np.int8)
                tensors[f"{m.name}.exp"] = np.ascontiguousarray(m.exp, dtype=np.int8)
                tensors[f"{m.name}.bias"] = np.ascontiguousarray(m.bias, dtype=np.int64)
            elif l[0] == "requant":
                layers.append({"kind": "requant", "shift": int(l[1]), "bits": ACT_BITS, "relu": bool(l[2])})
            elif l[0] == "maxpool":
                layers.append({"kind": "maxpool", "kernel": l[1], "stride": l[2], "padding": l[3]})
            else:
                layers.append({"kind": "flatten"})
        c, h, w = self.input_shape
        desc = {"format": FORMAT, "version": VERSION,
                "input": {"shape": {"c": c, "h": h, "w": w}, "bits": ACT_BITS, "signed": False},
                "layers": layers, "meta": self.meta}
        (out / "she.json").write_text(json.dumps(desc, indent=1) + "\n")
        save_file(tensors, str(out / "weights.safetensors"))
        tx = np.ascontiguousarray(test_x.reshape(len(test_x), -1), dtype=np.int64)
        save_file({"x": tx, "y": np.ascontiguousarray(test_y, dtype=np.int64),
                   "logits": np.ascontiguousarray(self.forward(tx), dtype=np.int64)},
                  str(out / "test.safetensors"))
