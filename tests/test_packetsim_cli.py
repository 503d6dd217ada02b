"""`estimator packetsim`: one point, JSON output, bad input, and the DuckDB sweep."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from estimator.config import compose

CLI = [sys.executable, "-m", "estimator.cli", "packetsim"]


def cli(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_one_point_as_json():
    p = cli("network=opsquare", "nodes=64", "load=0.4", "locality=0.5", "seed=3", "warmup_s=2e-6",
            "measure_s=4e-6", "output=json")
    assert p.returncode == 0, p.stderr
    row = json.loads(p.stdout)
    assert row["network"] == "opsquare" and row["nodes"] == 64 and row["seed"] == 3
    assert row["throughput"] == pytest.approx(0.4, rel=0.1)
    for key in ("latency_intra_mean_s", "latency_inter_p99_s", "loss_ratio", "sent", "received", "lost"):
        assert key in row


@pytest.mark.parametrize("args,needle", [
    (["load=2"], "load=2.0"), (["nodes=250"], "nodes=250"), (["network=mesh"], "network='mesh'"),
    (["opsquare.bogus=1"], "opsquare.bogus"), (["load=abc"], "load must be a number"),
])
def test_bad_input_exits_2_with_one_line(args, needle):
    p = cli(*args)
    assert p.returncode == 2
    assert needle in p.stderr and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr


def test_experiment_sweep_writes_rows_to_duckdb_and_resumes(tmp_path):
    from estimator.packetsim.sweep import TABLE, run_sweep
    from estimator.store.duckdb_store import query

    store = tmp_path / "r.duckdb"
    cfg = compose([
        "experiment=opsquare_packet", f"store={store}", "ray.num_cpus=1", "warmup_s=1e-6", "measure_s=2e-6",
        "experiment.sweeps.opsquare_packet.grid.nodes=[16]", "experiment.sweeps.opsquare_packet.grid.load=[0.3,0.9]",
        "experiment.sweeps.opsquare_packet.grid.locality=[0.5]", "~experiment.sweeps.opsquare_packet_1024",
    ], config_name="packetsim")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    first = run_sweep(cfg)
    assert first["points"] == 4 and first["written"] == 4
    df = query(store, f"SELECT network, load, throughput, loss_ratio FROM {TABLE} ORDER BY network, load")
    assert df["network"].to_list() == ["leafspine", "leafspine", "opsquare", "opsquare"]
    assert df["load"].to_list() == [0.3, 0.9, 0.3, 0.9]
    again = run_sweep(cfg)
    assert again["skipped"] == 4 and again["written"] == 0


def test_named_sweep_entry_point_for_the_generic_sweep_command(tmp_path):
    """`run_named_sweep` has the shape of `estimator sweep`'s per-sweep runner, so that command can
    dispatch `kind: packetsim` sweeps to it; foreign overrides (fabric.*) are ignored."""
    from estimator.packetsim.sweep import run_named_sweep
    from estimator.store.duckdb_store import query

    store = str(tmp_path / "n.duckdb")
    sweep = {"kind": "packetsim", "grid": {"network": ["opsquare"], "nodes": [16], "load": [0.5]}}
    out = run_named_sweep("tiny", sweep, ["warmup_s=1e-6", "measure_s=2e-6", "fabric.nodes=8"], store,
                          {"address": "local", "num_cpus": 1, "batch_size": 256})
    assert out["kind"] == "packetsim" and out["written"] == 1
    df = query(store, "SELECT nodes, load, window_s FROM packetsim")
    assert df.row(0) == (16, 0.5, 2e-6)
