"""The README's snippets, run as a newcomer runs them: the command-line block in bash, the two
Python blocks as a server process and a client process. Only the port (a free one) and the
/tmp/info directory (a temporary one) are substituted."""
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
BIN = ROOT / "target" / "release" / "secinfer"


def blocks(lang):
    return re.findall(r"```%s\n(.*?)```" % lang, README, re.S)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def substitute(code, port, info):
    assert "7460" in code and ("/tmp/info" in code or "serve(" in code), code
    return code.replace("7460", str(port)).replace("/tmp/info", str(info))


@pytest.fixture(scope="module")
def built():
    """The command-line binary (a no-op build when cargo test --workspace already made it)."""
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "secinfer-cli"], cwd=ROOT,
                   check=True, timeout=3600)
    assert BIN.is_file()
    return BIN


def test_readme_promises_the_secure_logits_it_shows():
    # What the snippets below are checked against: one figure, stated once.
    assert "[-0.8188, 1.0266]" in README


def test_readme_cli_snippet(built, tmp_path):
    [sh] = [b for b in blocks("sh") if "export-info" in b and "imdb-relu-gru" in b]
    script = substitute(sh, free_port(), tmp_path / "info")
    out = subprocess.run(["bash", "-e", "-c", script], cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    so = out.stdout
    assert "parameters" in so and "labels     negative, positive" in so, so
    # the plaintext reference in the cg2 server's format and the secure run agree exactly
    circuit = re.search(r"class +\d \((\w+)\)\nlogits +\[([^\]]+)\]", so)
    secure = re.search(r"secure: (\w+) +logits \[([^\]]+)\]", so)
    assert circuit and secure, so
    assert secure.groups() == circuit.groups() == ("positive", "-0.8188, 1.0266"), so
    assert "session 1 (" in out.stderr and ": done:" in out.stderr, out.stderr


def test_readme_families_snippet(built, tmp_path):
    [sh] = [b for b in blocks("sh") if "mnist-mlp" in b and "--family choco" in b]
    ports = {p: str(free_port()) for p in ("7461", "7462", "7463", "7464")}
    script = sh
    for info in ("mlp-info", "cnn-info", "fastgrnn-info"):
        script = script.replace(f"/tmp/{info}", str(tmp_path / info))
    for k, v in ports.items():
        script = script.replace(k, v)
    # $B is set by the README's first block; set -m gives the background servers job numbers
    script = f"set -m\nB={built}\n" + script
    out = subprocess.run(["bash", "-e", "-c", script], cwd=ROOT, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    # two GALA MLP samples, two CHOCO MLP samples, one CHOCO CNN sample and two FastGRNN
    # samples, each classified as its true label
    pairs = re.findall(r"secure: (\w+) +true label: (\w+)", out.stdout)
    assert len(pairs) == 7 and all(a == b for a, b in pairs), out.stdout
    assert "client sees every intermediate activation" in out.stdout + out.stderr, out.stdout


def test_readme_python_snippets_serve_log_print_and_stop_on_ctrl_c(built, tmp_path):
    server_code, client_code = blocks("python")[:2]
    port = free_port()
    info = tmp_path / "info"
    subprocess.run([str(built), "export-info", "--model", "models/imdb-relu-gru", "--out",
                    str(info)], cwd=ROOT, check=True, capture_output=True)
    srv = subprocess.Popen([sys.executable, "-c", substitute(server_code, port, info)], cwd=ROOT,
                           stderr=subprocess.PIPE, text=True)
    try:
        first = srv.stderr.readline()
        assert first.startswith(f"secinfer: listening on 127.0.0.1:{port}"), first
        cl = subprocess.run([sys.executable, "-c", substitute(client_code, port, info)], cwd=ROOT,
                            capture_output=True, text=True, timeout=600)
        assert cl.returncode == 0, cl.stderr
        lines = cl.stdout.splitlines()
        assert lines[0].startswith(
            "InferenceResult(prediction=1, label='positive', logits=[-0.8188, 1.0266], "
            "cost=Cost("), lines
        assert re.fullmatch(r"positive \d+\.\d{3} s online, \d+\.\d MB", lines[1]), lines
        srv.send_signal(signal.SIGINT)
        assert srv.wait(30) == 0, "Ctrl-C did not stop Server.serve cleanly"
        log = srv.stderr.read()
        assert re.search(r"secinfer: session 1 \(127\.0\.0\.1:\d+\): done: \d+\.\d{3} s, "
                         r"[\d.]+ MB \(GC [\d.]+ MB, HE [\d.]+ MB\)", log), log
        assert "stopped (Ctrl-C)" in log, log
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()
