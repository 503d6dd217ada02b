"""Pinned errors (``validation/pinned_errors.csv``: ``id,max_abs_error_pct``).

``estimator validate pin=true`` writes, for every row, its current |error| plus a margin
(``validation.margin_pct``, default 2 percentage points) rounded up to 0.1; the test
``tests/test_validation_suite.py`` fails when a row's |error| exceeds its pin, so a change that makes
the model worse against real hardware fails. Make the model better, then re-pin to tighten.
The margin only absorbs deliberate small trade-offs; it is not a tolerance for noise (estimates are
deterministic).
"""

from __future__ import annotations

import math
from pathlib import Path

from estimator.errors import EstimatorError
from estimator.validation.predict import Result
from estimator.validation.rows import number, read_written, write_written

HEADER = ("id", "max_abs_error_pct")


def read_pins(path: str | Path) -> dict[str, float]:
    """id -> pinned max |error| in percent (empty when the file does not exist)."""
    pins: dict[str, float] = {}
    for lineno, (ident, text) in read_written(path, HEADER, "pins"):
        value = number(text)
        if not (math.isfinite(value) and value >= 0):
            raise EstimatorError(f"{Path(path).name}:{lineno}: column max_abs_error_pct: {text!r} is not a number >= 0")
        if ident in pins:
            raise EstimatorError(f"{Path(path).name}:{lineno}: column id: duplicate id {ident!r}")
        pins[ident] = value
    return pins


def pin_value(error_pct: float, margin_pct: float) -> float:
    """|error| + margin, rounded up to one decimal."""
    return math.ceil((abs(error_pct) + margin_pct) * 10 - 1e-9) / 10


def write_pins(path: str | Path, results: list[Result], margin_pct: float) -> Path:
    if not (math.isfinite(margin_pct) and margin_pct >= 0):
        raise EstimatorError(f"validation.margin_pct must be a number >= 0, got {margin_pct!r}")
    lines = [[res.row.id, f"{pin_value(res.error_pct, margin_pct):.1f}"] for res in sorted(results, key=lambda r: r.row.id)]
    return write_written(path, HEADER, lines)


def violations(results: list[Result], pins: dict[str, float]) -> list[str]:
    """One line per row whose |error| exceeds its pin or that has no pin."""
    out = []
    for res in results:
        pin = pins.get(res.row.id)
        if pin is None:
            out.append(f"{res.row.where} {res.row.id}: no pin (run `estimator validate pin=true` and commit "
                       f"validation/pinned_errors.csv)")
        elif abs(res.error_pct) > pin:
            out.append(f"{res.row.where} {res.row.id}: |error| {abs(res.error_pct):.2f} % exceeds its pin "
                       f"{pin:.1f} % (predicted {res.predicted:.4g} vs measured {res.row.measured:.4g} {res.row.unit})")
    return out
