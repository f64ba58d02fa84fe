"""``secinfer.Server`` / ``secinfer.Client``: thin wrappers over the Rust runtime (issue 6).

No protocol logic lives here.  Python only reads the public model description
(model.json and vocab.json: architecture, formats, tokeniser), tokenises text
on the client side, and hands everything to ``secinfer._core``.  Until the core
exposes ``Server``/``Client`` these raise ``NotImplementedError`` naming issue 6.

Core API (``secinfer-nn``'s runtime, bound in ``crates/py``):

* ``_core.Server(model_dir: str, variant: str)`` with
  ``.serve(port, host, sessions=None, on_listen=None)``;
* ``_core.Client(host, port, model_info_dir: str, variant: str)`` with
  ``.infer(tokens, reveal_logits=False, gates="tables") -> dict``: ``prediction``, ``logits``
  (or None), ``cost`` (per phase: time, bytes each way, messages, rounds), ``gc_bytes``,
  ``he_bytes``, ``gate_tables``; ``gates="circuit"`` keeps the gates garbled (fewer rounds,
  more bytes), as ``secinfer infer --gates``.

``variant`` is CryptoGRU's: ``baseline`` (tanh, 20-bit), ``cg1`` (ReLU, 20-bit), ``cg2``
(ReLU, 8-bit activations).
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

    def __init__(self, model_dir: str | Path, variant: str = "cg2"):
        self.model_dir = Path(model_dir)
        if not (self.model_dir / "model.json").is_file():
            raise FileNotFoundError(f"{self.model_dir}: no model.json (see docs/model-format.md)")
        self.variant = variant
        self._inner = None

    def serve(self, port: int, host: str = "127.0.0.1", sessions: int | None = None,
              on_listen=None) -> None:
        """Block serving clients on ``host:port``; return after ``sessions`` sessions if given.

        ``port=0`` picks a free port; ``on_listen(address)`` receives the bound address.
        """
        if self._inner is None:
            self._inner = _core_attr("Server")(str(self.model_dir), self.variant)
        self._inner.serve(int(port), host, sessions, on_listen)


class Client:
    """Talks to a :class:`Server`; knows only the public model description.

    ``model_info`` is a model directory (only model.json and vocab.json are
    read; the weights file need not be there) or the parsed model.json dict
    (then text input needs ``vocab=``).
    """

    def __init__(self, host: str, port: int, model_info: ModelInfo, vocab: Vocab | None = None,
                 variant: str = "cg2"):
        self.host, self.port, self.variant = host, int(port), variant
        self.info_dir = None
        if isinstance(model_info, Mapping):
            self.info = dict(model_info)
            self.vocab = vocab
        else:
            d = Path(model_info)
            self.info_dir = d
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

    def infer(self, text_or_tokens: str | Sequence[int], reveal_logits: bool = False,
              gates: str = "tables") -> dict:
        """Run one secure inference; returns ``{"prediction", "label", "logits", "cost", ...}``.

        The secure run needs the public embedding table, so ``model_info`` must be a directory
        (``secinfer export-info`` writes one).
        """
        ids = self.tokens(text_or_tokens)
        if self._inner is None:
            if self.info_dir is None:
                raise ValueError("secure inference needs model_info as a directory holding the "
                                 "public embedding table (see `secinfer export-info`)")
            self._inner = _core_attr("Client")(self.host, self.port, str(self.info_dir), self.variant)
        res = dict(self._inner.infer(ids, reveal_logits, gates))
        labels = self.info.get("labels")
        if labels and "label" not in res:
            res["label"] = labels[res["prediction"]]
        return res
