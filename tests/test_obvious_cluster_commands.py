"""The first hour of ``estimator cluster`` (docs/research/h106-cluster-audit.md): the malformed traces a newcomer
writes are one-line refusals naming the file, exit 2 and nothing stored; the rack placements run on any fabric
whose size they fit; a handful of scripts/obvious_cluster_commands.py's commands through the CLI, with the sanity
its table checks (makespan covers every job, utilisations in [0, 1], slowdown >= 1, job count = the trace's)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from estimator.cluster.placement import make_placer
from estimator.cluster.simulate import trace_jobs
from estimator.config import compose, to_container
from estimator.errors import EstimatorError
from estimator.fabrics.registry import shared_fabric
from estimator.workloads import io
from tests.helpers import chain_workload

ROOT = Path(__file__).resolve().parent.parent


def _script():
    spec = importlib.util.spec_from_file_location("obvious_cluster_commands", ROOT / "scripts/obvious_cluster_commands.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    """The script's trace files (good and malformed) in a temp dir."""
    tmp = tmp_path_factory.mktemp("traces")
    _script().write_traces(tmp)
    return tmp


@pytest.fixture
def workload(tmp_path):
    """A small replayed single-replica workload (no capture needed)."""
    wl = chain_workload([0.01] * 3, [0.01] * 3, 0.001, [10_000_000] * 3, batch=8)
    return str(io.save(wl, tmp_path / "small.workload.json"))


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CI": "true", "RAY_USAGE_STATS_ENABLED": "0"}
    return subprocess.run([sys.executable, "-m", "estimator.cli", "cluster", *args, "cluster.progress=false"],
                          capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


@pytest.mark.parametrize("name, message", [
    ("missing_col.csv", "missing_col.csv: the job trace lacks column(s) submit_s"),
    ("neg_gpus.csv", "neg_gpus.csv: row 2 (job 2): gpus must be an integer >= 1, got '-4'"),
    ("too_big.csv", "too_big.csv: row 2 (job 2): asks for 512 GPUs, more than the cluster's 64"),
    ("unknown_model.csv", "unknown_model.csv: row 1 (job 1): unknown model 'resnet5O' (did you mean 'resnet50'?)"),
    ("empty.csv", "empty.csv: not a readable csv job trace"),
    ("header_only.csv", "header_only.csv: the job trace has no jobs"),
    ("empty.json", "empty.json: not valid JSON"),
    ("empty_list.json", "empty_list.json: the job trace has no jobs"),
    ("empty.parquet", "empty.parquet: not a readable parquet job trace"),
    ("garbage.parquet", "garbage.parquet: not a readable parquet job trace"),
    ("dup_ids.json", "dup_ids.json: row 2: duplicate job id 1 (also row 1)"),
    ("nan_iter.csv", "nan_iter.csv: row 1 (job 1): iterations must be finite"),
    ("extra_col.csv", "extra_col.csv: unknown column 'priority'"),
    ("both.json", "both.json: row 1 (job 1): give exactly one of model and workload"),
    ("dup_col.csv", "dup_col.csv: column 'id' appears twice"),
])
def test_malformed_trace_is_one_line_naming_the_file(traces, name, message):
    cfg = to_container(compose(["fabric=fattree", "fabric.nodes=64", f"cluster.trace={traces / name}"]))
    with pytest.raises(EstimatorError) as exc:
        trace_jobs(cfg, 64)
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_malformed_trace_through_the_cli_exits_2_and_stores_nothing(traces, tmp_path):
    store = tmp_path / "s.duckdb"
    for name in ("missing_col.csv", "neg_gpus.csv", "too_big.csv", "empty.parquet"):
        r = _cli("fabric=fattree", "fabric.nodes=64", f"cluster.trace={traces / name}", "write=true", f"store={store}")
        assert r.returncode == 2, r.stderr
        assert r.stderr.startswith(f"error: {traces / name}: ") and r.stderr.count("\n") == 1, r.stderr
    assert not store.exists()


def test_unknown_synthetic_model_names_the_key():
    cfg = to_container(compose(["fabric=fattree", "fabric.nodes=64", "cluster.models=[resnet5O]"]))
    from estimator.cluster.simulate import trace_models

    with pytest.raises(EstimatorError, match=r"^cluster.models: unknown model 'resnet5O' \(did you mean 'resnet50'\?\)"):
        trace_models(cfg)  # the command's first step (capturing what the trace names)


@pytest.mark.parametrize("policy, alloc5", [("lumorph", 5), ("torus_slices", 8), ("bcube_groups", 8)])
def test_rack_placements_on_a_fat_tree(policy, alloc5):
    # FatTreeConfig has a radix() method: it used to reach int() and end in a TypeError traceback
    fabric = shared_fabric(to_container(compose(["fabric=fattree", "fabric.nodes=64"]))["fabric"])
    placer = make_placer(policy, 64, (), 0, fabric.config)
    assert placer.allocation(5) == alloc5 and len(placer.place(5)) == alloc5


def _check(out: dict, store: Path, njobs: int) -> None:
    """The script's sanity, on one run and its stored job rows."""
    jobs = _script()._stored(store)["cluster_jobs"]
    assert _script().sanity(out, jobs, njobs) == []
    assert out["jobs"] == njobs == len(jobs) == out["cluster_jobs_written"]


def test_cli_trace_file_on_a_fat_tree_with_rack_placement(tmp_path, workload):
    rows = [{"id": i, "submit_s": 5.0 * i, "gpus": [1, 2, 4, 8, 32][i % 5], "workload": workload, "iterations": 40}
            for i in range(10)]
    trace = tmp_path / "jobs.json"
    trace.write_text(json.dumps(rows))
    store = tmp_path / "s.duckdb"
    r = _cli("fabric=fattree", "fabric.nodes=64", f"cluster.trace={trace}", "+device.replay=true",
             "cluster.placement=lumorph", "write=true", f"store={store}", "output=json")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    _check(json.loads(r.stdout), store, 10)


@pytest.mark.parametrize("fabric", [
    ["fabric=custom", "fabric.topology=topologies/two_leaves.yaml", "cluster.phases=aligned", "cluster.scheduler=sjf"],
    ["fabric=ocs", "fabric.nodes=16", "fabric.topology=ring", "cluster.scheduler=backfill"],
])
def test_cli_shared_fabrics_are_sane(tmp_path, workload, fabric):
    rows = [{"id": i, "submit_s": 2.0 * i, "gpus": [2, 4, 8][i % 3], "workload": workload, "iterations": 30}
            for i in range(8)]
    trace = tmp_path / "jobs.csv"
    import polars as pl

    pl.DataFrame(rows).write_csv(trace)
    store = tmp_path / "s.duckdb"
    r = _cli(*fabric, f"cluster.trace={trace}", "+device.replay=true", "write=true", f"store={store}", "output=json")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    _check(json.loads(r.stdout), store, 8)


def test_sanity_catches_what_it_claims():
    good = {"makespan_s": 10.0, "jct_mean_s": 5.0, "jct_p50_s": 5.0, "jct_p99_s": 9.0, "queue_mean_s": 0.0,
            "setup_mean_s": 0.0, "wall_s": 0.1, "gpu_utilisation": 0.5, "gpu_alloc_utilisation": 0.5,
            "link_utilisation": None, "slowdown_mean": 1.0, "slowdown_p99": 1.0, "slowdown_max": 1.0,
            "placement_factor_mean": 1.0, "jobs": 1}
    job = {"submit_s": 0.0, "start_s": 0.0, "end_s": 10.0, "queue_s": 0.0, "jct_s": 10.0, "run_s": 10.0,
           "setup_s": 0.0, "iter_time_alone_s": 1.0, "iter_time_shared_s": 1.0, "slowdown": 1.0}
    sanity = _script().sanity
    assert sanity(good, [job], 1) == []
    assert sanity({**good, "gpu_utilisation": 1.2}, [job], 1) == ["gpu_utilisation=1.2"]
    assert sanity(good, [{**job, "end_s": 11.0}], 1) == ["1 jobs end after the makespan"]
    assert sanity(good, [{**job, "slowdown": 0.9}], 1) == ["1 jobs slowdown < 1 or NaN"]
    assert sanity({**good, "jct_mean_s": float("nan")}, [job], 2) == ["jct_mean_s=nan", "jobs 1 != trace 2"]


def test_write_into_a_trace_file_is_refused_before_the_run(traces, tmp_path):
    # DuckDB 2 opens an existing CSV as an in-memory database over it: `store=jobs.csv` printed "stored 5
    # cluster_jobs rows" and the rows were gone
    trace = tmp_path / "jobs.csv"
    trace.write_bytes((traces / "jobs.csv").read_bytes())
    before = trace.read_bytes()
    r = _cli("fabric=fattree", "fabric.nodes=64", f"cluster.trace={trace}", "write=true", f"store={trace}")
    assert r.returncode == 2 and r.stderr == f"error: {trace}: not a results store (not a DuckDB file; name the " \
                                              "store e.g. results/estimates.duckdb)\n", r.stderr
    assert trace.read_bytes() == before and not Path(f"{trace}.spill").exists()
    from estimator.store.duckdb_store import StoreError, write_rows

    with pytest.raises(StoreError, match="not a results store"):
        write_rows(trace, {"t": ("k", [{"k": 1}])})


def test_csv_header_typed_with_spaces_is_read(traces):
    # "id, submit_s, gpus" used to be refused as "unknown column ' submit_s' (did you mean 'submit_s'?)"
    from estimator.cluster.trace import load_trace

    jobs = load_trace(traces / "spaces.csv", ["resnet50", "bert_base"])
    assert [(j.id, j.submit_s, j.gpus, j.model, j.iterations) for j in jobs] == [
        (1, 0.0, 8, "resnet50", 1000), (2, 60.0, 16, "bert_base", 500)]


@pytest.mark.parametrize("overrides, message", [
    ({"tiles": 0}, "allocation.tiles must be 1..32"),  # was ZeroDivisionError (gpus % tiles)
    ({"r": 1}, "needs a switch radix r >= 2, got r=1"),  # bcube_shape looped forever
    ({"seed": -1}, "allocation.seed must be an integer >= 0"),  # random.Random(-1) == random.Random(1)
    ({"policies": []}, "allocation.policies must name at least one"),  # printed an empty table, exit 0
    ({"max_size": 0}, "allocation.max_size must be >= 1"),  # was refused naming allocation.sizes
])
def test_allocate_bad_parameters_are_one_line(overrides, message):
    from omegaconf import OmegaConf

    from estimator.commands import allocate

    cfg = OmegaConf.create({"allocation": overrides})
    with pytest.raises(EstimatorError, match=message):
        allocate.run(cfg)
