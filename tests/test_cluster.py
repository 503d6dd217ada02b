"""The cluster simulation: traces, placement, scheduling, the event loop, the command and the store."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from estimator.cluster.placement import BlockPlacer, make_placer
from estimator.cluster.scheduler import Queue
from estimator.cluster.trace import load_trace, mean_duration_s, synthetic_trace
from estimator.config import compose, to_container
from estimator.errors import EstimatorError
from estimator.workloads import io
from tests.helpers import chain_workload

REPO = Path(__file__).resolve().parents[1]
MODELS = ["resnet50", "vgg13"]


@pytest.fixture
def workloads(tmp_path):
    """Two small synthetic single-replica workloads (replayed durations): a compute-heavy one with
    small gradients and a communication-heavy one with 400 MB of gradients."""
    light = chain_workload([0.01] * 3, [0.01] * 3, 0.001, [1_000_000] * 3, batch=8)
    heavy = chain_workload([0.005] * 4, [0.005] * 4, 0.001, [100_000_000] * 4, batch=8)
    paths = {}
    for name, wl in (("light", light), ("heavy", heavy)):
        paths[name] = str(io.save(wl, tmp_path / f"{name}.workload.json"))
    return paths


def _cfg(overrides: list[str]) -> dict:
    return to_container(compose(["+device.replay=true", "parallelism.sync_jitter_cv=0.0", *overrides]))


def _trace(tmp_path, rows: list[dict], name="jobs.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(rows))
    return path


# ---- traces --------------------------------------------------------------------------------------
def test_synthetic_trace_is_seeded_and_follows_the_mix():
    cfg = yaml_defaults()
    a = synthetic_trace(4000, 4096, MODELS, cfg["sizes"], cfg["size_weights"], "philly", 0.8, None, 3)
    b = synthetic_trace(4000, 4096, MODELS, cfg["sizes"], cfg["size_weights"], "philly", 0.8, None, 3)
    c = synthetic_trace(4000, 4096, MODELS, cfg["sizes"], cfg["size_weights"], "philly", 0.8, None, 4)
    assert a == b and a != c
    sizes = np.array([j.gpus for j in a])
    assert abs((sizes == 1).mean() - 0.6869) < 0.03  # Philly's 70 % single-GPU jobs, scaled
    assert 3.0 < sizes.mean() < 4.6  # Helios' 3.72 GPUs per job (a heavy tail: sampling noise)
    dur = np.array([j.duration_s for j in a])
    assert abs(dur.mean() / mean_duration_s("philly") - 1) < 0.1
    gaps = np.diff([j.submit_s for j in a])
    offered = sizes.mean() * mean_duration_s("philly") / gaps.mean() / 4096
    assert abs(offered - 0.8) < 0.1  # the arrival rate is set by the offered load
    small = synthetic_trace(500, 8, MODELS, cfg["sizes"], cfg["size_weights"], "helios", 0.5, None, 0)
    assert max(j.gpus for j in small) <= 8  # sizes beyond the cluster are left out


def yaml_defaults() -> dict:
    import yaml

    return yaml.safe_load((REPO / "conf/cluster/default.yaml").read_text())


def test_trace_files_in_three_formats(tmp_path):
    rows = [{"id": 1, "submit_s": 0, "gpus": 2, "model": "resnet50", "iterations": 100},
            {"id": 5, "submit_s": 3.5, "gpus": 4, "workload": "x.workload.json", "duration_s": 60.0, "layout": "data"}]
    import polars as pl

    csv = tmp_path / "jobs.csv"
    pl.DataFrame(rows).write_csv(csv)
    parquet = tmp_path / "jobs.parquet"
    pl.DataFrame(rows).write_parquet(parquet)
    for path in (_trace(tmp_path, rows), _trace(tmp_path, {"jobs": rows}, "wrapped.json"), csv, parquet):
        jobs = load_trace(path, MODELS)
        assert [(j.id, j.gpus, j.model, j.iterations, j.duration_s) for j in jobs] == [
            (1, 2, "resnet50", 100, None), (5, 4, "", None, 60.0)]
        assert jobs[1].label == "x"


@pytest.mark.parametrize("rows, message", [
    ([{"id": 1, "submit_s": 0, "gpus": 1, "model": "resnet5", "iterations": 10}], "row 1 (job 1): unknown model 'resnet5' (did you mean 'resnet50'?)"),
    ([{"id": 1, "submit_s": -1, "gpus": 1, "model": "resnet50", "iterations": 10}], "row 1 (job 1): submit_s must be a time >= 0"),
    ([{"id": 2, "submit_s": 0, "gpus": 1, "model": "resnet50", "iterations": 1},
      {"id": 2, "submit_s": 1, "gpus": 1, "model": "resnet50", "iterations": 1}], "row 2: duplicate job id 2 (also row 1)"),
    ([{"id": 3, "submit_s": 0, "gpus": 1, "model": "resnet50", "iterations": 1},
      {"id": 1, "submit_s": 1, "gpus": 1, "model": "resnet50", "iterations": 1}], "row 2: job ids must increase; id 1 comes after 3"),
    ([{"id": 1, "submit_s": 0, "gpus": 0, "model": "resnet50", "iterations": 1}], "gpus must be an integer >= 1"),
    ([{"id": 1, "submit_s": 0, "gpus": 2, "model": "resnet50"}], "give exactly one of iterations and duration_s"),
    ([{"id": 1, "submit_s": 0, "gpus": 2, "model": "resnet50", "iterations": 1, "layout": "tp=2"}], "layout 'tp=2' is not supported"),
    ([{"id": 1, "submit": 0, "gpus": 2, "model": "resnet50", "iterations": 1}], "unknown column 'submit' (did you mean 'submit_s'?)"),
])
def test_bad_trace_rows_are_one_line(tmp_path, rows, message):
    with pytest.raises(EstimatorError) as exc:
        load_trace(_trace(tmp_path, rows), MODELS)
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_malformed_trace_files(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text('id,submit_s,gpus,model,iterations\n1,0,"2,resnet50,10\n')
    with pytest.raises(EstimatorError, match="bad.csv: "):
        load_trace(bad, MODELS)
    notjson = tmp_path / "bad.json"
    notjson.write_text("[{'id': 1}]")
    with pytest.raises(EstimatorError, match="not valid JSON"):
        load_trace(notjson, MODELS)
    with pytest.raises(EstimatorError, match="must be .csv, .parquet or .json"):
        load_trace(tmp_path / "jobs.txt", MODELS)


# ---- placement -----------------------------------------------------------------------------------
def test_packed_fills_the_fullest_leaf_that_fits():
    p = BlockPlacer(32, (4, 16), "packed")
    a = p.place(3)
    assert a.tolist() == [0, 1, 2]
    b = p.place(2)  # leaf 0 has 1 free: does not fit; leaf 1 is the fullest that fits (4 free, tie: lowest)
    assert b.tolist() == [4, 5]
    c = p.place(1)  # best fit: leaf 0's last GPU
    assert c.tolist() == [3]
    d = p.place(8)  # two whole leaves of pod 0 (leaves 2 and 3), not 8 scattered GPUs
    assert sorted(set((d // 4).tolist())) == [2, 3]
    p.release(a)
    assert p.free_count() == 32 - 2 - 1 - 8


def test_spread_random_and_ring_runs():
    spread = BlockPlacer(32, (4, 16), "spread").place(8)
    assert len(set((spread // 4).tolist())) == 8  # one GPU per leaf
    r1 = BlockPlacer(32, (4,), "random", seed=1).place(6)
    r2 = BlockPlacer(32, (4,), "random", seed=1).place(6)
    assert r1.tolist() == r2.tolist() and len(set(r1.tolist())) == 6
    ring = BlockPlacer(16, (), "packed")
    ring.free[:] = False
    ring.free[[1, 2, 5, 6, 7, 10, 11, 12, 13]] = True
    ring._free_count = 9
    assert ring.place(3).tolist() == [5, 6, 7]  # the shortest free run that holds it, not the lowest ids


def test_topology_aware_avoids_loaded_uplinks():
    loads = {1: 5.0}
    p = BlockPlacer(16, (4,), "topology",
                    block_load=lambda level, blocks: np.array([loads.get(int(b), 0.0) for b in blocks]))
    p.free[:6] = False  # leaf 0: 0 free, leaf 1: 2 free
    p._free_count = 10
    # packed would take leaf 1 (fullest that fits 2); topology-aware avoids its loaded uplinks
    assert BlockPlacer(16, (4,), "packed").place(2).tolist() == [0, 1]
    got = p.place(2)
    assert set((got // 4).tolist()) == {2}


def test_allocation_policies_as_placements():
    lum = make_placer("lumorph", 64, (32,), 0, type("C", (), {"tiles_per_server": 32})())
    assert lum.allocation(5) == 5 and len(lum.place(5)) == 5
    bc = make_placer("bcube_groups", 64, (), 0, type("C", (), {"r": 4})())
    assert bc.allocation(5) == 16 and bc.place(5).tolist() == list(range(16))
    with pytest.raises(EstimatorError, match="cluster.placement must be one of"):
        make_placer("packd", 64, (), 0, object())


# ---- scheduling ----------------------------------------------------------------------------------
def _queue(policy, jobs):
    q = Queue(policy)
    for job_id, submit, alloc, est in jobs:
        q.push(job_id, submit, alloc, est)
    return q


def test_fifo_blocks_sjf_orders_backfill_fills():
    jobs = [(1, 0.0, 8, 100.0), (2, 1.0, 2, 5.0), (3, 2.0, 2, 500.0)]
    started: list[int] = []

    def start(w):
        started.append(w.job_id)
        return True

    _queue("fifo", jobs).schedule(10.0, 4, start, lambda: [(50.0, 4)])
    assert started == []  # job 1 needs 8 of 4 free: it blocks jobs 2 and 3
    _queue("sjf", jobs).schedule(10.0, 4, start, lambda: [(50.0, 4)])
    assert started == [2]  # shortest first: 2 (5 s) starts, then 1 (100 s) does not fit and blocks 3 (500 s)
    started.clear()
    # backfill: job 1 is promised t = 50 (4 running GPUs end then: 4 free + 4 = 8); job 2 ends at
    # 15 < 50 and starts; job 3 would end at 510 and the head needs every GPU: it waits
    _queue("backfill", jobs).schedule(10.0, 4, start, lambda: [(50.0, 4)])
    assert started == [2]
    started.clear()
    # with 2 GPUs to spare at the promised time, job 3 may take them
    _queue("backfill", jobs).schedule(10.0, 4, start, lambda: [(50.0, 6)])
    assert started == [2, 3]


# ---- the simulation ------------------------------------------------------------------------------
def _run(workloads, tmp_path, rows, fabric, extra=()):
    from estimator.cluster import simulate_cluster

    for r in rows:
        r.setdefault("workload", workloads[r.pop("kind")])
    trace = _trace(tmp_path, rows)
    return simulate_cluster(_cfg([*fabric, f"cluster.trace={trace}", *extra]), progress=False)


def test_jobs_sharing_an_oversubscribed_uplink_slow_down(workloads, tmp_path):
    """Two communication-heavy jobs spread over the same two leaves of a 4:1 leaf-spine: each slows
    the other (aligned phases: twice the bandwidth time); apart, each runs at its alone time."""
    topo = tmp_path / "ls.yaml"
    topo.write_text("builder: {type: leaf_spine, n: 16, per_leaf: 4, endpoint_bw: 1.0e9, spines: 1, uplink_bw: 1.0e9, "
                    "leaf_latency_s: 0.0, uplink_latency_s: 0.0, spine_latency_s: 0.0}\n")
    fabric = ["fabric=custom", f"fabric.topology={topo}", "fabric.nodes=16"]
    rows = [{"id": i, "submit_s": 0.0, "gpus": 8, "kind": "heavy", "iterations": 20} for i in range(2)]
    res = _run(workloads, tmp_path, rows, fabric, ["cluster.placement=spread", "cluster.phases=aligned"])
    slow = [j["slowdown"] for j in res.jobs]
    assert all(s > 1.3 for s in slow)
    assert res.run["jobs_slowed"] == 2
    assert all(j["iter_time_shared_s"] > j["iter_time_alone_s"] for j in res.jobs)
    packed = _run(workloads, tmp_path, [{"id": i, "submit_s": 0.0, "gpus": 4, "kind": "heavy", "iterations": 20}
                                         for i in range(2)], fabric, ["cluster.placement=packed"])
    assert [j["slowdown"] for j in packed.jobs] == [1.0, 1.0]  # each inside its own leaf
    assert [j["leaves"] for j in packed.jobs] == [1, 1]


def test_ocs_circuits_per_job_pay_reconfiguration_not_sharing(workloads, tmp_path):
    rows = [{"id": i, "submit_s": 0.0, "gpus": 8, "kind": "heavy", "iterations": 10} for i in range(2)]
    res = _run(workloads, tmp_path, rows, ["fabric=ocs", "fabric.nodes=16", "fabric.topology=ring"],
               ["cluster.placement=random", "cluster.phases=aligned"])
    for j in res.jobs:
        assert j["slowdown"] == 1.0
        assert j["setup_s"] == pytest.approx(25e-3)
        assert j["end_s"] == pytest.approx(j["start_s"] + 25e-3 + 10 * j["iter_time_alone_s"])


def test_queueing_and_jct(workloads, tmp_path):
    """Two 12-GPU jobs on 16 GPUs: the second waits for the first (FIFO); JCT = queue + run."""
    rows = [{"id": 1, "submit_s": 0.0, "gpus": 12, "kind": "light", "iterations": 5},
            {"id": 2, "submit_s": 0.1, "gpus": 12, "kind": "light", "iterations": 5}]
    res = _run(workloads, tmp_path, rows, ["fabric=fattree", "fabric.nodes=16"])
    first, second = res.jobs
    assert first["queue_s"] == 0.0
    assert second["start_s"] == pytest.approx(first["end_s"])
    assert second["jct_s"] == pytest.approx(second["queue_s"] + second["run_s"])
    assert res.run["makespan_s"] == pytest.approx(second["end_s"])
    busy = (first["run_s"] * 12 + second["run_s"] * 12) / (16 * res.run["makespan_s"])
    assert res.run["gpu_utilisation"] == pytest.approx(busy)


def test_every_slowdown_at_least_one_and_reproducible():
    cfg = to_container(compose(["fabric=custom", "fabric.topology=topologies/leafspine_4to1.yaml", "fabric.nodes=128",
                                "cluster.jobs=150", "cluster.placement=random", "cluster.load=0.9",
                                "cluster.models=[resnet50]"]))
    from estimator.cluster import simulate_cluster

    traces = REPO / "traces" / "resnet50.workload.json"
    if not traces.exists():
        pytest.skip("traces/resnet50.workload.json not captured")
    a = simulate_cluster(cfg, progress=False)
    b = simulate_cluster(cfg, progress=False)
    assert len(a.jobs) == 150
    assert min(j["slowdown"] for j in a.jobs) >= 1.0
    assert a.run["jobs_slowed"] > 0  # random placement on a 4:1 leaf-spine at high load
    assert [j["end_s"] for j in a.jobs] == [j["end_s"] for j in b.jobs]


def test_job_larger_than_the_cluster_is_refused(workloads, tmp_path):
    rows = [{"id": 7, "submit_s": 0.0, "gpus": 32, "kind": "light", "iterations": 5}]
    with pytest.raises(EstimatorError, match="job 7.*asks for 32 GPUs, more than the cluster's 16"):
        _run(workloads, tmp_path, rows, ["fabric=fattree", "fabric.nodes=16"])


# ---- the command ---------------------------------------------------------------------------------
def _cli(*args, cwd=REPO):
    return subprocess.run([sys.executable, "-m", "estimator.cli", "cluster", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=600)


def test_cli_bad_input_exit_2_nothing_written(tmp_path):
    store = tmp_path / "s.duckdb"
    trace = _trace(tmp_path, [{"id": 1, "submit_s": 0, "gpus": 1, "model": "nosuchmodel", "iterations": 1}])
    for args in ([f"cluster.trace={trace}"], ["cluster.phases=sometimes"], ["cluster.bogus=1"],
                 ["cluster.scheduler=lifo"]):
        r = _cli(*args, "write=true", f"store={store}")
        assert r.returncode == 2, r.stderr
        assert r.stderr.startswith("error: ") and r.stderr.count("\n") == 1, r.stderr
        assert "Traceback" not in r.stderr
    assert not store.exists()


def test_cli_writes_runs_and_jobs(tmp_path, workloads):
    rows = [{"id": i, "submit_s": float(i), "gpus": 2 + 2 * (i % 2), "workload": workloads["light"],
             "iterations": 20} for i in range(12)]
    trace = _trace(tmp_path, rows)
    store = tmp_path / "s.duckdb"
    r = _cli("fabric=fattree", "fabric.nodes=16", f"cluster.trace={trace}", "+device.replay=true", "write=true",
             f"store={store}", "output=json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["jobs"] == 12 and out["cluster_jobs_written"] == 12 and out["makespan_s"] > 0
    import duckdb

    with duckdb.connect(str(store), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM cluster_jobs").fetchone()[0] == 12
        assert con.execute("SELECT min(slowdown) >= 1 FROM cluster_jobs").fetchone()[0]
        assert con.execute("SELECT jct_mean_s FROM cluster_runs").fetchone()[0] == pytest.approx(out["jct_mean_s"])
    from estimator.reports.sections import cluster as section

    with duckdb.connect(str(store), read_only=True) as con:  # the report's SQL binds on any cluster store
        q = lambda sql: con.sql(sql).pl()  # noqa: E731
        for sql in (section.RUNS_SQL, section.CDF_SQL, section.SLOWDOWN_SQL, section.UTILISATION_SQL,
                    section.CASSINI_SQL, section.CASSINI_SEEDS_SQL):
            q(sql)
        assert [c.verdict for c in section._claims(q)] == ["no-data", "no-data"]  # no CASSINI runs here
    tables = subprocess.run([sys.executable, "-m", "estimator.cli", "tables", f"store={store}", "output=json"],
                            capture_output=True, text=True, cwd=REPO, timeout=300)
    units = {(t["table"], t["column"]): t["unit"] for t in json.loads(tables.stdout)}
    assert units[("cluster_jobs", "jct_s")] == "s" and units[("cluster_runs", "slowdown_mean")] == "ratio"
    assert units[("cluster_runs", "gpu_utilisation")] == "fraction / ratio"


def test_cli_text_output_and_progress(tmp_path, workloads):
    trace = _trace(tmp_path, [{"id": 1, "submit_s": 0.0, "gpus": 2, "workload": workloads["light"], "iterations": 3}])
    r = _cli("fabric=ideal", "fabric.nodes=8", f"cluster.trace={trace}", "+device.replay=true")
    assert r.returncode == 0, r.stderr
    assert "1 jobs on ideal (8 GPUs)" in r.stdout and "JCT mean / p50 / p99" in r.stdout
