"""A local Ray instance started by a sweep refuses clients without its per-run token."""

from __future__ import annotations

import os
import subprocess
import sys

INTRUDER = """
import ray
try:
    ray.init(address={gcs!r}, logging_level="ERROR")
    @ray.remote
    def f():
        return 1
    print("INTRUDER RAN", ray.get(f.remote(), timeout=20))
except Exception as exc:
    print("rejected:", type(exc).__name__, str(exc).splitlines()[0][:200])
"""


def test_local_ray_rejects_clients_without_the_token():
    import ray

    from estimator.sweep import runner

    saved = {k: os.environ.get(k) for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}
    was_running = ray.is_initialized()
    if was_running:
        ray.shutdown()
    for k in saved:
        os.environ.pop(k, None)
    try:
        runner._init_ray("local", 1)
        assert os.environ["RAY_AUTH_MODE"] == "token" and len(os.environ["RAY_AUTH_TOKEN"]) == 64
        gcs = ray.get_runtime_context().gcs_address
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
        try:
            out = subprocess.run([sys.executable, "-c", INTRUDER.format(gcs=gcs)], env=env, capture_output=True,
                                 text=True, timeout=90).stdout
        except subprocess.TimeoutExpired:
            out = "rejected: timed out"
        assert "INTRUDER RAN" not in out and "rejected" in out, out
    finally:
        ray.shutdown()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_a_token_changed_in_the_environment_is_what_the_next_local_instance_uses(monkeypatch):
    """A caller that restores its environment between two sweeps (as a test or a notebook does)
    leaves Ray's in-process token cache stale; the next local instance must re-read it, or the
    driver's own calls are refused and Ray reports "Failed to start GCS"."""
    import secrets

    import ray

    from estimator.sweep import runner

    if ray.is_initialized():
        ray.shutdown()
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    try:
        runner._init_ray("local", 1)
        ray.shutdown()
        monkeypatch.setenv("RAY_AUTH_MODE", "token")
        monkeypatch.setenv("RAY_AUTH_TOKEN", secrets.token_hex(32))  # not the token Ray cached
        runner._init_ray("local", 1)

        @ray.remote
        def one():
            return 1

        assert ray.get(one.remote(), timeout=60) == 1
    finally:
        ray.shutdown()
