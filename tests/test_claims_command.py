"""`estimator claims` writes the `claims` table; `estimator report` only reads the store."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from estimator.commands.claims import run
from estimator.config import compose
from estimator.errors import EstimatorError
from estimator.reports.build import build_report


def _store(tmp_path: Path) -> str:
    path = str(tmp_path / "s.duckdb")
    con = duckdb.connect(path)
    con.execute("""CREATE TABLE validation AS SELECT * REPLACE (error_pct::DOUBLE AS error_pct, bytes::DOUBLE AS bytes),
        'sys' AS system, 'src' AS source, 'GB/s' AS unit, 100.0::DOUBLE AS measured,
        (100 * (1 + error_pct / 100))::DOUBLE AS predicted FROM (VALUES
        ('a', 'holdout', 'nccl', 8, 'all_reduce', 33554432.0, 20.0, 'box', NULL, NULL, NULL),
        ('b', 'calibration', 'nccl', 8, 'all_reduce', 1048576.0, 40.0, 'box', NULL, NULL, NULL),
        ('c', 'holdout', 'training', 1, NULL, NULL, 12.0, 'box', 'resnet50', 'amp', 64))
        AS t(id, role, kind, gpus, collective, bytes, error_pct, hardware, model, precision, batch_per_gpu)""")
    con.close()
    return path


def test_claims_writes_the_table_and_the_report_renders_it(tmp_path):
    path = _store(tmp_path)
    dry = run(compose([f"store={path}", "write=false"], config_name="claims"))
    with duckdb.connect(path, read_only=True) as con:
        assert "claims" not in {r[0] for r in con.execute("SHOW TABLES").fetchall()}  # write=false wrote nothing
    done = run(compose([f"store={path}"], config_name="claims"))
    assert done["written"] and done["claims"] == dry["claims"] >= 3
    with duckdb.connect(path, read_only=True) as con:
        rows = con.sql("SELECT verdict, rule, tolerance, sql, unit FROM claims WHERE verdict <> 'no-data'").fetchall()
    # "Against real hardware" rows carry a rule, a tolerance, their SQL and a unit like every other row
    assert rows and all(r[1] == "at-most" and r[2] and r[3].lstrip().startswith("SELECT") and r[4] for r in rows)
    assert {r[0] for r in rows} == {"holds", "fails"}  # 20 % > 15 % fails, 12 % holds
    before = Path(path).stat().st_mtime_ns
    page = build_report(path, tmp_path / "rep").read_text()
    assert Path(path).stat().st_mtime_ns == before
    assert "written by <code>estimator claims</code>" in page and "class='v-fails'" in page


def test_claims_on_a_missing_store_is_a_one_line_error(tmp_path):
    with pytest.raises(EstimatorError, match="no results store"):
        run(compose([f"store={tmp_path / 'none.duckdb'}"], config_name="claims"))
    out = subprocess.run([sys.executable, "-m", "estimator.cli", "claims", f"store={tmp_path / 'none.duckdb'}"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
