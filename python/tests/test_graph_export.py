"""PyTorch layer stacks exported to model format v2 and evaluated by the Rust reference."""
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the export tests need torch (make test installs it)")
nn = torch.nn

import secinfer  # noqa: E402
from secinfer.graph_export import ExportError, Residual, export_graph  # noqa: E402


def every_kind():
    """A random network with every layer kind the exporter supports."""
    torch.manual_seed(3)
    model = nn.Sequential(
        nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
        Residual(nn.Sequential(nn.Conv2d(4, 4, 3, padding=1), nn.ReLU())),
        nn.AvgPool2d(2), nn.BatchNorm2d(4),
        nn.Flatten(), nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 3))
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.5, 0.5)
    return model.eval()


def test_export_round_trip_agrees_with_torch(tmp_path):
    model = every_kind()
    out = export_graph(model, tmp_path / "net", torch.zeros(1, 2, 8, 8), labels=["a", "b", "c"])
    cfg = json.loads((out / "model.json").read_text())
    types = [l["type"] for l in cfg["layers"]]
    # the first BatchNorm folds into the conv before it; the second stands alone
    assert types == ["input", "conv2d", "relu", "maxpool2d", "conv2d", "relu", "add", "avgpool2d",
                     "batchnorm", "flatten", "dense", "relu", "dense", "argmax"]
    assert cfg["version"] == 2 and cfg["labels"] == ["a", "b", "c"]
    x = torch.rand(300, 2, 8, 8) * 2 - 1
    with torch.no_grad():
        want = model(x).argmax(dim=1).numpy()
    got = np.array(secinfer.core().eval_graph(str(out), x.reshape(300, -1).tolist()))[:, 0]
    assert (got == want).mean() >= 0.99


def test_unsupported_modules_are_refused_by_name(tmp_path):
    with pytest.raises(ExportError, match=r"model\[1\]: Sigmoid is not a supported layer"):
        export_graph(nn.Sequential(nn.Linear(4, 4), nn.Sigmoid()), tmp_path / "s", torch.zeros(1, 4))
    with pytest.raises(ExportError, match="groups or dilation"):
        export_graph(nn.Sequential(nn.Conv2d(2, 2, 3, groups=2)), tmp_path / "g",
                     torch.zeros(1, 2, 8, 8))


def test_the_rust_loader_refuses_a_shape_the_exporter_did_not_write(tmp_path):
    model = nn.Sequential(nn.Flatten(), nn.Linear(16, 2)).eval()
    out = export_graph(model, tmp_path / "m", torch.zeros(1, 16))
    cfg = json.loads((out / "model.json").read_text())
    cfg["layers"][2]["input"] = 15
    (out / "model.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match=r"layers\[2\] \(fc1\): input = 15 but it reads 16"):
        secinfer.core().eval_graph(str(out), [[0.0] * 16])
