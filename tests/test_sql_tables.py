"""`estimator sql` and `estimator tables` through the real CLI on a real store."""

from __future__ import annotations

import json

import polars as pl
from helpers import chain_workload
from test_hardening_cli import cli, one_line_error

from estimator.workloads import io


def test_sql_and_tables(tmp_path):
    wl = tmp_path / "w.workload.json"
    io.save(chain_workload([1e-3], [1e-3], 1e-4, [1 << 20]), wl)
    store = tmp_path / "s.duckdb"
    for n in (8, 16):
        assert cli("estimate", f"workload={wl}", f"store={store}", "write=true", f"fabric.nodes={n}",
                   cwd=tmp_path).returncode == 0
    q = "SELECT fabric_nodes AS n, iter_time_s FROM estimates WHERE fabric_name = 'ideal' ORDER BY n"
    out = cli("sql", q, f"store={store}", "output=json", cwd=tmp_path)
    rows = json.loads(out.stdout)
    assert [r["n"] for r in rows] == [8, 16] and all(r["iter_time_s"] > 0 for r in rows)
    text = cli("sql", q, f"store={store}", cwd=tmp_path).stdout
    assert "iter_time_s" in text and "(2 rows)" in text
    (tmp_path / "q.sql").write_text(q + "\n")
    for suffix, read in ((".csv", pl.read_csv), (".parquet", pl.read_parquet)):
        dest = tmp_path / f"out{suffix}"
        res = cli("sql", "q.sql", f"store={store}", f"sql_out={dest}", cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        assert read(dest)["n"].to_list() == [8, 16]
    one_line_error(cli("sql", "SELEC 1", f"store={store}", cwd=tmp_path), "query failed")
    one_line_error(cli("sql", "SELECT 1", f"store={store}", "sql_out=x.xml", cwd=tmp_path), ".csv, .parquet")
    tables = json.loads(cli("tables", f"store={store}", "output=json", cwd=tmp_path).stdout)
    units = {(t["table"], t["column"]): t["unit"] for t in tables}
    assert units[("estimates", "iter_time_s")] == "s"
    assert units[("collectives", "bytes")] == "bytes"
    assert units[("estimates", "fabric_bandwidth_Bps")] == "bytes/s"
