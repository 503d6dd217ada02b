"""Joining a Ray cluster that cannot be joined is one error line with a hint, in seconds (issue #26):
an unknown host, a closed port, something that is not a GCS, ``auto`` with nothing recorded, and a
real token-protected cluster (``ray start --head`` with ``RAY_AUTH_MODE=token``) joined without its
token — which works once the token is given. Each CLI call has a timeout: Ray's own retries (minutes
for an unknown host) would hit it."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil
import pytest
from test_hardening_cli import cli, one_line_error

GRID = "sweep.grid={fabric.nodes:[8,16]}"


@pytest.fixture
def workload(tmp_path):
    from helpers import chain_workload

    from estimator.workloads import io

    path = tmp_path / "w.workload.json"
    io.save(chain_workload([1e-3], [1e-3], 1e-4, [1 << 20]), path)
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unjoinable_addresses_are_one_line(tmp_path, workload):
    closed = _free_port()
    raydir = tmp_path / "raytmp"  # nothing recorded by `ray start` there
    raydir.mkdir()
    env = {"RAY_TMPDIR": str(raydir), "RAY_ADDRESS": ""}
    for address, needle in [("nosuch.invalid:1", "unknown host 'nosuch.invalid'"),
                            (f"127.0.0.1:{closed}", "cannot connect"),
                            ("ray://nosuch.invalid:10001", "unknown host"),
                            ("nonsense", "expected host:port"),
                            ("auto", "no cluster to join")]:
        out = cli("sweep", GRID, f"workload={workload}", f"store={tmp_path / 's.duckdb'}", "ray.in_process_below=0",
                  f"ray.address={address}", cwd=tmp_path, env=env, timeout=60)
        one_line_error(out, needle, "ray.address=local")
    assert not (tmp_path / "s.duckdb").exists()


def test_port_that_is_not_a_gcs(tmp_path, workload):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)  # accepts TCP connections, speaks no gRPC
    try:
        port = server.getsockname()[1]
        out = cli("sweep", GRID, f"workload={workload}", f"store={tmp_path / 's.duckdb'}", "ray.in_process_below=0",
                  f"ray.address=127.0.0.1:{port}", cwd=tmp_path, timeout=60)
        one_line_error(out, "no Ray GCS answers")
    finally:
        server.close()


@pytest.fixture
def token_cluster():
    """A real Ray head (`ray start --head`) that requires a token, in its own temporary folder;
    its processes (found by that folder in their command lines) are killed afterwards."""
    ray = shutil.which("ray", path=str(Path(sys.executable).parent))
    if ray is None:
        pytest.skip("the ray CLI is not installed beside this Python")
    folder = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    port, token = _free_port(), secrets.token_hex(32)
    env = {**os.environ, "RAY_TMPDIR": folder, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token,
           "RAY_USAGE_STATS_ENABLED": "0"}
    started = subprocess.run([ray, "start", "--head", f"--port={port}", "--num-cpus=1", "--include-dashboard=false",
                              "--disable-usage-stats"], env=env, capture_output=True,
                             text=True, timeout=180)
    try:
        if started.returncode != 0:
            pytest.skip(f"ray start failed: {started.stderr[-300:]}")
        yield {"address": f"127.0.0.1:{port}", "token": token, "folder": folder}
    finally:
        procs = [p for p in psutil.process_iter(["cmdline"]) if folder in " ".join(p.info["cmdline"] or ())
                 and p.pid != os.getpid()]
        for p in procs:
            try:
                p.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(procs, timeout=15)
        shutil.rmtree(folder, ignore_errors=True)


def test_token_protected_cluster(tmp_path, workload, token_cluster):
    store = tmp_path / "s.duckdb"
    base = ("sweep", GRID, f"workload={workload}", f"store={store}", "ray.in_process_below=0")
    no_token = {"RAY_TMPDIR": token_cluster["folder"], "RAY_ADDRESS": "", "RAY_AUTH_MODE": "", "RAY_AUTH_TOKEN": ""}
    out = cli(*base, f"ray.address={token_cluster['address']}", cwd=tmp_path, env=no_token, timeout=60)
    one_line_error(out, "requires Ray's auth token", "RAY_AUTH_TOKEN")
    out = cli(*base, "ray.address=auto", cwd=tmp_path, env=no_token, timeout=60)  # `ray start` recorded it
    one_line_error(out, "requires Ray's auth token")
    assert not store.exists()
    with_token = {**no_token, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token_cluster["token"]}
    out = cli(*base, "ray.address=auto", cwd=tmp_path, env=with_token, timeout=300)
    assert out.returncode == 0, out.stderr[-800:]
    import duckdb

    with duckdb.connect(str(store), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM estimates").fetchone()[0] == 2
