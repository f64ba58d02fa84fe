"""Write and read the secinfer model format (docs/model-format.md).

``export`` needs torch (it reads a PyTorch module); ``load_model_dir`` and
``validate_config`` need only numpy and safetensors.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np

from . import fixedpoint
from .text import TOKENIZER, Vocab

FORMAT_NAME = "secinfer-model"
FORMAT_VERSION = 1
TASKS = ("classification", "language-model")
ACTIVATIONS = ("tanh", "relu")
MAX_DIM = 1 << 20


class ModelFormatError(ValueError):
    pass


def _weights_of(model) -> dict[str, np.ndarray]:
    """PyTorch names of the format, from a GRUClassifier/GRULanguageModel (SecGRU or nn.GRU)."""
    import torch

    sd = {k: v.detach().to(torch.float32).cpu().numpy() for k, v in model.state_dict().items()}
    out = {}
    for k, v in sd.items():
        # torch.nn.GRU names its tensors weight_ih_l0 ...; the format drops the layer suffix.
        out[k[:-3] if k.endswith("_l0") else k] = np.ascontiguousarray(v, dtype=np.float32)
    return out


def export(model, path: str | os.PathLike, *, vocab: Vocab | None = None, max_len: int | None = None,
           labels: Sequence[str] | None = None, formats: str | Iterable[str] | Mapping = "fx20",
           padding: str = "pre", truncation: str = "pre", activation: str | None = None,
           metadata: Mapping | None = None) -> Path:
    """Write ``model.json``, ``weights.safetensors`` (and ``vocab.json``) into directory ``path``.

    ``model`` is a :class:`secinfer.models.GRUClassifier` or
    :class:`secinfer.models.GRULanguageModel` (or any module with ``embed``,
    ``gru`` and ``fc`` children, ``gru`` being a SecGRU or a one-layer
    ``torch.nn.GRU``, whose activation is then ``tanh`` unless given).

    ``formats`` chooses the fixed-point formats: a preset name (``"fx20"``:
    20-bit values, 12 fractional bits, activations included; ``"fx8"``: the
    same with 8-bit sigmoid and candidate activations as CryptoGRU's CG-2), a
    list of preset names (the first becomes ``fixed_point``, all are listed in
    ``fixed_point_variants``), or an explicit ``fixed_point`` dict.
    """
    from safetensors.numpy import save_file

    act = activation or getattr(model.gru, "activation", None) or "tanh"
    task = getattr(model, "task", None) or ("language-model" if labels is None else "classification")
    weights = _weights_of(model)
    embed_w = weights["embed.weight"]
    V, E = embed_w.shape
    H = weights["gru.weight_hh"].shape[1]
    C = weights["fc.weight"].shape[0]

    if isinstance(formats, Mapping):
        variants = {"custom": dict(formats)}
    else:
        names = [formats] if isinstance(formats, str) else list(formats)
        if not names:
            raise ValueError("formats must name at least one preset")
        variants = {n: fixedpoint.preset(n, act) for n in names}
    default_fp = next(iter(variants.values()))

    config: dict = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "task": task,
        "layers": [
            {"type": "embedding", "name": "embed", "vocab": int(V), "dim": int(E)},
            {"type": "gru", "name": "gru", "input": int(E), "hidden": int(H), "activation": act},
            {"type": "dense", "name": "fc", "input": int(H), "output": int(C)},
        ],
        "fixed_point": default_fp,
    }
    if len(variants) > 1:
        config["fixed_point_variants"] = variants
    if vocab is not None:
        if len(vocab) != V:
            raise ValueError(f"vocabulary has {len(vocab)} tokens but the embedding has {V} rows")
        if task == "classification" and max_len is None:
            raise ValueError("a classifier needs max_len (the number of GRU steps)")
        config["vocab"] = {"file": "vocab.json", "tokenizer": TOKENIZER, "max_len": max_len,
                           "pad": 0, "unk": 1, "padding": padding, "truncation": truncation}
        if max_len is None:
            del config["vocab"]["max_len"]
    if task == "classification":
        config["labels"] = list(labels) if labels is not None else [str(i) for i in range(C)]
    if metadata:
        config["metadata"] = dict(metadata)
    validate_config(config)

    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    save_file(weights, str(out / "weights.safetensors"), metadata={"format": FORMAT_NAME})
    os.chmod(out / "weights.safetensors", 0o644)
    if vocab is not None:
        vocab.save(out / "vocab.json")
    with open(out / "model.json", "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    validate_weights(config, load_weights(out))
    return out


def expected_shapes(config: Mapping) -> dict[str, tuple[int, ...]]:
    layers = {l["type"]: l for l in config["layers"]}
    e, g, d = layers["embedding"], layers["gru"], layers["dense"]
    V, E, H, C = e["vocab"], e["dim"], g["hidden"], d["output"]
    return {
        f"{e['name']}.weight": (V, E),
        f"{g['name']}.weight_ih": (3 * H, E), f"{g['name']}.weight_hh": (3 * H, H),
        f"{g['name']}.bias_ih": (3 * H,), f"{g['name']}.bias_hh": (3 * H,),
        f"{d['name']}.weight": (C, H), f"{d['name']}.bias": (C,),
    }


def _int(obj, key, lo, hi, where):
    v = obj.get(key)
    if not isinstance(v, int) or isinstance(v, bool) or not (lo <= v <= hi):
        raise ModelFormatError(f"{where}.{key} must be an integer in [{lo}, {hi}], got {v!r}")
    return v


def validate_config(config: Mapping) -> None:
    """Check ``model.json`` against docs/model-format.md; raises ModelFormatError."""
    if config.get("format") != FORMAT_NAME or config.get("version") != FORMAT_VERSION:
        raise ModelFormatError(f"not a {FORMAT_NAME} version {FORMAT_VERSION} file")
    if config.get("task") not in TASKS:
        raise ModelFormatError(f"task must be one of {TASKS}")
    layers = config.get("layers")
    if not isinstance(layers, list) or [l.get("type") for l in layers] != ["embedding", "gru", "dense"]:
        raise ModelFormatError("layers must be exactly [embedding, gru, dense] in that order")
    e, g, d = layers
    names = [l.get("name") for l in layers]
    if not all(isinstance(n, str) and n and "." not in n for n in names) or len(set(names)) != 3:
        raise ModelFormatError("layer names must be distinct non-empty strings without '.'")
    V = _int(e, "vocab", 2, MAX_DIM, "embedding")
    E = _int(e, "dim", 1, 4096, "embedding")
    if _int(g, "input", 1, 4096, "gru") != E:
        raise ModelFormatError("gru.input must equal embedding.dim")
    H = _int(g, "hidden", 1, 4096, "gru")
    if g.get("activation") not in ACTIVATIONS:
        raise ModelFormatError(f"gru.activation must be one of {ACTIVATIONS}")
    if _int(d, "input", 1, 4096, "dense") != H:
        raise ModelFormatError("dense.input must equal gru.hidden")
    C = _int(d, "output", 1, MAX_DIM, "dense")
    if config["task"] == "language-model" and C != V:
        raise ModelFormatError("a language model's dense.output must equal embedding.vocab")
    try:
        fixedpoint.FixedPointConfig.from_json(config.get("fixed_point") or {})
        for k, v in (config.get("fixed_point_variants") or {}).items():
            fixedpoint.FixedPointConfig.from_json(v)
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelFormatError(f"fixed_point: {exc}") from None
    voc = config.get("vocab")
    if voc is not None:
        if voc.get("tokenizer", TOKENIZER) != TOKENIZER:
            raise ModelFormatError(f"vocab.tokenizer must be {TOKENIZER!r}")
        if voc.get("pad") != 0 or voc.get("unk") != 1:
            raise ModelFormatError("vocab.pad must be 0 and vocab.unk 1")
        if config["task"] == "classification":
            _int(voc, "max_len", 1, 4096, "vocab")
        for k in ("padding", "truncation"):
            if voc.get(k, "pre") not in ("pre", "post"):
                raise ModelFormatError(f"vocab.{k} must be 'pre' or 'post'")
        if not isinstance(voc.get("file"), str) or "/" in voc["file"] or voc["file"].startswith("."):
            raise ModelFormatError("vocab.file must be a plain file name in the model directory")
    if config["task"] == "classification":
        labels = config.get("labels")
        if not isinstance(labels, list) or len(labels) != C or not all(isinstance(s, str) for s in labels):
            raise ModelFormatError("labels must list one string per dense output")


def validate_weights(config: Mapping, weights: Mapping[str, np.ndarray]) -> None:
    want = expected_shapes(config)
    if set(weights) != set(want):
        raise ModelFormatError(f"weights: expected tensors {sorted(want)}, found {sorted(weights)}")
    for k, shape in want.items():
        w = weights[k]
        if w.dtype != np.float32 or tuple(w.shape) != tuple(shape):
            raise ModelFormatError(f"weights: {k} must be float32 {list(shape)}, got {w.dtype} {list(w.shape)}")
        if not np.isfinite(w).all():
            raise ModelFormatError(f"weights: {k} has non-finite values")


def load_weights(model_dir: str | os.PathLike) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    return load_file(str(Path(model_dir) / "weights.safetensors"))


def load_model_dir(model_dir: str | os.PathLike) -> tuple[dict, dict[str, np.ndarray]]:
    """Read and validate a model directory: returns (config, float32 weights by name)."""
    d = Path(model_dir)
    with open(d / "model.json", encoding="utf-8") as f:
        config = json.load(f)
    validate_config(config)
    weights = load_weights(d)
    validate_weights(config, weights)
    return config, weights


def load_vocab(model_dir: str | os.PathLike, config: Mapping | None = None) -> Vocab:
    d = Path(model_dir)
    if config is None:
        config, _ = load_model_dir(d)
    return Vocab.load(d / config["vocab"]["file"])


def encode_for(model_dir: str | os.PathLike, texts: Sequence[str]) -> np.ndarray:
    """Tokenise ``texts`` as the model in ``model_dir`` expects: int64 [N, max_len]."""
    from .text import encode_corpus

    with open(Path(model_dir) / "model.json", encoding="utf-8") as f:
        config = json.load(f)
    v = config["vocab"]
    return encode_corpus(texts, load_vocab(model_dir, config), v["max_len"], v.get("padding", "pre"),
                         v.get("truncation", "pre"))


def load_torch(model_dir: str | os.PathLike):
    """Rebuild the PyTorch module of a model directory (needs torch)."""
    import torch

    from .models import GRUClassifier, GRULanguageModel

    config, weights = load_model_dir(model_dir)
    e, g, d = config["layers"]
    if config["task"] == "classification":
        m = GRUClassifier(e["vocab"], e["dim"], g["hidden"], d["output"], g["activation"])
    else:
        m = GRULanguageModel(e["vocab"], e["dim"], g["hidden"], g["activation"])
    m.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in weights.items()})
    return m.eval()
