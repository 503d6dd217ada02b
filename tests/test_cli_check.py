"""`estimator --check COMMAND ...`: compose and validate as a run would, run nothing (the docs test
uses it to fail stale command examples)."""

from __future__ import annotations

import pytest

from estimator import cli
from estimator.errors import EstimatorError


@pytest.mark.parametrize("argv", [
    ["estimate", "model=resnet50", "fabric=ideal", "fabric.nodes=8", "device=a100", "output=json"],
    ["estimate", "-m", "fabric=ideal,nvlink_leafspine", "fabric.nodes=8,64"],
    ["sweep", "experiment=foundation"],
    ["collective", "fabric=ideal", "fabric.nodes=64", "algorithm=ring", "bytes=67108864"],
    ["import", "traces/reference/lenet5_gloo.kineto.json", "importer.ranks=8"],
    ["packetsim", "network=opsquare", "nodes=256", "load=0.6", "locality=0.5"],
])
def test_a_valid_command_checks_ok(argv, capsys):
    assert cli.run(["--check", *argv]) == 0
    assert capsys.readouterr().out.startswith(f"ok: estimator {argv[0]} composes and validates")


@pytest.mark.parametrize("argv, needle", [
    (["estimate", "fabric.nodez=3"], "nodez"),  # a renamed key
    (["estimate", "fabric=bogus"], "bogus"),  # a removed fabric
    (["estimate", "device=h100", "precision=tf64"], "precision"),
    (["sweep", "experiment=foundation", "fabric.alpha_s=-1"], "alpha_s"),  # a bad point of the grid
    (["collective", "fabric=ideal", "algorithm=nope", "bytes=1"], "nope"),
    (["import", "traces/no_such.kineto.json"], "no_such"),
    (["cluster", "cluster.seed=-1"], "cluster.seed"),  # cluster had no check hook: --check said ok
    (["cluster", "fabric=sipac", "fabric.nodes=8"], "SiPAC"),
    # commands that had no check hook: --check said ok to what their run refuses before any work
    (["allocate", "allocation.gpus=100"], "not a whole number of 32-tile"),
    (["import", "traces/reference/lenet5_gloo.kineto.json", "importer.ranks=0"], "importer.ranks"),
    (["export", "traces/reference/lenet5_gloo4.workload.json", "fabric=ideal", "fabric.nodes=2"], "has 2 nodes"),
    (["estimat", "model=resnet50"], "unknown command"),
    (["estimate", "unexpected_positional"], "unexpected argument"),
])
def test_a_stale_command_fails(argv, needle):
    with pytest.raises(EstimatorError, match=needle):
        cli.run(["--check", *argv])


def test_check_runs_nothing(tmp_path, capsys):
    """A model with no trace in traces_dir is not captured by --check (a run would capture it)."""
    assert cli.run(["--check", "estimate", "model=lenet5", f"traces_dir={tmp_path}"]) == 0
    assert not any(tmp_path.iterdir())
    store = tmp_path / "s.duckdb"
    assert cli.run(["--check", "sweep", "experiment=foundation", f"store={store}"]) == 0
    assert not store.exists()


@pytest.mark.parametrize("argv, points", [
    (["sweep", "sweep=resnet50_scaling"], 12),  # 2 fabrics x 6 sizes, not the one command line
    (["sweep", "sweep=resnet50_scaling", "sweep.grid.fabric=[ideal]"], 6),
    (["sweep", "sweep.grid={fabric:[ideal],fabric.nodes:[8,64,128]}"], 3),
    (["estimate", "-m", "fabric=ideal,nvlink_leafspine", "fabric.nodes=8,64"], 4),
    (["estimate", "model=resnet50"], 1),
])
def test_check_counts_grid_points(argv, points, capsys):
    """--check reports the points a run would compute: a sweep's grid points, a multirun's points."""
    assert cli.run(["--check", *argv]) == 0
    assert f"({points} point{'s' * (points != 1)}; nothing run)" in capsys.readouterr().out
