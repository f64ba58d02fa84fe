#!/usr/bin/env python3
# Round-robin (order alternating per round) runs of `bench math` for two binaries and several
# functions; prints per-run lines and min/median/max summaries. Usage:
#   [PROFILE=lan|none|wan] [WARM=1] scripts/bench/math-ab.py ROUNDS base=BIN new=BIN -- fn1 fn2 ...
# WARM=1 runs two sessions per process (`--repeat 2`) and keeps the second: a heap already
# mapped, without the first run's fresh pages (which cost far more right after an idle spell on
# this VM; docs/history/benchmarks-by-session.md, "Session 9"). Both binaries must know `--repeat`.
import json, os, subprocess, sys, statistics, time
R = int(sys.argv[1]); i = sys.argv.index('--')
bins = [a.split('=', 1) for a in sys.argv[2:i]]; fns = sys.argv[i+1:]
res = {}
for r in range(R):
    for fn in fns:
        order = bins if r % 2 == 0 else bins[::-1]
        for lab, b in order:
            out = subprocess.run([b, 'bench', 'math', '--fn', fn, '--impl', 'opaf', '--n', '16384',
                                  '--profile', os.environ.get('PROFILE', 'lan'), '--json']
                                 + (['--repeat', '2'] if os.environ.get('WARM') else []),
                                 capture_output=True, text=True).stdout
            d = [json.loads(l) for l in out.splitlines() if l.startswith('{')][-1]
            ph = {k: v['time_s'] * 1e3 for k, v in d['phases'].items()}
            rec = dict(t=d['time_s'] * 1e3, setup=ph['setup'], off=ph['offline'], on=ph['online'],
                       on_b=d['bytes_per_item'], off_b=d['offline_bytes_per_item'], ulp=d['max_ulp'],
                       rounds=d['rounds'])
            res.setdefault((fn, lab), []).append(rec)
            print(time.strftime('%H:%M:%S', time.gmtime()), fn, lab,
                  ' '.join(f'{k}={v:.1f}' if isinstance(v, float) else f'{k}={v}' for k, v in rec.items()), flush=True)
print()
for fn in fns:
    for lab, _ in bins:
        rs = res[(fn, lab)]
        t = sorted(x['t'] for x in rs)
        med = lambda k: statistics.median(x[k] for x in rs)
        print(f"{fn:8s} {lab:5s} total min/med/max {t[0]:.1f} / {statistics.median(t):.1f} / {t[-1]:.1f} ms "
              f"(all: {', '.join(f'{x:.1f}' for x in t)}); setup/off/on medians {med('setup'):.1f} / {med('off'):.1f} / {med('on'):.1f}; "
              f"B/elem {rs[0]['on_b']:.3f} on + {rs[0]['off_b']:.3f} off = {rs[0]['on_b']+rs[0]['off_b']:.3f}; "
              f"rounds {rs[0]['rounds']}; max ULP {min(x['ulp'] for x in rs):.3f}-{max(x['ulp'] for x in rs):.3f}")
