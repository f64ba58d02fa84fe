"""The numpy fixed-point reference implements docs/model-format.md bit for bit.

`slow_reference` below re-derives the semantics with plain Python integers and
`math`, independently of secinfer.fixedpoint's vectorised code, so a change to
either shows up here.
"""
import math

import numpy as np
import pytest

from secinfer import fixedpoint as fx
from secinfer.fixedpoint import ActFormat, Counters, FixedPointModel, Format


def test_quantize_rounds_to_nearest_ties_up_and_saturates():
    f = Format(8, 4)
    c = Counters()
    q = fx.quantize(np.array([0.5 / 16, -0.5 / 16, 1.5 / 16, -1.5 / 16, 0.49 / 16, 100.0, -100.0]), f, c)
    assert q.tolist() == [1, 0, 2, -1, 0, 127, -128]
    assert c.saturated_weights == 2


def test_truncation_is_floor_and_wrap_is_twos_complement():
    assert fx.trunc(np.array([-1, -4096, -4097, 4095]), 12).tolist() == [-1, -1, -2, 0]
    f = Format(20, 12)
    c = Counters()
    assert fx.wrap(np.array([(1 << 19) - 1, 1 << 19, -(1 << 19) - 1]), f, c).tolist() == [
        (1 << 19) - 1, -(1 << 19), (1 << 19) - 1]
    assert c.overflows == 2


def test_activation_formats():
    main = Format(20, 12)
    c = Counters()
    x = np.array([-5 * 4096, -1, 0, 1, 4096, 40 * 4096])
    assert fx.activation("sigmoid", np.array([0]), main, None, c).tolist() == [2048]
    assert fx.activation("relu", x, main, None, c).tolist() == [0, 0, 0, 1, 4096, 40 * 4096]
    s8 = ActFormat(Format(8, 4), Format(8, 7))
    y = fx.activation("sigmoid", x, main, s8, c)
    assert all(v % 32 == 0 for v in y.tolist())           # 7 fractional bits shifted back to 12
    assert y[-1] == 127 * 32                                 # sigmoid(8) saturates at 127/128
    r8 = ActFormat(Format(8, 4), Format(8, 4))
    assert fx.activation("relu", x, main, r8, c).tolist() == [0, 0, 0, 0, 4096, 127 * 256]
    assert c.saturated_activations > 0


def _tiny_model(act, rng, V=7, E=3, H=4, C=2, scale=1.0):
    cfg = {"format": "secinfer-model", "version": 1, "task": "classification",
           "layers": [{"type": "embedding", "name": "embed", "vocab": V, "dim": E},
                      {"type": "gru", "name": "gru", "input": E, "hidden": H, "activation": act},
                      {"type": "dense", "name": "fc", "input": H, "output": C}],
           "fixed_point": {"bits": 20, "frac_bits": 12}, "labels": ["a", "b"]}
    w = lambda *s: (scale * rng.standard_normal(s)).astype(np.float32)  # noqa: E731
    weights = {"embed.weight": w(V, E), "gru.weight_ih": w(3 * H, E), "gru.weight_hh": w(3 * H, H),
               "gru.bias_ih": w(3 * H), "gru.bias_hh": w(3 * H), "fc.weight": w(C, H), "fc.bias": w(C)}
    return cfg, weights


def slow_reference(cfg, weights, tokens, fp):
    """docs/model-format.md 'Fixed-point semantics', one scalar at a time with Python ints."""
    B, F = fp["bits"], fp["frac_bits"]
    lo, hi = -(1 << (B - 1)), (1 << (B - 1)) - 1
    acts = fp.get("activations", {})

    def q(v):
        return min(max(math.floor(float(v) * 2 ** F + 0.5), lo), hi)

    def wrap(v):
        return ((v - lo) % (1 << B)) + lo

    def act(kind, X, key):
        a = acts.get(key)
        bi, fi, bo, fo = (a["input"]["bits"], a["input"]["frac_bits"], a["output"]["bits"],
                          a["output"]["frac_bits"]) if a else (B, F, B, F)
        xa = min(max(X >> (F - fi), -(1 << (bi - 1))), (1 << (bi - 1)) - 1)
        if kind == "relu":
            y = max(xa, 0)
        else:
            r = xa / 2 ** fi
            val = 1.0 / (1.0 + math.exp(-r)) if kind == "sigmoid" else math.tanh(r)
            y = math.floor(val * 2 ** fo + 0.5)
        y = min(max(y, -(1 << (bo - 1))), (1 << (bo - 1)) - 1)
        return y << (F - fo)

    Q = {k: np.vectorize(q, otypes=[object])(v) for k, v in weights.items()}
    H = cfg["layers"][1]["hidden"]
    g = cfg["layers"][1]["activation"]

    def lin(W, b, x):
        return [wrap((sum(int(W[i][j]) * x[j] for j in range(len(x))) >> F) + int(b[i])) for i in range(len(b))]

    out = []
    for seq in tokens:
        h = [0] * H
        for tok in seq:
            x = [int(v) for v in Q["embed.weight"][tok]]
            gi = lin(Q["gru.weight_ih"], Q["gru.bias_ih"], x)
            gh = lin(Q["gru.weight_hh"], Q["gru.bias_hh"], h)
            new = []
            for k in range(H):
                r = act("sigmoid", wrap(gi[k] + gh[k]), "sigmoid")
                z = act("sigmoid", wrap(gi[H + k] + gh[H + k]), "sigmoid")
                n = act(g, wrap(gi[2 * H + k] + wrap((r * gh[2 * H + k]) >> F)), "candidate")
                new.append(wrap(n + wrap((z * wrap(h[k] - n)) >> F)))
            h = new
        out.append(lin(Q["fc.weight"], Q["fc.bias"], h))
    return out


@pytest.mark.parametrize("act", ["tanh", "relu"])
@pytest.mark.parametrize("preset", ["fx20", "fx8"])
def test_vectorised_reference_equals_scalar_spec(act, preset):
    rng = np.random.default_rng(7)
    cfg, weights = _tiny_model(act, rng)
    fp = fx.preset(preset, act)
    tokens = rng.integers(0, 7, size=(5, 6))
    m = FixedPointModel(cfg, weights, fp)
    got = m.logits(tokens).tolist()
    assert got == slow_reference(cfg, weights, tokens, fp)


def float_logits(weights, tokens, act):
    """Float64 forward pass of DESIGN.md section 5 (classifier on the last state)."""
    w = {k: v.astype(np.float64) for k, v in weights.items()}
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    g = np.tanh if act == "tanh" else (lambda v: np.maximum(v, 0))
    H = w["gru.weight_hh"].shape[1]
    h = np.zeros((len(tokens), H))
    for t in range(tokens.shape[1]):
        x = w["embed.weight"][tokens[:, t]]
        gi = x @ w["gru.weight_ih"].T + w["gru.bias_ih"]
        gh = h @ w["gru.weight_hh"].T + w["gru.bias_hh"]
        r, z = sig(gi[:, :H] + gh[:, :H]), sig(gi[:, H:2 * H] + gh[:, H:2 * H])
        n = g(gi[:, 2 * H:] + r * gh[:, 2 * H:])
        h = n + z * (h - n)
    return h @ w["fc.weight"].T + w["fc.bias"]


@pytest.mark.parametrize("act", ["tanh", "relu"])
def test_fine_format_tracks_float(act):
    """With 16 fractional bits the quantised GRU stays within 1e-3 of float64."""
    rng = np.random.default_rng(3)
    cfg, weights = _tiny_model(act, rng, scale=0.5)
    tokens = rng.integers(0, 7, size=(4, 8))
    m = FixedPointModel(cfg, weights, {"bits": 24, "frac_bits": 16})
    got = m.to_float(m.logits(tokens))
    np.testing.assert_allclose(got, float_logits(weights, tokens, act), atol=1e-3)
    assert m.counters.overflows == 0


def test_rejects_bad_formats():
    with pytest.raises(ValueError):
        Format(32, 12)
    with pytest.raises(ValueError):
        Format(8, 8)
    with pytest.raises(ValueError):
        fx.FixedPointConfig.from_json({"bits": 20, "frac_bits": 12, "activations": {
            "sigmoid": {"input": {"bits": 8, "frac_bits": 14}, "output": {"bits": 8, "frac_bits": 7}}}})
    with pytest.raises(ValueError):
        fx.FixedPointConfig.from_json({"bits": 20, "frac_bits": 12, "activations": {"softmax": {}}})
