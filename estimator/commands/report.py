"""Build the static HTML report from the DuckDB store: ``estimator report``.

Writes ``reports/index.html`` and ``reports/figures/*.{png,svg,sql,csv}`` (``report_dir=...`` to
change); one progress line per section goes to stderr (the pipeline's ``results/logs/report.log``).
"""

from __future__ import annotations

import sys
from typing import Any

from omegaconf import DictConfig

from estimator.reports.build import build_report

HELP = "build reports/index.html (figures + tables from SQL over the store)"


def run(cfg: DictConfig) -> dict[str, Any]:
    path = build_report(cfg.store, cfg.get("report_dir") or "reports",
                        progress=lambda message: print(message, file=sys.stderr, flush=True))
    return {"report": str(path)}
