"""``secinfer.Server`` / ``secinfer.Client``: thin wrappers over the Rust runtime (issue 6).

No protocol logic lives here.  Python only reads the public model description
(model.json and vocab.json: architecture, formats, tokeniser), tokenises text
on the client side, and hands everything to ``secinfer._core``.  Until the core
exposes ``Server``/``Client`` these raise ``NotImplementedError`` naming issue 6.

Expected core API (the Rust side implements it):

* ``_core.Server(model_dir: str, fixed_point: str | None)`` with
  ``.serve(port: int, host: str, once: bool) -> None``;
* ``_core.Client(host: str, port: int, model_info_json: str, fixed_point: str | None)``
  with ``.infer(tokens: list[int]) -> dict`` returning at least
  ``{"logits": [...], "cost": {...}}`` (cost as in DESIGN.md section 4: per phase time,
  bytes each way, messages, rounds).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping, Sequence, Union

from .text import Vocab, pad_truncate, tokenize

ModelInfo = Union[str, Path, Mapping]


def _core_attr(name: str):
    from . import core

    c = core()
    if not hasattr(c, name):
        raise NotImplementedError(
            f"secinfer._core has no {name} yet: the secure GRU runtime comes with issue 6")
    return getattr(c, name)


class Server:
    """Holds a model directory (weights stay in the Rust process) and serves secure inference."""

    def __init__(self, model_dir: str | Path, fixed_point: str | None = None):
        self.model_dir = Path(model_dir)
        if not (self.model_dir / "model.json").is_file():
            raise FileNotFoundError(f"{self.model_dir}: no model.json (see docs/model-format.md)")
        self.fixed_point = fixed_point
        self._inner = None

    def serve(self, port: int, host: str = "127.0.0.1", once: bool = False) -> None:
        """Block serving clients on ``host:port`` (``once``: return after one client)."""
        if self._inner is None:
            self._inner = _core_attr("Server")(str(self.model_dir), self.fixed_point)
        self._inner.serve(int(port), host, bool(once))


class Client:
    """Talks to a :class:`Server`; knows only the public model description.

    ``model_info`` is a model directory (only model.json and vocab.json are
    read; the weights file need not be there) or the parsed model.json dict
    (then text input needs ``vocab=``).
    """

    def __init__(self, host: str, port: int, model_info: ModelInfo, vocab: Vocab | None = None,
                 fixed_point: str | None = None):
        self.host, self.port, self.fixed_point = host, int(port), fixed_point
        if isinstance(model_info, Mapping):
            self.info = dict(model_info)
            self.vocab = vocab
        else:
            d = Path(model_info)
            self.info = json.loads((d / "model.json").read_text(encoding="utf-8"))
            voc = self.info.get("vocab")
            self.vocab = vocab or (Vocab.load(d / voc["file"]) if voc else None)
        self._inner = None

    def tokens(self, text_or_tokens: str | Sequence[int]) -> list[int]:
        """Text -> exactly ``max_len`` ids as the model expects; token lists are padded/truncated."""
        voc = self.info.get("vocab") or {}
        max_len = voc.get("max_len")
        if isinstance(text_or_tokens, str):
            if self.vocab is None:
                raise ValueError("text input needs the model's vocabulary")
            ids = self.vocab.encode(tokenize(text_or_tokens))
        else:
            ids = [int(t) for t in text_or_tokens]
        if max_len is None:
            return ids
        return pad_truncate(ids, max_len, voc.get("padding", "pre"), voc.get("truncation", "pre"))

    def infer(self, text_or_tokens: str | Sequence[int]) -> dict:
        """Run one secure inference; returns ``{"prediction", "label", "logits", "cost", ...}``."""
        ids = self.tokens(text_or_tokens)
        if self._inner is None:
            self._inner = _core_attr("Client")(self.host, self.port, json.dumps(self.info),
                                                self.fixed_point)
        res = dict(self._inner.infer(ids))
        logits = res.get("logits")
        if logits is not None and "prediction" not in res and self.info.get("task") == "classification":
            res["prediction"] = max(range(len(logits)), key=lambda i: (logits[i], -i))
        labels = self.info.get("labels")
        if labels and "prediction" in res and "label" not in res:
            res["label"] = labels[res["prediction"]]
        return res
