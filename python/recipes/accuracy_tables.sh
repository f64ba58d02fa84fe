#!/usr/bin/env bash
# Reproduces docs/accuracy.md: trains every model of the tables (seeded, one torch thread unless THREADS is set) into $OUT and
# evaluates float / fx20 / fx8 on the full held-out splits. About 30-40 minutes on 2 idle cores
# (one torch thread: on a shared, loaded machine two threads were 4x slower per step).
#   bash python/recipes/accuracy_tables.sh [OUT]        (default /tmp/secinfer-accuracy)
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
export PYTHONUNBUFFERED=1
OUT=${1:-/tmp/secinfer-accuracy}
mkdir -p "$OUT"
T="python/recipes/train_classifier.py --threads ${THREADS:-1}"

# IMDB at the shipped model's sizes: the relu one is models/imdb-relu-gru (train_imdb.py)
$PY $T --dataset imdb --activation tanh --vocab 2000 --embed 32 --hidden 64 --max-len 100 \
  --epochs 3 --out "$OUT/imdb-tanh-v2k-e32-t100" | tee "$OUT/imdb-tanh-v2k-e32-t100.log"
for act in relu tanh; do
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

$PY python/recipes/accuracy.py models/imdb-relu-gru "$OUT"/imdb-tanh-v2k-e32-t100 "$OUT"/imdb-relu-v10k-e100-t30 \
  "$OUT"/imdb-tanh-v10k-e100-t30 "$OUT"/spam-relu "$OUT"/spam-tanh "$OUT"/sms-relu "$OUT"/sms-tanh \
  --json "$OUT/classifiers.jsonl" | tee "$OUT/classifiers.log"

for act in relu tanh; do
  $PY python/recipes/train_ptb.py --threads ${THREADS:-1} --activation $act --embed 100 --hidden 128 --bptt 30 --epochs 1 \
    --out "$OUT/ptb-$act" | tee "$OUT/ptb-$act.log"
done
