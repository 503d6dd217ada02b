"""Build the static HTML report from the DuckDB store: ``estimator report``.

Writes ``reports/index.html`` and ``reports/figures/*.{svg,sql,csv}`` (``report_dir=...`` to
change); one progress line per section goes to stderr (the pipeline's ``results/logs/report.log``),
and one ``report: figure check: ...`` line for anything a figure check finds (docs/report.md).
The report folder is checked before the store is opened; a store that cannot be read (missing,
damaged, locked for longer than the wait) is one error line.
"""

from __future__ import annotations

import sys
from typing import Any

from omegaconf import DictConfig

from estimator.config_checks import check_output_dir
from estimator.errors import EstimatorError

HELP = "build reports/index.html (figures + tables from SQL over the store)"


def run(cfg: DictConfig) -> dict[str, Any]:
    import duckdb

    from estimator.reports.build import build_report
    from estimator.store.spill import pending

    out = check_output_dir(str(cfg.get("report_dir") or "reports"), "report_dir")
    waiting = pending(cfg.store)
    if waiting:
        print(f"note: {len(waiting)} spilled write(s) in {cfg.store}.spill/ are not in the store yet "
              "(the next write, e.g. estimator sweep, merges them)", file=sys.stderr)
    try:
        path = build_report(cfg.store, out, progress=lambda message: print(message, file=sys.stderr, flush=True))
    except duckdb.Error as exc:
        raise EstimatorError(f"{cfg.store}: cannot build the report ({str(exc).strip().splitlines()[0][:160]})") from None
    except OSError as exc:
        raise EstimatorError(f"{exc.filename or out}: cannot write the report ({exc.strerror or exc})") from None
    return {"report": str(path)}
