"""PyTorch modules whose maths is exactly the secinfer GRU (DESIGN.md section 5).

torch is imported here only; ``import secinfer`` never needs it.

GRU step (PyTorch gate order r, z, n)::

    gi = W_ih x + b_ih          gh = W_hh h + b_hh          (each [3H] = [r | z | n])
    r  = sigmoid(gi_r + gh_r)
    z  = sigmoid(gi_z + gh_z)
    n  = g(gi_n + r * gh_n)     g = tanh ("tanh") or max(0, .) ("relu")
    h' = n + z * (h - n)        (= (1 - z) * n + z * h)

with ``h0 = 0``.  For ``activation="tanh"`` this is ``torch.nn.GRU``; the
tests check both against each other.
"""

from __future__ import annotations

import math

import torch
from torch import nn

ACTIVATIONS = ("tanh", "relu")


def _candidate(activation: str):
    if activation == "tanh":
        return torch.tanh
    if activation == "relu":
        return torch.relu
    raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")


class SecGRU(nn.Module):
    """Single-layer GRU, batch-first, candidate activation ``tanh`` or ``relu``.

    Parameters carry the names of the model format (``weight_ih [3H, E]``,
    ``weight_hh [3H, H]``, ``bias_ih [3H]``, ``bias_hh [3H]``) and
    ``torch.nn.GRU``'s initialisation (uniform in +-1/sqrt(H)).
    """

    def __init__(self, input_size: int, hidden_size: int, activation: str = "relu"):
        super().__init__()
        _candidate(activation)
        self.input_size, self.hidden_size, self.activation = input_size, hidden_size, activation
        self.weight_ih = nn.Parameter(torch.empty(3 * hidden_size, input_size))
        self.weight_hh = nn.Parameter(torch.empty(3 * hidden_size, hidden_size))
        self.bias_ih = nn.Parameter(torch.empty(3 * hidden_size))
        self.bias_hh = nn.Parameter(torch.empty(3 * hidden_size))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def cell(self, gi: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """One step given the input projection ``gi = W_ih x + b_ih`` ([B, 3H])."""
        g = _candidate(self.activation)
        gh = torch.nn.functional.linear(h, self.weight_hh, self.bias_hh)
        i_r, i_z, i_n = gi.chunk(3, dim=-1)
        h_r, h_z, h_n = gh.chunk(3, dim=-1)
        r = torch.sigmoid(i_r + h_r)
        z = torch.sigmoid(i_z + h_z)
        n = g(i_n + r * h_n)
        return n + z * (h - n)

    def forward(self, x: torch.Tensor, h0: torch.Tensor | None = None):
        """``x`` [B, T, E] -> (outputs [B, T, H], h_T [B, H])."""
        b, t, _ = x.shape
        h = x.new_zeros(b, self.hidden_size) if h0 is None else h0
        gi_all = torch.nn.functional.linear(x, self.weight_ih, self.bias_ih)  # all steps at once
        outs = []
        for k in range(t):
            h = self.cell(gi_all[:, k], h)
            outs.append(h)
        return torch.stack(outs, dim=1), h

    @classmethod
    def from_torch_gru(cls, gru: nn.GRU, activation: str = "tanh") -> "SecGRU":
        if gru.num_layers != 1 or gru.bidirectional or not gru.bias:
            raise ValueError("only single-layer, unidirectional GRUs with biases are supported")
        m = cls(gru.input_size, gru.hidden_size, activation)
        with torch.no_grad():
            m.weight_ih.copy_(gru.weight_ih_l0)
            m.weight_hh.copy_(gru.weight_hh_l0)
            m.bias_ih.copy_(gru.bias_ih_l0)
            m.bias_hh.copy_(gru.bias_hh_l0)
        return m

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}, activation={self.activation!r}"


ReLUGRU = lambda input_size, hidden_size: SecGRU(input_size, hidden_size, "relu")  # noqa: E731


class GRUClassifier(nn.Module):
    """Embedding -> GRU -> Dense on the last hidden state (``task = classification``)."""

    task = "classification"

    def __init__(self, vocab_size: int, embed_dim: int, hidden: int, num_classes: int,
                 activation: str = "relu"):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embed_dim)
        self.gru = SecGRU(embed_dim, hidden, activation)
        self.fc = nn.Linear(hidden, num_classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        _, h = self.gru(self.embed(tokens))
        return self.fc(h)


class GRULanguageModel(nn.Module):
    """Embedding -> GRU -> Dense on every step's hidden state (``task = language-model``)."""

    task = "language-model"

    def __init__(self, vocab_size: int, embed_dim: int, hidden: int, activation: str = "relu",
                 dropout: float = 0.0):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embed_dim)
        self.gru = SecGRU(embed_dim, hidden, activation)
        self.fc = nn.Linear(hidden, vocab_size)
        # Dropout on the GRU's input and output (Zaremba et al.'s non-recurrent dropout): a
        # training-time regulariser only, so the exported network is unchanged.
        self.drop = nn.Dropout(dropout)

    def forward(self, tokens: torch.Tensor, h0: torch.Tensor | None = None):
        out, h = self.gru(self.drop(self.embed(tokens)), h0)
        return self.fc(self.drop(out)), h


def describe(model: nn.Module) -> dict:
    """Architecture summary used by the exporter."""
    gru: SecGRU = model.gru
    return {
        "task": model.task,
        "vocab": model.embed.num_embeddings,
        "embed": model.embed.embedding_dim,
        "hidden": gru.hidden_size,
        "activation": gru.activation,
        "classes": model.fc.out_features,
    }
