"""SHE training and export (python/secinfer/she.py): the integer arithmetic matches a naive
per-element reference, export round-trips, and quantisation-aware training learns."""

from __future__ import annotations

import numpy as np
from secinfer import she


def test_shift_floor_is_arithmetic_on_negatives():
    x = np.array([-5, -1, 0, 5, 31, -32])
    assert she.shift_floor(x, np.full(6, -1)).tolist() == [-3, -1, 0, 2, 15, -16]
    assert she.shift_floor(x, np.full(6, 2)).tolist() == [-20, -4, 0, 20, 124, -128]
    assert she.shift_floor(x, np.full(6, -9)).tolist() == [-1, -1, 0, 0, 0, -1]


def test_pow2_projection_levels_and_pruning():
    w = np.array([0.9, -0.3, 0.26, 2.0**-20, -(2.0**-14), 0.0])
    s, e = she.pow2_project(w, emax=0)
    assert s.tolist() == [1, -1, 1, 0, -1, 0]
    assert e[:3].tolist() == [0, -2, -2]
    assert e.min() >= -15 and e.max() <= 0


def _naive(model: she.SheMlp, x: np.ndarray) -> np.ndarray:
    a = [int(v) for v in x]
    for i, l in enumerate(model.layers):
        out = []
        for o in range(l.sign.shape[0]):
            acc = int(l.bias[o])
            for j, v in enumerate(a):
                k = int(l.exp[o, j]) + l.offset
                t = v << k if k >= 0 else v >> -k
                acc += int(l.sign[o, j]) * t
            out.append(acc)
        if i < len(model.shifts):
            out = [min(max(v >> model.shifts[i], 0), 31) for v in out]
        a = out
    return np.array(a)


def _random_model(rng) -> she.SheMlp:
    def dense(name, o, n, off):
        return she.Pow2Dense(name, rng.integers(-1, 2, (o, n)), rng.integers(-6, 2, (o, n)),
                             rng.integers(-50, 50, o), off)
    return she.SheMlp(5, [dense("fc1", 7, 9, 2), dense("fc2", 3, 7, 1)], [3])


def test_integer_forward_matches_naive_reference():
    rng = np.random.default_rng(1)
    m = _random_model(rng)
    x = rng.integers(0, 32, (20, 9))
    x[0] = 31
    got = m.forward(x)
    for i in range(len(x)):
        assert got[i].tolist() == _naive(m, x[i]).tolist()
    assert np.abs(got).max() > 0


def test_export_round_trip(tmp_path):
    rng = np.random.default_rng(2)
    m = _random_model(rng)
    x = rng.integers(0, 32, (5, 9))
    m.export(tmp_path, x, np.arange(5))
    back = she.load(tmp_path)
    assert back.shifts == m.shifts
    assert (back.forward(x) == m.forward(x)).all()
    from safetensors.numpy import load_file
    t = load_file(str(tmp_path / "weights.safetensors"))
    assert t["fc1.sign"].dtype == np.int8 and t["fc1.bias"].dtype == np.int64


def test_quantisation_aware_training_learns_digits():
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    x = x.astype(np.int64)
    cfg = she.TrainConfig(hidden=(32, 32), epochs=8, seed=0, keep=0.5)
    params = she.train_mlp(x[:1200], y[:1200], 10, cfg)
    model = she.to_integer(params, she.choose_offsets(params, x[:600], y[:600]))
    for l in model.layers:
        assert set(np.unique(l.sign)) <= {-1, 0, 1}
        nz = l.sign != 0
        assert np.ptp(l.exp[nz]) <= she.EXP_LEVELS - 1, "a 4-bit exponent window per layer"
        assert nz.mean() <= 0.5 + 1e-9, "pruning keeps at most the asked fraction"
    assert model.accuracy(x[1200:], y[1200:]) > 0.8


def _naive_conv(c: she.Pow2Conv, x: np.ndarray) -> np.ndarray:
    n, ci, h, w = x.shape
    k, s, p = c.sign.shape[2], c.stride, c.padding
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    out = np.zeros((n, c.sign.shape[0], oh, ow), dtype=np.int64)
    for b in range(n):
        for o in range(c.sign.shape[0]):
            for y in range(oh):
                for z in range(ow):
                    acc = int(c.bias[o])
                    for i in range(ci):
                        for ky in range(k):
                            for kx in range(k):
                                iy, ix = y * s + ky - p, z * s + kx - p
                                if 0 <= iy < h and 0 <= ix < w:
                                    v, kk = int(x[b, i, iy, ix]), int(c.exp[o, i, ky, kx]) + c.offset
                                    acc += int(c.sign[o, i, ky, kx]) * (v << kk if kk >= 0 else v >> -kk)
                    out[b, o, y, z] = acc
    return out


def test_conv_forward_matches_naive_reference_on_signed_inputs():
    rng = np.random.default_rng(5)
    c = she.Pow2Conv("c", rng.integers(-1, 2, (3, 2, 3, 3)), rng.integers(-6, 2, (3, 2, 3, 3)),
                     rng.integers(-40, 40, 3), 1, 2, 1)
    x = rng.integers(-16, 16, (2, 2, 7, 7))  # negatives: every term floors on its own
    assert np.array_equal(c.forward(x), _naive_conv(c, x))


def test_maxpool_ignores_padding_and_net_exports_logits(tmp_path):
    x = -np.arange(1, 10, dtype=np.int64).reshape(1, 1, 3, 3)  # all negative: zero padding would win
    assert she.maxpool_int(x, 3, 1, 1)[0, 0].tolist() == [[-1, -1, -2], [-1, -1, -2], [-4, -4, -5]]
    rng = np.random.default_rng(6)
    conv = she.Pow2Conv("conv1", rng.integers(-1, 2, (2, 1, 3, 3)), rng.integers(-3, 1, (2, 1, 3, 3)),
                        rng.integers(-5, 5, 2), 0, 1, 1)
    fc = she.Pow2Dense("fc1", rng.integers(-1, 2, (3, 32)), rng.integers(-3, 1, (3, 32)), rng.integers(-5, 5, 3), 0)
    net = she.SheNet((1, 4, 4), [("conv", conv), ("requant", 1, False), ("maxpool", 3, 1, 1),
                                 ("flatten",), ("dense", fc)])
    xs, ys = rng.integers(0, 32, (5, 16)), rng.integers(0, 3, 5)
    net.export(tmp_path, xs, ys)
    from safetensors.numpy import load_file
    t = load_file(str(tmp_path / "test.safetensors"))
    assert np.array_equal(t["logits"], net.forward(xs))
    assert t["logits"].shape == (5, 3)
