"""List every table and column of the results store with its type and unit: ``estimator tables``.

    estimator tables [store=results/estimates.duckdb] [output=json]

Units follow the column-name conventions of the project (SI units named in the name): ``_s``
seconds, ``_Bps`` bytes/s, ``_bps`` bits/s, ``bytes`` bytes, ``flops`` floating-point operations,
``samples_per_s`` samples/s, ``_hash`` an identity; counts are plain numbers.
"""

from __future__ import annotations

import re
from typing import Any

from omegaconf import DictConfig

from estimator.store.duckdb_store import connect

HELP = "list every table and column of the results store, with units"

#: (pattern on the column name, unit), first match wins
UNITS = (
    (r"_pct$", "%"), (r"samples_per_s", "samples/s"), (r"tokens_per_s", "tokens/s"), (r"^tflops_per_gpu$", "TFLOP/s per GPU"),
    (r"_per_s$", "1/s (rate)"), (r"_Bps$", "bytes/s"), (r"_bps$", "bits/s"),
    (r"_GBps$", "GB/s"), (r"_ms$", "ms"), (r"_us$", "µs"), (r"_ns$", "ns"), (r"(^|_)s$|_s$", "s"),
    (r"bytes", "bytes"), (r"flops", "FLOP"), (r"_hash$", "identity (hash of the resolved config)"),
    (r"(^|_)(nodes|devices|gpus|ranks|steps|tensors|idx|count|num_\w+|points|depth|seed|batch\w*|group_size|stride"
     r"|count_per_step|tp|pp|dp|ep|zero|microbatches|virtual_stages|grad_accum|params|requests|placed|rejected\w*"
     r"|capacity|overallocated|max_size|wavelengths|k_star|k_best|sent|received|lost|packets\w*)$", "count"),
    (r"(^|_)(jobs|jobs_slowed|iterations|leaves|pods|job|job_id|cluster_jobs)$", "count"),
    (r"(slowdown|stretch|factor|duty|error)", "ratio"),
    (r"(^|_)(share|ratio|load|locality|efficiency|utili[sz]ation|speedup|throughput|offered|mfu)(_|$)", "fraction / ratio"),
    (r"_json$", "JSON text"), (r"created_at", "UTC time"),
)


def unit_of(column: str) -> str:
    for pattern, unit in UNITS:
        if re.search(pattern, column):
            return unit
    return ""


def run(cfg: DictConfig) -> list[dict[str, Any]]:
    with connect(cfg.store, read_only=True) as con:
        rows = con.execute(
            "SELECT c.table_name, c.column_name, c.data_type, t.estimated_size FROM information_schema.columns c "
            "JOIN duckdb_tables() t ON t.table_name = c.table_name "
            "ORDER BY c.table_name, c.ordinal_position").fetchall()
    return [{"table": t, "rows": n, "column": c, "type": d, "unit": unit_of(c)} for t, c, d, n in rows]


def format_text(result: list[dict[str, Any]]) -> str:
    lines, current = [], None
    for r in result:
        if r["table"] != current:
            current = r["table"]
            lines.append(f"{'' if not lines else chr(10)}{current}  (~{r['rows']} rows)")
        lines.append(f"  {r['column']:<34} {r['type']:<10} {r['unit']}".rstrip())
    return "\n".join(lines) or "(no tables yet)"
