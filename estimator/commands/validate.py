"""Run every public measurement in ``validation/*.csv`` through the model and compare.

  estimator validate                          # table (id, role, measured, predicted, error %) + summary
  estimator validate output=json
  estimator validate pin=true                 # also write validation/pinned_errors.csv (|error| + 2 points)
                                              # and validation/record.csv (each LLM row's class and error)
  estimator validate validation.dir=other/ store=results/other.duckdb
  estimator validate validation.only='a100x8-*'   # just the rows whose id matches (printed, not stored)
  estimator validate 'validation.unstate=[framework.tp_comm_overlap,parallelism.sequence_parallel]'
                      # llm rows as stated and without those keys (preset defaults): what a user who does not
                      # know them gets; refusals counted; printed, not stored

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
from dataclasses import replace
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from estimator.config import to_container
from estimator.errors import EstimatorError
from estimator.files import resolve_input
from estimator.validation import ROLES, load_rows, predict_all, summary
from estimator.validation.envelope import Entry, class_summary, describe, entry_of, write_record
from estimator.validation.pins import read_pins, violations, write_pins
from estimator.validation.predict import composed_config, predict, row_class
from estimator.validation.rows import PINS_FILE, RECORD_FILE, Row
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
    unstate = [str(k) for k in (opts.get("unstate") or [])]
    if unstate:
        return _unstated(rows, unstate, folder, tree)
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
        entries = [record_entry(res, rec) for res, rec in zip(results, out_rows, strict=True) if rec["run_class"]]
        out["record_written"] = str(write_record(pins_path.parent / RECORD_FILE, entries))
    else:
        out["pin_problems"] = violations(results, pins)
    return out


def record_entry(res: Any, rec: dict[str, Any]) -> Entry:
    """A large-model row's line of the validation record: its class, role and error, and what
    :func:`~estimator.validation.envelope.nearest` compares, from the row's composed config."""
    return entry_of(composed_config(res.row), rec["id"], rec["run_class"], rec["role"], rec["error_pct"])


def _unstated(rows: list[Row], keys: list[str], folder: Path, tree: dict[str, Any]) -> dict[str, Any]:
    """The llm rows priced twice, with their overrides and without the override keys ``keys`` (what a user who
    leaves those settings at the presets' defaults gets); a row the model refuses without them is counted as
    refused. Printed, not stored, no pins."""
    if tree.get("pin"):
        raise EstimatorError("pin=true pins the rows as stated; drop validation.unstate")
    rows = [r for r in rows if r.kind == "llm"]
    if not rows:
        raise EstimatorError(f"validation.unstate applies to llm rows; {folder} has none")
    out_rows, stated, unstated = [], [], []
    for row in rows:
        as_stated = predict(row)
        kept = tuple(o for o in row.overrides if o.lstrip("+").split("=", 1)[0] not in keys)
        entry = {"id": row.id, "role": row.role, "run_class": row_class(row), "dropped": len(row.overrides) - len(kept),
                 "error_pct": as_stated.error_pct, "unstated_error_pct": None, "refused": None}
        try:
            without = predict(replace(row, overrides=kept))
        except EstimatorError as exc:
            entry["refused"] = str(exc).split(f"row {row.id}: ", 1)[-1]
        else:
            entry["unstated_error_pct"] = without.error_pct
            stated.append(as_stated)
            unstated.append(without)
        out_rows.append(entry)
    # the same per-role figures as the summary of a plain run, over the rows priced both ways
    before = {s["role"]: s for s in summary(stated)}
    after = {s["role"]: s for s in summary(unstated)}
    groups = []
    for role in ROLES:
        mine = [r for r in out_rows if r["role"] == role]
        if mine:
            b, a = before.get(role, {}), after.get(role, {})
            groups.append({"role": role, "count": len(mine), "refused": sum(1 for r in mine if r["refused"]),
                           "mean_abs_error_pct": b.get("mean_abs_error_pct"),
                           "unstated_mean_abs_error_pct": a.get("mean_abs_error_pct"),
                           "max_abs_error_pct": b.get("max_abs_error_pct"),
                           "unstated_max_abs_error_pct": a.get("max_abs_error_pct")})
    return {"dir": str(folder), "store": None, "count": len(out_rows), "unstate": keys, "unstated_rows": out_rows,
            "unstated_summary": groups, "rows": [], "summary": [], "classes": []}


def classes(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Independent large-model rows per class of run: count, mean and max |error|, issue #23's verdict."""
    errors: dict[str, list[float]] = {}
    for r in rows:
        if r["kind"] == "llm" and r["role"] == "independent" and r.get("run_class") and r["error_pct"] is not None:
            errors.setdefault(r["run_class"], []).append(r["error_pct"])
    out = [{"run_class": cls, "validation_class": describe(cls), **class_summary(errs)} for cls, errs in errors.items()]
    return sorted(out, key=lambda c: (-c["count"], c["run_class"]))


def format_text(result: dict[str, Any]) -> str:
    if "unstate" in result:
        return _format_unstated(result)
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


def _format_unstated(result: dict[str, Any]) -> str:
    rows = result["unstated_rows"]
    width = max(len(r["id"]) for r in rows)
    lines = [f"llm rows priced with their overrides and without {', '.join(result['unstate'])} (preset defaults)",
             f"{'id':<{width}}  {'role':<11} {'dropped':>7} {'error%':>8} {'unstated%':>9}"]
    for r in rows:
        after = "refused" if r["refused"] else f"{r['unstated_error_pct']:>+9.1f}"
        lines.append(f"{r['id']:<{width}}  {r['role']:<11} {r['dropped']:>7} {r['error_pct']:>+8.1f} {after:>9}")
    lines += ["", f"{'group':<11} {'count':>5} {'refused':>7} {'mean|err|% as stated':>21} {'without':>8} "
              f"{'max|err|% as stated':>20} {'without':>8}"]
    for g in result["unstated_summary"]:
        def num(v):
            return "-" if v is None else f"{v:.1f}"
        lines.append(f"{g['role']:<11} {g['count']:>5} {g['refused']:>7} {num(g['mean_abs_error_pct']):>21} "
                     f"{num(g['unstated_mean_abs_error_pct']):>8} {num(g['max_abs_error_pct']):>20} "
                     f"{num(g['unstated_max_abs_error_pct']):>8}")
    lines.append("(means over the rows priced both ways; printed, not stored)")
    return "\n".join(lines)
