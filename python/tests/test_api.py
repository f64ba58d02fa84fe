"""secinfer.Server / Client: Python tokenises and delegates; no protocol logic here."""
import json
from pathlib import Path

import pytest

import secinfer
from secinfer.modelio import encode_for

SHIPPED = Path(__file__).resolve().parents[2] / "models" / "imdb-relu-gru"


def test_import_needs_no_torch():
    import subprocess
    import sys

    code = ("import sys, secinfer; secinfer.Client; secinfer.Server; secinfer.export; "
            "import secinfer.fixedpoint, secinfer.datasets, secinfer.modelio; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(secinfer.__file__).parents[1])


def test_client_tokenises_like_the_exporter():
    sample = json.loads((SHIPPED / "samples.jsonl").read_text().splitlines()[0])
    c = secinfer.Client("127.0.0.1", 1, SHIPPED)
    ids = c.tokens(sample["text"])
    assert ids == encode_for(SHIPPED, [sample["text"]])[0].tolist()
    assert len(c.tokens([5, 6])) == c.info["vocab"]["max_len"]


def test_server_needs_a_model_dir(tmp_path):
    with pytest.raises(FileNotFoundError):
        secinfer.Server(tmp_path)


def test_secure_inference_between_python_server_and_client_matches_reference(caplog):
    """A real two-party run through the bindings: a Server thread on loopback serving two
    sessions, a Client classifying a shipped review; the class equals the reference's, the
    result is a typed dataclass, and the server logs its address and each session."""
    import dataclasses
    import logging
    import threading

    caplog.set_level(logging.INFO, logger="secinfer")
    core = secinfer.core()
    sample = json.loads((SHIPPED / "samples.jsonl").read_text().splitlines()[0])
    server = secinfer.Server(SHIPPED, variant="cg2")
    bound = []
    ready = threading.Event()

    def listening(addr):
        bound.append(addr)
        ready.set()

    t = threading.Thread(target=server.serve, kwargs=dict(port=0, sessions=2, on_listen=listening,
                                                             allow_logits=True))
    t.start()
    assert ready.wait(60), "server did not start"
    host, port = bound[0].rsplit(":", 1)
    client = secinfer.Client(host, int(port), SHIPPED, variant="cg2")
    res = client.infer(sample["text"], reveal_logits=True)
    # the same text with the gates garbled: the same logits, fewer rounds, more bytes
    garbled = client.infer(sample["text"], reveal_logits=True, gates="circuit")
    t.join(60)
    assert not t.is_alive(), "server did not return after its two sessions"
    assert isinstance(res, secinfer.InferenceResult) and dataclasses.is_dataclass(res)
    assert res.gate_tables and not garbled.gate_tables
    assert garbled.logits == res.logits and garbled.logits_fixed == res.logits_fixed
    assert garbled.cost.online.rounds < res.cost.online.rounds
    assert garbled.gc_bytes > res.gc_bytes
    with pytest.raises(ValueError, match="tables"):
        client.infer(sample["text"], gates="lookup")
    ids = client.tokens(sample["text"])
    ref = core.eval_fixed_point(str(SHIPPED), [ids], "fx8")[0]
    assert res.prediction == max(range(len(ref)), key=lambda i: (ref[i], -i))
    assert res.label == json.loads((SHIPPED / "model.json").read_text())["labels"][res.prediction]
    assert len(res.logits) == 2
    # the float logits are the revealed integers in the main format (fx8: 12 fraction bits),
    # near the exact-activation reference's (the circuit's 8-bit activations differ by up to an
    # 8-bit ULP per step from exact ones, here up to 0.06; a wrong scale is off by 2x or more)
    frac = json.loads((SHIPPED / "model.json").read_text())["fixed_point_variants"]["fx8"]["frac_bits"]
    assert all(isinstance(v, int) for v in res.logits_fixed)
    assert res.logits == [v / 2 ** frac for v in res.logits_fixed]
    assert all(abs(a - r / 2 ** frac) < 0.15 for a, r in zip(res.logits, ref)), (res.logits, ref)
    online = res.cost.online
    assert online.bytes_sent > 0 and online.bytes_received > 0 and online.rounds > 0
    assert res.cost.bytes == sum(p.bytes for p in (res.cost.setup, res.cost.offline, online))
    assert res.gc_bytes > 0 and res.he_bytes > 0
    text = repr(res)
    assert text.startswith(f"InferenceResult(prediction={res.prediction}, label={res.label!r}, "
                           "logits=["), text
    assert " MB, " in text and "rounds" in text and len(text) < 200, text
    lines = [r.getMessage() for r in caplog.records if r.name == "secinfer"]
    assert lines[0] == f"listening on {bound[0]} (model {SHIPPED}, variant cg2)", lines
    done = [l for l in lines if l.startswith("session ") and ": done: " in l]
    assert len(done) == 2, lines


def test_failures_raise_typed_errors_by_kind():
    """A port nobody listens on is a refusal, a server that reveals no logits refuses a logits
    request, and both are SecinferErrors (RuntimeErrors) a caller can tell apart by class."""
    import socket
    import threading

    sample = json.loads((SHIPPED / "samples.jsonl").read_text().splitlines()[0])
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    free_port = s.getsockname()[1]
    s.close()
    with pytest.raises(secinfer.Refused):
        secinfer.Client("127.0.0.1", free_port, SHIPPED).infer(sample["text"])
    server = secinfer.Server(SHIPPED, variant="cg2")
    bound, ready = [], threading.Event()
    t = threading.Thread(target=server.serve, kwargs=dict(
        port=0, sessions=1, on_listen=lambda a: (bound.append(a), ready.set())))
    t.start()
    assert ready.wait(60), "server did not start"
    host, port = bound[0].rsplit(":", 1)
    with pytest.raises(secinfer.Refused, match="does not reveal logits") as e:
        secinfer.Client(host, int(port), SHIPPED).infer(sample["text"], reveal_logits=True)
    t.join(60)
    assert isinstance(e.value, secinfer.SecinferError) and isinstance(e.value, RuntimeError)
    assert not isinstance(e.value, secinfer.PeerTimeout)


def test_secure_inference_needs_an_info_directory():
    info = json.loads((SHIPPED / "model.json").read_text())
    with pytest.raises(ValueError, match="directory"):
        secinfer.Client("127.0.0.1", 1, info).infer([5, 6, 7])
