"""scripts/plots/plot.py renders docs/benchmarks.md's figures and tables from recorded JSON."""
import importlib.util
import json
import struct
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "scripts" / "plots" / "data"


@pytest.fixture(scope="module")
def plot():
    spec = importlib.util.spec_from_file_location("plot", ROOT / "scripts" / "plots" / "plot.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def png_size(path):
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


def test_renders_every_figure_from_the_recorded_json(plot, tmp_path):
    made = plot.render(DATA, tmp_path)
    names = sorted(p.name for p in made)
    assert names == ["gru.png", "math-lan.png", "math-none.png", "ot.png"], names
    for p in made:
        w, h = png_size(p)
        assert w >= 600 and h >= 300, (p, w, h)
    # the committed images are the ones the committed data gives (same names, same sizes)
    for p in made:
        committed = ROOT / "docs" / "img" / p.name
        assert committed.is_file(), f"{committed} missing: run scripts/plots/plot.py"
        assert png_size(committed) == png_size(p)


def test_tables_show_the_recorded_bytes_in_human_units(plot):
    records, metas = plot.load(DATA)
    assert metas and all("date" in m for m in metas)
    text = plot.tables(DATA)
    gru = [r for r in records if r["bench"] == "gru" and r["params"]["profile"] == "none"][0]
    assert plot.human_bytes(gru["bytes_total"]) in text
    for bench in {r["bench"] for r in records}:
        assert f"#### {bench}\n" in text


def test_peer_records_are_drawn_beside_secinfers(plot, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "secinfer.jsonl").write_text((DATA / "secinfer.jsonl").read_text())
    peer = {"bench": "math", "params": {"fn": "sigmoid", "n": 16384, "profile": "none",
                                        "system": "spu", "impl": "cheetah"},
            "time_s": 0.5, "bytes_total": 123456789, "rounds": 40}
    (data / "peers-spu.jsonl").write_text(json.dumps(peer) + "\n")
    records, _ = plot.load(data)
    assert "spu cheetah" in {plot.system(r) for r in records}
    assert "117 MB" not in plot.tables(data) and "123 MB" in plot.tables(data)
    assert (tmp_path / "img").exists() is False
    assert any(p.name == "math-none.png" for p in plot.render(data, tmp_path / "img"))


def test_a_malformed_record_is_an_error_not_a_gap(plot, tmp_path):
    (tmp_path / "bad.jsonl").write_text('{"bench": "gru"}\n')
    with pytest.raises(ValueError, match="params"):
        plot.load(tmp_path)
    with pytest.raises(FileNotFoundError):
        plot.load(tmp_path / "none")
