"""A hand capture after the pipeline's leaves Snakemake nothing to do (issue #27).

Snakemake runs a capture with one torch thread (OMP_NUM_THREADS=1), a user's shell with every core;
only timings differ, so the hand capture keeps the file and `snakemake -n` finds nothing to rerun."""

import json
import os
import subprocess
import sys

from estimator.workloads import io
from tests.conftest import REPO


def test_hand_capture_then_snakemake_dry_run_has_nothing_to_do(tmp_path):
    for name in ("workflow", "conf", "estimator", "validation"):
        (tmp_path / name).symlink_to(REPO / name)
    env = {**os.environ, "PYTHONPATH": str(REPO), "RAY_USAGE_STATS_ENABLED": "0"}
    target = "traces/lenet5.workload.json"
    snake = [sys.executable, "-m", "snakemake", "--cores", "1", target]
    out = subprocess.run(snake, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    path = tmp_path / target
    assert io.load(path).meta["torch_threads"] == 1  # Snakemake's one thread per job
    before, mtime = path.read_bytes(), path.stat().st_mtime_ns

    hand = subprocess.run([sys.executable, "-m", "estimator.cli", "capture", "model=lenet5", "output=json"],
                          cwd=tmp_path, env={**env, "OMP_NUM_THREADS": "2"}, capture_output=True, text=True,
                          timeout=600)
    assert hand.returncode == 0, hand.stderr
    assert json.loads(hand.stdout)["written"] is False
    assert path.read_bytes() == before and path.stat().st_mtime_ns == mtime

    dry = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", target], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=600)
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert "Nothing to be done" in dry.stdout + dry.stderr, dry.stdout + dry.stderr
