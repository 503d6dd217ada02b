"""A killed sweep leaves no Ray processes (issue #12): a real `estimator sweep` on a local Ray is
killed (SIGKILL: no handler runs; SIGTERM: the handler runs) while its workers compute, and every
Ray process it had started (GCS, raylet, workers, agents) must be gone shortly after."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parents[1]


def _ray_descendants(proc: psutil.Process) -> dict[int, tuple[str, float]]:
    found = {}
    for child in proc.children(recursive=True):
        try:
            name, cmd = child.name(), " ".join(child.cmdline())
            if name in ("gcs_server", "raylet") or "/ray/" in cmd or name.startswith("ray::"):
                found[child.pid] = (name, child.create_time())
        except psutil.Error:
            pass
    return found


def _alive(recorded: dict[int, tuple[str, float]]) -> list[str]:
    alive = []
    for pid, (name, started) in recorded.items():
        try:
            p = psutil.Process(pid)
            if p.create_time() == started and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(f"{name}({pid})")
        except psutil.Error:
            pass
    return alive


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_killed_sweep_leaves_no_ray_processes(tmp_path, sig):
    alphas = ",".join(str(1e-6 + i * 1e-9) for i in range(400))
    args = [sys.executable, "-m", "estimator.cli", "sweep",
            f"sweep.grid={{fabric.nodes:[1024],fabric.alpha_s:[{alphas}],parallelism.bucket_cap_bytes:[5242880,52428800]}}",
            f"store={tmp_path / 'k.duckdb'}", "ray.in_process_below=0", "ray.local_pool=false", "ray.batch_size=4"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "RAY_USAGE_STATS_ENABLED": "0"}
    sweep = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    proc = psutil.Process(sweep.pid)
    recorded: dict[int, tuple[str, float]] = {}
    deadline = time.monotonic() + 240
    # wait until the raylet runs and a worker is computing (a `ray::` task process)
    while time.monotonic() < deadline and sweep.poll() is None:
        recorded.update(_ray_descendants(proc))
        names = {n for n, _ in recorded.values()}
        if "raylet" in names and any(n.startswith("ray::") or n == "python" for n in names) and len(recorded) >= 4:
            break
        time.sleep(0.3)
    assert sweep.poll() is None, f"sweep ended before it could be killed: {sweep.stderr.read().decode()[-500:]}"
    time.sleep(1.0)
    recorded.update(_ray_descendants(proc))
    # a `ray::` process that is not the sweep's (another user's or another Ray's orphaned worker:
    # started after the sweep, its parent not a raylet) must survive the watchdog (issue #26)
    foreign = subprocess.Popen(["bash", "-c", "exec -a 'ray::IDLE' sleep 120"])
    watchdogs = [c for c in proc.children() if "estimator.sweep.watchdog" in " ".join(c.cmdline())]
    assert watchdogs, "no watchdog beside the sweep's local Ray"
    time.sleep(0.3)
    os.kill(sweep.pid, sig)
    sweep.wait(timeout=60)
    left: list[str] = []
    for _ in range(60):  # up to 15 s for the watchdog to notice and the processes to exit
        left = _alive(recorded)
        if not left:
            break
        time.sleep(0.25)
    psutil.wait_procs(watchdogs, timeout=30)  # it has done all its killing when it exits
    try:
        assert not left, f"Ray processes outlived the killed sweep: {left}"
        assert not [w for w in watchdogs if w.is_running() and w.status() != psutil.STATUS_ZOMBIE]
        assert foreign.poll() is None, "the watchdog killed a ray:: process its sweep did not start"
        assert psutil.Process(foreign.pid).cmdline()[0] == "ray::IDLE"
    finally:
        foreign.kill()
        foreign.wait()
    assert not list(tmp_path.glob("*.spill"))
