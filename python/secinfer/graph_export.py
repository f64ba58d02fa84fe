"""Export of PyTorch layer stacks to the secinfer model format, version 2 (docs/model-format.md).

``export_graph(model, path, example_input)`` walks an ``nn.Sequential`` (nested ones are
flattened; :class:`Residual` adds a skip connection) and writes ``model.json`` (a graph of typed
layers) and ``weights.safetensors``. Supported modules: ``Linear``, ``Conv2d`` (no groups, no
dilation, zero padding), ``ReLU``, ``MaxPool2d``, ``AvgPool2d`` (no padding, floor mode),
``Flatten``, ``BatchNorm1d/2d`` (folded into the ``Linear``/``Conv2d`` right before it, else a
``batchnorm`` layer) and :class:`Residual`. Anything else is refused with the module named.

The Rust reference (``secinfer._core.eval_graph``) evaluates the exported file in fixed point; it
is the definition every secure run equals.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

__all__ = ["Residual", "export_graph", "ExportError"]


class ExportError(ValueError):
    """A module or an option the version-2 format cannot express."""


def _torch():
    import torch

    return torch


class _ResidualBase:
    pass


def _make_residual():
    torch = _torch()

    class Residual(torch.nn.Module, _ResidualBase):
        """``x + body(x)``: a residual connection around ``body`` (its output shape must equal its
        input shape)."""

        def __init__(self, body):
            super().__init__()
            self.body = body

        def forward(self, x):
            return x + self.body(x)

    return Residual


def __getattr__(name):
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


def _np(t):
    return t.detach().cpu().double().numpy()


def _fold_bn(w: _Writer, bn) -> bool:
    """Folds ``bn`` into the dense/conv layer written last, if there is one."""
    prev = w.last()
    if prev["type"] not in ("dense", "conv2d"):
        return False
    name = prev["name"]
    s = _np(bn.weight) / np.sqrt(_np(bn.running_var) + bn.eps)
    shift = _np(bn.bias) - _np(bn.running_mean) * s
    wt = w.tensors[f"{name}.weight"].astype(np.float64)
    bias = w.tensors[f"{name}.bias"].astype(np.float64)
    shape = (-1,) + (1,) * (wt.ndim - 1)
    w.tensors[f"{name}.weight"] = (wt * s.reshape(shape)).astype(np.float32)
    w.tensors[f"{name}.bias"] = (bias * s + shift).astype(np.float32)
    return True


def _walk(w: _Writer, module, where: str) -> None:
    torch = _torch()
    nn = torch.nn
    if isinstance(module, nn.Sequential):
        for i, m in enumerate(module):
            _walk(w, m, f"{where}[{i}]")
        return
    if isinstance(module, _ResidualBase):
        other = w.last()["name"]
        _walk(w, module.body, f"{where}.body")
        w.add({"type": "add", "name": w.name("add"), "other": other})
        return
    if isinstance(module, nn.Linear):
        bias = _np(module.bias) if module.bias is not None else np.zeros(module.out_features)
        w.add({"type": "dense", "name": w.name("fc"), "input": module.in_features,
               "output": module.out_features}, weight=_np(module.weight), bias=bias)
    elif isinstance(module, nn.Conv2d):
        if module.groups != 1 or _pair(module.dilation, where) != [1, 1]:
            raise ExportError(f"{where}: Conv2d with groups or dilation is not supported")
        if isinstance(module.padding, str) or module.padding_mode != "zeros":
            raise ExportError(f"{where}: Conv2d padding must be numeric zero padding")
        bias = _np(module.bias) if module.bias is not None else np.zeros(module.out_channels)
        w.add({"type": "conv2d", "name": w.name("conv"), "in_channels": module.in_channels,
               "out_channels": module.out_channels, "kernel": _pair(module.kernel_size, where),
               "stride": _pair(module.stride, where), "padding": _pair(module.padding, where)},
              weight=_np(module.weight), bias=bias)
    elif isinstance(module, nn.ReLU):
        w.add({"type": "relu", "name": w.name("relu")})
    elif isinstance(module, (nn.MaxPool2d, nn.AvgPool2d)):
        if _pair(module.padding, where) != [0, 0] or module.ceil_mode:
            raise ExportError(f"{where}: pooling with padding or ceil_mode is not supported")
        if isinstance(module, nn.MaxPool2d) and _pair(module.dilation, where) != [1, 1]:
            raise ExportError(f"{where}: MaxPool2d with dilation is not supported")
        kind = "maxpool2d" if isinstance(module, nn.MaxPool2d) else "avgpool2d"
        stride = module.stride if module.stride is not None else module.kernel_size
        w.add({"type": kind, "name": w.name(kind[:7]), "kernel": _pair(module.kernel_size, where),
               "stride": _pair(stride, where)})
    elif isinstance(module, nn.Flatten):
        if module.start_dim != 1 or module.end_dim != -1:
            raise ExportError(f"{where}: Flatten must flatten every dimension after the batch")
        w.add({"type": "flatten", "name": w.name("flatten")})
    elif isinstance(module, (nn.BatchNorm1d, nn.BatchNorm2d)):
        if module.running_mean is None:
            raise ExportError(f"{where}: BatchNorm without running statistics")
        if not _fold_bn(w, module):
            w.add({"type": "batchnorm", "name": w.name("bn"), "channels": module.num_features,
                   "eps": float(module.eps)},
                  weight=_np(module.weight), bias=_np(module.bias),
                  running_mean=_np(module.running_mean), running_var=_np(module.running_var))
    elif isinstance(module, nn.Identity):
        return
    else:
        raise ExportError(f"{where}: {type(module).__name__} is not a supported layer")


def export_graph(model, path: str | os.PathLike, example_input, *, labels=None,
                 fixed_point=(20, 12), argmax: bool = True, metadata: dict | None = None) -> Path:
    """Writes ``model`` (an ``nn.Sequential`` in eval mode) as a version-2 model directory.

    ``example_input`` is one input with its batch dimension (e.g. ``torch.zeros(1, 1, 28, 28)``):
    its shape becomes the input layer's. ``labels`` names the classes (default "0", "1", ...);
    ``fixed_point`` is the main format (bits, fraction bits); ``argmax`` appends the layer whose
    output the client learns (the class).
    """
    torch = _torch()
    model = model.eval()
    shape = list(example_input.shape[1:])
    if not 1 <= len(shape) <= 3:
        raise ExportError(f"example_input has shape {list(example_input.shape)}: expected "
                          "[1, n], [1, steps, n] or [1, channels, height, width]")
    w = _Writer()
    w.add({"type": "input", "name": "input", "dtype": "fixed", "shape": shape})
    _walk(w, model, "model")
    with torch.no_grad():
        out = model(example_input)
    classes = int(np.prod(out.shape[1:]))
    if argmax:
        w.add({"type": "argmax", "name": "class"})
    labels = [str(i) for i in range(classes)] if labels is None else [str(x) for x in labels]
    if len(labels) != classes:
        raise ExportError(f"{len(labels)} labels for {classes} outputs")
    bits, frac = fixed_point
    config = {
        "format": "secinfer-model", "version": 2, "task": "classification",
        "layers": w.layers,
        "fixed_point": {"bits": int(bits), "frac_bits": int(frac)},
        "labels": labels,
        "metadata": metadata or {},
    }
    from safetensors.numpy import save_file

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    (path / "model.json").write_text(json.dumps(config, indent=1) + "\n")
    save_file(w.tensors, str(path / "weights.safetensors"))
    return path
