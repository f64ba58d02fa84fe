"""Export of PyTorch layer stacks to the secinfer model format, version 2 (docs/model-format.md).

``export_graph(model, path, example_input)`` walks an ``nn.Sequential`` (nested ones are
flattened) and writes ``model.json`` (a graph of typed layers) and ``weights.safetensors``.
Supported modules: ``Linear``, ``Conv2d`` (no groups, no dilation, zero padding, numeric or
``"valid"``/``"same"``), ``ReLU``, ``MaxPool2d``, ``AvgPool2d`` (no padding, floor mode),
``AdaptiveAvgPool2d`` (when the input divides evenly), ``Flatten``, ``BatchNorm1d/2d`` (folded
into the ``Linear``/``Conv2d`` right before it, else a ``batchnorm`` layer), ``Dropout`` and
``Identity`` (nothing, in eval mode) and :class:`Residual`. Anything else is refused with the
module's path in the model named.

The walk runs ``example_input`` through every module as it goes, so a module that cannot read
its input (a wrong shape) is refused by name too, and the layers it writes are checked to
compute the model's own forward.

The Rust reference (``secinfer._core.eval_graph``) evaluates the exported file in fixed point; it
is the definition every secure run equals.
"""
from __future__ import annotations

import json
import math
import os
import warnings
from pathlib import Path

import numpy as np

from . import projection

__all__ = ["Residual", "export", "export_graph", "ExportError", "accumulator_bounds"]


class ExportError(ValueError):
    """A module or an option the version-2 format cannot express (the message names the module
    by its path in the model, e.g. ``model[3].body[0]``)."""


def _torch():
    import torch

    return torch


class _ResidualBase:
    pass


def _make_residual():
    torch = _torch()

    class Residual(torch.nn.Module, _ResidualBase):
        """A residual block: ``body(x) + x``, or ``body(x) + shortcut(x)`` with a projection.

        ``body`` maps the input to an output of the same shape (identity shortcut) or to the
        shape ``shortcut`` gives. ``shortcut`` is ``None`` or a 1x1 ``Conv2d`` (no padding),
        optionally followed by a ``BatchNorm2d`` (an ``nn.Sequential`` of the two): ResNet's
        projection shortcut. The ReLU that ResNet applies after the sum goes after the block.

        The identity form exports as an ``add`` layer. The version-2 graph is a chain (each
        layer reads the one before it), so a projection is folded into the body's convolutions
        instead: the body's last ``Conv2d`` also computes the projection, reading a copy of the
        block's input that the earlier convolutions pass along in extra channels
        (:mod:`secinfer.projection`). Such a body is a chain of ``Conv2d`` (each optionally
        followed by ``BatchNorm2d`` and ``ReLU``) ending in a ``Conv2d`` (or ``Conv2d`` +
        ``BatchNorm2d``).
        """

        def __init__(self, body, shortcut=None):
            super().__init__()
            self.body = body
            self.shortcut = shortcut

        def forward(self, x):
            skip = x if self.shortcut is None else self.shortcut(x)
            return self.body(x) + skip

    return Residual


def __getattr__(name):
    # torch is imported only when Residual is first asked for, so that importing this module
    # (and the model-format readers beside it) does not need torch.
    if name == "Residual":
        cls = _make_residual()
        globals()["Residual"] = cls
        return cls
    raise AttributeError(name)


def _pair(v, what: str) -> list[int]:
    if isinstance(v, int):
        return [v, v]
    if isinstance(v, (tuple, list)) and len(v) == 2 and all(isinstance(x, int) for x in v):
        return [int(v[0]), int(v[1])]
    raise ExportError(f"{what}: {v!r} is not an int or a pair of ints")


class _Writer:
    def __init__(self):
        self.layers: list[dict] = []
        self.tensors: dict[str, np.ndarray] = {}
        self.names: dict[str, int] = {}
        # layers whose output an `add` reads later: BatchNorm must not fold into them
        self.shared: set[str] = set()
        # whether the current value is known to be >= 0 (a projection needs fewer channels)
        self.nonneg = False
        self.carries: list[dict] = []

    def name(self, base: str) -> str:
        k = self.names.get(base, 0) + 1
        self.names[base] = k
        return f"{base}{k}"

    def add(self, layer: dict, **tensors: np.ndarray) -> str:
        self.layers.append(layer)
        for k, v in tensors.items():
            self.tensors[f"{layer['name']}.{k}"] = np.ascontiguousarray(v, dtype=np.float32)
        return layer["name"]

    def last(self) -> dict:
        return self.layers[-1]

    def conv(self, weight: np.ndarray, bias: np.ndarray, stride, padding) -> str:
        o, i, kh, kw = weight.shape
        return self.add({"type": "conv2d", "name": self.name("conv"), "in_channels": int(i),
                         "out_channels": int(o), "kernel": [int(kh), int(kw)],
                         "stride": list(stride), "padding": list(padding)},
                        weight=weight, bias=bias)


def _np(t):
    return t.detach().cpu().double().numpy()


def bn_affine(bn, where: str) -> tuple[np.ndarray, np.ndarray]:
    """The per-channel scale and shift an eval-mode BatchNorm applies."""
    if bn.running_mean is None or bn.running_var is None:
        raise ExportError(f"{where}: {type(bn).__name__} without running statistics "
                          "(track_running_stats=False) cannot be exported")
    n = bn.num_features
    gamma = _np(bn.weight) if bn.weight is not None else np.ones(n)
    beta = _np(bn.bias) if bn.bias is not None else np.zeros(n)
    s = gamma / np.sqrt(_np(bn.running_var) + bn.eps)
    return s, beta - _np(bn.running_mean) * s


def linear_params(module) -> tuple[np.ndarray, np.ndarray]:
    """Float64 weight and bias of a Linear or Conv2d (a missing bias is zero)."""
    out = module.out_features if hasattr(module, "out_features") else module.out_channels
    bias = _np(module.bias) if module.bias is not None else np.zeros(out)
    return _np(module.weight), bias


def conv_geometry(module, where: str) -> tuple[list[int], list[int], list[int]]:
    """Kernel, stride and padding of a Conv2d the format can express, or ExportError."""
    kernel = _pair(module.kernel_size, where)
    stride = _pair(module.stride, where)
    if module.groups != 1 or _pair(module.dilation, where) != [1, 1]:
        raise ExportError(f"{where}: Conv2d with groups or dilation is not supported")
    if module.padding_mode != "zeros":
        raise ExportError(f"{where}: Conv2d padding_mode {module.padding_mode!r} is not "
                          "supported (only zero padding)")
    if module.padding == "valid":
        padding = [0, 0]
    elif module.padding == "same":
        if any(k % 2 == 0 for k in kernel):
            raise ExportError(f"{where}: Conv2d padding='same' with an even kernel {kernel} pads "
                              "unevenly, which the format cannot express")
        padding = [k // 2 for k in kernel]
    else:
        padding = _pair(module.padding, where)
    if padding[0] >= kernel[0] or padding[1] >= kernel[1]:
        raise ExportError(f"{where}: Conv2d padding {padding} must be smaller than its kernel "
                          f"{kernel}")
    return kernel, stride, padding


def _fold_bn(w: _Writer, bn, where: str) -> bool:
    """Folds ``bn`` into the dense/conv layer written last, if there is one no skip reads."""
    prev = w.last()
    if prev["type"] not in ("dense", "conv2d") or prev["name"] in w.shared:
        return False
    name = prev["name"]
    s, shift = bn_affine(bn, where)
    wt = w.tensors[f"{name}.weight"].astype(np.float64)
    bias = w.tensors[f"{name}.bias"].astype(np.float64)
    shape = (-1,) + (1,) * (wt.ndim - 1)
    w.tensors[f"{name}.weight"] = (wt * s.reshape(shape)).astype(np.float32)
    w.tensors[f"{name}.bias"] = (bias * s + shift).astype(np.float32)
    return True


def _shape(x) -> list[int]:
    return list(x.shape[1:])


def _needs(x, dims: int, kind: str, where: str, hint: str = "") -> None:
    if x.dim() != dims + 1:
        raise ExportError(f"{where}: {kind} cannot read an input of shape {_shape(x)}{hint}")


def _run(module, x, where: str):
    try:
        return module(x)
    except RuntimeError as e:
        raise ExportError(f"{where}: {type(module).__name__} cannot read an input of shape "
                          f"{_shape(x)}: {e}") from e


def _pool(w: _Writer, module, x, where: str) -> None:
    nn = _torch().nn
    if isinstance(module, nn.AdaptiveAvgPool2d):
        _needs(x, 3, "AdaptiveAvgPool2d", where)
        h, wd = x.shape[2], x.shape[3]
        size = module.output_size
        oh, ow = (size, size) if isinstance(size, int) else size
        oh, ow = oh or h, ow or wd
        if h % oh or wd % ow:
            raise ExportError(f"{where}: AdaptiveAvgPool2d to {[oh, ow]} from {[h, wd]} has "
                              "unequal windows, which the format cannot express")
        kernel = [h // oh, wd // ow]
        w.add({"type": "avgpool2d", "name": w.name("avgpool"), "kernel": kernel, "stride": kernel})
        return
    kind = "maxpool2d" if isinstance(module, nn.MaxPool2d) else "avgpool2d"
    _needs(x, 3, type(module).__name__, where)
    if _pair(module.padding, where) != [0, 0] or module.ceil_mode:
        raise ExportError(f"{where}: pooling with padding or ceil_mode is not supported")
    if kind == "maxpool2d" and (_pair(module.dilation, where) != [1, 1] or module.return_indices):
        raise ExportError(f"{where}: MaxPool2d with dilation or return_indices is not supported")
    if kind == "avgpool2d" and module.divisor_override is not None:
        raise ExportError(f"{where}: AvgPool2d with divisor_override is not supported")
    stride = module.stride if module.stride is not None else module.kernel_size
    w.add({"type": kind, "name": w.name(kind[:7]), "kernel": _pair(module.kernel_size, where),
           "stride": _pair(stride, where)})


def _leaf(w: _Writer, module, x, where: str) -> None:
    """Writes one non-container module that reads ``x``."""
    nn = _torch().nn
    nonneg = False
    if isinstance(module, nn.Linear):
        # [n] or a sequence [steps, n]; an image needs a Flatten first
        hint = ": add nn.Flatten() before it" if x.dim() == 4 else ""
        if x.dim() not in (2, 3) or x.shape[-1] != module.in_features:
            raise ExportError(f"{where}: Linear(in_features={module.in_features}) cannot read an "
                              f"input of shape {_shape(x)}{hint}")
        weight, bias = linear_params(module)
        w.add({"type": "dense", "name": w.name("fc"), "input": module.in_features,
               "output": module.out_features}, weight=weight, bias=bias)
    elif isinstance(module, nn.Conv2d):
        _needs(x, 3, "Conv2d", where, " (it needs [channels, height, width])")
        if x.shape[1] != module.in_channels:
            raise ExportError(f"{where}: Conv2d(in_channels={module.in_channels}) cannot read an "
                              f"input of shape {_shape(x)}")
        _, stride, padding = conv_geometry(module, where)
        w.conv(*linear_params(module), stride, padding)
    elif isinstance(module, nn.ReLU):
        w.add({"type": "relu", "name": w.name("relu")})
        nonneg = True
    elif isinstance(module, (nn.MaxPool2d, nn.AvgPool2d, nn.AdaptiveAvgPool2d)):
        _pool(w, module, x, where)
        nonneg = w.nonneg
    elif isinstance(module, nn.Flatten):
        if module.start_dim != 1 or module.end_dim != -1:
            raise ExportError(f"{where}: Flatten must flatten every dimension after the batch")
        w.add({"type": "flatten", "name": w.name("flatten")})
        nonneg = w.nonneg
    elif isinstance(module, (nn.BatchNorm1d, nn.BatchNorm2d)):
        _needs(x, 1 if isinstance(module, nn.BatchNorm1d) else 3, type(module).__name__, where)
        if not _fold_bn(w, module, where):
            s, shift = bn_affine(module, where)  # also refuses missing running statistics
            w.add({"type": "batchnorm", "name": w.name("bn"), "channels": module.num_features,
                   "eps": float(module.eps)},
                  weight=_np(module.weight) if module.weight is not None else np.ones_like(s),
                  bias=_np(module.bias) if module.bias is not None else np.zeros_like(shift),
                  running_mean=_np(module.running_mean), running_var=_np(module.running_var))
    else:
        raise ExportError(f"{where}: {type(module).__name__} is not a supported layer")
    w.nonneg = nonneg


def _walk(w: _Writer, module, x, where: str):
    """Writes ``module`` reading ``x`` (a batch); returns the module's output on ``x``."""
    nn = _torch().nn
    if isinstance(module, nn.Sequential):  # a subclass with its own forward: refused at the end
        for i, m in enumerate(module):
            x = _walk(w, m, x, f"{where}[{i}]")
        return x
    if isinstance(module, (nn.Identity, nn.Dropout, nn.Dropout2d)):
        return x
    if isinstance(module, _ResidualBase):
        if module.shortcut is not None:
            return projection.write(w, module, x, where)
        other = w.last()["name"]
        w.shared.add(other)
        y = _walk(w, module.body, x, f"{where}.body")
        if y.shape != x.shape:
            raise ExportError(f"{where}: the body maps {_shape(x)} to {_shape(y)}; an identity "
                              "shortcut needs equal shapes (give a projection shortcut)")
        w.add({"type": "add", "name": w.name("add"), "other": other})
        w.nonneg = False
        return x + y
    _leaf(w, module, x, where)
    return _run(module, x, where)


def _probe(example_input, input_range):
    """The example input and a seeded random one of the same shape, as one batch of two."""
    torch = _torch()
    x0 = example_input[:1].detach().to(torch.float32)
    lo, hi = input_range if input_range is not None else (-1.0, 1.0)
    g = torch.Generator().manual_seed(0)
    return torch.cat([x0, lo + (hi - lo) * torch.rand(x0.shape, generator=g)])


def _format(fp, what: str) -> dict:
    bits, frac = fp
    if not (isinstance(bits, int) and isinstance(frac, int) and 2 <= bits <= 64
            and 0 <= frac < bits):
        raise ExportError(f"{what}: {fp!r} is not a (bits, frac_bits) pair with "
                          "0 <= frac_bits < bits")
    return {"bits": int(bits), "frac_bits": int(frac)}


def _saturated(w: _Writer, fp: dict) -> list[str]:
    """The dense/conv tensors with a value outside the format (rule 1 clamps them)."""
    hi = 2 ** (fp["bits"] - 1) - 1
    lo = -(2 ** (fp["bits"] - 1))
    out = []
    for layer in w.layers:
        if layer["type"] in ("dense", "conv2d"):
            for t in ("weight", "bias"):
                v = np.floor(w.tensors[f"{layer['name']}.{t}"].astype(np.float64)
                             * 2.0 ** fp["frac_bits"] + 0.5)
                if (v > hi).any() or (v < lo).any():
                    out.append(f"{layer['name']}.{t}")
    return out


def export_graph(model, path: str | os.PathLike, example_input, *, labels=None,
                 fixed_point=(20, 12), variants: dict | None = None, input_range=None,
                 argmax: bool = True, metadata: dict | None = None) -> Path:
    """Writes ``model`` (an ``nn.Sequential``, put in eval mode) as a version-2 model directory.

    ``example_input`` is one input with its batch dimension (e.g. ``torch.zeros(1, 1, 28, 28)``):
    its shape becomes the input layer's. ``labels`` names the classes (default "0", "1", ...);
    ``fixed_point`` is the main format (bits, fraction bits); ``variants`` maps names to other
    formats a runtime may select (``fixed_point_variants``); ``input_range`` (lo, hi) is the range
    of the client's values (e.g. (0, 1) for pixels), written as the input layer's ``range`` (every
    party clamps the input into it, and ``hegc`` bounds the first layer's accumulators with it);
    ``argmax`` appends the layer whose output the client learns (the class): without it the
    model's last layer gives the logits.
    """
    torch = _torch()
    model = model.eval()
    shape = list(example_input.shape[1:])
    if not 1 <= len(shape) <= 3:
        raise ExportError(f"example_input has shape {list(example_input.shape)}: expected "
                          "[1, n], [1, steps, n] or [1, channels, height, width]")
    main = _format(fixed_point, "fixed_point")
    extra = {str(k): _format(v, f"variants[{k!r}]") for k, v in (variants or {}).items()}
    meta = dict(metadata or {})
    w = _Writer()
    layer = {"type": "input", "name": "input", "dtype": "fixed", "shape": shape}
    if input_range is not None:
        lo, hi = (float(v) for v in input_range)
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ExportError(f"input_range {input_range!r} must be finite with lo < hi")
        layer["range"] = [lo, hi]
        w.nonneg = lo >= 0
    w.add(layer)
    probe = _probe(example_input, input_range)
    with torch.no_grad():
        walked = _walk(w, model, probe, "model")
        out = model(probe)
    if walked.shape != out.shape or not torch.allclose(walked, out, rtol=1e-4, atol=1e-5):
        raise ExportError("model: its forward does not compute its layers in order (a subclass "
                          "of nn.Sequential with its own forward?), so they cannot be exported")
    if w.carries:
        meta["projection_carries"] = w.carries
        for f in (main, *extra.values()):
            if f["bits"] - 1 - f["frac_bits"] < 1:
                raise ExportError(f"fixed point {f}: a projection shortcut passes its input on "
                                  "with weight 1.0, which needs an integer bit")
    classes = int(np.prod(out.shape[1:]))
    if argmax and out.dim() != 2:
        raise ExportError(f"model: its output has shape {_shape(out)}, but the class (argmax) "
                          "is taken of a vector: end it in nn.Flatten() or nn.Linear")
    if argmax:
        w.add({"type": "argmax", "name": "class"})
    labels = [str(i) for i in range(classes)] if labels is None else [str(x) for x in labels]
    if len(labels) != classes:
        raise ExportError(f"{len(labels)} labels for {classes} outputs")
    for f in (main, *extra.values()):
        if sat := _saturated(w, f):
            warnings.warn(f"weights saturate in fixed point {f}: {', '.join(sat)}", stacklevel=2)
    config = {
        "format": "secinfer-model", "version": 2, "task": "classification",
        "layers": w.layers,
        "fixed_point": main,
        "labels": labels,
        "metadata": meta,
    }
    if extra:
        config["fixed_point_variants"] = extra
    from safetensors.numpy import save_file

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    (path / "model.json").write_text(json.dumps(config, indent=1) + "\n")
    save_file(w.tensors, str(path / "weights.safetensors"))
    return path


def export(model, path: str | os.PathLike, example_input=None, **options) -> Path:
    """``secinfer.export``: a layer stack with ``example_input`` goes to :func:`export_graph`
    (format version 2); a GRU text model without it to :func:`secinfer.modelio.export`."""
    if example_input is None:
        from .modelio import export as export_gru

        return export_gru(model, path, **options)
    return export_graph(model, path, example_input, **options)


def accumulator_bounds(path: str | os.PathLike, fixed_point: str | None = None) -> list[dict]:
    """For each dense/conv layer of an exported model, the largest row bound the ``hegc``
    family checks against its HE plaintext modulus (docs/model-format.md, rule 4):
    ``max_i sum_j |W_ij| * x_max + |b_i| * 2^F`` with the weights quantised, and its bits
    (``log2`` of the bound, plus one for the sign). ``x_max`` is ``2^(L-1)`` (any value in the
    format); for the first linear layer of a model whose input layer states a ``range`` it is
    also given for that range (``bound_in_range``). This is the plain worst case: the Rust check
    (``NetShape::check_range``) is interval arithmetic through the graph, never larger."""
    from safetensors.numpy import load_file

    path = Path(path)
    cfg = json.loads((path / "model.json").read_text())
    fp = cfg["fixed_point"] if fixed_point is None else cfg["fixed_point_variants"][fixed_point]
    L, F = fp["bits"], fp["frac_bits"]
    tensors = load_file(str(path / "weights.safetensors"))

    def q(v):
        return np.clip(np.floor(v.astype(np.float64) * 2.0 ** F + 0.5), -2 ** (L - 1), 2 ** (L - 1) - 1)

    rng = cfg["layers"][0].get("range")
    rows, first = [], True
    for layer in cfg["layers"]:
        if layer["type"] not in ("dense", "conv2d"):
            continue
        wq = np.abs(q(tensors[f"{layer['name']}.weight"])).reshape(
            tensors[f"{layer['name']}.weight"].shape[0], -1).sum(axis=1)
        bq = np.abs(q(tensors[f"{layer['name']}.bias"])) * 2.0 ** F
        bound = float((wq * 2.0 ** (L - 1) + bq).max())
        row = {"layer": layer["name"], "bound": bound, "bits": math.log2(bound) + 1}
        if first and rng is not None:
            xmax = min(max(abs(q(np.array(rng))).max(), 0), 2 ** (L - 1))
            b = float((wq * xmax + bq).max())
            row.update(bound_in_range=b, bits_in_range=math.log2(max(b, 1)) + 1)
        first = False
        rows.append(row)
    return rows
