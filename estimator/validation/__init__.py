"""Validation against real hardware: public measurements in ``validation/*.csv`` run through the model.

* :mod:`~estimator.validation.rows` — the CSV formats and their checks (one line per problem);
* :mod:`~estimator.validation.predict` — each row through ``estimator collective`` / ``estimate``;
* :mod:`~estimator.validation.table` — the DuckDB ``validation`` table (replaced per run);
* :mod:`~estimator.validation.pins` — ``pinned_errors.csv``, so a change that makes the model worse fails.

Rule (validation/README.md): a row's ``role`` is ``calibration`` when a constant was fitted or
chosen using it, ``same-source`` when it is another point of the same curve, table or run as a
calibration row, ``independent`` otherwise; ``estimator validate`` and the report show the three
groups' errors apart.
"""

from __future__ import annotations

from estimator.validation.predict import Result, predict, predict_all
from estimator.validation.rows import ROLES, Row, load_rows

__all__ = ["ROLES", "Result", "Row", "load_rows", "predict", "predict_all", "summary"]


def summary(results: list[Result]) -> list[dict]:
    """Per (kind, role): count, mean |error| and max |error| in percent; kinds in name order, the
    roles of a kind as :data:`ROLES` orders them (calibration, same-source, independent)."""
    groups: dict[tuple[str, str], list[float]] = {}
    for res in results:
        groups.setdefault((res.row.kind, res.row.role), []).append(abs(res.error_pct))
    return [
        {"kind": kind, "role": role, "count": len(errs), "mean_abs_error_pct": sum(errs) / len(errs),
         "max_abs_error_pct": max(errs)}
        for (kind, role), errs in sorted(groups.items(), key=lambda kv: (kv[0][0], ROLES.index(kv[0][1])))
    ]
