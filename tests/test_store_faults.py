"""The results store under concurrency and faults, through the real CLI and real processes (issue
#26): concurrent writers store every row exactly once; a write that fails (a full disk) spills
every computed row, says so with the COMMIT's error, and the next run merges them; damaged spill
folders are quarantined, never block; `report` and `validate` fail in one line without writing."""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from test_hardening_cli import REPO, cli, one_line_error


@pytest.fixture
def workload(tmp_path):
    from helpers import chain_workload

    from estimator.workloads import io

    path = tmp_path / "w.workload.json"
    io.save(chain_workload([1e-3, 2e-3], [2e-3, 1e-3], 1e-4, [1 << 20, 1 << 22]), path)
    return path


def _grid(nodes: range) -> str:
    return "sweep.grid={fabric:[ideal],fabric.nodes:[" + ",".join(map(str, nodes)) + "]}"


def _counts(store: Path) -> tuple[int, int, int, int]:
    with duckdb.connect(str(store), read_only=True) as con:
        est = con.execute("SELECT count(*), count(DISTINCT config_hash) FROM estimates").fetchone()
        col = con.execute("SELECT count(*), count(DISTINCT (config_hash, idx)) FROM collectives").fetchone()
    return est[0], est[1], col[0], col[1]


def _popen(*args: str, cwd: Path, env: dict[str, str] | None = None, **kw) -> subprocess.Popen:
    full_env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONWARNINGS="ignore", RAY_USAGE_STATS_ENABLED="0",
                    **(env or {}))
    return subprocess.Popen([sys.executable, "-m", "estimator.cli", *args], cwd=cwd, env=full_env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def test_concurrent_sweeps_and_an_estimate_store_every_row_once(tmp_path, workload):
    """Three sweeps over overlapping grids and `estimate write=true` at once: while a holder keeps
    the store's lock, all three start and wait to read which points are stored; released
    together, each computes its whole grid (none sees the others' rows yet) and every write
    must still store each point exactly once (the old append duplicated 1,998 of 4,498 rows).
    On a loaded machine a sweep may read the store only after another wrote (no race): every
    attempt must store each point once, and at least one of three must have raced."""
    raced = []
    for attempt in range(3):
        raced.append(_concurrent_writers(tmp_path / str(attempt), workload))
        if raced[-1]:
            break
    assert any(raced), "the sweeps never computed the same points: the race was not exercised"


def _concurrent_writers(tmp_path, workload) -> bool:
    tmp_path.mkdir()
    store = tmp_path / "s.duckdb"
    common = (f"workload={workload}", f"store={store}", "ray.in_process_below=100000")
    out = cli("estimate", *common[:2], "fabric.nodes=1200", "write=true", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-500:]
    holder = subprocess.Popen([sys.executable, "-c", f"import duckdb,sys; c=duckdb.connect({str(store)!r}); "
                               "print('held', flush=True); sys.stdin.readline()"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    grids = [range(2, 1502), range(1002, 2502), range(502, 2002)]
    sweeps = [_popen("sweep", _grid(g), *common, cwd=tmp_path) for g in grids]
    time.sleep(3.0)  # every sweep is waiting for the lock
    holder.stdin.write("\n")
    holder.stdin.flush()
    holder.wait(timeout=30)
    estimate = _popen("estimate", *common[:2], "fabric.nodes=1500", "write=true", cwd=tmp_path)
    outs = [p.communicate(timeout=600) for p in [*sweeps, estimate]]
    for p, (_, err) in zip([*sweeps, estimate], outs, strict=True):
        assert p.returncode == 0, err[-800:]
    # the sweep's one-line summary: "N points: C computed, S already in the store; ..."
    computed = [int(re.search(r"points: (\d+) computed", out).group(1)) for out, _ in outs[:3]]
    union = len(set().union(*grids) | {1200, 1500})
    n, distinct, ncoll, distinct_coll = _counts(store)
    assert (n, distinct) == (union, union)
    assert (ncoll, distinct_coll) == (2 * union, 2 * union)  # two collectives per point, each once
    return sum(computed) > union  # the sweeps did compute the same points: the race was there


def _limit_file_size(limit: int):
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def test_full_disk_spills_every_row_and_the_next_run_merges_them(tmp_path, workload):
    """`ulimit -f`: the WAL cannot grow, COMMIT fails. The sweep says so (the COMMIT's error, not
    the follow-up ROLLBACK's), spills every computed row, exits 2; the next run merges them."""
    store = tmp_path / "s.duckdb"
    common = (f"workload={workload}", f"store={store}")
    assert cli("estimate", *common, "write=true", cwd=tmp_path).returncode == 0
    size = store.stat().st_size
    grid = _grid(range(2, 3002))
    sweep = _popen("sweep", grid, *common, cwd=tmp_path, preexec_fn=_limit_file_size(size + (512 << 10)))
    _, err = sweep.communicate(timeout=600)
    assert sweep.returncode == 2, err[-800:]
    last = err.strip().splitlines()[-1]
    m = re.match(r"error: (\d+) computed row\(s\) were not written: .*Failed to commit.*File too large.*spill", last)
    assert m and "Traceback" not in err, last
    lost = int(m.group(1))
    spills = list((tmp_path / "s.duckdb.spill").iterdir())
    import pyarrow.parquet as pq

    assert sum(pq.read_table(f / "estimates.parquet").num_rows for f in spills) == lost > 0
    out = cli("sweep", grid, *common, cwd=tmp_path)  # nothing left to compute: the spills are merged
    assert out.returncode == 0, out.stderr[-500:]
    assert f"merged {lost} spilled row(s)" in out.stderr and "0 computed" in out.stdout
    assert not (tmp_path / "s.duckdb.spill").exists()
    assert _counts(store) == (3000, 3000, 6000, 6000)


def test_failed_estimate_write_spills_and_says_so(tmp_path, workload):
    """A store that cannot be opened for writing (its WAL path is a folder): the row is spilled,
    the error says so in one line (exit 2), and the next write merges it."""
    store = tmp_path / "s.duckdb"
    base = ("estimate", f"workload={workload}", f"store={store}", "write=true")
    assert cli(*base, cwd=tmp_path).returncode == 0
    wal = tmp_path / "s.duckdb.wal"
    wal.mkdir()
    one_line_error(cli(*base, "fabric.nodes=16", cwd=tmp_path), "s.duckdb.wal", "1 computed row(s) saved to",
                   "merged on the next write")
    wal.rmdir()
    out = cli(*base, "fabric.nodes=32", cwd=tmp_path)
    assert out.returncode == 0 and "merged 1 spilled row(s)" in out.stderr, out.stderr
    with duckdb.connect(str(store), read_only=True) as con:
        assert [r[0] for r in con.execute("SELECT fabric_nodes FROM estimates ORDER BY 1").fetchall()] == [8, 16, 32]


def test_damaged_spills_are_quarantined_and_never_block(tmp_path, workload):
    import pyarrow as pa

    from estimator.store import spill

    store = tmp_path / "s.duckdb"
    base = ("estimate", f"workload={workload}", f"store={store}", "write=true")
    assert cli(*base, cwd=tmp_path).returncode == 0
    # one good spill (of another table) and three damaged ones
    good = tmp_path / "s.duckdb.spill"
    spill.write_spill(store, {"extra": (["k"], pa.table({"k": ["a"], "v": [1.5]}))})
    for name, damage in [("0-bad-keys", "keys"), ("0-no-parquet", "missing"), ("0-garbage", "garbage")]:
        folder = good / name
        folder.mkdir()
        (folder / "keys.json").write_text("{not json" if damage == "keys" else json.dumps({"estimates": ["config_hash"]}))
        if damage == "garbage":
            (folder / "estimates.parquet").write_bytes(b"PAR1 garbage")
    out = cli(*base, "fabric.nodes=16", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("damaged spill") == 3 and "merged 1 spilled row(s)" in out.stderr, out.stderr
    bad = sorted(p.name for p in (tmp_path / "s.duckdb.spill.bad").iterdir())
    assert bad == ["0-bad-keys", "0-garbage", "0-no-parquet"]
    assert not good.exists()
    with duckdb.connect(str(store), read_only=True) as con:
        assert [r[0] for r in con.execute("SELECT fabric_nodes FROM estimates ORDER BY 1").fetchall()] == [8, 16]
        assert con.execute("SELECT k, v FROM extra").fetchall() == [("a", 1.5)]


def test_existing_keys_skip_a_damaged_spill(tmp_path):
    from estimator.store.duckdb_store import existing_keys, write_rows

    store = tmp_path / "s.duckdb"
    write_rows(store, {"estimates": ("config_hash", [{"config_hash": "a", "x": 1}])})
    folder = tmp_path / "s.duckdb.spill" / "0-x"
    folder.mkdir(parents=True)
    (folder / "keys.json").write_text(json.dumps({"estimates": ["config_hash"]}))
    (folder / "estimates.parquet").write_bytes(b"not parquet")
    assert existing_keys(store) == {"a"}
    assert (tmp_path / "s.duckdb.spill.bad" / "0-x").is_dir()


def test_spill_files_are_fsynced_before_the_rename(tmp_path, monkeypatch):
    import pyarrow as pa

    from estimator.store import spill

    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        return real_fsync(fd)

    def replace(a, b):
        events.append(("rename", str(a)))
        return real_replace(a, b)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    spill.write_spill(tmp_path / "s.duckdb", {"estimates": (["k"], pa.table({"k": ["a"]})),
                                              "collectives": (["k"], pa.table({"k": ["a"], "i": [0]}))})
    names = [Path(p).name for kind, p in events]
    rename = [k for k, _ in events].index("rename")
    assert {"estimates.parquet", "collectives.parquet", "keys.json"} <= set(names[:rename])
    assert Path(events[rename - 1][1]).name.startswith(".")  # the folder itself, then the rename
    assert events[rename + 1][0] == "fsync" and events[rename + 1][1].endswith("s.duckdb.spill")


def test_report_store_and_folder_errors_are_one_line(tmp_path, workload):
    store = tmp_path / "s.duckdb"
    assert cli("estimate", f"workload={workload}", f"store={store}", "write=true", cwd=tmp_path).returncode == 0
    before = store.stat().st_mtime_ns
    for args, needle in [((f"store={store}", "report_dir=/dev/null"), "is not a folder"),
                         ((f"store={store}", "report_dir=/proc/x"), "not a writable folder"),
                         ((f"store={tmp_path / 'none.duckdb'}", f"report_dir={tmp_path / 'r'}"), "no results store"),
                         ((f"store={tmp_path}", f"report_dir={tmp_path / 'r'}"), "not a results store")]:
        one_line_error(cli("report", *args, cwd=tmp_path, timeout=300), needle)
    garbage = tmp_path / "g.duckdb"
    garbage.write_bytes(b"not a database" * 100)
    one_line_error(cli("report", f"store={garbage}", f"report_dir={tmp_path / 'r'}", cwd=tmp_path, timeout=300),
                   "g.duckdb")
    assert store.stat().st_mtime_ns == before  # a bad report folder writes nothing to the store
    with duckdb.connect(str(store), read_only=True) as con:
        tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    assert "claims" not in tables


def test_validate_without_measurements_keeps_the_store(tmp_path):
    store = tmp_path / "s.duckdb"
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("no csv here")
    for folder in (empty, Path("/etc")):
        one_line_error(cli("validate", f"validation.dir={folder}", f"store={store}", cwd=tmp_path, timeout=120),
                       "no measurement rows")
    assert not store.exists()
    fifo = tmp_path / "pins.csv"
    os.mkfifo(fifo)
    for pins in ("/dev/zero", str(fifo)):  # size-bounded readers: no MemoryError, no hang
        one_line_error(cli("validate", f"validation.pins={pins}", f"store={store}", cwd=REPO, timeout=120),
                       "not a regular file")
    one_line_error(cli("validate", "validation.margin_pct=-1", "pin=true", f"store={store}", cwd=REPO, timeout=60),
                   "validation.margin_pct")
    assert not store.exists()
