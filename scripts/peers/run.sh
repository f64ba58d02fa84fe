#!/usr/bin/env bash
# Installs each peer in its own virtualenv (.peers/NAME, from PyPI only) and runs it on the
# same work as secinfer's benches, writing scripts/plots/data/peers-NAME.jsonl for
# scripts/plots/plot.py. Not part of `make test`: the installs are large (see README.md here).
#   scripts/peers/run.sh [spu] [crypten] [concrete-ml]
set -euo pipefail
cd "$(dirname "$0")/../.."
PEERS=("$@")
[ ${#PEERS[@]} -gt 0 ] || PEERS=(spu crypten concrete-ml)
DATA=scripts/plots/data
# CrypTen 0.4.1 (PyPI's latest) imports torch.onnx internals that torch 1.13 removed, and its
# encoder passes floats where Python 3.10+ wants integers ("'float' object cannot be
# interpreted as an integer", fixed only in CrypTen's unreleased source): it needs torch 1.12
# on Python 3.9 (PY39, default `python3.9`).
PY39=${PY39:-python3.9}

venv() {  # venv NAME PYTHON PIP-ARGS...
  local name=$1 py=$2; shift 2
  if [ ! -f ".peers/$name/.installed" ]; then
    echo "== installing $name into .peers/$name (pip shows download progress)" >&2
    "$py" -m venv ".peers/$name"
    ".peers/$name/bin/pip" install --progress-bar on "$@"
    touch ".peers/$name/.installed"
  fi
}

meta() {
  printf '{"meta": {"date": "%s", "peer": "%s", "cpus": %s, "loadavg": "%s"}}\n' \
    "$(date -u +%FT%TZ)" "$1" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)"
}

for p in "${PEERS[@]}"; do
  case "$p" in
    spu)
      venv spu python3 spu==0.9.5
      { meta spu; .peers/spu/bin/python scripts/peers/bench_spu.py; } > "$DATA/peers-spu.jsonl.tmp" ;;
    crypten)
      command -v "$PY39" >/dev/null || { echo "run.sh: crypten needs $PY39 (set PY39)" >&2; exit 1; }
      # crypten 0.4.1 still lists the retired `sklearn` alias package, whose install refuses
      # unless told that the deprecated name is meant (it only pulls in scikit-learn). torch
      # 1.12 was built against NumPy 1.x and cannot use NumPy 2.
      SKLEARN_ALLOW_DEPRECATED_SKLEARN_PACKAGE_INSTALL=True venv crypten "$PY39" torch==1.12.1 torchvision==0.13.1 crypten==0.4.1 "numpy<2"
      { meta crypten; .peers/crypten/bin/python scripts/peers/bench_crypten.py; } > "$DATA/peers-crypten.jsonl.tmp" ;;
    concrete-ml)
      venv concrete-ml python3 concrete-ml==1.9.0
      { meta concrete-ml; .peers/concrete-ml/bin/python scripts/peers/bench_concrete.py; } > "$DATA/peers-concrete-ml.jsonl.tmp" ;;
    *) echo "run.sh: unknown peer $p (spu, crypten, concrete-ml)" >&2; exit 2 ;;
  esac
  mv "$DATA/peers-$p.jsonl.tmp" "$DATA/peers-$p.jsonl"
  echo "wrote $DATA/peers-$p.jsonl" >&2
done
