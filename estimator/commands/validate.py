"""Run every public measurement in ``validation/*.csv`` through the model and compare.

  estimator validate                          # table (id, role, measured, predicted, error %) + summary
  estimator validate output=json
  estimator validate pin=true                 # also write validation/pinned_errors.csv (|error| + 2 points)
                                              # and validation/record.csv (each LLM row's class and error)
  estimator validate validation.dir=other/ store=results/other.duckdb
  estimator validate validation.only='a100x8-*'   # just the rows whose id matches (printed, not stored)

Every row is checked first (a malformed row: one line naming file, line and column, exit 2,
nothing written). nccl-tests rows are priced as ``estimator collective ... algorithm=auto`` and
compared as nccl-tests bus bandwidth; training rows as ``estimator estimate ...`` samples/s. The
results replace the DuckDB table ``validation`` in one transaction. The summary gives mean and max
|error| per kind and group (calibration / same-source / independent: validation/README.md), then the
independent large-model rows per class of run with issue #23's verdict on each (the rule
``estimator estimate`` prints beside a hybrid estimate: estimator/validation/envelope.py).
"""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from estimator.config import to_container
from estimator.errors import EstimatorError
from estimator.files import resolve_input
from estimator.validation import load_rows, predict_all, summary
from estimator.validation.envelope import Entry, class_summary, describe, write_record
from estimator.validation.pins import read_pins, violations, write_pins
from estimator.validation.rows import PINS_FILE, RECORD_FILE
from estimator.validation.table import record, replace_validation

HELP = "run validation/*.csv (real-hardware measurements) through the model; store + pin the errors"
CONFIG_NAME = "validate"


def run(cfg: DictConfig) -> dict[str, Any]:
    tree = to_container(cfg)
    opts = tree.get("validation") or {}
    folder = resolve_input(opts.get("dir") or "validation")
    pins_path = Path(opts["pins"]) if opts.get("pins") else folder / PINS_FILE
    rows = load_rows(folder)
    if not rows:  # a wrong folder must not empty the stored table
        raise EstimatorError(f"{folder}: no measurement rows (*.csv, format in validation/README.md); "
                             "the stored validation table is left as it was")
    only = opts.get("only")
    if only:
        if tree.get("pin"):
            raise EstimatorError("pin=true pins every row; drop validation.only")
        rows = [r for r in rows if fnmatch.fnmatchcase(r.id, str(only))]
        if not rows:
            raise EstimatorError(f"validation.only={only!r} matches no row id in {folder}")
    pins = {} if tree.get("pin") else read_pins(pins_path)
    results = predict_all(rows)
    if not only:  # a partial run never replaces the table of the last full run
        replace_validation(tree["store"], results)
    out_rows = []
    for res in results:
        rec = record(res, "")
        rec.pop("created_at")
        rec["pin_pct"] = pins.get(res.row.id)
        out_rows.append(rec)
    out: dict[str, Any] = {"dir": str(folder), "store": None if only else str(tree["store"]), "count": len(results),
                           "rows": out_rows, "summary": summary(results), "classes": classes(out_rows)}
    if tree.get("pin"):
        out["pins_written"] = str(write_pins(pins_path, results, float(opts.get("margin_pct", 2.0))))
        entries = [Entry(r["id"], r["run_class"], r["role"], r["error_pct"]) for r in out_rows if r["run_class"]]
        out["record_written"] = str(write_record(pins_path.parent / RECORD_FILE, entries))
    else:
        out["pin_problems"] = violations(results, pins)
    return out


def classes(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Independent large-model rows per class of run: count, mean and max |error|, issue #23's verdict."""
    errors: dict[str, list[float]] = {}
    for r in rows:
        if r["kind"] == "llm" and r["role"] == "independent" and r.get("run_class") and r["error_pct"] is not None:
            errors.setdefault(r["run_class"], []).append(r["error_pct"])
    out = [{"run_class": cls, "validation_class": describe(cls), **class_summary(errs)} for cls, errs in errors.items()]
    return sorted(out, key=lambda c: (-c["count"], c["run_class"]))


def format_text(result: dict[str, Any]) -> str:
    if not result["rows"]:
        return f"no measurement rows in {result['dir']} (validation/README.md describes the format); " \
               f"table validation emptied in {result['store']}"
    width = max(len(r["id"]) for r in result["rows"])
    lines = [f"{'id':<{width}}  {'kind':<8} {'role':<11} {'measured':>11} {'predicted':>11} {'unit':<9} "
             f"{'error%':>8} {'pin%':>6}"]
    for r in result["rows"]:
        pin = "" if r["pin_pct"] is None else f"{r['pin_pct']:.1f}"
        flag = " !" if r["pin_pct"] is not None and abs(r["error_pct"]) > r["pin_pct"] else ""
        lines.append(f"{r['id']:<{width}}  {r['kind']:<8} {r['role']:<11} {r['measured']:>11.1f} "
                     f"{r['predicted']:>11.1f} {r['unit']:<9} {r['error_pct']:>+8.1f} {pin:>6}{flag}")
    lines += ["", f"{'kind':<8} {'group':<11} {'count':>5} {'mean|err|%':>10} {'max|err|%':>9}"]
    for s in result["summary"]:
        lines.append(f"{s['kind']:<8} {s['role']:<11} {s['count']:>5} {s['mean_abs_error_pct']:>10.1f} "
                     f"{s['max_abs_error_pct']:>9.1f}")
    if result.get("classes"):
        cw = max(len(c["run_class"]) for c in result["classes"])
        lines += ["", "independent llm rows by class of run (issue #23's rule: mean <= 10 %, max <= 20 %)",
                  f"{'class':<{cw}} {'count':>5} {'mean|err|%':>10} {'max|err|%':>9}  verdict"]
        lines += [f"{c['run_class']:<{cw}} {c['count']:>5} {c['mean_abs_error_pct']:>10.1f} {c['max_abs_error_pct']:>9.1f}"
                  f"  {c['verdict']}" for c in result["classes"]]
    lines.append("")
    lines.append(f"{result['count']} rows -> table validation in {result['store']}" if result["store"]
                 else f"{result['count']} rows (validation.only: not stored)")
    if "pins_written" in result:
        lines.append(f"pins written: {result['pins_written']}; record written: {result['record_written']}")
    elif result["pin_problems"]:
        unpinned = [p for p in result["pin_problems"] if ": no pin (" in p]
        over = [p for p in result["pin_problems"] if p not in unpinned]
        lines.append(f"{len(over)} row(s) over their pin, {len(unpinned)} without a pin "
                     f"(tests/test_validation_suite.py fails on them; `estimator validate pin=true` re-pins):")
        lines += [f"  {p}" for p in over[:20]]
        lines += [f"  {p.split(': no pin')[0]}: no pin" for p in unpinned[:5]]
        if len(unpinned) > 5:
            lines.append(f"  ... {len(unpinned) - 5} more without a pin")
    return "\n".join(lines)
