"""secinfer.rescale: range calibration of a ReLU chain keeps every decision."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the rescale tests need torch (make test installs it)")
nn = torch.nn

from secinfer.rescale import rescale_ranges  # noqa: E402


def chain():
    torch.manual_seed(4)
    m = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(4, 6, 3),
                      nn.ReLU(), nn.AvgPool2d(2), nn.Flatten(), nn.Linear(6, 8), nn.ReLU(),
                      nn.Dropout(0.2), nn.Linear(8, 5)).eval()
    with torch.no_grad():
        for p in m.parameters():
            p.mul_(4.0)  # activations far above the limit
    return m


def test_rescaled_chain_fits_the_limit_and_keeps_its_decisions():
    m = chain()
    x = torch.rand(256, 1, 12, 12, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        before = m(x)
    scales = rescale_ranges(m, x, 2.0)
    assert len(scales) == 4 and all(a >= b for a, b in zip([1.0] + scales, scales))
    assert scales[-1] < 1.0
    with torch.no_grad():
        after = m(x)
        h = x
        for layer in m:
            h = layer(h)
            if isinstance(layer, (nn.Linear, nn.Conv2d)):
                assert float(h.abs().max()) <= 2.0 * (1 + 1e-5)
    np.testing.assert_allclose(after.numpy(), (before * scales[-1]).numpy(), rtol=1e-4, atol=1e-5)
    assert (after.argmax(1) == before.argmax(1)).all()


def test_a_module_outside_a_relu_chain_is_refused():
    m = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3), nn.Linear(3, 2)).eval()
    with pytest.raises(ValueError, match=r"model\[1\]: BatchNorm1d is not part of a ReLU chain"):
        rescale_ranges(m, torch.zeros(2, 3), 1.0)
