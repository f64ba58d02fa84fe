"""ResNet's projection shortcut (He et al., "Deep Residual Learning for Image Recognition",
option B) written as a chain of convolutions, for :class:`secinfer.graph_export.Residual`.

A version-2 graph is a chain: every layer reads the layer before it (``add`` also reads one
earlier layer, unchanged). A block ``y = body(x) + P(x)``, where ``P`` is a 1x1 convolution of
stride S (with its BatchNorm) and ``body`` is ``conv_1 [bn] [relu] ... conv_m [bn]``, needs
``P(x)`` on a second path, so it is folded into the body's convolutions instead:

* m = 1: ``P`` reads the same ``x`` as ``conv_1`` with the same stride, so its weights are added
  to ``conv_1``'s kernel at the tap (pad_h, pad_w), the one whose input position is the stride
  times the output position, as P's single tap is.
* m > 1: ``conv_1 .. conv_{m-1}`` get K extra output channels that copy ``x`` along (weight 1 at
  the tap (pad_h, pad_w)); after them the copies hold ``x`` sampled at the product of their
  strides, which must be S. ``conv_m`` reads the copies with P's weights at its own tap
  (pad_h, pad_w). The ReLUs between leave non-negative copies unchanged: when ``x`` is known to
  be >= 0 (it follows a ReLU, or the input range starts at 0) K = C_in; otherwise the copies are
  relu(x) and relu(-x) (K = 2 C_in), read with P's weights and their negation, since
  relu(x) - relu(-x) = x.

In fixed point the copies are exact (weight 1.0 is 2^F and (2^F X) >> F = X), and P's products
join ``conv_m``'s accumulator before its single truncation. The cost is K extra channels in
every convolution and ReLU of the body but the last.
"""
from __future__ import annotations

import numpy as np

_SHAPE = ("a body with a projection shortcut must be Conv2d [BatchNorm2d] [ReLU] ... "
          "Conv2d [BatchNorm2d]")


def _flatten(module, where: str):
    import torch.nn as nn

    if isinstance(module, nn.Sequential):
        for i, m in enumerate(module):
            yield from _flatten(m, f"{where}[{i}]")
    elif not isinstance(module, (nn.Identity, nn.Dropout, nn.Dropout2d)):
        yield where, module


def _folded(conv, bn, where: str) -> tuple[np.ndarray, np.ndarray]:
    from .graph_export import bn_affine, linear_params

    weight, bias = linear_params(conv)
    if bn is not None:
        s, t = bn_affine(bn, where)
        weight = weight * s.reshape(-1, 1, 1, 1)
        bias = bias * s + t
    return weight, bias


def _stages(body, where: str) -> list[dict]:
    import torch.nn as nn

    from .graph_export import ExportError, conv_geometry

    stages: list[dict] = []
    for wh, m in _flatten(body, f"{where}.body"):
        if isinstance(m, nn.Conv2d):
            kernel, stride, padding = conv_geometry(m, wh)
            if any(p > (k - 1) // 2 for p, k in zip(padding, kernel)):
                raise ExportError(f"{wh}: padding {padding} exceeds (kernel - 1) / 2 for kernel "
                                  f"{kernel}, so its output does not align with the shortcut's")
            stages.append({"where": wh, "conv": m, "bn": None, "relu": False, "stride": stride,
                           "padding": padding})
        elif isinstance(m, nn.BatchNorm2d) and stages and stages[-1]["bn"] is None \
                and not stages[-1]["relu"]:
            stages[-1]["bn"] = m
        elif isinstance(m, nn.ReLU) and stages:
            stages[-1]["relu"] = True
        else:
            raise ExportError(f"{wh}: {type(m).__name__} here: {_SHAPE}")
    if not stages:
        raise ExportError(f"{where}.body: {_SHAPE}")
    if stages[-1]["relu"]:
        raise ExportError(f"{where}.body ends in ReLU: {_SHAPE} (put the ReLU after the block)")
    return stages


def _shortcut(res, x, where: str) -> tuple[np.ndarray, np.ndarray, list[int]]:
    import torch.nn as nn

    from .graph_export import ExportError, conv_geometry

    parts = list(_flatten(res.shortcut, f"{where}.shortcut"))
    kinds = [type(m) for _, m in parts]
    if kinds not in ([nn.Conv2d], [nn.Conv2d, nn.BatchNorm2d]):
        raise ExportError(f"{where}.shortcut: must be a 1x1 Conv2d, optionally followed by "
                          f"BatchNorm2d (got {[k.__name__ for k in kinds]})")
    wh, conv = parts[0]
    kernel, stride, padding = conv_geometry(conv, wh)
    if kernel != [1, 1] or padding != [0, 0]:
        raise ExportError(f"{wh}: a projection shortcut must be a 1x1 Conv2d without padding "
                          f"(got kernel {kernel}, padding {padding})")
    if conv.in_channels != x.shape[1]:
        raise ExportError(f"{wh}: Conv2d(in_channels={conv.in_channels}) cannot read an input "
                          f"of shape {list(x.shape[1:])}")
    weight, bias = _folded(conv, parts[1][1] if len(parts) == 2 else None, wh)
    return weight[:, :, 0, 0], bias, stride


def _lowered(res, x, stages, nonneg: bool, where: str):
    """The chain's (weight, bias, stride, padding, relu) per convolution, and the copies' K."""
    from .graph_export import ExportError

    wp, bp, sp = _shortcut(res, x, where)
    total = [int(np.prod([s["stride"][d] for s in stages])) for d in (0, 1)]
    if total != sp:
        raise ExportError(f"{where}: the body's strides multiply to {total} but the shortcut's "
                          f"stride is {sp}")
    c = x.shape[1]
    m = len(stages)
    split = m > 1 and not nonneg and any(s["relu"] for s in stages[:-1])
    k = 0 if m == 1 else c * (2 if split else 1)
    sign = np.array([1.0] * c + ([-1.0] * c if split else []))[:k]
    src = np.arange(k) % c
    chain = []
    for i, st in enumerate(stages):
        weight, bias = _folded(st["conv"], st["bn"], st["where"])
        o, cin = weight.shape[:2]
        ph, pw = st["padding"]
        if i < m - 1:
            w2 = np.zeros((o + k, cin + (k if i else 0)) + weight.shape[2:])
            w2[:o, :cin] = weight
            w2[o + np.arange(k), src if i == 0 else cin + np.arange(k), ph, pw] = sign if i == 0 else 1.0
            b2 = np.concatenate([bias, np.zeros(k)])
        else:
            w2 = np.zeros((o, cin + k) + weight.shape[2:])
            w2[:, :cin] = weight
            if m == 1:
                w2[:, :, ph, pw] += wp
            else:
                w2[:, cin:, ph, pw] = wp[:, src] * sign
            b2 = bias + bp
        chain.append((w2, b2, st["stride"], st["padding"], st["relu"]))
    return chain, k


def write(w, res, x, where: str):
    """Writes the block ``res`` (a Residual with a shortcut) reading ``x``; returns its output."""
    import torch
    import torch.nn.functional as fn

    from .graph_export import ExportError, _run

    stages = _stages(res.body, where)
    y = _run(res, x, where)
    chain, k = _lowered(res, x, stages, w.nonneg, where)
    # the chain must compute the block: checked in float64 on the probe inputs
    h = x.double()
    for weight, bias, stride, padding, relu in chain:
        h = fn.conv2d(h, torch.from_numpy(weight), torch.from_numpy(bias), stride, padding)
        h = fn.relu(h) if relu else h
    if h.shape != y.shape or not torch.allclose(h, y.double(), rtol=1e-4, atol=1e-4):
        raise ExportError(f"{where}: the folded projection does not reproduce the block")
    for weight, bias, stride, padding, relu in chain:
        w.conv(weight, bias, stride, padding)
        if relu:
            w.add({"type": "relu", "name": w.name("relu")})
    w.nonneg = False
    w.carries.append({"block": where, "channels": int(k)})
    return y
