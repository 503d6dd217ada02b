"""The validation machinery on small synthetic CSVs (the real rows are in test_validation_suite.py).

Synthetic rows use an empty ``system`` (no preset) with the device and fabric in ``overrides``;
training rows read a synthetic workload through ``traces_dir`` so nothing is captured.
"""

from __future__ import annotations

import json
import subprocess
import sys
from contextlib import redirect_stdout
from io import StringIO
from pathlib import Path

import duckdb
import pytest

from estimator.cli import run as cli_run
from estimator.errors import EstimatorError
from estimator.fabrics.registry import make_fabric
from estimator.reports.build import build_report
from estimator.validation import load_rows, predict, summary
from estimator.validation.pins import pin_value, read_pins, violations, write_pins
from estimator.validation.predict import Result, nccl_bus_factor
from estimator.validation.rows import COLUMNS
from estimator.validation.table import replace_validation
from estimator.workloads import io
from tests.helpers import chain_workload

NCCL_HEADER = ",".join(COLUMNS["nccl"])
TRAIN_HEADER = ",".join(COLUMNS["training"])
TAIL = "synthetic hw,none,https://example.org/synthetic,synthetic for a unit test"


def nccl_row(ident="ar-64M", gpus=8, coll="all_reduce", nbytes=67108864, busbw=100, role="independent",
             overrides="device=a100 fabric=ideal", system=""):
    return f"{ident},{system},{gpus},{coll},{nbytes},{busbw},{role},{overrides},{TAIL}"


def write(folder, name, header, *rows):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("\n".join([header, *rows]) + "\n")
    return folder


@pytest.fixture
def traces(tmp_path):
    """A synthetic single-replica workload under the name ``lenet5`` (so model=lenet5 finds it)."""
    d = tmp_path / "traces"
    d.mkdir()
    io.save(chain_workload([1e-3], [1e-3] * 3, 1e-4, [4_000_000] * 3, batch=8), d / "lenet5.workload.json")
    return d


def validate(folder, store, *extra):
    """``estimator validate ... output=json`` in-process; the printed JSON object."""
    buf = StringIO()
    with redirect_stdout(buf):
        cli_run(["validate", f"validation.dir={folder}", f"store={store}", "output=json", *extra])
    return json.loads(buf.getvalue())


def table(store):
    con = duckdb.connect(str(store), read_only=True)
    try:
        return {r[0]: r[1:] for r in con.execute("SELECT id, role, measured, predicted, error_pct FROM validation")
                .fetchall()}
    finally:
        con.close()


# --- schema -----------------------------------------------------------------------------------------

BAD = [
    (nccl_row(gpus=0), "column gpus"),
    (nccl_row(gpus="8x"), "column gpus"),
    (nccl_row(role="tuned"), "column role"),
    (nccl_row(coll="allreduce_perf"), "column collective"),
    (nccl_row(nbytes=-5), "column bytes"),
    (nccl_row(busbw="fast"), "column measured_busbw_GBps"),
    (nccl_row(system="dgx_nope"), "column system: unknown system 'dgx_nope'"),
    (nccl_row(ident="a b"), "column id"),
    (nccl_row(overrides="fabric.nodes=16"), "column overrides"),
    (nccl_row(overrides="device"), "column overrides"),
    (nccl_row().replace("https://example.org/synthetic", ""), "column source: empty"),
    (nccl_row() + ",extra", "fields, the header has"),
]


@pytest.mark.parametrize(("line", "needle"), BAD)
def test_malformed_row_names_file_line_column(tmp_path, line, needle):
    folder = write(tmp_path / "v", "nccl.csv", NCCL_HEADER, nccl_row(ident="fine"), line)
    with pytest.raises(EstimatorError) as err:
        load_rows(folder)
    msg = str(err.value)
    assert "nccl.csv:3:" in msg and needle in msg and "\n" not in msg


def test_bad_header_and_duplicate_ids(tmp_path):
    folder = write(tmp_path / "a", "x.csv", NCCL_HEADER.replace(",software", ""), nccl_row())
    with pytest.raises(EstimatorError, match=r"x\.csv:1: missing column\(s\) software"):
        load_rows(folder)
    folder = write(tmp_path / "b", "x.csv", "id,what\n1,2")
    with pytest.raises(EstimatorError, match="header names none of measured_busbw_GBps .*, measured_samples_per_s .* or measured "):
        load_rows(folder)
    folder = write(tmp_path / "c", "a.csv", NCCL_HEADER, nccl_row(ident="same"))
    write(folder, "b.csv", NCCL_HEADER, nccl_row(ident="same"))
    with pytest.raises(EstimatorError, match=r"b\.csv:2: column id: duplicate id 'same' \(first at .*a\.csv:2\)"):
        load_rows(folder)


def test_cli_malformed_row_exits_2_one_line_nothing_written(tmp_path):
    folder = write(tmp_path / "v", "nccl.csv", NCCL_HEADER, nccl_row(), nccl_row(ident="b", system="nope"))
    store = tmp_path / "s.duckdb"
    out = subprocess.run([sys.executable, "-m", "estimator.cli", "validate", f"validation.dir={folder}",
                          f"store={store}", "pin=true"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "nccl.csv:3: column system: unknown system 'nope'" in lines[0]
    assert not store.exists() and not (folder / "pinned_errors.csv").exists()


def test_row_the_model_cannot_run_is_named_and_nothing_written(tmp_path):
    folder = write(tmp_path / "v", "nccl.csv", NCCL_HEADER, nccl_row(overrides="device=a100 fabric=nope"))
    with pytest.raises(EstimatorError, match=r"nccl\.csv:2: row ar-64M: unknown fabric 'nope'"):
        validate(folder, tmp_path / "s.duckdb")
    assert not (tmp_path / "s.duckdb").exists()


# --- predictions --------------------------------------------------------------------------------------


def test_nccl_tests_bus_factors():
    assert nccl_bus_factor("all_reduce", 8) == pytest.approx(2 * 7 / 8)
    for coll in ("all_gather", "reduce_scatter", "all_to_all"):
        assert nccl_bus_factor(coll, 8) == pytest.approx(7 / 8)
    for coll in ("broadcast", "reduce"):
        assert nccl_bus_factor(coll, 8) == 1.0
    assert nccl_bus_factor("all_reduce", 1) == 0.0  # one rank moves nothing over the bus


@pytest.mark.parametrize("coll", ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all"])
def test_nccl_prediction_is_busbw_of_the_collective_time(tmp_path, coll):
    folder = write(tmp_path / "v", "n.csv", NCCL_HEADER, nccl_row(coll=coll, gpus=16, busbw=50))
    (row,) = load_rows(folder)
    res = predict(row)
    fabric = make_fabric({"name": "ideal", "nodes": 16})
    cost = fabric.collective_cost(coll, 67108864, "auto")
    expect = 67108864 / cost.time_s * nccl_bus_factor(coll, 16) / 1e9
    assert res.predicted == pytest.approx(expect, rel=1e-9)
    assert res.error_pct == pytest.approx(100 * (expect - 50) / 50)


def test_training_prediction_is_estimate_samples_per_s(tmp_path, traces):
    from estimator.config import compose, to_container
    from estimator.estimate import estimate

    over = f"device=a100 fabric=ideal traces_dir={traces}"
    folder = write(tmp_path / "v", "t.csv", TRAIN_HEADER,
                   f"t8,,lenet5,amp,32,8,1000,independent,{over},{TAIL}")
    (row,) = load_rows(folder)
    res = predict(row)
    cfg = to_container(compose(["model=lenet5", "fabric.nodes=8", "precision=amp", "batch_size=32",
                                *over.split()]))
    assert res.predicted == pytest.approx(estimate(cfg).metrics["samples_per_s"])
    assert res.row.metric == "samples_per_s" and res.row.unit == "samples/s"


# --- store --------------------------------------------------------------------------------------------


def test_table_is_replaced_per_run(tmp_path):
    store = tmp_path / "s.duckdb"
    folder = write(tmp_path / "v", "n.csv", NCCL_HEADER, nccl_row("a"), nccl_row("b"), nccl_row("c"))
    out = validate(folder, store)
    assert out["count"] == 3 and set(table(store)) == {"a", "b", "c"}
    write(folder, "n.csv", NCCL_HEADER, nccl_row("a", busbw=200), nccl_row("d"))
    validate(folder, store)
    rows = table(store)
    assert set(rows) == {"a", "d"}  # rows no longer in the CSV are gone, not kept beside the new ones
    assert rows["a"][1] == 200


def test_failed_write_keeps_the_previous_rows(tmp_path):
    store = tmp_path / "s.duckdb"
    folder = write(tmp_path / "v", "n.csv", NCCL_HEADER, nccl_row("a"), nccl_row("b"))
    validate(folder, store)
    good = [predict(r) for r in load_rows(folder)]
    broken = Result(row=good[0].row.__class__(**{**good[0].row.__dict__, "id": "x", "gpus": "many"}),
                    predicted=1.0, algorithm="")
    with pytest.raises(duckdb.Error):
        replace_validation(store, [good[0], broken])  # 'many' is not a BIGINT: fails inside the transaction
    assert set(table(store)) == {"a", "b"}


def test_empty_folder_is_an_error_and_keeps_the_table(tmp_path):
    """A folder without measurement rows (a wrong validation.dir, e.g. /etc) is an error, and the
    table of the last run stays (issue #26)."""
    store = tmp_path / "s.duckdb"
    folder = write(tmp_path / "v", "n.csv", NCCL_HEADER, nccl_row("a"))
    validate(folder, store)
    before = table(store)
    (folder / "n.csv").unlink()
    with pytest.raises(EstimatorError, match="no measurement rows"):
        validate(folder, store)
    assert table(store) == before and before


# --- pins ---------------------------------------------------------------------------------------------


def test_pin_value_rounds_up_with_margin():
    assert pin_value(-3.01, 2.0) == 5.1
    assert pin_value(3.0, 2.0) == 5.0
    assert pin_value(0.0, 0.0) == 0.0


def test_pins_written_read_and_enforced(tmp_path):
    store = tmp_path / "s.duckdb"
    folder = write(tmp_path / "v", "n.csv", NCCL_HEADER, nccl_row("a", busbw=100), nccl_row("b", busbw=300))
    out = validate(folder, store, "pin=true")
    pins = read_pins(folder / "pinned_errors.csv")
    errs = {r["id"]: r["error_pct"] for r in out["rows"]}
    assert pins == {k: pin_value(v, 2.0) for k, v in errs.items()}
    results = [predict(r) for r in load_rows(folder)]
    assert violations(results, pins) == []
    tight = {"a": abs(errs["a"]) - 0.5}
    problems = violations(results, tight)
    assert len(problems) == 2
    assert "a: |error|" in problems[0] and "exceeds its pin" in problems[0]
    assert "b: no pin" in problems[1] and "estimator validate pin=true" in problems[1]
    # the CLI (without pin=true) reports the same problems
    write_pins(folder / "pinned_errors.csv", results[:1], margin_pct=0.0)
    assert len(validate(folder, store)["pin_problems"]) == 1


def test_bad_pins_file_is_one_line(tmp_path):
    path = tmp_path / "pinned_errors.csv"
    path.write_text("id,max_abs_error_pct\na,lots\n")
    with pytest.raises(EstimatorError, match=r"pinned_errors\.csv:2: column max_abs_error_pct"):
        read_pins(path)


# --- summary and report --------------------------------------------------------------------------------


def test_summary_and_report_keep_the_three_groups_apart(tmp_path, traces):
    store = tmp_path / "s.duckdb"
    over = f"device=a100 fabric=ideal traces_dir={traces}"
    folder = write(tmp_path / "v", "n.csv", NCCL_HEADER, nccl_row("cal", role="calibration", busbw=250),
                   nccl_row("s1", role="same-source", busbw=300), nccl_row("h1", busbw=200), nccl_row("h2", busbw=400))
    write(folder, "t.csv", TRAIN_HEADER, f"t1,,lenet5,amp,32,1,1000,independent,{over},{TAIL}",
          f"t8,,lenet5,amp,32,8,7000,independent,{over},{TAIL}", f"t16,,lenet5,amp,32,16,13000,independent,{over},{TAIL}")
    out = validate(folder, store)
    errs = {r["id"]: abs(r["error_pct"]) for r in out["rows"]}
    by = {(s["kind"], s["role"]): s for s in out["summary"]}
    # calibration, same-source, independent: in that order per kind, never pooled
    assert [(s["kind"], s["role"]) for s in out["summary"]] == [
        ("nccl", "calibration"), ("nccl", "same-source"), ("nccl", "independent"), ("training", "independent")]
    assert by["training", "independent"]["count"] == 3
    assert by["nccl", "calibration"]["count"] == 1 and by["nccl", "same-source"]["count"] == 1
    assert by["nccl", "calibration"]["max_abs_error_pct"] == pytest.approx(errs["cal"])
    assert by["nccl", "same-source"]["mean_abs_error_pct"] == pytest.approx(errs["s1"])
    assert by["nccl", "independent"]["mean_abs_error_pct"] == pytest.approx((errs["h1"] + errs["h2"]) / 2)
    assert by["nccl", "independent"]["max_abs_error_pct"] == pytest.approx(max(errs["h1"], errs["h2"]))
    assert summary([]) == []

    page = build_report(store, tmp_path / "rep").read_text()
    section = page[page.index("id='validation'"):]
    assert "Against real hardware" in page
    for fig in ("validation_nccl", "validation_training", "validation_errors"):
        assert (tmp_path / "rep" / "figures" / f"{fig}.svg").stat().st_size > 0
    assert (tmp_path / "rep" / "figures" / "validation_nccl.sql").read_text().startswith("SELECT")
    assert "<td>nccl</td><td>calibration</td><td class='num'>1</td><td>cal</td>" in section  # which rows calibrated
    assert "<td>nccl</td><td>same-source</td><td class='num'>1</td><td>s1</td>" in section
    assert "<td>nccl</td><td>independent</td><td class='num'>2</td><td>h1, h2</td>" in section
    # the summary table lists the groups in reading order, not alphabetically
    summary_html = section[section.index("Errors per group"):]
    assert summary_html.index("calibration") < summary_html.index("same-source") < summary_html.index("independent")
    assert f"<td class='num'>{round(errs['cal'], 1):.4g}</td>" in section
    assert "<a href='https://example.org/synthetic'>" in section
    assert "t8 vs t1" in section  # the 8-GPU row is paired with the 1-GPU row for scaling efficiency
    assert "t16 vs t8" in section  # the 2-node row with the one-node row for multi-node scaling
    pred = {r["id"]: r["predicted"] for r in out["rows"]}
    speedup_error = 100 * ((pred["t16"] / pred["t8"]) / (13000 / 7000) - 1)
    assert "<td>t16</td><td>independent</td><td>t8</td>" in section
    assert f"<td class='num'>{round(speedup_error, 1):.4g}</td></tr>" in section


def test_validate_text_summary_names_the_groups(tmp_path, capsys):
    folder = write(tmp_path / "v", "n.csv", NCCL_HEADER, nccl_row("cal", role="calibration", busbw=250),
                   nccl_row("s1", role="same-source", busbw=300), nccl_row("h1", busbw=200))
    cli_run(["validate", f"validation.dir={folder}", f"store={tmp_path / 's.duckdb'}"])
    text = capsys.readouterr().out
    groups = [line.split()[1] for line in text.splitlines() if line.startswith("nccl ")]
    assert groups == ["calibration", "same-source", "independent"]


@pytest.mark.parametrize("role", ["holdout", "Independent", "same source", ""])
def test_unknown_role_is_a_one_line_error(tmp_path, role):
    folder = write(tmp_path / "v", "n.csv", NCCL_HEADER, nccl_row("x", role=role))
    want = "empty" if not role else "is not one of calibration, same-source, independent"
    with pytest.raises(EstimatorError, match=want) as err:
        load_rows(folder)
    assert str(err.value).startswith("v/n.csv:2: column role:") or "n.csv:2: column role:" in str(err.value)
    assert "\n" not in str(err.value)
    if role == "holdout":
        assert "holdout is now same-source or independent" in str(err.value)


def test_report_without_validation_table_says_run_validate(tmp_path):
    store = tmp_path / "s.duckdb"
    con = duckdb.connect(str(store))
    con.execute("CREATE TABLE other (x INTEGER)")
    con.close()
    page = build_report(store, tmp_path / "rep").read_text()
    section = page[page.index("id='validation'"):]
    section = section[:section.index("<h2")]
    assert "run <code>estimator validate</code>" in section and "missing tables: validation" in section


def test_only_runs_matching_rows_and_stores_nothing(tmp_path):
    store = tmp_path / "s.duckdb"
    folder = write(tmp_path / "v", "n.csv", NCCL_HEADER, nccl_row("a100-x"), nccl_row("a100-y"), nccl_row("h100-x"))
    validate(folder, store)
    out = validate(folder, store, "validation.only=h100-*")
    assert [r["id"] for r in out["rows"]] == ["h100-x"] and out["store"] is None
    assert set(table(store)) == {"a100-x", "a100-y", "h100-x"}  # the full run's table is untouched
    with pytest.raises(EstimatorError, match="matches no row id"):
        validate(folder, store, "validation.only=v100-*")
    with pytest.raises(EstimatorError, match="pin=true pins every row"):
        validate(folder, store, "validation.only=h100-*", "pin=true")


def test_snakemake_runs_validate_before_the_report():
    repo = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--forceall", "--cores", "2", "-p",
                          "reports/index.html"], capture_output=True, text=True, cwd=repo, timeout=300)
    assert out.returncode == 0, out.stderr
    text = out.stdout + out.stderr
    assert "rule validate:" in text and "estimator.cli validate store=results/estimates.duckdb" in text
    report = text[text.index("rule report:"):].split("rule ", 2)[1]
    assert "results/validation.done" in report  # the report waits for the validation table
