"""Tokeniser, vocabulary, padding and truncation (pure Python, no torch).

The tokeniser is deliberately trivial so that the Rust runtime can reproduce it
byte for byte (docs/model-format.md, "Tokeniser `words-v1`"):

1. every HTML line break ``<br>``, ``<br/>``, ``<br />`` (any case, any spaces
   before the slash) becomes one space;
2. ASCII letters ``A-Z`` are lower-cased (nothing else is touched);
3. the tokens are the maximal runs of ``[a-z0-9]``; every other character,
   including apostrophes and all non-ASCII characters, separates tokens.

Ids: ``0`` is padding, ``1`` is the unknown word, then the vocabulary by
decreasing training-set frequency (ties broken by the token's string order).
"""

from __future__ import annotations

import collections
import json
import os
import re
from typing import Iterable, Sequence

TOKENIZER = "words-v1"
PAD, UNK = 0, 1
PAD_TOKEN, UNK_TOKEN = "<pad>", "<unk>"

_BR = re.compile(r"<br\s*/?>", re.IGNORECASE)
_WORD = re.compile(r"[a-z0-9]+")
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def tokenize(text: str) -> list[str]:
    """Split ``text`` into ``words-v1`` tokens (see the module docstring)."""
    return _WORD.findall(_BR.sub(" ", text).translate(_ASCII_LOWER))


def pad_truncate(ids: Sequence[int], max_len: int, padding: str = "pre",
                 truncation: str = "pre", pad: int = PAD) -> list[int]:
    """Return exactly ``max_len`` ids.

    ``truncation="pre"`` drops tokens from the start (keeps the last
    ``max_len``), ``"post"`` drops them from the end (keeps the first).
    ``padding="pre"`` puts the pad ids before the tokens (so the last GRU step
    reads the last real token), ``"post"`` after them.
    """
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    if padding not in ("pre", "post") or truncation not in ("pre", "post"):
        raise ValueError("padding and truncation must be 'pre' or 'post'")
    ids = list(ids)
    if len(ids) > max_len:
        ids = ids[-max_len:] if truncation == "pre" else ids[:max_len]
    fill = [pad] * (max_len - len(ids))
    return fill + ids if padding == "pre" else ids + fill


class Vocab:
    """Token <-> id map with reserved ``<pad>`` = 0 and ``<unk>`` = 1."""

    def __init__(self, tokens: Sequence[str], specials: bool = True):
        tokens = list(tokens)
        if specials and tokens[:2] != [PAD_TOKEN, UNK_TOKEN]:
            tokens = [PAD_TOKEN, UNK_TOKEN] + [t for t in tokens if t not in (PAD_TOKEN, UNK_TOKEN)]
        self.tokens = tokens
        self.index = {t: i for i, t in enumerate(tokens)}
        if len(self.index) != len(tokens):
            raise ValueError("duplicate tokens in vocabulary")

    @classmethod
    def build(cls, token_lists: Iterable[Sequence[str]], max_size: int,
              min_count: int = 1) -> "Vocab":
        """Most frequent tokens of ``token_lists``; ``max_size`` counts the two specials."""
        if max_size < 3:
            raise ValueError("max_size must be >= 3 (pad, unk and one word)")
        counts: collections.Counter[str] = collections.Counter()
        for toks in token_lists:
            counts.update(toks)
        ranked = sorted((t for t, c in counts.items()
                         if c >= min_count and t not in (PAD_TOKEN, UNK_TOKEN)),
                        key=lambda t: (-counts[t], t))
        return cls([PAD_TOKEN, UNK_TOKEN] + ranked[: max_size - 2])

    def __len__(self) -> int:
        return len(self.tokens)

    def encode(self, tokens: Sequence[str]) -> list[int]:
        return [self.index.get(t, UNK) for t in tokens]

    def encode_text(self, text: str, max_len: int, padding: str = "pre",
                    truncation: str = "pre") -> list[int]:
        return pad_truncate(self.encode(tokenize(text)), max_len, padding, truncation)

    def decode(self, ids: Sequence[int]) -> list[str]:
        return [self.tokens[i] for i in ids]

    # --- files -------------------------------------------------------------
    def to_json(self) -> dict:
        return {"tokenizer": TOKENIZER, "pad": PAD, "unk": UNK, "tokens": self.tokens}

    def save(self, path: str | os.PathLike) -> None:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_json(), f, ensure_ascii=False, separators=(",", ":"))
            f.write("\n")

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Vocab":
        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
        if not isinstance(obj, dict) or not isinstance(obj.get("tokens"), list):
            raise ValueError(f"{path}: not a secinfer vocabulary (no 'tokens' list)")
        return cls(obj["tokens"], specials=obj.get("pad") == PAD)


def encode_corpus(texts: Sequence[str], vocab: Vocab, max_len: int, padding: str = "pre",
                  truncation: str = "pre"):
    """Encode many texts into an ``int64`` numpy array ``[N, max_len]``."""
    import numpy as np

    out = np.zeros((len(texts), max_len), dtype=np.int64)
    for i, t in enumerate(texts):
        out[i] = vocab.encode_text(t, max_len, padding, truncation)
    return out
