"""Every real measurement in validation/*.csv stays within its pinned error (validation/pinned_errors.csv).

Estimates are deterministic, so this is an accuracy test, not a timing test: a change that makes the
model worse against real hardware fails here. After improving the model (or adding rows) run
``estimator validate pin=true`` and commit the new pins (validation/README.md).

Skips only when validation/ holds no measurement rows at all; a malformed CSV fails collection.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from estimator.validation import load_rows, predict
from estimator.validation.envelope import RECORD_DRIFT_PCT, read_record
from estimator.validation.pins import read_pins
from estimator.validation.predict import row_class
from estimator.validation.rows import PINS_FILE, RECORD_FILE, csv_files

FOLDER = Path(__file__).resolve().parents[1] / "validation"
ROWS = load_rows(FOLDER) if FOLDER.is_dir() and csv_files(FOLDER) else []
PINS = read_pins(FOLDER / PINS_FILE)
RECORD = {e.id: e for e in read_record(FOLDER / RECORD_FILE)}
REPIN = "run `estimator validate pin=true` and commit validation/pinned_errors.csv and validation/record.csv"


def test_there_are_measurements():
    if not ROWS:
        pytest.skip("validation/ has no measurement rows yet")
    assert {r.role for r in ROWS} <= {"calibration", "same-source", "independent"}


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_row_within_its_pinned_error(row):
    res = predict(row)
    pin = PINS.get(row.id)
    assert pin is not None, f"{row.where} {row.id} has no pinned error: {REPIN}"
    assert abs(res.error_pct) <= pin, (
        f"{row.where} {row.id}: |error| {abs(res.error_pct):.2f} % > pinned {pin:.1f} % "
        f"(predicted {res.predicted:.4g}, measured {row.measured:.4g} {row.unit}); the model got worse on this "
        f"measurement. If the change is intended and better overall, {REPIN}."
    )
    if row.kind == "llm":  # the record `estimator estimate` prints beside an LLM estimate stays current
        entry = RECORD.get(row.id)
        assert entry is not None, f"{row.id} is not in validation/record.csv: {REPIN}"
        assert (entry.cls, entry.role) == (row_class(row), row.role), f"{row.id}: record's class/role is stale: {REPIN}"
        assert abs(entry.error_pct - res.error_pct) <= RECORD_DRIFT_PCT, (
            f"{row.id}: recorded error {entry.error_pct:+.1f} % but the model now gives {res.error_pct:+.1f} %: {REPIN}")


def test_no_stale_pins():
    stale = sorted((set(PINS) | set(RECORD)) - {r.id for r in ROWS})
    assert not stale, f"pins for rows that no longer exist: {', '.join(stale)}; {REPIN}"
