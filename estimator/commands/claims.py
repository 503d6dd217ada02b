"""Compute every paper claim by SQL over the store and write the ``claims`` table: ``estimator claims``.

  estimator claims                      # then `estimator report` renders them
  estimator claims write=false          # compute and print the verdict counts, write nothing
  estimator claims store=results/other.duckdb output=json

Each row is judged by a named rule (estimator/reports/rules.py); the columns are described in
estimator/reports/claims.py and docs/claims.md. The table is replaced in one transaction, so a
failed run leaves the previous one. The pipeline (workflow/Snakefile) runs this before the report.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from estimator.config import to_container
from estimator.errors import EstimatorError
from estimator.reports.claims import COLUMNS, TYPES, collect

HELP = "compute the paper claims by SQL over the store and write the `claims` table"
CONFIG_NAME = "claims"


def _write(store: str | Path, rows: list[dict[str, Any]]) -> None:
    from estimator.store.duckdb_store import connect

    with connect(store) as con:
        con.execute("BEGIN")
        con.execute("CREATE OR REPLACE TABLE claims (" + ", ".join(f"{c} {TYPES[c]}" for c in COLUMNS) + ")")
        if rows:
            con.executemany(f"INSERT INTO claims VALUES ({', '.join('?' for _ in COLUMNS)})",
                            [[r[c] for c in COLUMNS] for r in rows])
        con.execute("COMMIT")


def run(cfg: Any) -> dict[str, Any]:
    from estimator.store.duckdb_store import connect

    tree = to_container(cfg)
    store = tree["store"]
    if not Path(store).exists():
        raise EstimatorError(f"store={store}: no results store yet (run `estimator sweep experiment=...` first)")
    with connect(store, read_only=True) as con:
        rows = collect(con)
    if tree.get("write", True):
        _write(store, rows)
    counts: dict[str, Counter] = {}
    for r in rows:
        if r["default_reading"]:
            counts.setdefault(r["paper"], Counter())[r["verdict"]] += 1
    return {"store": str(store), "written": bool(tree.get("write", True)), "claims": len(rows),
            "per_paper": {p: dict(c) for p, c in sorted(counts.items())}}


def format_text(result: dict[str, Any]) -> str:
    lines = [f"{result['claims']} claim rows {'written to' if result['written'] else 'computed from'} "
             f"{result['store']} (table claims)"]
    for paper, c in result["per_paper"].items():
        lines.append(f"  {paper}: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
    return "\n".join(lines)
