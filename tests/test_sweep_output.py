"""What a sweep prints (issue #27): a command-line grid is labelled as such, the summary is printed
once, in words (points computed / already in the store, rows written per table)."""

from __future__ import annotations

from estimator import cli
from estimator.commands.sweep import sweep_label

GRID = "sweep.grid={fabric:[ideal],fabric.nodes:[8,64]}"


def test_labels():
    assert sweep_label("resnet50_scaling", []) == "resnet50_scaling"
    assert sweep_label("resnet50_scaling", [GRID, "store=x"]) == "command-line grid"
    assert sweep_label("resnet50_scaling", ["sweep.grid.fabric=[ideal]"]) == \
        "resnet50_scaling (grid changed on the command line)"
    assert sweep_label("resnet50_scaling", ["fabric.alpha_s=1e-6"]) == "resnet50_scaling"


def test_a_command_line_grid_prints_one_summary_in_words(tmp_path, capsys):
    store = tmp_path / "s.duckdb"
    assert cli.run(["sweep", GRID, f"store={store}"]) == 0
    out, err = capsys.readouterr()
    assert len(out.strip().splitlines()) == 1
    assert out.startswith("sweep command-line grid: 2 points: 2 computed, 0 already in the store; "
                          "2 rows written (estimates 2)")
    assert "resnet50_scaling" not in out + err and "[1/1]" not in err
    assert cli.run(["sweep", GRID, f"store={store}"]) == 0
    out, _ = capsys.readouterr()
    assert "2 points: 0 computed, 2 already in the store; 0 rows written (estimates 0)" in out


def test_an_experiment_reports_each_sweep_as_it_finishes_and_the_total_once(tmp_path, capsys):
    assert cli.run(["sweep", "experiment=foundation", f"store={tmp_path / 's.duckdb'}"]) == 0
    out, err = capsys.readouterr()
    finished = [line for line in err.splitlines() if line.startswith("[")]
    assert [line.split("]")[0] for line in finished] == ["[1/2", "[2/2"]
    lines = out.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("experiment foundation: 2 sweeps, 24 points: 24 computed")
