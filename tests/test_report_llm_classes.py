"""The report's large-model verdicts: issue #23's rule (mean |error| <= 10 %, max <= 20 %) per class of
run and over all independent rows, judged from the validation table (DuckDB), both ways."""

from __future__ import annotations

import duckdb

from estimator.reports.sections import validation as v


def _con(rows):
    con = duckdb.connect()
    con.execute("CREATE TABLE validation (id VARCHAR, kind VARCHAR, role VARCHAR, run_class VARCHAR, error_pct DOUBLE, "
                "validation_class VARCHAR)")
    con.executemany("INSERT INTO validation VALUES (?, ?, ?, ?, ?, ?)", [(*r, r[3] and r[3].upper()) for r in rows])
    return con


ROWS = [
    # a class that holds: mean 5, max 8
    ("a1", "llm", "independent", "megatron/le16k", 2.0), ("a2", "llm", "independent", "megatron/le16k", -5.0),
    ("a3", "llm", "independent", "megatron/le16k", 8.0),
    # one that fails on its max alone (mean 9.3 <= 10, max 21 > 20)
    ("b1", "llm", "independent", "fsdp/le16k/ac", 21.0), ("b2", "llm", "independent", "fsdp/le16k/ac", 3.0),
    ("b3", "llm", "independent", "fsdp/le16k/ac", -4.0),
    # too few rows for a verdict
    ("c1", "llm", "independent", "deepspeed/le16k", 1.0),
    # not counted: a calibration row, an nccl row, a row the model refused (no error)
    ("d1", "llm", "calibration", "megatron/le16k", 90.0), ("d2", "nccl", "independent", None, 90.0),
    ("d3", "llm", "independent", "megatron/le16k", None),
]


def test_each_class_gets_the_rules_verdict():
    got = {r[0]: r for r in _con(ROWS).execute(v.LLM_CLASSES_SQL).fetchall()}
    cols = [c[0] for c in _con(ROWS).execute(v.LLM_CLASSES_SQL).description]
    verdict, rows, worst = cols.index("verdict"), cols.index("rows"), cols.index("worst_id")
    assert {k: r[verdict] for k, r in got.items()} == {"megatron/le16k": "holds", "fsdp/le16k/ac": "fails",
                                                        "deepspeed/le16k": "too few rows"}
    assert got["megatron/le16k"][rows] == 3 and got["fsdp/le16k/ac"][worst] == "b1"
    assert got["megatron/le16k"][cols.index("validation_class")] == "MEGATRON/LE16K"  # the class in words, carried along


def _claims(rows):
    con = _con(rows)
    return v._llm_claims(lambda sql: con.sql(sql).pl())


def test_issue_23_claims_fail_on_the_max_and_hold_without_the_outlier():
    mean, worst = _claims(ROWS)
    assert mean.verdict == "holds" and "over 7 rows" in mean.project_value  # (2+5+8+21+3+4+1)/7 = 6.3
    assert worst.verdict == "fails" and "worst b1" in worst.project_value
    mean, worst = _claims([r for r in ROWS if r[0] != "b1"])
    assert (mean.verdict, worst.verdict) == ("holds", "holds")


def test_issue_23_mean_claim_fails_when_the_mean_is_over_and_the_max_is_not():
    rows = [(f"m{i}", "llm", "independent", "fsdp/le16k/ac", err) for i, err in enumerate((12.0, -15.0, 11.0))]
    mean, worst = _claims(rows)  # mean 12.7 % > 10 %, max 15 % <= 20 %
    assert (mean.verdict, worst.verdict) == ("fails", "holds")


def test_no_independent_rows_is_no_data_not_a_verdict():
    (claim,) = _claims([r for r in ROWS if r[2] != "independent"])
    assert claim.verdict != "holds" and claim.verdict != "fails"


def test_the_report_and_the_estimate_give_each_class_the_same_verdict():
    """The report's SQL and ``estimator estimate``'s envelope.verdict apply the same rule: on the committed
    record (validation/record.csv, written by ``estimator validate pin=true``) they agree class by class."""
    from pathlib import Path

    from estimator.validation.envelope import read_record, verdict
    from estimator.validation.rows import RECORD_FILE

    entries = read_record(Path(__file__).resolve().parents[1] / "validation" / RECORD_FILE)
    con = _con([(e.id, "llm", e.role, e.cls, e.error_pct) for e in entries])
    cols = [c[0] for c in con.execute(v.LLM_CLASSES_SQL).description]
    sql = {r[0]: r[cols.index("verdict")] for r in con.execute(v.LLM_CLASSES_SQL).fetchall()}
    errors: dict[str, list[float]] = {}
    for e in entries:
        if e.role == "independent":
            errors.setdefault(e.cls, []).append(e.error_pct)
    assert len(sql) >= 5 and sql == {cls: verdict(errs) for cls, errs in errors.items()}
    assert {"holds", "fails"} <= set(sql.values())  # both verdicts occur on real data


def test_estimator_validate_prints_each_class_verdict():
    """``estimator validate`` (text and JSON) lists the independent llm rows per class with the same verdict."""
    from estimator.commands.validate import classes, format_text

    rows = [{"id": i, "kind": k, "role": role, "run_class": cls, "error_pct": err, "measured": 1.0, "predicted": 1.0,
             "unit": "x", "pin_pct": None} for i, k, role, cls, err in ROWS]
    got = {c["run_class"]: c for c in classes(rows)}
    assert {k: c["verdict"] for k, c in got.items()} == {"megatron/le16k": "holds", "fsdp/le16k/ac": "fails",
                                                         "deepspeed/le16k": "too few rows"}
    assert got["megatron/le16k"]["count"] == 3 and got["fsdp/le16k/ac"]["max_abs_error_pct"] == 21.0
    assert got["megatron/le16k"]["validation_class"] == "Megatron-LM / NeMo, up to 16k tokens"
    priced = [r for r in rows if r["error_pct"] is not None]  # estimator validate prints priced rows only
    text = format_text({"rows": priced, "summary": [], "classes": classes(rows), "count": len(priced), "store": None,
                        "pin_problems": []})
    lines = text.splitlines()
    assert "fsdp/le16k/ac" in text and any(line.startswith("fsdp/le16k/ac") and line.endswith("fails") for line in lines)
    assert not classes([r for r in rows if r["kind"] == "nccl"])  # no llm rows: no class table
