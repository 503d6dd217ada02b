"""Bad input through the real CLI: one line naming the input and the problem, exit 2, nothing written."""

import subprocess
import sys

import pytest
from fixtures.importing import TOPOOPT_FIXTURES, need_shared

from tests.conftest import REPO


def run_cli(*args, cwd=REPO):
    return subprocess.run(
        [sys.executable, "-m", "estimator.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


@pytest.mark.parametrize(
    "args, needle",
    [
        (["estimate", "model=nosuchmodel"], "unknown model 'nosuchmodel'"),
        (["estimate", "fabric=nosuchfabric"], "unknown fabric 'nosuchfabric'"),
        (["estimate", "fabric.nodes=0"], "fabric.nodes"),
        (["estimate", "fabric.bandwidth_Bps=-5"], "bandwidth_Bps"),
        (["estimate", "fabric.nodez=8"], "nodez"),
        # a key other presets of the group name (the Qwen3 presets' qk_norm): where it is and how to add it
        (["estimate", "model=llama3_8b", "model.qk_norm=true"],
         "unknown parameter 'qk_norm' in model (this model preset does not name it; qwen3_235b_a22b, qwen3_30b_a3b do: "
         "add it with +model.qk_norm=VALUE)"),
        (["estimate", "model=llama3_8b", "parallelism.tp=3"], "tp x pp = 3 does not divide"),
        (["estimate", "model=llama3_8b", "system=dgx_a100", "precision=fp8"], "device a100 has no fp8"),
        (["estimate", "model=llama3_8b", "system=dgx_h100", "precision=fp8", "framework.fp8_recipe=mxfp8"], "fp8_recipe=mxfp8 is Blackwell-only"),
        (["frobnicate"], "unknown command 'frobnicate'"),
        (["collective", "fabric.nodes=64", "collective=all_reduce", "algorithm=nosuchalgo"], "nosuchalgo"),
        # export sizes the ASTRA-sim network to the workload: a smaller fabric is refused, as estimate refuses it
        (["export", "traces/reference/lenet5_gloo4.workload.json", "fabric=ideal", "fabric.nodes=2"],
         "workload 'lenet5_gloo4' uses 4 devices but fabric 'ideal' has 2 nodes (set fabric.nodes=4 or more)"),
        # importer.ranks / iteration are checked whatever the format (a TopoOpt or Kineto file alike)
        # -4 x -4 is 16: the old message said the product must equal fabric.nodes = 16
        (["collective", "fabric=torus2d", "fabric.nodes=16", "fabric.rows=-4", "fabric.cols=-4"],
         "fabric.rows = -4, fabric.cols = -4: set both >= 1"),
        (["collective", "fabric=torus2d", "fabric.nodes=16", "fabric.rows=4"], "fabric.rows = 4, fabric.cols = 0"),
        # a fabric's config is typed: no `+fabric.radix` advice (it is refused as well); one preset "does"
        (["collective", "fabric=fattree", "fabric.radix=4"],
         "unknown parameter 'radix' in fabric (a parameter of other fabrics: bcube does)"),
        (["packetsim", "network=leafspine", "nodes=64", "seed=-1"], "seed=-1 must be >= 0"),  # was numpy's traceback
        (["cluster", "cluster.jobs=10", "cluster.seed=-1"], "cluster.seed must be an integer >= 0"),  # the same
        (["import", "traces/reference/lenet5_gloo.kineto.json", "importer.iteration=-1"],  # a Horovod key
         "importer.iteration: must be a finite number >= 0, got -1"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, args, needle):
    store = tmp_path / "store.duckdb"
    traces = tmp_path / "traces"  # empty: a bad config must fail before any capture
    traces.mkdir()
    extra = {"estimate": [f"store={store}", "write=true", f"traces_dir={traces}"],
             "export": [f"export.out={traces / 'export'}"],
             "import": [f"importer.out={traces / 'imported.workload.json'}"]}.get(args[0], [])
    out = run_cli(*args, *extra)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], out.stderr
    assert "Traceback" not in out.stderr
    assert not store.exists() and not any(traces.iterdir())


def test_corrupt_trace_is_named(tmp_path):
    bad = tmp_path / "broken.workload.json"
    bad.write_text('{"format": "estimator.workload", "format_version": 1, "nodes": [')
    store = tmp_path / "s.duckdb"
    out = run_cli("estimate", f"workload={bad}", f"store={store}", "write=true")
    assert out.returncode == 2
    assert "broken.workload.json" in out.stderr and "not valid JSON" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert not store.exists()


def test_importer_ranks_checked_for_every_format(tmp_path):
    """A TopoOpt task graph ignores importer.ranks, but a negative one is still a mistake: refused."""
    fbuf = need_shared(TOPOOPT_FIXTURES / "100vgg_16.fbuf")
    out = run_cli("import", str(fbuf), "importer.ranks=-1", f"importer.out={tmp_path / 'vgg.workload.json'}")
    assert out.returncode == 2 and out.stderr.strip() == "error: importer.ranks: must be a finite number >= 1, got -1"
    assert not any(tmp_path.iterdir())


def test_export_of_a_missing_path_names_it_once(tmp_path):
    """A path that is not there is not looked up again as traces/<path>.workload.json (a name is)."""
    out = run_cli("export", "traces/reference/nope.workload.json", f"export.out={tmp_path / 'x'}")
    assert out.returncode == 2 and out.stderr.strip() == "error: traces/reference/nope.workload.json: no such workload file"
    out = run_cli("export", "nope", f"export.out={tmp_path / 'x'}")
    assert out.returncode == 2 and out.stderr.strip() == "error: nope: no such workload file (nor traces/nope.workload.json)"
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("command", [["estimate", "model=lenet5", "fabric.nodes=2"],
                                     ["collective", "fabric.nodes=8", "collective=all_reduce", "bytes=1e6"]])
def test_write_into_a_file_that_is_no_store_is_refused_before_any_work(tmp_path, command):
    """DuckDB opens an existing CSV as an in-memory database, so rows 'stored' there were lost: every command with
    write=true refuses such a store first (one line, exit 2), leaving the file as it was and writing nothing beside it."""
    trace = tmp_path / "jobs.csv"
    trace.write_text("id,submit_s,gpus\n1,0,8\n")
    r = run_cli(*command, "write=true", f"store={trace}", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr == f"error: {trace}: not a results store (not a DuckDB file; name the store " \
                                              "e.g. results/estimates.duckdb)\n", r.stderr
    assert trace.read_text() == "id,submit_s,gpus\n1,0,8\n" and sorted(p.name for p in tmp_path.iterdir()) == ["jobs.csv"]
