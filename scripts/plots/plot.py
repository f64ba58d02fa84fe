#!/usr/bin/env python3
"""Draws docs/benchmarks.md's figures from recorded `secinfer bench ... --json` output.

    python scripts/plots/plot.py [--data scripts/plots/data] [--out docs/img] [--tables]

Reads every ``*.jsonl`` under ``--data``: secinfer's own records (``secinfer.jsonl``, written by
``scripts/plots/record.sh``) and the peers' (``peers-*.jsonl``, written by
``scripts/peers/run.sh`` in the same schema, with the system in ``params.impl``). A line
``{"meta": {...}}`` says where and when a file was recorded and is not a record.

Writes one PNG per figure to ``--out``; with ``--tables`` also prints the Markdown tables that
docs/benchmarks.md shows, from the same records.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Dict, Iterable, List, Tuple

ROOT = Path(__file__).resolve().parents[2]

Record = Dict


def load(data_dir: Path) -> Tuple[List[Record], List[Dict]]:
    """All records and all meta lines under ``data_dir``; a malformed line is an error."""
    records, metas = [], []
    files = sorted(data_dir.glob("*.jsonl"))
    if not files:
        raise FileNotFoundError(f"{data_dir}: no *.jsonl bench records")
    for f in files:
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{f}:{n}: not JSON: {e}") from e
            if "meta" in obj:
                metas.append(dict(obj["meta"], file=f.name))
                continue
            for key in ("bench", "params", "time_s", "bytes_total"):
                if key not in obj:
                    raise ValueError(f"{f}:{n}: a bench record needs {key!r}")
            obj["_file"] = f.name
            records.append(obj)
    return records, metas


def system(r: Record) -> str:
    """Which system and implementation a record measures, as the figures label it."""
    p = r["params"]
    who = p.get("system", "secinfer")
    if r["bench"] == "math":
        return f"{who} {p.get('impl', '')}".strip()
    if r["bench"] == "gru":
        return f"{who} {p.get('variant', p.get('impl', ''))}".strip()
    return who


def human_bytes(b: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if b >= size:
            return f"{b / size:.3g} {unit}"
    return f"{b:.0f} B"


def human_time(s: float) -> str:
    if s >= 1:
        return f"{s:.3g} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} µs"


def select(records: Iterable[Record], bench: str, **params) -> List[Record]:
    return [r for r in records if r["bench"] == bench
            and all(r["params"].get(k) == v for k, v in params.items())]


def grouped_bars(ax, groups: List[str], series: Dict[str, Dict[str, float]], fmt, log: bool):
    """Bars per group (x) and series (colour); a missing value leaves a gap."""
    names = list(series)
    width = 0.8 / max(len(names), 1)
    for i, name in enumerate(names):
        xs, ys = [], []
        for g, group in enumerate(groups):
            if group in series[name]:
                xs.append(g + (i - (len(names) - 1) / 2) * width)
                ys.append(series[name][group])
        bars = ax.bar(xs, ys, width, label=name)
        for b, y in zip(bars, ys):
            ax.annotate(fmt(y), (b.get_x() + b.get_width() / 2, y), ha="center", va="bottom",
                        fontsize=6, rotation=90, xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(range(len(groups)), groups)
    if log:
        from matplotlib.ticker import FuncFormatter, NullFormatter

        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: fmt(v)))
        ax.yaxis.set_minor_formatter(NullFormatter())
    ax.legend(fontsize=7)


def fig_math(records, out: Path, profile: str) -> Path | None:
    rows = select(records, "math", n=16384, profile=profile)
    rows = [r for r in rows if r["params"].get("run", 1) == 1]
    if not rows:
        return None
    fns = [f for f in ("sigmoid", "tanh", "exp", "exp_neg", "relu")
           if any(r["params"]["fn"] == f for r in rows)]
    t: Dict[str, Dict[str, float]] = defaultdict(dict)
    b: Dict[str, Dict[str, float]] = defaultdict(dict)
    for r in rows:
        t[system(r)][r["params"]["fn"]] = r["time_s"]
        b[system(r)][r["params"]["fn"]] = r["bytes_total"]
    return _two_panels(out / f"math-{profile}.png",
                       f"2^14 elements, secret-shared, profile {profile}", fns, t, b)


def fig_gru(records, out: Path) -> Path | None:
    rows = [r for r in select(records, "gru", input=100, hidden=64, steps=30)]
    if not rows:
        return None
    profiles = [p for p in ("none", "lan", "wan") if any(r["params"]["profile"] == p for r in rows)]
    t: Dict[str, Dict[str, float]] = defaultdict(dict)
    b: Dict[str, Dict[str, float]] = defaultdict(dict)
    for r in rows:
        t[system(r)][r["params"]["profile"]] = r["time_s"]
        b[system(r)][r["params"]["profile"]] = r["bytes_total"]
    return _two_panels(out / "gru.png", "GRU(100,64,30), one inference", profiles, t, b)


def fig_ot(records, out: Path) -> Path | None:
    rows = [r for r in select(records, "ot") if r["params"].get("profile") == "none"]
    if not rows:
        return None
    label = lambda r: r["params"]["kind"] + (f"-k{r['params']['k']}" if "k" in r["params"] else "")
    kinds = [label(r) for r in rows]
    t = {"secinfer": {label(r): r["per_second"] / 1e6 for r in rows}}
    b = {"secinfer": {label(r): r["bytes_per_item"] for r in rows}}
    import matplotlib.pyplot as plt

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.4))
    grouped_bars(a1, kinds, t, lambda v: f"{v:.3g}", log=False)
    a1.set_ylabel("million OTs per second")
    grouped_bars(a2, kinds, b, lambda v: f"{v:.3g} B", log=True)
    a2.set_ylabel("bytes per OT (log scale)")
    for a in (a1, a2):
        a.tick_params(axis="x", labelsize=7)
        a.get_legend().remove()
    fig.suptitle("OT extension, 10^7 OTs, both parties on one machine", fontsize=9)
    fig.tight_layout()
    path = out / "ot.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _two_panels(path: Path, title: str, groups, t, b) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.6))
    grouped_bars(a1, groups, t, human_time, log=True)
    a1.set_ylabel("time (log scale)")
    grouped_bars(a2, groups, b, human_bytes, log=True)
    a2.set_ylabel("bytes both ways (log scale)")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def render(data_dir: Path, out: Path) -> List[Path]:
    """Every figure the records allow; returns the PNGs written."""
    import matplotlib

    matplotlib.use("Agg")
    records, _ = load(data_dir)
    out.mkdir(parents=True, exist_ok=True)
    made = [fig_math(records, out, "none"), fig_math(records, out, "lan"),
            fig_gru(records, out), fig_ot(records, out)]
    return [p for p in made if p is not None]


def tables(data_dir: Path) -> str:
    """docs/benchmarks.md's tables: one per bench, a row per record, human units."""
    records, metas = load(data_dir)
    by_bench: Dict[str, List[Record]] = defaultdict(list)
    for r in records:
        by_bench[r["bench"]].append(r)
    out = []
    for m in metas:
        out.append(f"<!-- {m['file']}: " + ", ".join(f"{k} {v}" for k, v in m.items()
                                                    if k != "file") + " -->")
    for bench, rows in by_bench.items():
        keys = [k for k in dict.fromkeys(k for r in rows for k in r["params"])
                if len({json.dumps(r["params"].get(k)) for r in rows}) > 1]
        out.append(f"\n#### {bench}\n")
        out.append("| " + " | ".join(keys + ["time", "online", "bytes", "rounds"]) + " |")
        out.append("|" + "---|" * (len(keys) + 4))
        for r in rows:
            online = r.get("phases", {}).get("online", {}).get("time_s")
            cells = [str(r["params"].get(k, "")) for k in keys]
            cells += [human_time(r["time_s"]), "" if online is None else human_time(online),
                      human_bytes(r["bytes_total"]),
                      "-" if r.get("rounds") is None else str(r["rounds"])]
            out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT / "scripts" / "plots" / "data")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    ap.add_argument("--tables", action="store_true", help="also print the Markdown tables")
    a = ap.parse_args(argv)
    for p in render(a.data, a.out):
        print(f"wrote {p}", file=sys.stderr)
    if a.tables:
        print(tables(a.data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
