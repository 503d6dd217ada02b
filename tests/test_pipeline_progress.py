"""Under Snakemake a long step's progress reaches the terminal, not only its log (issue #27: the
packet-level step was silent for minutes). A two-sweep experiment of collective prices runs through
the real Snakefile in a scratch folder."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO

TINY = """name: tiny
sweeps:
  ring:
    kind: collective
    grid:
      fabric: [ideal]
      algorithm: [ring]
      fabric.nodes: [8, 16]
      collective: [all_reduce]
      bytes: [1024, 2048, 4096, 8192, 16384]
  tree:
    kind: collective
    grid:
      fabric: [ideal]
      algorithm: [double_binary_tree]
      fabric.nodes: [8, 16]
      collective: [all_reduce]
      bytes: [1024, 2048, 4096, 8192, 16384]
"""


def test_experiment_progress_reaches_the_terminal(tmp_path):
    for name in ("workflow", "estimator", "validation"):
        (tmp_path / name).symlink_to(REPO / name)
    conf = tmp_path / "conf"
    conf.mkdir()
    for entry in (REPO / "conf").iterdir():
        if entry.name != "experiment":
            (conf / entry.name).symlink_to(entry)
    (conf / "experiment").mkdir()
    (conf / "experiment" / "tiny.yaml").write_text(TINY)
    env = {**os.environ, "PYTHONPATH": str(REPO), "RAY_USAGE_STATS_ENABLED": "0", "ESTIMATOR_CONF": str(conf)}
    out = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "experiment_tiny"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    terminal = (out.stdout + out.stderr).splitlines()
    progress = [line for line in terminal if line.startswith("experiment tiny: ")]
    assert any("sweep tiny/ring: 10/10 points (100 %)" in line for line in progress), progress
    assert any(line.startswith("experiment tiny: [1/2] tiny/ring") for line in progress), progress
    assert any(line.startswith("experiment tiny: [2/2] tiny/tree") for line in progress), progress
    assert progress[-1].startswith("experiment tiny: 2 sweeps, 20 points: 20 computed, 0 already in the store")
    log = (tmp_path / "results" / "logs" / "experiment_tiny.log").read_text()
    assert "[2/2] tiny/tree" in log  # the log keeps everything
