#!/bin/bash
# usage: scripts/bench/he-ops-ab.sh ROUNDS THREADS bin1 bin2 ... ; prints per run: rotate, lazy HstPerm, marginal lazy in a 16-sum, ratios
R=$1; TH=$2; shift 2
for r in $(seq 1 $R); do
  if (( r % 2 )); then order=("$@"); else order=(); for ((i=$#;i>=1;i--)); do order+=("${!i}"); done; fi
  for b in "${order[@]}"; do
    RAYON_NUM_THREADS=$TH $b bench he-ops --params n4096 --iters 300 --json 2>/dev/null | python3 -c "
import json,sys
d={}
for l in sys.stdin:
  if l.startswith('{'):
    j=json.loads(l); d[j['op']]=j['micros']
rot=d['rotate (Perm)']; lazy=d['rotate_hoisted_ext (lazy HstPerm)']
marg=(d['16 lazy hoisted rotations summed, 1 mod-down']-d['1 lazy hoisted rotation incl. DecPerm, mod-down'])/15
print('%-28s th=$TH ntt %.2f rot %.1f lazy %.1f (x%.2f) marginal %.1f (x%.2f)'%('$b',d['ntt_fwd (one prime)'],rot,lazy,rot/lazy,marg,rot/marg))
"
  done
done
