"""Family ``choco`` (CHOCO's client-aided HE) on the Python face.

The server evaluates the linear layers (Dense, Conv2d) on BFV ciphertexts; the client
decrypts each result and computes the rest in the clear, so it sees every intermediate
activation.  Choose it with ``family="choco"`` on both :class:`secinfer.Server` and
:class:`secinfer.Client`; ``Client.infer(image)`` then returns an
:class:`~secinfer.InferenceResult` whose ``choco`` field is a :class:`ChocoReport`: the
client's own cost (CHOCO's first metric) and what it saw.  No protocol logic lives here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Tuple


@dataclass(frozen=True, repr=False)
class ChocoReport:
    """What one CHOCO inference cost the client, and the activations it saw.

    Times are the client's own work in seconds: ``keygen_s`` (keys, once per session),
    ``encrypt_s`` (pack, encode, encrypt), ``decrypt_s`` (decrypt, CRT), ``clear_layers_s``
    (requantisation and the layers computed in the clear); ``online_s`` is the sum of the
    last three.  Bytes: ``setup_bytes`` of keys, ``bytes_up`` / ``bytes_down`` of ciphertexts
    per inference.  ``revealed`` names the layers whose outputs the client saw, and
    ``activations`` maps each layer's name (the input's too) to its main-format output.
    """

    keygen_s: float
    encrypt_s: float
    decrypt_s: float
    clear_layers_s: float
    online_s: float
    setup_bytes: int
    bytes_up: int
    bytes_down: int
    ciphertexts_up: int
    ciphertexts_down: int
    revealed: Tuple[str, ...]
    activations: Dict[str, List[int]]

    @property
    def online_bytes(self) -> int:
        """Ciphertext bytes both ways for the inference (keys excluded)."""
        return self.bytes_up + self.bytes_down

    @classmethod
    def from_core(cls, res: Mapping[str, Any], layer_names: List[str]) -> "ChocoReport":
        c = res["client"]
        outputs = res["outputs"]
        if len(outputs) != len(layer_names):
            raise ValueError(f"{len(outputs)} layer outputs for {len(layer_names)} layers")
        return cls(keygen_s=float(c["keygen_s"]), encrypt_s=float(c["encrypt_s"]),
                   decrypt_s=float(c["decrypt_s"]), clear_layers_s=float(c["clear_layers_s"]),
                   online_s=float(c["online_s"]), setup_bytes=int(c["setup_bytes"]),
                   bytes_up=int(c["bytes_up"]), bytes_down=int(c["bytes_down"]),
                   ciphertexts_up=int(c["ciphertexts_up"]),
                   ciphertexts_down=int(c["ciphertexts_down"]),
                   revealed=tuple(res["revealed"]),
                   activations={n: list(o) for n, o in zip(layer_names, outputs)})

    def __repr__(self) -> str:
        return (f"ChocoReport(client {self.online_s * 1e3:.2f} ms online "
                f"(encrypt {self.encrypt_s * 1e3:.2f}, decrypt {self.decrypt_s * 1e3:.2f}), "
                f"{self.bytes_up / 1e3:.1f} kB up, {self.bytes_down / 1e3:.1f} kB down, "
                f"{self.setup_bytes / 1e6:.1f} MB of keys; saw {', '.join(self.revealed)})")
