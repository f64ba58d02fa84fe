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


def test_secure_calls_wait_for_the_core():
    if hasattr(secinfer.core(), "Client"):
        pytest.skip("the core has a Client: covered by the runtime's own tests")
    with pytest.raises(NotImplementedError, match="issue 6"):
        secinfer.Client("127.0.0.1", 1, SHIPPED).infer("a fine film")
