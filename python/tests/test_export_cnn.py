"""secinfer.export of CNNs and residual networks: round trips through the Rust fixed-point
reference (secinfer._core.eval_graph) against torch, and refusals that name the module."""
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the export tests need torch (make test installs it)")
nn = torch.nn

import secinfer  # noqa: E402
from secinfer.graph_export import ExportError, Residual, accumulator_bounds  # noqa: E402

# The main format of these tests, and the largest |fixed point - float| allowed on a logit: the
# rounding of a few layers at 2^-12 each (measured: at most 6.0e-4 on logits of magnitude up to
# 0.52), far below what a wrong or misplaced weight does to these O(0.1..1) logits.
FIXED = (20, 12)
TOL = 2.0 ** -8


def _randomise_bn(model):
    """Running statistics and affine parameters away from the identity, so folding shows."""
    for m in model.modules():
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.5, 0.5)
    return model.eval()


def every_kind():
    """A random network with every module kind the exporter supports, both shortcut kinds."""
    torch.manual_seed(7)
    return _randomise_bn(nn.Sequential(
        nn.Conv2d(3, 6, 3, stride=2, padding=1), nn.BatchNorm2d(6), nn.ReLU(),
        nn.Sequential(nn.Conv2d(6, 6, 3, padding="same"), nn.ReLU(), nn.Dropout(0.3)),
        nn.MaxPool2d(3, stride=1),
        Residual(nn.Sequential(nn.Conv2d(6, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU(),
                               nn.Conv2d(6, 6, 3, padding=1))),
        nn.ReLU(),
        Residual(nn.Sequential(nn.Conv2d(6, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8),
                               nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8)),
                 shortcut=nn.Sequential(nn.Conv2d(6, 8, 1, stride=2), nn.BatchNorm2d(8))),
        nn.ReLU(), nn.AvgPool2d(2), nn.AdaptiveAvgPool2d(1), nn.Identity(),
        nn.Flatten(), nn.Linear(8, 12), nn.BatchNorm1d(12), nn.ReLU(), nn.Linear(12, 5)))


def small_resnet(negative_input: bool):
    """A ResNet-style net whose first block has a projection shortcut right on the input."""
    torch.manual_seed(11)
    return _randomise_bn(nn.Sequential(
        Residual(nn.Sequential(nn.Conv2d(2, 4, 3, stride=2, padding=1), nn.BatchNorm2d(4),
                               nn.ReLU(), nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4)),
                 shortcut=nn.Sequential(nn.Conv2d(2, 4, 1, stride=2), nn.BatchNorm2d(4))),
        nn.ReLU(),
        Residual(nn.Conv2d(4, 6, 3, stride=2, padding=1), shortcut=nn.Conv2d(4, 6, 1, stride=2)),
        nn.ReLU(), nn.Flatten(), nn.Linear(6 * 2 * 2, 4))), (-1.0 if negative_input else 0.0, 1.0)


def _compare(model, out, x):
    """Rust fixed-point logits and classes against torch on the batch ``x``."""
    frac = json.loads((out / "model.json").read_text())["fixed_point"]["frac_bits"]
    got = np.array(secinfer.core().eval_graph(str(out), x.reshape(len(x), -1).tolist()))
    with torch.no_grad():
        want = model(x).double().numpy()
    return got / 2.0 ** frac, want


def _check_agreement(model, tmp_path, shape, lo=-1.0, hi=1.0, n=400):
    ex = torch.zeros(1, *shape)
    logits_dir = secinfer.export(model, tmp_path / "logits", ex, fixed_point=FIXED, argmax=False,
                                 input_range=(lo, hi))
    class_dir = secinfer.export(model, tmp_path / "class", ex, fixed_point=FIXED,
                                input_range=(lo, hi))
    x = lo + (hi - lo) * torch.rand(n, *shape, generator=torch.Generator().manual_seed(5))
    got, want = _compare(model, logits_dir, x)
    err = np.abs(got - want).max()
    assert err <= TOL, f"max |fixed - float| logit error {err} > {TOL}"
    classes = np.array(secinfer.core().eval_graph(str(class_dir), x.reshape(n, -1).tolist()))[:, 0]
    assert (classes == got.argmax(axis=1)).all()  # the argmax layer reads those logits
    assert (classes == want.argmax(axis=1)).mean() >= 0.99
    return logits_dir


def test_every_layer_kind_agrees_with_torch(tmp_path):
    model = every_kind()
    out = _check_agreement(model, tmp_path, (3, 20, 20))
    cfg = json.loads((out / "model.json").read_text())
    assert [l["type"] for l in cfg["layers"]] == [
        "input", "conv2d", "relu", "conv2d", "relu", "maxpool2d",
        "conv2d", "relu", "conv2d", "add", "relu",  # identity shortcut: an add
        "conv2d", "relu", "conv2d", "relu",  # projection: folded into the body's convs
        "avgpool2d", "avgpool2d", "flatten", "dense", "relu", "dense"]
    conv, pad = cfg["layers"][3], cfg["layers"][3]["padding"]
    assert conv["kernel"] == [3, 3] and pad == [1, 1]  # padding="same"
    assert cfg["layers"][9]["other"] == cfg["layers"][5]["name"]
    # the projection's input follows a ReLU, so one copy of its 6 channels rides along
    assert cfg["layers"][11]["out_channels"] == 8 + 6 and cfg["layers"][13]["in_channels"] == 8 + 6
    assert cfg["metadata"]["projection_carries"] == [{"block": "model[7]", "channels": 6}]
    assert cfg["layers"][16]["kernel"] == [2, 2]  # AdaptiveAvgPool2d(1) on 2x2 (20 -> 10 -> 8 -> 4 -> 2)


@pytest.mark.parametrize("negative_input", [True, False])
def test_projection_shortcuts_agree_with_torch(tmp_path, negative_input):
    model, (lo, hi) = small_resnet(negative_input)
    out = _check_agreement(model, tmp_path, (2, 8, 8), lo, hi)
    cfg = json.loads((out / "model.json").read_text())
    convs = [l for l in cfg["layers"] if l["type"] == "conv2d"]
    # an input that may be negative rides along as relu(x) and relu(-x): twice its channels
    k = 4 if negative_input else 2
    assert [(c["in_channels"], c["out_channels"]) for c in convs] == [(2, 4 + k), (4 + k, 4), (4, 6)]
    assert cfg["metadata"]["projection_carries"][0]["channels"] == k
    assert not any(l["type"] == "add" for l in cfg["layers"])


def test_batchnorm_is_not_folded_into_a_layer_a_shortcut_reads(tmp_path):
    torch.manual_seed(2)
    model = _randomise_bn(nn.Sequential(
        nn.Conv2d(1, 3, 3, padding=1),
        Residual(nn.Sequential(nn.BatchNorm2d(3), nn.Conv2d(3, 3, 3, padding=1))),
        nn.Flatten(), nn.Linear(3 * 6 * 6, 3)))
    out = _check_agreement(model, tmp_path, (1, 6, 6))
    types = [l["type"] for l in json.loads((out / "model.json").read_text())["layers"]]
    assert types == ["input", "conv2d", "batchnorm", "conv2d", "add", "flatten", "dense"]


def test_export_writes_variants_and_the_input_range(tmp_path):
    model = nn.Sequential(nn.Flatten(), nn.Linear(16, 3)).eval()
    with torch.no_grad():
        model[1].weight.copy_(torch.stack([torch.full((16,), 0.1), torch.full((16,), -0.1),
                                           torch.zeros(16)]))
        model[1].bias.zero_()
    out = secinfer.export(model, tmp_path / "m", torch.zeros(1, 1, 4, 4), fixed_point=(12, 6),
                          variants={"fx20": (20, 12)}, input_range=(0, 1), argmax=False)
    cfg = json.loads((out / "model.json").read_text())
    assert cfg["fixed_point"] == {"bits": 12, "frac_bits": 6}
    assert cfg["fixed_point_variants"] == {"fx20": {"bits": 20, "frac_bits": 12}}
    assert cfg["layers"][0]["range"] == [0.0, 1.0]
    x = [[0.5] * 16]
    # logits 0.8, -0.8, 0 with weights rounded to Q(0.1): 6/64 and 410/4096
    assert secinfer.core().eval_graph(str(out), x) == [[16 * 32 * 6 // 64, -(16 * 32 * 6) // 64, 0]]
    assert secinfer.core().eval_graph(str(out), x, "fx20") == [
        [16 * 2048 * 410 // 4096, -(16 * 2048 * 410) // 4096, 0]]
    assert secinfer.Residual is Residual


def test_accumulator_bounds_by_hand(tmp_path):
    model = nn.Sequential(nn.Linear(2, 2)).eval()
    with torch.no_grad():
        model[0].weight.copy_(torch.tensor([[0.5, -0.25], [1.0, 1.0]]))
        model[0].bias.copy_(torch.tensor([0.5, 0.0]))
    out = secinfer.export(model, tmp_path / "m", torch.zeros(1, 2), fixed_point=(8, 4),
                          input_range=(0, 1), argmax=False)
    [row] = accumulator_bounds(out)
    # quantised rows [8, -4] and [16, 16]; any 8-bit input is below 2^7; the bias 8 is scaled 2^4
    assert row["bound"] == max(12 * 128 + 8 * 16, 32 * 128) == 4096
    assert row["bits"] == 13
    # inputs in [0, 1] are at most Q(1) = 16
    assert row["bound_in_range"] == max(12 * 16 + 128, 32 * 16) == 512


@pytest.mark.parametrize("model, shape, message", [
    (lambda: nn.Sequential(nn.Conv2d(1, 2, 3), nn.Sequential(nn.ReLU(), nn.Sigmoid())),
     (1, 6, 6), r"model\[1\]\[1\]: Sigmoid is not a supported layer"),
    (lambda: nn.Sequential(nn.Flatten(), nn.Linear(15, 2)), (16,),
     r"model\[1\]: Linear\(in_features=15\) cannot read an input of shape \[16\]$"),
    (lambda: nn.Sequential(nn.Conv2d(1, 2, 3), nn.Linear(4, 2)), (1, 6, 6),
     r"model\[1\]: Linear\(in_features=4\) cannot read an input of shape \[2, 4, 4\]: "
     r"add nn.Flatten\(\) before it"),
    (lambda: nn.Sequential(nn.Conv2d(1, 2, 3), nn.Conv2d(3, 2, 3)), (1, 6, 6),
     r"model\[1\]: Conv2d\(in_channels=3\) cannot read an input of shape \[2, 4, 4\]"),
    (lambda: nn.Sequential(nn.Conv2d(1, 2, 4, padding="same")), (1, 6, 6),
     r"model\[0\]: Conv2d padding='same' with an even kernel"),
    (lambda: nn.Sequential(nn.MaxPool2d(2, ceil_mode=True)), (1, 5, 5),
     r"model\[0\]: pooling with padding or ceil_mode"),
    (lambda: nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2, track_running_stats=False)),
     (1, 6, 6), r"model\[1\]: BatchNorm2d without running statistics"),
    (lambda: nn.Sequential(Residual(nn.Conv2d(1, 2, 3, padding=1))), (1, 6, 6),
     r"model\[0\]: the body maps \[1, 6, 6\] to \[2, 6, 6\]"),
    (lambda: nn.Sequential(Residual(nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU()),
                                    shortcut=nn.Conv2d(1, 2, 1))), (1, 6, 6),
     r"model\[0\]\.body ends in ReLU"),
    (lambda: nn.Sequential(Residual(nn.Conv2d(1, 2, 3, padding=1),
                                    shortcut=nn.Conv2d(1, 2, 3, padding=1))), (1, 6, 6),
     r"model\[0\]\.shortcut: a projection shortcut must be a 1x1 Conv2d"),
    (lambda: nn.Sequential(Residual(nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.MaxPool2d(2)),
                                    shortcut=nn.Conv2d(1, 2, 1, stride=2))), (1, 6, 6),
     r"model\[0\]\.body\[1\]: MaxPool2d here"),
])
def test_refusals_name_the_module(tmp_path, model, shape, message):
    with pytest.raises(ExportError, match=message):
        secinfer.export(model().eval(), tmp_path / "m", torch.zeros(1, *shape))


def test_an_output_or_a_format_the_graph_cannot_hold_is_refused(tmp_path):
    with pytest.raises(ExportError, match=r"its output has shape \[2, 4, 4\], but the class"):
        secinfer.export(nn.Sequential(nn.Conv2d(1, 2, 3)).eval(), tmp_path / "a",
                        torch.zeros(1, 1, 6, 6))
    block = nn.Sequential(Residual(nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(),
                                                 nn.Conv2d(2, 2, 3, padding=1)),
                                   shortcut=nn.Conv2d(1, 2, 1)), nn.Flatten()).eval()
    with pytest.raises(ExportError, match="passes its input on with weight 1.0"):
        secinfer.export(block, tmp_path / "b", torch.zeros(1, 1, 4, 4), fixed_point=(8, 7))


def test_a_sequential_with_its_own_forward_is_refused(tmp_path):
    class Twice(nn.Sequential):
        def forward(self, x):
            return super().forward(x) * 2

    with pytest.raises(ExportError, match="forward does not compute its layers in order"):
        secinfer.export(Twice(nn.Linear(4, 2)).eval(), tmp_path / "m", torch.zeros(1, 4))


def test_a_gru_model_still_exports_through_secinfer_export(tmp_path):
    from secinfer.models import GRUClassifier
    from secinfer.text import Vocab

    torch.manual_seed(0)
    m = GRUClassifier(12, 5, 4, 2, "relu")
    out = secinfer.export(m, tmp_path / "g", vocab=Vocab([f"w{i}" for i in range(10)]), max_len=7)
    assert json.loads((out / "model.json").read_text())["version"] == 1
