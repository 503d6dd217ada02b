"""The committed reference workloads in traces/reference/ load, are small, and estimate at once."""

from __future__ import annotations

from pathlib import Path

from test_hardening_cli import cli

from estimator.workloads import io

REF = Path(__file__).resolve().parents[1] / "traces" / "reference"


def test_reference_set_is_small_and_valid():
    files = sorted(REF.glob("*.workload.json"))
    assert files
    assert sum(f.stat().st_size for f in files) < 5 * 2**20
    for f in files:
        w = io.load(f)
        assert w.devices >= 2 and any(n.kind == "collective" for n in w.nodes)


def test_reference_trace_estimates_from_anywhere(tmp_path):
    out = cli("estimate", "workload=traces/reference/lenet5_gloo4.workload.json", "fabric=nvlink_leafspine",
              "fabric.nodes=4", "output=json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert '"iter_time_s"' in out.stdout


def test_reference_workload_is_the_import_of_the_committed_trace():
    """lenet5_gloo4.workload.json is exactly `estimator import` of lenet5_gloo.kineto.json (4 ranks)."""
    from estimator.workloads.importers import import_file

    fresh, _ = import_file(REF / "lenet5_gloo.kineto.json", name="lenet5_gloo4", options={"ranks": 4})
    committed = io.load(REF / "lenet5_gloo4.workload.json")
    assert fresh.nodes == committed.nodes and fresh.devices == committed.devices == 4
    assert sum(n.kind == "collective" for n in committed.nodes) == 10  # LeNet-5: 5 layers x (weight, bias)
