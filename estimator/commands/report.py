"""Build the static HTML report from the DuckDB store: ``estimator report``.

Writes ``reports/index.html`` and ``reports/figures/*.{png,svg,sql}`` (``report_dir=...`` to change).
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig

from estimator.reports.build import build_report

HELP = "build reports/index.html (figures + tables from SQL over the store)"


def run(cfg: DictConfig) -> dict[str, Any]:
    path = build_report(cfg.store, cfg.get("report_dir") or "reports")
    return {"report": str(path)}
