"""``secinfer.Server`` / ``secinfer.Client``: thin wrappers over the Rust runtime.

No protocol logic lives here.  Python only reads the public model description
(model.json and vocab.json: architecture, formats, tokeniser), tokenises text
on the client side, and hands everything to ``secinfer._core``; results come
back as dataclasses (:class:`InferenceResult`, :class:`Cost`, :class:`PhaseCost`).

``variant`` is CryptoGRU's: ``baseline`` (tanh, 20-bit), ``cg1`` (ReLU, 20-bit), ``cg2``
(ReLU, 8-bit activations), or ``cg2-tanh`` (CG-2's protocol with a tanh candidate, for tanh
models; not one of the paper's variants).  Server and client must use the same one.

The server logs like ``secinfer serve`` through the ``secinfer`` logger ("listening on
...", then one line per session); call ``logging.basicConfig(level=logging.INFO)`` to see
the lines.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, List, Mapping, Optional, Sequence, Union

from .choco import ChocoReport
from .text import Vocab, pad_truncate, tokenize

ModelInfo = Union[str, Path, Mapping]

log = logging.getLogger("secinfer")


def _human_bytes(b: int) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if b >= size:
            return f"{b / size:.2f} {unit}"
    return f"{b} B"


@dataclass(frozen=True)
class PhaseCost:
    """What one protocol phase cost the client: seconds, bytes each way, messages, rounds."""

    time_s: float
    bytes_sent: int
    bytes_received: int
    messages_sent: int
    messages_received: int
    rounds: int

    @property
    def bytes(self) -> int:
        """Bytes in both directions."""
        return self.bytes_sent + self.bytes_received


@dataclass(frozen=True)
class Cost:
    """A session's cost per phase (setup: base OTs and keys; offline: input-independent
    pools and tables; online: the work once the input is known), as the client metered it."""

    setup: PhaseCost
    offline: PhaseCost
    online: PhaseCost

    @property
    def time_s(self) -> float:
        """Seconds over all phases."""
        return self.setup.time_s + self.offline.time_s + self.online.time_s

    @property
    def bytes(self) -> int:
        """Bytes in both directions over all phases."""
        return self.setup.bytes + self.offline.bytes + self.online.bytes

    @property
    def rounds(self) -> int:
        """Round trips over all phases."""
        return self.setup.rounds + self.offline.rounds + self.online.rounds

    @classmethod
    def from_dict(cls, d: Mapping[str, Mapping[str, Any]]) -> "Cost":
        return cls(**{p: PhaseCost(**d[p]) for p in ("setup", "offline", "online")})

    def __repr__(self) -> str:
        return (f"Cost({self.time_s:.3f} s, {_human_bytes(self.bytes)}, {self.rounds} rounds; "
                f"online {self.online.time_s:.3f} s, {_human_bytes(self.online.bytes)})")


@dataclass(frozen=True, repr=False)
class InferenceResult:
    """What the client learns from one secure inference, and what it cost.

    ``logits`` are ``None`` unless the client asked for them (``reveal_logits=True``); they
    are the fixed-point logits as floats, ``logits_fixed`` the integers the circuit revealed.
    """

    prediction: int
    label: Optional[str]
    logits: Optional[List[float]]
    logits_fixed: Optional[List[int]]
    cost: Cost
    gc_bytes: int
    he_bytes: int
    and_gates: int
    gate_tables: bool
    steps: int
    #: Family ``choco``: the client's cost report and the activations it saw.
    choco: Optional[ChocoReport] = None

    def __repr__(self) -> str:
        label = f", label={self.label!r}" if self.label is not None else ""
        logits = ("" if self.logits is None
                  else ", logits=[" + ", ".join(f"{v:.4f}" for v in self.logits) + "]")
        return f"InferenceResult(prediction={self.prediction}{label}{logits}, cost={self.cost!r})"


def _core_attr(name: str):
    from . import core

    return getattr(core(), name)


class Server:
    """Holds a model directory (weights stay in the Rust process) and serves secure inference.

    ``family`` picks the protocols (``"hegc"``, ``"ss"``, ``"choco"``; ``None``: the planner's
    choice) and ``packing`` CHOCO's packing (``"redundant"`` or ``"baseline"``); clients must
    name the same.  In family ``choco`` the client sees every intermediate activation.
    """

    def __init__(self, model_dir: Union[str, Path], variant: str = "cg2",
                 family: Optional[str] = None, packing: str = "redundant"):
        self.model_dir = Path(model_dir)
        if not (self.model_dir / "model.json").is_file():
            raise FileNotFoundError(f"{self.model_dir}: no model.json (see docs/model-format.md)")
        self.variant = variant
        self.family, self.packing = family, packing
        self._inner = None

    def serve(self, port: int = 7460, host: str = "127.0.0.1", sessions: Optional[int] = None,
              on_listen: Optional[Callable[[str], None]] = None, timeout_s: int = 60,
              allow_logits: bool = False, max_sessions: Optional[int] = None) -> None:
        """Serve clients on ``host:port`` until ``sessions`` sessions ended, or for ever.

        ``port=0`` picks a free port; ``on_listen(address)`` receives the bound address.  Logs
        "listening on ..." and one line per session to the ``secinfer`` logger.  Ctrl-C stops
        it (in the main thread): the call then returns.  Sessions run on an encrypted,
        authenticated channel under the model's key (``server.key`` beside the model, made at
        first serve; clients pin ``server.pub`` from ``secinfer export-info``).  Clients learn
        only the class unless ``allow_logits``; at most ``max_sessions`` run at once (default:
        from the cores and memory), later ones wait in a bounded queue or are refused as busy.
        """
        if self._inner is None:
            self._inner = _core_attr("Server")(str(self.model_dir), self.variant, self.family,
                                               self.packing)

        def listening(addr: str) -> None:
            log.info("listening on %s (model %s, variant %s)", addr, self.model_dir, self.variant)
            if on_listen is not None:
                on_listen(addr)

        # A session may end (and log, from a Rust worker thread) just as Ctrl-C returns from
        # serve: if that thread were stopped inside `logging` while holding a handler's lock
        # (the interpreter stops daemon threads that want the GIL once it finalizes), logging's
        # exit hook would wait for that lock for ever. Ctrl-C therefore takes `quiet` first and
        # marks the server stopping; a session ending afterwards logs nothing.
        quiet = threading.Lock()
        stopping: List[bool] = []

        def session(sid: int, peer: str, status: str, info: Mapping[str, Any]) -> None:
            with quiet:
                if not stopping:
                    _log_session(sid, peer, status, info)

        def _log_session(sid: int, peer: str, status: str, info: Mapping[str, Any]) -> None:
            if status == "done":
                log.info("session %d (%s): done: %.3f s, %s (GC %s, HE %s)", sid, peer,
                         info["time_s"], _human_bytes(info["bytes"]),
                         _human_bytes(info["gc_bytes"]), _human_bytes(info["he_bytes"]))
            elif status == "failed":
                log.warning("session %d (%s): failed: %s", sid, peer, info["error"])
            elif status == "refused":
                log.warning("connection from %s refused: %s", peer, info["reason"])
            else:
                log.error("session %d (%s): panicked (caught; server continues)", sid, peer)

        kwargs = dict(port=int(port), host=host, sessions=sessions, on_listen=listening,
                      timeout_s=int(timeout_s), on_session=session,
                      allow_logits=bool(allow_logits), max_sessions=max_sessions)
        if threading.current_thread() is not threading.main_thread():
            self._inner.serve(**kwargs)
            return
        # The core blocks in accept() with the GIL released, where Python cannot deliver
        # SIGINT; serving from a daemon thread leaves the main thread free to take Ctrl-C.
        failure: List[BaseException] = []

        def run() -> None:
            try:
                self._inner.serve(**kwargs)
            except BaseException as e:  # re-raised in the caller's thread below
                failure.append(e)

        t = threading.Thread(target=run, name="secinfer-serve", daemon=True)
        t.start()
        try:
            while t.is_alive():
                t.join(0.2)
        except KeyboardInterrupt:
            with quiet:
                stopping.append(True)
            log.info("stopped (Ctrl-C)")
            return
        if failure:
            raise failure[0]


class Client:
    """Talks to a :class:`Server`; knows only the public model description.

    ``model_info`` is a model directory (only model.json and vocab.json are
    read; the weights file need not be there) or the parsed model.json dict
    (then text input needs ``vocab=``).  ``family`` and ``packing`` must be the server's
    (see :class:`Server`).
    """

    def __init__(self, host: str, port: int, model_info: ModelInfo, vocab: Optional[Vocab] = None,
                 variant: str = "cg2", family: Optional[str] = None, packing: str = "redundant"):
        self.host, self.port, self.variant = host, int(port), variant
        self.family, self.packing = family, packing
        self.info_dir: Optional[Path] = None
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

    def tokens(self, text_or_tokens: Union[str, Sequence[int]]) -> List[int]:
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

    def infer(self, text_or_tokens: Union[str, Sequence[int]], reveal_logits: bool = False,
              gates: str = "tables", client_threads: Optional[int] = None) -> InferenceResult:
        """Run one secure inference against the server: on a text or token ids, or on an image
        array (numpy or torch, any shape: its values are flattened row-major) for a network
        that reads numbers, such as ``models/mnist-mlp``.

        ``gates="circuit"`` keeps the GRU's gates r and z in the garbled circuit (fewer rounds,
        more bytes), as ``secinfer infer --gates``.  The secure run needs the public embedding
        table, so ``model_info`` must be a directory (``secinfer export-info`` writes one).

        In family ``choco`` the result's ``choco`` field is the client's cost report and the
        activations it saw; ``client_threads`` bounds the client's threads (1 models a small
        device; ``None``: all cores).  Logits are never revealed there beyond the activations.
        """
        image = None
        if hasattr(text_or_tokens, "shape"):
            # An image array (numpy or torch): the flattened floats, for a network that reads
            # numbers (GALA's networks, family hegc).
            image = [float(v) for v in text_or_tokens.reshape(-1).tolist()]
        ids = None if image is not None else self.tokens(text_or_tokens)
        if self._inner is None:
            if self.info_dir is None:
                raise ValueError("secure inference needs model_info as a directory holding the "
                                 "public embedding table (see `secinfer export-info`)")
            self._inner = _core_attr("Client")(self.host, self.port, str(self.info_dir),
                                               self.variant, self.family, self.packing)
        if image is not None and self._inner.family == "choco":
            return self._choco_result(self._inner.infer_choco(image, client_threads))
        if image is not None:
            res = self._inner.infer_image(image, reveal_logits)
        else:
            res = self._inner.infer(ids, reveal_logits, gates)
        labels = self.info.get("labels") or []
        pred = int(res["prediction"])
        fixed = res["logits"]
        scale = float(2 ** self._inner.logit_frac_bits)
        return InferenceResult(
            prediction=pred,
            label=labels[pred] if pred < len(labels) else None,
            logits=None if fixed is None else [v / scale for v in fixed],
            logits_fixed=None if fixed is None else list(fixed),
            cost=Cost.from_dict(res["cost"]),
            gc_bytes=int(res["gc_bytes"]),
            he_bytes=int(res["he_bytes"]),
            and_gates=int(res["and_gates"]),
            gate_tables=bool(res["gate_tables"]),
            steps=int(res["steps"]),
        )

    def _choco_result(self, res: Mapping[str, Any]) -> InferenceResult:
        """A CHOCO session's dict as an :class:`InferenceResult` (every byte is HE)."""
        labels = self.info.get("labels") or []
        pred = int(res["prediction"])
        names = [layer["name"] for layer in self.info["layers"]]
        report = ChocoReport.from_core(res, names)
        return InferenceResult(
            prediction=pred, label=labels[pred] if pred < len(labels) else None,
            logits=None, logits_fixed=None, cost=Cost.from_dict(res["cost"]), gc_bytes=0,
            he_bytes=report.setup_bytes + report.online_bytes, and_gates=0, gate_tables=False,
            steps=0, choco=report)
