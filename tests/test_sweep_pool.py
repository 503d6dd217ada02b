"""Local sweeps on forked worker processes (``ray.local_pool=true``, no Ray): the same rows as in
process, and no worker outlives a killed sweep."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import psutil
import pytest

from estimator.commands.sweep import run_sweep

REPO = Path(__file__).resolve().parents[1]
GRID = {"fabric": ["ideal", "nvlink_leafspine"], "fabric.nodes": [8, 64], "parallelism.bucketing": ["ddp", "horovod"],
        "fabric.alpha_s": [1e-6, 2e-6, 3e-6]}


def rows(store: Path) -> dict:
    con = duckdb.connect(str(store), read_only=True)
    out = {t: con.execute(f"SELECT * EXCLUDE (created_at) FROM {t} ORDER BY ALL" if t == "estimates"
                          else f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in ("estimates", "collectives")}
    con.close()
    return out


def test_pool_sweep_stores_the_in_process_rows(tmp_path):
    base = ["model=resnet50", "device=a100"]
    res = {}
    for mode, cfg in (("here", {"in_process_below": 10**9}), ("pool", {"in_process_below": 0, "local_pool": True})):
        ray_cfg = {"address": "local", "num_cpus": 2, "batch_size": 5, **cfg}
        res[mode] = run_sweep(mode, {"kind": "estimate", "grid": GRID}, base, str(tmp_path / f"{mode}.duckdb"), ray_cfg)
    assert res["pool"]["pool"] and not res["pool"]["ray"] and not res["here"]["pool"]
    assert res["pool"]["written"] == res["here"]["written"] == 24
    here, pool = rows(tmp_path / "here.duckdb"), rows(tmp_path / "pool.duckdb")
    assert len(here["collectives"]) > 24
    assert pool == here


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_killed_pool_sweep_leaves_no_workers(tmp_path, sig):
    alphas = ",".join(str(1e-6 + i * 1e-9) for i in range(2000))
    args = [sys.executable, "-m", "estimator.cli", "sweep",
            f"sweep.grid={{fabric.nodes:[1024],fabric.alpha_s:[{alphas}],parallelism.bucket_cap_bytes:[5242880,52428800]}}",
            f"store={tmp_path / 'k.duckdb'}", "ray.in_process_below=0", "ray.local_pool=true", "ray.batch_size=4"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "RAY_USAGE_STATS_ENABLED": "0"}
    sweep = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    proc = psutil.Process(sweep.pid)
    workers: list[psutil.Process] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and sweep.poll() is None and len(workers) < 2:
        workers = proc.children()
        time.sleep(0.2)
    assert sweep.poll() is None, f"sweep ended before it could be killed: {sweep.stderr.read().decode()[-500:]}"
    assert len(workers) == 2
    time.sleep(1.0)
    os.kill(sweep.pid, sig)
    sweep.wait(timeout=60)
    _, alive = psutil.wait_procs(workers, timeout=10)
    assert not alive, f"pool workers outlived the killed sweep: {[p.pid for p in alive]}"
