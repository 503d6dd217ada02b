"""``estimator validate validation.unstate=[keys]``: the llm rows priced as stated and again without some of their
override keys (what a user who leaves those settings at the presets' defaults gets), refusals counted, nothing
stored. Rows are copied from validation/llm.csv into a temporary folder."""

from __future__ import annotations

import csv
import json
from contextlib import redirect_stdout
from io import StringIO
from pathlib import Path

import pytest

from estimator.cli import run as cli_run
from estimator.errors import EstimatorError

LLM = Path(__file__).resolve().parents[1] / "validation" / "llm.csv"
# two rows that state framework.tp_comm_overlap=true: TP 4 with sequence parallelism (MLPerf GPT-3 175B, 512 H100)
# and TP 1, whose layout has no tensor-parallel communication to overlap
IDS = ("mlperf41-gpt3-eos-512gpu", "mlperf51-llama31-8b-cisco-64gpu")


@pytest.fixture
def folder(tmp_path):
    with LLM.open(newline="") as f:
        reader = csv.DictReader(f)
        rows = [r for r in reader if r["id"] in IDS]
        fields = reader.fieldnames
    assert len(rows) == len(IDS)
    out = tmp_path / "rows"
    out.mkdir()
    with (out / "llm.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return out


def run(folder, store, *extra):
    buf = StringIO()
    with redirect_stdout(buf):
        cli_run(["validate", f"validation.dir={folder}", f"store={store}", "output=json", *extra])
    return json.loads(buf.getvalue())


def test_dropping_a_stated_key_moves_only_the_rows_it_matters_for(folder, tmp_path):
    store = tmp_path / "s.duckdb"
    csv_path = folder / "llm.csv"  # both rows state the overlap off: dropping the key gives the megatron default (on)
    csv_path.write_text(csv_path.read_text().replace("framework.tp_comm_overlap=true", "framework.tp_comm_overlap=false"))
    out = run(folder, store, "validation.unstate=[framework.tp_comm_overlap]")
    by_id = {r["id"]: r for r in out["unstated_rows"]}
    tp4, tp1 = by_id[IDS[0]], by_id[IDS[1]]
    assert tp4["dropped"] == 1 and tp4["unstated_error_pct"] > tp4["error_pct"] + 1  # TP comm hidden: faster
    assert tp1["dropped"] == 1 and tp1["unstated_error_pct"] == pytest.approx(tp1["error_pct"])  # nothing to overlap
    group = out["unstated_summary"][0]
    assert group["role"] == "independent" and group["count"] == 2 and group["refused"] == 0
    assert not store.exists()  # printed, not stored


def test_a_row_refused_without_the_key_is_counted_as_refused(folder, tmp_path):
    """The TP 4 GPT-3 row without sequence parallelism fits only a 200 GB device; without that key (the preset's
    80 GB) it is refused, and the one line says sequence parallelism alone would make it fit."""
    csv_path = folder / "llm.csv"
    text = csv_path.read_text()
    assert text.count("parallelism.sequence_parallel=true") == 1  # only the TP 4 row states it
    csv_path.write_text(text.replace("parallelism.sequence_parallel=true",
                                     "parallelism.sequence_parallel=false device.memory_bytes=200e9"))
    out = run(folder, tmp_path / "s.duckdb", "validation.unstate=[device.memory_bytes]")
    refused = [r for r in out["unstated_rows"] if r["refused"]]
    assert [r["id"] for r in refused] == [IDS[0]]
    assert "GB too much" in refused[0]["refused"] and "sequence_parallel=true" in refused[0]["refused"]
    assert out["unstated_summary"][0]["refused"] == 1


def test_text_output_and_pin_is_refused(folder, tmp_path, capsys):
    cli_run(["validate", f"validation.dir={folder}", f"store={tmp_path / 's.duckdb'}",
             "validation.unstate=[framework.tp_comm_overlap]"])
    text = capsys.readouterr().out
    assert "without framework.tp_comm_overlap" in text and "not stored" in text
    with pytest.raises(EstimatorError, match="drop validation.unstate"):
        cli_run(["validate", f"validation.dir={folder}", f"store={tmp_path / 's.duckdb'}", "pin=true",
                 "validation.unstate=[framework.tp_comm_overlap]"])
