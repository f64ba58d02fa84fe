#!/usr/bin/env bash
# Records the secinfer figures docs/benchmarks.md shows and plots: every bench's --json output,
# one record per line, into scripts/plots/data/secinfer.jsonl (the first line says when, where,
# on which commit and under what load). Then: python scripts/plots/plot.py --tables
#   B=path/to/secinfer scripts/plots/record.sh [OUT]
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${B:-target/release/secinfer}
OUT=${1:-scripts/plots/data/secinfer.jsonl}
[ -x "$B" ] || { echo "record.sh: $B not built (cargo build --release -p secinfer-cli)" >&2; exit 1; }
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
meta() {
  printf '{"meta": {"date": "%s", "commit": "%s", "cpus": %s, "cpu": "%s", "loadavg_%s": "%s"}}\n' \
    "$(date -u +%FT%TZ)" "$(git rev-parse --short HEAD)" "$(nproc)" \
    "$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)" "$1" "$(cut -d' ' -f1-3 /proc/loadavg)"
}
run() { echo "+ secinfer $*" >&2; "$B" "$@" --json >> "$tmp"; }
meta start >> "$tmp"
# OT extension: 10^7 OTs per kind
run bench ot --kind cot --count 10000000
run bench ot --kind softspoken --count 10000000
run bench ot --kind ferret --count 10000000
# garbled activations on 2^14 shared values (8-bit, shares mod 2^8)
for f in relu sigmoid tanh; do run bench gc --fn "$f" --bits 8 --count 16384; done
# secret-sharing math on 2^14 elements, OPAF and SIRNN, no shaping and the lan profile
for p in none lan; do
  for f in sigmoid tanh exp relu; do
    run bench math --fn "$f" --impl opaf --n 16384 --profile "$p"
    # SIRNN has no exponential for general inputs (only x <= 0: exp_neg)
    [ "$f" = exp ] || run bench math --fn "$f" --impl sirnn --n 16384 --profile "$p"
  done
done
# HE linear layers
run bench he-matvec --method gazelle,gala --rows 16 --cols 128
run bench he-conv --method gazelle,gala
# the secure GRU (CryptoGRU Table 3's cell) per variant and profile
for p in none lan wan; do run bench gru --input 100 --hidden 64 --steps 30 --variant cg2 --profile "$p"; done
for v in cg1 baseline; do run bench gru --input 100 --hidden 64 --steps 30 --variant "$v" --profile lan; done
# whole networks: GALA's MNIST MLP (family hegc), CHOCO's client-aided MLP, OPAF's FastGRNN
for p in lan wan; do run bench net --model models/mnist-mlp --profile "$p"; done
run bench choco --arch mlp --samples 3
for m in opaf sirnn; do run bench fastgrnn --input 32 --hidden 100 --steps 99 --math "$m" --profile lan; done
meta end >> "$tmp"
mv "$tmp" "$OUT"
trap - EXIT
echo "wrote $OUT" >&2
