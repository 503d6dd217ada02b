"""`estimator sql` is a read-only results query (issue #26): file and network functions, COPY,
ATTACH, INSTALL/LOAD, EXPORT, settings and writes are refused in one line and touch nothing; read
statements work; a killed `sql_out=` write leaves no partial file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import duckdb
import pytest
from test_hardening_cli import REPO, cli, one_line_error


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "s.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE estimates AS SELECT range AS fabric_nodes, range * 1e-3 AS iter_time_s "
                    "FROM range(1, 6)")
    other = tmp_path / "other.duckdb"
    with duckdb.connect(str(other)) as con:
        con.execute("CREATE TABLE keep AS SELECT 42 AS x")
    (tmp_path / "secret.txt").write_text("top secret\n")
    (tmp_path / "victim.csv").write_text("keep me\n")
    return path


REFUSED = [
    ("SELECT * FROM read_text('{tmp}/secret.txt')", "reads or writes files"),
    ("SELECT * FROM read_csv('{tmp}/victim.csv')", "reads or writes files"),
    ("SELECT * FROM '{tmp}/victim.csv'", "reads or writes files"),
    ("SELECT * FROM '{tmp}/secret.txt'", "query failed"),
    ("SELECT * FROM read_parquet('{tmp}/x.parquet')", "reads or writes files"),
    ("SELECT * FROM glob('{tmp}/*')", "reads or writes files"),
    ("SELECT * FROM 'https://example.com/x.csv'", "reads or writes files"),
    ("COPY estimates TO '{tmp}/victim.csv'", "COPY"),
    ("COPY (SELECT 1) TO '{tmp}/new.csv'", "COPY"),
    ("ATTACH '{tmp}/other.duckdb' AS o", "ATTACH"),
    ("INSTALL httpfs", "INSTALL/LOAD"),
    ("LOAD httpfs", "INSTALL/LOAD"),
    ("EXPORT DATABASE '{tmp}/exported'", "EXPORT"),
    ("SET threads = 1", "SET"),
    ("PRAGMA threads = 1", "SET"),
    ("PRAGMA enable_profiling", "PRAGMA"),
    ("CREATE TABLE t AS SELECT 1", "CREATE"),
    ("DROP TABLE estimates", "DROP"),
    ("DELETE FROM estimates", "DELETE"),
    ("SELECT 1; DROP TABLE estimates", "2 statements"),
    ("CALL pragma_version()", "CALL"),
]


@pytest.mark.parametrize("sql,needle", REFUSED)
def test_refused_in_one_line_and_nothing_touched(tmp_path, store, sql, needle):
    home = tmp_path / "home"
    home.mkdir()
    out = cli("sql", sql.format(tmp=tmp_path), f"store={store}", cwd=tmp_path, env={"HOME": str(home)})
    one_line_error(out, needle)
    assert "top secret" not in out.stdout + out.stderr
    assert (tmp_path / "victim.csv").read_text() == "keep me\n"
    assert not (tmp_path / "new.csv").exists() and not (tmp_path / "exported").exists()
    assert not (home / ".duckdb").exists()  # no extension downloaded or installed
    with duckdb.connect(str(tmp_path / "other.duckdb"), read_only=True) as con:
        assert con.execute("SELECT x FROM keep").fetchall() == [(42,)]
    with duckdb.connect(str(store), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM estimates").fetchone()[0] == 5


@pytest.mark.parametrize("sql", [
    "SELECT count(*) AS n FROM estimates", "FROM estimates LIMIT 2", "WITH a AS (SELECT 1 AS n) SELECT * FROM a",
    "DESCRIBE estimates", "SHOW TABLES", "SUMMARIZE estimates", "EXPLAIN SELECT * FROM estimates",
    "PRAGMA table_info('estimates')", "SELECT * FROM duckdb_tables()",
])
def test_read_statements_work(tmp_path, store, sql):
    out = cli("sql", sql, f"store={store}", "output=json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr


def test_killed_sql_out_leaves_no_partial_file(tmp_path):
    store = tmp_path / "big.duckdb"
    with duckdb.connect(str(store)) as con:
        con.execute("CREATE TABLE t AS SELECT range AS a, range * 2 AS b, 'some text' AS c FROM range(3000000)")
    out_file = tmp_path / "q.csv"
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONWARNINGS="ignore")
    for sig in (signal.SIGTERM, signal.SIGKILL):
        proc = subprocess.Popen([sys.executable, "-m", "estimator.cli", "sql", "SELECT * FROM t", f"store={store}",
                                 f"sql_out={out_file}"], cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None and not _temps(tmp_path):
            time.sleep(0.01)
        assert proc.poll() is None, f"finished before the kill: {proc.stderr.read()[-300:]}"
        proc.send_signal(sig)
        proc.wait(timeout=60)
        assert not out_file.exists()
        if sig == signal.SIGTERM:  # unwound: the temporary is removed at once
            assert proc.returncode == 130 and not _temps(tmp_path), _temps(tmp_path)
        else:  # no handler runs: the next write into that folder removes the dead writer's temporary
            assert _temps(tmp_path)
    done = cli("sql", "SELECT count(*) AS n FROM t", f"store={store}", f"sql_out={out_file}", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert out_file.read_text().splitlines() == ["n", "3000000"]
    assert not _temps(tmp_path)


def _temps(folder) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.startswith(".q.")]
