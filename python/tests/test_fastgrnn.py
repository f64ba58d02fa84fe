"""FastGRNN: export to model.json v2 and the numpy fixed-point reference track the float model."""
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from secinfer.fastgrnn import FastGRNNClassifier, export_fastgrnn, fixed_point_logits  # noqa: E402


@pytest.mark.parametrize("w_rank", [None, 3])
def test_export_and_fixed_point_track_the_float_model(tmp_path, w_rank):
    torch.manual_seed(0)
    m = FastGRNNClassifier(6, 8, 4, w_rank=w_rank).eval()
    out = export_fastgrnn(m, tmp_path / "m", 5)
    cfg = json.loads((out / "model.json").read_text())
    assert [layer["type"] for layer in cfg["layers"]] == ["input", "fastgrnn", "dense", "argmax"]
    assert cfg["layers"][1]["w_rank"] == w_rank
    assert cfg["fixed_point"] == {"bits": 18, "frac_bits": 9}
    x = np.random.default_rng(0).uniform(-1, 1, (32, 5, 6)).astype(np.float32)
    with torch.no_grad():
        want = m(torch.from_numpy(x)).numpy()
    got = fixed_point_logits(out, x) / 2.0 ** 9
    # Weights at 2^-8, states at 2^-9 over 5 steps: a few hundredths at most.
    assert np.abs(got - want).max() < 0.05
    assert (got.argmax(1) == want.argmax(1)).mean() >= 0.9
