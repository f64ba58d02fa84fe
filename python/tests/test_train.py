"""A few real training steps run and reduce the loss (classifier and language model)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from secinfer import datasets  # noqa: E402
from secinfer.models import GRUClassifier, GRULanguageModel  # noqa: E402
from secinfer.text import Vocab, encode_corpus, tokenize  # noqa: E402
from secinfer.train import lm_perplexity, set_seed, train_classifier, train_lm  # noqa: E402


@pytest.mark.parametrize("act", ["relu", "tanh"])
def test_classifier_steps_reduce_loss(act):
    set_seed(0, threads=1)
    ds = datasets.load_sms_spam()
    texts, y = ds.train.texts[:640], ds.train.labels[:640]
    vocab = Vocab.build((tokenize(t) for t in texts), max_size=500)
    x = encode_corpus(texts, vocab, 20, truncation="post")
    m = GRUClassifier(len(vocab), 16, 16, 2, act)
    hist = train_classifier(m, x, y, epochs=3, batch_size=32, lr=1e-2, log_every=20, log=None)
    assert len(hist.losses) >= 3
    assert hist.losses[-1] < 0.8 * hist.losses[0]


def test_language_model_steps_reduce_perplexity():
    set_seed(0, threads=1)
    c = datasets.load_ptb()
    stream = c.stream("train")[:40_000]
    vocab = Vocab.build([stream], max_size=2000)
    ids = np.array(vocab.encode(stream))
    m = GRULanguageModel(len(vocab), 16, 32, "relu")
    before = lm_perplexity(m, ids[:4000], batch_size=8, bptt=20)
    train_lm(m, ids, epochs=1, batch_size=16, bptt=20, lr=1e-2, max_steps=60, log=None)
    after = lm_perplexity(m, ids[:4000], batch_size=8, bptt=20)
    assert after < 0.5 * before


def test_language_model_export_and_fixed_point_perplexity(tmp_path):
    """A (briefly trained) LM exports; its fx20 perplexity is within 1 % of PyTorch's."""
    from secinfer.fixedpoint import FixedPointModel
    from secinfer.fixedpoint import lm_perplexity as fx_ppl
    from secinfer.modelio import export, load_model_dir

    set_seed(0, threads=1)
    c = datasets.load_ptb()
    stream = c.stream("train")[:20_000]
    vocab = Vocab.build([stream], max_size=1000)
    ids = np.array(vocab.encode(stream))
    m = GRULanguageModel(len(vocab), 16, 32, "relu")
    train_lm(m, ids, epochs=1, batch_size=16, bptt=20, lr=1e-2, max_steps=30, log=None)
    export(m, tmp_path, vocab=vocab, formats=["fx20", "fx8"])
    cfg, _ = load_model_dir(tmp_path)
    assert cfg["task"] == "language-model" and cfg["layers"][2]["output"] == len(vocab)
    held = np.array(vocab.encode(c.stream("valid")[:3000]))
    want = lm_perplexity(m, held, batch_size=8, bptt=20)
    fx = FixedPointModel.load(tmp_path, "fx20")
    got = fx_ppl(fx, held, batch=8, bptt=20)
    assert abs(got - want) / want < 0.01
    assert fx.counters.overflows == 0


def _tiny_lm_stream(n=3000, vocab=50, seed=0):
    return np.random.default_rng(seed).integers(0, vocab, size=n)


def test_language_model_keeps_the_best_evaluation_and_decays_on_plateau():
    """keep_best restores the weights of the best eval (not the last); plateau halves the rate
    after an epoch that did not improve, and only then."""
    set_seed(0, threads=1)
    m = GRULanguageModel(50, 8, 8, "relu")
    scores, snaps = iter([5.0, 6.0, 4.0, 4.5]), []

    def snap(mm, s):
        snaps.append((s, {k: v.clone() for k, v in mm.state_dict().items()}))

    hist = train_lm(m, _tiny_lm_stream(), epochs=4, batch_size=4, bptt=10, lr=1e-2, max_steps=None,
                    eval_fn=lambda _m: next(scores), plateau=True, lr_decay=0.5, keep_best=True,
                    on_best=snap,
                    log=None)
    assert [e["lr"] for e in hist.epochs] == [1e-2, 1e-2, 5e-3, 5e-3]
    assert [s for s, _ in snaps] == [5.0, 4.0]
    best = snaps[-1][1]
    assert all(torch.equal(v, best[k]) for k, v in m.state_dict().items())


def test_language_model_skips_steps_whose_gradient_is_not_finite():
    """An exploding ReLU state (huge recurrent weights) gives non-finite gradients: those steps
    are skipped and counted, so the weights stay finite and unchanged."""
    set_seed(0, threads=1)
    m = GRULanguageModel(50, 8, 8, "relu")
    with torch.no_grad():  # the candidate's rows: n = relu(1 + r * 1e20 * sum(h)) overflows in 3 steps
        m.gru.weight_hh[16:].fill_(1e20)
        m.gru.bias_ih[16:].fill_(1.0)
    before = {k: v.clone() for k, v in m.state_dict().items()}
    hist = train_lm(m, _tiny_lm_stream(), epochs=1, batch_size=4, bptt=10, lr=1e-2, log=None)
    steps = hist.epochs[-1]["steps"]
    assert steps > 0 and hist.epochs[-1]["skipped"] == steps
    assert all(torch.equal(v, before[k]) for k, v in m.state_dict().items())
