#!/usr/bin/env python3
"""Exports the real data sets `secinfer bench choco --app` runs on, from the packages that ship
them: Zachary's karate-club graph (networkx) and Fisher's iris (scikit-learn).

    python scripts/choco/app_data.py   # writes data/choco/karate.edges and data/choco/iris.csv
"""
from pathlib import Path

import networkx as nx
from sklearn.datasets import load_iris

out = Path(__file__).resolve().parents[2] / "data" / "choco"
out.mkdir(parents=True, exist_ok=True)
g = nx.karate_club_graph()
edges = sorted((min(u, v), max(u, v)) for u, v in g.edges())
(out / "karate.edges").write_text(
    f"# Zachary's karate club (networkx {nx.__version__}): {g.number_of_nodes()} nodes, "
    f"{len(edges)} undirected edges, one 'u v' per line\n"
    + "".join(f"{u} {v}\n" for u, v in edges))
iris = load_iris()
rows = [",".join(f"{v:g}" for v in x) + f",{y}" for x, y in zip(iris.data, iris.target)]
(out / "iris.csv").write_text(
    "# Fisher's iris (scikit-learn): sepal length, sepal width, petal length, petal width (cm), "
    "class 0-2\n" + "\n".join(rows) + "\n")
print(f"wrote {out}/karate.edges ({len(edges)} edges) and {out}/iris.csv ({len(rows)} rows)")
