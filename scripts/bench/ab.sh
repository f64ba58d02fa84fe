#!/bin/bash
# usage: scripts/bench/ab.sh ROUNDS -- label1=/path/bin1 label2=/path/bin2 -- bench args...
# prints label, time_s, bytes_total per run, round-robin (order alternates per round)
R=$1; shift; shift
bins=(); while [ "$1" != "--" ]; do bins+=("$1"); shift; done; shift
for r in $(seq 1 $R); do
  if (( r % 2 )); then order=("${bins[@]}"); else order=(); for ((i=${#bins[@]}-1;i>=0;i--)); do order+=("${bins[$i]}"); done; fi
  for lb in "${order[@]}"; do
    l=${lb%%=*}; b=${lb#*=}
    "$b" "$@" --json 2>/dev/null | python3 -c "
import json,sys
for line in sys.stdin:
  line=line.strip()
  if not line.startswith('{'): continue
  d=json.loads(line); print('$l', round(d.get('time_s',0),4), d.get('bytes_total'), {k:round(v['time_s'],4) for k,v in d.get('phases',{}).items()})
"
  done
done
