"""SecGRU computes DESIGN.md section 5 exactly; for tanh it is torch.nn.GRU."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from secinfer.models import GRUClassifier, SecGRU  # noqa: E402


def numpy_gru(x, w_ih, w_hh, b_ih, b_hh, act):
    """The GRU of DESIGN.md section 5 written out in numpy (float64)."""
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    g = np.tanh if act == "tanh" else (lambda v: np.maximum(v, 0))
    H = w_hh.shape[1]
    h = np.zeros((x.shape[0], H))
    for t in range(x.shape[1]):
        gi = x[:, t] @ w_ih.T + b_ih
        gh = h @ w_hh.T + b_hh
        r = sig(gi[:, :H] + gh[:, :H])
        z = sig(gi[:, H:2 * H] + gh[:, H:2 * H])
        n = g(gi[:, 2 * H:] + r * gh[:, 2 * H:])
        h = (1 - z) * n + z * h
    return h


def test_tanh_secgru_equals_torch_gru():
    torch.manual_seed(0)
    ref = torch.nn.GRU(7, 5, batch_first=True)
    mine = SecGRU.from_torch_gru(ref, "tanh")
    x = torch.randn(3, 11, 7)
    out_ref, h_ref = ref(x)
    out, h = mine(x)
    torch.testing.assert_close(out, out_ref, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(h, h_ref[0], atol=1e-6, rtol=1e-5)
    # gradients too: the custom cell trains like nn.GRU
    out_ref.sum().backward()
    out.sum().backward()
    torch.testing.assert_close(mine.weight_hh.grad, ref.weight_hh_l0.grad, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("act", ["tanh", "relu"])
def test_secgru_matches_numpy_spec(act):
    torch.manual_seed(1)
    m = SecGRU(4, 6, act)
    x = torch.randn(2, 9, 4)
    _, h = m(x)
    p = {k: v.detach().double().numpy() for k, v in m.state_dict().items()}
    want = numpy_gru(x.double().numpy(), p["weight_ih"], p["weight_hh"], p["bias_ih"], p["bias_hh"], act)
    np.testing.assert_allclose(h.detach().double().numpy(), want, atol=1e-5)


def test_relu_differs_from_tanh():
    torch.manual_seed(2)
    a = SecGRU(4, 6, "relu")
    b = SecGRU(4, 6, "tanh")
    b.load_state_dict(a.state_dict())
    x = 3 * torch.randn(2, 5, 4)
    assert not torch.allclose(a(x)[1], b(x)[1])


def test_classifier_names_match_the_format():
    m = GRUClassifier(10, 3, 4, 2, "relu")
    assert sorted(m.state_dict()) == sorted([
        "embed.weight", "gru.weight_ih", "gru.weight_hh", "gru.bias_ih", "gru.bias_hh",
        "fc.weight", "fc.bias"])
    assert tuple(m.gru.weight_ih.shape) == (12, 3)
