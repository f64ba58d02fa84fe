"""Tokeniser words-v1, vocabulary ids, padding and truncation (the Rust side must match these)."""
import pytest

from secinfer.text import PAD, UNK, Vocab, pad_truncate, tokenize


def test_tokenize_words_v1():
    assert tokenize("I didn't LIKE it.<br /><br />Ten/10, café!") == [
        "i", "didn", "t", "like", "it", "ten", "10", "caf"]
    assert tokenize("a<BR>b<br/>c") == ["a", "b", "c"]
    # only ASCII A-Z is lower-cased; other letters separate tokens
    assert tokenize("ÉCOLE Straße") == ["cole", "stra", "e"]
    assert tokenize("") == []


def test_pad_truncate_all_modes():
    ids = [5, 6, 7, 8]
    assert pad_truncate(ids, 6) == [0, 0, 5, 6, 7, 8]
    assert pad_truncate(ids, 6, padding="post") == [5, 6, 7, 8, 0, 0]
    assert pad_truncate(ids, 2) == [7, 8]  # "pre" truncation keeps the end
    assert pad_truncate(ids, 2, truncation="post") == [5, 6]
    with pytest.raises(ValueError):
        pad_truncate(ids, 0)


def test_vocab_build_orders_by_frequency_then_string(tmp_path):
    v = Vocab.build([["b", "a", "c", "a"], ["b", "d"]], max_size=4)
    assert v.tokens == ["<pad>", "<unk>", "a", "b"]
    assert v.encode(["a", "b", "c", "zzz"]) == [2, 3, UNK, UNK]
    assert v.encode_text("B a <br />", 4) == [PAD, PAD, 3, 2]
    v.save(tmp_path / "vocab.json")
    w = Vocab.load(tmp_path / "vocab.json")
    assert w.tokens == v.tokens
