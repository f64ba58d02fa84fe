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
