"""Family choco (CHOCO's client-aided HE) through the Python face: a Server and a Client named
family="choco" classify shipped MNIST samples over the Noise channel; the classes equal the
plaintext fixed-point reference's, and the client's cost report and the activations it saw
come back typed."""
import json
import threading
from pathlib import Path

import numpy as np
import pytest

import secinfer

MLP = Path(__file__).resolve().parents[2] / "models" / "mnist-mlp"


def _serve(sessions, **kw):
    server = secinfer.Server(MLP, family="choco", **kw)
    bound, ready = [], threading.Event()
    t = threading.Thread(target=server.serve, kwargs=dict(
        port=0, sessions=sessions, on_listen=lambda a: (bound.append(a), ready.set())))
    t.start()
    assert ready.wait(60), "server did not start"
    host, port = bound[0].rsplit(":", 1)
    return t, host, int(port)


def test_choco_client_classifies_like_the_reference():
    samples = [json.loads(l) for l in (MLP / "samples.jsonl").read_text().splitlines()[:3]]
    info = json.loads((MLP / "model.json").read_text())
    names = [layer["name"] for layer in info["layers"]]
    t, host, port = _serve(len(samples))
    client = secinfer.Client(host, port, MLP, family="choco")
    results = [client.infer(np.array(s["input"], dtype=np.float32).reshape(28, 28),
                            client_threads=1) for s in samples]
    t.join(120)
    assert not t.is_alive(), "server did not return after its sessions"
    ref = secinfer.core().eval_graph(str(MLP), [s["input"] for s in samples])
    for s, r, want in zip(samples, results, ref):
        assert isinstance(r, secinfer.InferenceResult)
        assert [r.prediction] == want, (r.prediction, want)
        assert r.label == info["labels"][r.prediction]
        assert r.logits is None and r.gc_bytes == 0
        rep = r.choco
        assert isinstance(rep, secinfer.ChocoReport)
        # what the client saw: every layer after the input, named, ending in the class
        assert rep.revealed == tuple(names[1:])
        assert list(rep.activations) == names
        assert rep.activations[names[-1]] == [r.prediction]
        assert len(rep.activations["input"]) == 784
        scale = 2 ** info["fixed_point"]["frac_bits"]
        # the client's input in the main format (round half up), clamped to the stated range
        assert rep.activations["input"] == [int(np.floor(min(max(v, 0.0), 1.0) * scale + 0.5))
                                            for v in s["input"]]
        # the client's cost: its own work and the ciphertexts it moved, inside the channel's
        assert 0 < rep.encrypt_s and 0 < rep.decrypt_s and rep.keygen_s > 0
        assert rep.online_s == pytest.approx(rep.encrypt_s + rep.decrypt_s + rep.clear_layers_s)
        assert rep.ciphertexts_up > 0 and rep.ciphertexts_down > 0
        assert 0 < rep.bytes_up <= r.cost.online.bytes_sent
        assert 0 < rep.bytes_down <= r.cost.online.bytes_received
        assert 0 < rep.setup_bytes <= r.cost.setup.bytes_sent
        assert r.he_bytes == rep.setup_bytes + rep.online_bytes
        text = repr(rep)
        assert "kB up" in text and "saw " + ", ".join(names[1:]) in text, text


def test_choco_packing_must_match_the_server():
    """A client naming the other packing is refused with a typed error, not a wrong class."""
    sample = json.loads((MLP / "samples.jsonl").read_text().splitlines()[0])
    t, host, port = _serve(1)
    client = secinfer.Client(host, port, MLP, family="choco", packing="baseline")
    with pytest.raises(secinfer.SecinferError):
        client.infer(np.array(sample["input"], dtype=np.float32))
    t.join(120)
    assert not t.is_alive()


def test_choco_options_are_checked():
    with pytest.raises(ValueError, match="packing"):
        secinfer.Client("127.0.0.1", 1, MLP, family="choco", packing="double").infer(
            np.zeros(784, dtype=np.float32))
    with pytest.raises(secinfer.BadInput, match="family"):
        secinfer.Client("127.0.0.1", 1, MLP, family="cheap").infer(
            np.zeros(784, dtype=np.float32))
