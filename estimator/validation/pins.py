"""Pinned errors (``validation/pinned_errors.csv``: ``id,max_abs_error_pct``).

``estimator validate pin=true`` writes, for every row, its current |error| plus a margin
(``validation.margin_pct``, default 2 percentage points) rounded up to 0.1; the test
``tests/test_validation_suite.py`` fails when a row's |error| exceeds its pin, so a change that makes
the model worse against real hardware fails. Make the model better, then re-pin to tighten.
The margin only absorbs deliberate small trade-offs; it is not a tolerance for noise (estimates are
deterministic).
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from estimator.errors import EstimatorError
from estimator.files import decode_text, read_input, write_atomic
from estimator.validation.predict import Result

HEADER = ("id", "max_abs_error_pct")


def read_pins(path: str | Path) -> dict[str, float]:
    """id -> pinned max |error| in percent (empty when the file does not exist)."""
    path = Path(path)
    if not path.exists():
        return {}
    text = decode_text(read_input(path, "pins"), path, "pins file")  # a regular file, size-bounded
    reader = csv.reader(text.splitlines())
    header = tuple(h.strip() for h in next(reader, ()))
    if header != HEADER:
        raise EstimatorError(f"{path.name}:1: header must be {','.join(HEADER)}, got {','.join(header)!r}")
    pins: dict[str, float] = {}
    for lineno, values in enumerate(reader, start=2):
        if not values:
            continue
        if len(values) != 2:
            raise EstimatorError(f"{path.name}:{lineno}: expected 2 fields (id,max_abs_error_pct), got {len(values)}")
        ident, text = values[0].strip(), values[1].strip()
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value >= 0):
            raise EstimatorError(f"{path.name}:{lineno}: column max_abs_error_pct: {text!r} is not a number >= 0")
        if ident in pins:
            raise EstimatorError(f"{path.name}:{lineno}: column id: duplicate id {ident!r}")
        pins[ident] = value
    return pins


def pin_value(error_pct: float, margin_pct: float) -> float:
    """|error| + margin, rounded up to one decimal."""
    return math.ceil((abs(error_pct) + margin_pct) * 10 - 1e-9) / 10


def write_pins(path: str | Path, results: list[Result], margin_pct: float) -> Path:
    if not (math.isfinite(margin_pct) and margin_pct >= 0):
        raise EstimatorError(f"validation.margin_pct must be a number >= 0, got {margin_pct!r}")
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(HEADER)
    for res in sorted(results, key=lambda r: r.row.id):
        writer.writerow([res.row.id, f"{pin_value(res.error_pct, margin_pct):.1f}"])
    return write_atomic(path, buf.getvalue())


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
