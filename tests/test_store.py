import duckdb
import pytest

from estimator.errors import EstimatorError
from estimator.estimate import Estimate
from estimator.store.duckdb_store import existing_keys, query, write_estimates, write_rows


def est(h, nodes, t):
    cfg = {"fabric": {"name": "ideal", "nodes": nodes}, "model": {"name": "m"}, "algorithm": "default"}
    return Estimate(cfg, h, {"iter_time_s": t, "nodes": nodes},
                    [{"idx": 0, "collective": "all_reduce", "bytes": 1.0, "time_s": t / 2}])


def test_rows_are_idempotent_by_config_hash(tmp_path):
    db = tmp_path / "r.duckdb"
    write_estimates(db, [est("a", 8, 1.0), est("b", 16, 2.0)])
    write_estimates(db, [est("a", 8, 1.5)])  # same point again: replaced, not duplicated
    df = query(db, "SELECT config_hash, fabric_nodes, iter_time_s FROM estimates ORDER BY config_hash")
    assert df.rows() == [("a", 8, 1.5), ("b", 16, 2.0)]
    assert query(db, "SELECT count(*) AS n FROM collectives")["n"][0] == 2
    assert existing_keys(db) == {"a", "b"}
    cfg_json = query(db, "SELECT config_json FROM estimates WHERE config_hash = 'a'")["config_json"][0]
    assert '"nodes": 8' in cfg_json


def test_new_columns_are_added_and_ints_widen(tmp_path):
    db = tmp_path / "r.duckdb"
    write_rows(db, {"t": ("k", [{"k": "a", "x": 1}])})
    write_rows(db, {"t": ("k", [{"k": "b", "x": 2.5, "y": "new"}])})
    df = query(db, "SELECT k, x, y FROM t ORDER BY k")
    assert df.rows() == [("a", 1.0, None), ("b", 2.5, "new")]


def test_failed_write_leaves_nothing(tmp_path):
    db = tmp_path / "r.duckdb"
    write_rows(db, {"t": ("k", [{"k": "a", "x": 1}])})

    class Boom:
        def __str__(self):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        write_rows(db, {"t": ("k", [{"k": "z", "x": 3}]), "u": ("k", [{"k": "q", "v": Boom()}])})
    assert query(db, "SELECT k FROM t")["k"].to_list() == ["a"]
    con = duckdb.connect(str(db), read_only=True)
    assert "u" not in {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    con.close()


def test_missing_store_and_corrupt_file_are_clear_errors(tmp_path):
    with pytest.raises(EstimatorError, match="no results store"):
        query(tmp_path / "none.duckdb", "SELECT 1")
    bad = tmp_path / "bad.duckdb"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(EstimatorError, match="bad.duckdb"):
        write_rows(bad, {"t": ("k", [{"k": "a"}])})
