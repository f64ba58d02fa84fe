#!/usr/bin/env python3
"""Write a seeded sample of a held-out split as JSON lines {"text", "label"} (for `secinfer infer --samples`).

    python python/recipes/make_samples.py --dataset imdb --n 200 --seed 3 --out /tmp/secure-sample.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from secinfer import datasets  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="imdb", choices=sorted(datasets.LOADERS))
    p.add_argument("--n", type=int, default=200)
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    ds = datasets.load_text(args.dataset)
    idx = datasets.sample_texts(ds.test, args.n, seed=args.seed)
    with open(args.out, "w", encoding="utf-8") as f:
        for i in idx:
            f.write(json.dumps({"text": ds.test.texts[i], "label": ds.label_names[ds.test.labels[i]]}) + "\n")
    print(f"wrote {len(idx)} held-out {ds.name} items to {args.out}")


if __name__ == "__main__":
    main()
