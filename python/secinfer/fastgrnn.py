"""FastGRNN (Kusupati et al. 2018), the model of OPAF's end-to-end table, in PyTorch: the cell, a
classifier (FastGRNN -> Linear on the last state), its export to the secinfer model format,
version 2, and the fixed-point reference of docs/model-format.md (section "FastGRNN") in numpy.

The cell, per step, with W and U optionally low rank (W = W2 W1, U = U2 U1)::

    z  = sigmoid(W x + U h + b_gate)
    h~ = tanh(W x + U h + b_update)
    h' = (zeta (1 - z) + nu) * h~ + z * h

with ``zeta = sigmoid(zeta_param)`` and ``nu = sigmoid(nu_param)`` as in the FastGRNN paper;
the file stores the values zeta and nu themselves. Family ``ss`` runs the exported model in
OPAF's formats: activations 16-bit at scale 9, W and U at scale 8, sigmoid's input at scale 8
and output at 14, zeta and nu at 14; the dense head in the main format, which must be
``(bits, 9)`` with 17 <= bits <= 27 for family ``ss`` (the state's scale, no wrap of the
state, the head's product inside the update ring); (18, 9) is the default here.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

__all__ = ["FastGRNN", "FastGRNNClassifier", "export_fastgrnn", "fixed_point_logits",
           "FIXED_POINT"]

#: The main format family ``ss`` serves FastGRNN models in (bits, fraction bits).
FIXED_POINT = (18, 9)

# The cell's own formats (OPAF's; docs/model-format.md, FastGRNN).
_ACT_BITS, _ACT_SCALE = 16, 9
_WEIGHT_SCALE = 8
_SIG_IN, _GATE = 8, 14
# The accumulator: scale 17, and 16 bits once shifted to sigmoid's input scale.
_ACC_SCALE = _ACT_SCALE + _WEIGHT_SCALE
_ACC_BITS = _ACT_BITS + _ACC_SCALE - _SIG_IN
_UPDATE_BITS = 36


def _torch():
    import torch

    return torch


def _module_classes():
    torch = _torch()
    nn = torch.nn

    class FastGRNN(nn.Module):
        """One FastGRNN layer over ``[batch, steps, input]``; returns the last state
        ``[batch, hidden]`` (or every state with ``return_sequences``)."""

        def __init__(self, input_size: int, hidden_size: int, w_rank: int | None = None,
                     u_rank: int | None = None, return_sequences: bool = False):
            super().__init__()
            self.input_size, self.hidden_size = input_size, hidden_size
            self.w_rank, self.u_rank = w_rank, u_rank
            self.return_sequences = return_sequences

            def mat(rows, cols):
                return nn.Parameter(torch.randn(rows, cols) * (1.0 / cols) ** 0.5)

            if w_rank is None:
                self.W = mat(hidden_size, input_size)
            else:
                self.W1, self.W2 = mat(w_rank, input_size), mat(hidden_size, w_rank)
            if u_rank is None:
                self.U = mat(hidden_size, hidden_size)
            else:
                self.U1, self.U2 = mat(u_rank, hidden_size), mat(hidden_size, u_rank)
            self.bias_gate = nn.Parameter(torch.ones(hidden_size))
            self.bias_update = nn.Parameter(torch.ones(hidden_size))
            self.zeta_param = nn.Parameter(torch.tensor([1.0]))
            self.nu_param = nn.Parameter(torch.tensor([-4.0]))

        def w_matrix(self):
            return self.W if self.w_rank is None else self.W2 @ self.W1

        def u_matrix(self):
            return self.U if self.u_rank is None else self.U2 @ self.U1

        def zeta(self):
            return torch.sigmoid(self.zeta_param)

        def nu(self):
            return torch.sigmoid(self.nu_param)

        def forward(self, x):
            w, u = self.w_matrix(), self.u_matrix()
            wx = x @ w.t()  # all steps at once: x is the input, not the state
            h = x.new_zeros(x.shape[0], self.hidden_size)
            zeta, nu = self.zeta(), self.nu()
            states = []
            for t in range(x.shape[1]):
                a = wx[:, t] + h @ u.t()
                z = torch.sigmoid(a + self.bias_gate)
                ht = torch.tanh(a + self.bias_update)
                h = (zeta * (1 - z) + nu) * ht + z * h
                states.append(h)
            return torch.stack(states, 1) if self.return_sequences else h

    class FastGRNNClassifier(nn.Module):
        """FastGRNN -> Linear on the last state: ``[batch, steps, input]`` -> logits."""

        def __init__(self, input_size: int, hidden_size: int, classes: int, **kw):
            super().__init__()
            self.rnn = FastGRNN(input_size, hidden_size, **kw)
            self.fc = nn.Linear(hidden_size, classes)

        def forward(self, x):
            return self.fc(self.rnn(x))

    return FastGRNN, FastGRNNClassifier


def __getattr__(name):
    if name in ("FastGRNN", "FastGRNNClassifier"):
        cell, clf = _module_classes()
        globals().update(FastGRNN=cell, FastGRNNClassifier=clf)
        return globals()[name]
    raise AttributeError(name)


def _np(t):
    return t.detach().cpu().double().numpy()


def export_fastgrnn(model, path: str | os.PathLike, steps: int, *, labels=None,
                    fixed_point=FIXED_POINT, metadata: dict | None = None) -> Path:
    """Writes a :class:`FastGRNNClassifier` as a version-2 model directory: layers ``input``
    ``[steps, input]`` -> ``fastgrnn`` -> ``dense`` -> ``argmax``, tensors in float32."""
    rnn, fc = model.rnn, model.fc
    classes = fc.out_features
    labels = [str(i) for i in range(classes)] if labels is None else [str(x) for x in labels]
    if len(labels) != classes:
        raise ValueError(f"{len(labels)} labels for {classes} classes")
    tensors = {
        "rnn1.bias_gate": _np(rnn.bias_gate), "rnn1.bias_update": _np(rnn.bias_update),
        "rnn1.zeta": _np(rnn.zeta()), "rnn1.nu": _np(rnn.nu()),
        "fc1.weight": _np(fc.weight), "fc1.bias": _np(fc.bias),
    }
    if rnn.w_rank is None:
        tensors["rnn1.W"] = _np(rnn.W)
    else:
        tensors["rnn1.W1"], tensors["rnn1.W2"] = _np(rnn.W1), _np(rnn.W2)
    if rnn.u_rank is None:
        tensors["rnn1.U"] = _np(rnn.U)
    else:
        tensors["rnn1.U1"], tensors["rnn1.U2"] = _np(rnn.U1), _np(rnn.U2)
    layers = [
        {"type": "input", "name": "input", "dtype": "fixed", "shape": [steps, rnn.input_size]},
        {"type": "fastgrnn", "name": "rnn1", "input": rnn.input_size, "hidden": rnn.hidden_size,
         "w_rank": rnn.w_rank, "u_rank": rnn.u_rank, "return_sequences": False},
        {"type": "dense", "name": "fc1", "input": rnn.hidden_size, "output": classes},
        {"type": "argmax", "name": "class"},
    ]
    bits, frac = fixed_point
    config = {"format": "secinfer-model", "version": 2, "task": "classification",
              "layers": layers, "fixed_point": {"bits": int(bits), "frac_bits": int(frac)},
              "labels": labels, "metadata": metadata or {}}
    from safetensors.numpy import save_file

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    (path / "model.json").write_text(json.dumps(config, indent=1) + "\n")
    save_file({k: np.ascontiguousarray(v, dtype=np.float32) for k, v in tensors.items()},
              str(path / "weights.safetensors"))
    return path


def _wrap(x, bits: int):
    half = np.int64(1) << np.int64(bits - 1)
    return ((x + half) & ((half << np.int64(1)) - 1)) - half


def _quantize(v, scale: int, bits: int):
    x = np.floor(np.asarray(v, dtype=np.float32).astype(np.float64) * 2.0 ** scale + 0.5)
    lim = 2.0 ** (bits - 1)
    return np.clip(x, -lim, lim - 1).astype(np.int64)


def fixed_point_logits(path: str | os.PathLike, x: np.ndarray) -> np.ndarray:
    """The fixed-point reference's logits (integers in the main format) of the exported model
    at ``path`` on float inputs ``x`` ``[n, steps, input]``: docs/model-format.md's FastGRNN
    rules and the dense layer's ``wrap((W h) >> F + b)``, vectorised over the batch. An
    independent re-derivation of ``secinfer_nn::reference``, for accuracy over a whole split."""
    from safetensors.numpy import load_file

    path = Path(path)
    cfg = json.loads((path / "model.json").read_text())
    t = {k: v.astype(np.float32) for k, v in load_file(str(path / "weights.safetensors")).items()}
    bits, frac = cfg["fixed_point"]["bits"], cfg["fixed_point"]["frac_bits"]
    cell = next(layer for layer in cfg["layers"] if layer["type"] == "fastgrnn")
    w = t["rnn1.W"] if cell["w_rank"] is None else t["rnn1.W2"] @ t["rnn1.W1"]
    u = t["rnn1.U"] if cell["u_rank"] is None else t["rnn1.U2"] @ t["rnn1.U1"]
    wq, uq = _quantize(w, _WEIGHT_SCALE, _ACT_BITS), _quantize(u, _WEIGHT_SCALE, _ACT_BITS)
    bz = _quantize(t["rnn1.bias_gate"], _ACC_SCALE, _ACC_BITS)
    bh = _quantize(t["rnn1.bias_update"], _ACC_SCALE, _ACC_BITS)
    zeta = int(_quantize(t["rnn1.zeta"], _GATE, _ACT_BITS)[0])
    nu = int(_quantize(t["rnn1.nu"], _GATE, _ACT_BITS)[0])
    xq = _quantize(x, frac, bits)
    xq = xq >> (frac - _ACT_SCALE) if frac >= _ACT_SCALE else xq << (_ACT_SCALE - frac)
    xq = np.clip(xq, -(1 << 15), (1 << 15) - 1)
    h = np.zeros((x.shape[0], cell["hidden"]), dtype=np.int64)
    shift, up = _ACC_SCALE - _SIG_IN, 2 * _GATE - _ACT_SCALE
    for s in range(x.shape[1]):
        a = _wrap(xq[:, s] @ wq.T + h @ uq.T, _ACC_BITS)
        zi = _wrap(_wrap(a + bz, _ACC_BITS) >> shift, _ACT_BITS)
        hi = _wrap(_wrap(2 * _wrap(a + bh, _ACC_BITS), _ACC_BITS) >> shift, _ACT_BITS)
        z = np.floor(2.0 ** _GATE / (1.0 + np.exp(-zi / 2.0 ** _SIG_IN)) + 0.5).astype(np.int64)
        ht = np.floor(np.tanh(hi / 2.0 ** _ACT_SCALE) * 2.0 ** _GATE + 0.5).astype(np.int64)
        d = _wrap((h << up) - zeta * ht, _UPDATE_BITS) >> up
        p = _wrap(z * d, _UPDATE_BITS) << (_GATE - _ACT_SCALE)
        h = _wrap((zeta + nu) * ht + p, _UPDATE_BITS) >> up
    hm = h << (frac - _ACT_SCALE) if frac >= _ACT_SCALE else h >> (_ACT_SCALE - frac)
    hm = _wrap(hm, bits)
    wd, bd = _quantize(t["fc1.weight"], frac, bits), _quantize(t["fc1.bias"], frac, bits)
    return _wrap(((hm @ wd.T) >> frac) + bd, bits)
