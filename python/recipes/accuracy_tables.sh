#!/usr/bin/env bash
# Reproduces docs/accuracy.md: trains every model of the tables (seeded, 2 threads) into $OUT and
# evaluates float / fx20 / fx8 on the full held-out splits. About 30-40 minutes on 2 cores.
#   bash python/recipes/accuracy_tables.sh [OUT]        (default /tmp/secinfer-accuracy)
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
export PYTHONUNBUFFERED=1
OUT=${1:-/tmp/secinfer-accuracy}
mkdir -p "$OUT"
T=python/recipes/train_classifier.py

for act in relu tanh; do
  # IMDB, the shipped model's sizes (models/imdb-relu-gru is the relu one, made by train_imdb.py)
  $PY $T --dataset imdb --activation $act --vocab 2000 --embed 32 --hidden 64 --max-len 100 \
    --epochs 3 --out "$OUT/imdb-$act-v2k-e32-t100" | tee "$OUT/imdb-$act-v2k-e32-t100.log"
  # IMDB at CryptoGRU's stated sizes: embedding 100, hidden 64, 30 steps (vocabulary 10,000)
  $PY $T --dataset imdb --activation $act --vocab 10000 --embed 100 --hidden 64 --max-len 30 \
    --epochs 3 --out "$OUT/imdb-$act-v10k-e100-t30" | tee "$OUT/imdb-$act-v10k-e100-t30.log"
  # spam e-mail (SpamAssassin standing in for Enron): subject + body, first 100 tokens
  $PY $T --dataset spam-assassin --activation $act --vocab 2000 --embed 32 --hidden 64 \
    --max-len 100 --epochs 5 --out "$OUT/spam-$act" | tee "$OUT/spam-$act.log"
  # SMS spam
  $PY $T --dataset sms-spam --activation $act --vocab 2000 --embed 32 --hidden 64 \
    --max-len 30 --epochs 5 --out "$OUT/sms-$act" | tee "$OUT/sms-$act.log"
done

$PY python/recipes/accuracy.py "$OUT"/imdb-* "$OUT"/spam-relu "$OUT"/spam-tanh "$OUT"/sms-* \
  --json "$OUT/classifiers.jsonl" | tee "$OUT/classifiers.log"

for act in relu tanh; do
  $PY python/recipes/train_ptb.py --activation $act --embed 100 --hidden 128 --bptt 30 --epochs 1 \
    --out "$OUT/ptb-$act" | tee "$OUT/ptb-$act.log"
done
