"""Bad inputs and overrides through the real CLI: one line on stderr, exit 2, bounded time, nothing
written; computed rows survive a locked store; killed writers' temporaries are cleaned up."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def cli(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONWARNINGS="ignore", **(env or {}))
    return subprocess.run([sys.executable, "-m", "estimator.cli", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def one_line_error(out: subprocess.CompletedProcess, *needles: str) -> str:
    assert out.returncode == 2, (out.returncode, out.stderr[-500:])
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), out.stderr[-500:]
    assert "Traceback" not in out.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def test_non_regular_inputs_fail_at_once(tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    for args, what in [(("import", str(fifo)), "not a regular file"),
                       (("import", "/dev/zero"), "not a regular file"),
                       (("estimate", f"workload={fifo}"), "not a regular file"),
                       (("estimate", "workload=/dev/zero"), "not a regular file"),
                       (("estimate", f"workload={tmp_path}"), "is a directory"),
                       (("estimate", "fabric=custom", f"fabric.topology={fifo}"), "not a regular file")]:
        one_line_error(cli(*args, cwd=tmp_path, timeout=60), what)
    assert not (tmp_path / "traces").exists()


def test_size_limit_refuses_before_parsing(tmp_path):
    big = tmp_path / "big.json"
    big.write_bytes(b'{"traceEvents": [' + b'{"ph": "X"},' * 200_000 + b'{}]}')  # 2.4 MB
    one_line_error(cli("import", str(big), "limits.input_mb=1", cwd=tmp_path), "exceeds", "limits.input_mb")
    one_line_error(cli("import", str(big), "limits.input_mb=-1", cwd=tmp_path), "limits.input_mb")


def _workload(**node_extra) -> dict:
    return {"format": "estimator.workload", "format_version": 1, "name": "w", "devices": 2, "batch_size": 1,
            "nodes": [{"id": 0, "name": "a"}, {"id": 1, "name": "b", "deps": [0], **node_extra}]}


@pytest.mark.parametrize("text,needle", [
    (json.dumps(_workload()).replace('"deps": [0]', '"deps": [Infinity]'), "nodes[1].deps[0] is inf"),
    (json.dumps(_workload(flops=1.0)).replace('"flops": 1.0', '"flops": NaN'), "nodes[1].flops is nan"),
    (json.dumps(_workload(deps=["x"])), "nodes[1].deps[0]: expected an integer"),
    (json.dumps(_workload()).replace('"id": 1', '"id": [1]'), "nodes[1].id: expected an integer"),
    (json.dumps(_workload()).replace('"devices": 2', '"devices": 9223372036854775808'), "devices is an integer beyond 64 bits"),
    (json.dumps(_workload()).replace('"devices": 2', '"devices": 9223372036854775807'), "limits.devices"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
])
def test_bad_workload_json_names_the_field(tmp_path, text, needle):
    path = tmp_path / "bad.workload.json"
    path.write_text(text)
    one_line_error(cli("estimate", f"workload={path}", cwd=tmp_path), str(path), needle)


def test_encoding_and_topoopt_trailing_garbage(tmp_path, shared_dir):
    w = tmp_path / "u16.workload.json"
    w.write_bytes(json.dumps(_workload()).encode("utf-16"))
    one_line_error(cli("estimate", f"workload={w}", cwd=tmp_path), "UTF-16")
    topo = tmp_path / "t.yaml"
    topo.write_bytes(b"name: x\nendpoints: 4\xff\n")
    one_line_error(cli("estimate", "fabric=custom", f"fabric.topology={topo}", cwd=tmp_path), "not UTF-8")
    fbuf = tmp_path / "g.fbuf"
    fbuf.write_bytes((shared_dir / "fixtures/topoopt/100vgg_16.fbuf").read_bytes() + b"\0" * 4096)
    one_line_error(cli("import", str(fbuf), cwd=tmp_path), "unexpected bytes after the end")


def test_huge_counts_fail_fast(tmp_path):
    ring = tmp_path / "ring.yaml"
    ring.write_text("builder: {type: ring, n: 1000000000, bandwidth_Bps: 1.0e9, latency_s: 1.0e-6}\n")
    eps = tmp_path / "eps.yaml"
    eps.write_text("endpoints: 100000000\nswitches: [s]\nlinks: [[gpu0, s]]\n")
    for f in (ring, eps):
        one_line_error(cli("estimate", "fabric=custom", f"fabric.topology={f}", cwd=tmp_path), "limits.topology_nodes")
    et = tmp_path / "t.99999999999999.et"
    et.write_bytes(b"\0" * 16)
    one_line_error(cli("import", str(et), cwd=tmp_path), "missing")
    wl = tmp_path / "many.workload.json"
    wl.write_text(json.dumps(_workload()).replace('"devices": 2', f'"devices": {2**63 - 1}'))
    one_line_error(cli("export", str(wl), f"export.out={tmp_path / 'x'}", cwd=tmp_path), "limits.devices")
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("args,needle", [
    (("estimate", "batch_size=0"), "batch_size must be >= 1"),
    (("sweep", "ray.batch_size=0"), "ray.batch_size must be >= 1"),
    (("estimate", "output=xml"), "output must be one of"),
    (("compare", "compare.fabrics=[idael]"), "did you mean 'ideal'"),
    (("allocate", "allocation.sizes=[]"), "allocation.sizes"),
    (("capture", "capture.batch=100000000"), "limits.capture_batch"),
    (("packetsim", "nodes=-256"), "nodes must be >= 1"),
    (("collective", "sizes=[1024]", "busbw_plot=/proc/x.png"), "cannot write"),
    (("estimate", "fabric.nodes=2**63"), "fabric.nodes must be a whole number"),
    (("estimate", "fabric.nodes=9223372036854775808"), "limits.devices"),
    (("estimate", "model.name=${oc.env:HOME}"), "interpolation"),
    (("estimate", "fabric=idael"), "did you mean 'ideal'"),
    (("estimate", "fabric.nodez=3"), "did you mean 'nodes'"),
    (("estmate",), "did you mean 'estimate'"),
])
def test_invalid_overrides_are_one_line(tmp_path, args, needle):
    store = tmp_path / "s.duckdb"
    one_line_error(cli(*args, f"store={store}", "write=true", cwd=tmp_path) if args[0] == "estimate"
                   else cli(*args, cwd=tmp_path), needle)
    assert not store.exists() and not (tmp_path / "traces").exists()


def test_export_stays_in_its_folder(tmp_path):
    wl = _workload(kind="collective", collective="all_reduce", comm_bytes=8.0)
    wl["name"] = "../../escape"
    path = tmp_path / "evil.workload.json"
    path.write_text(json.dumps(wl))
    one_line_error(cli("export", str(path), "export.prefix=../../x", f"export.out={tmp_path / 'o'}", cwd=tmp_path),
                   "export.prefix")
    out = cli("export", str(path), "export.astrasim=false", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.et"))
    assert written == ["exports/escape/escape.0.et", "exports/escape/escape.1.et"]


def test_typo_in_sweep_override_fails_before_any_capture(tmp_path):
    out = cli("sweep", "experiment=ocs", "fabric.reconfig_sx=1", f"store={tmp_path / 's.duckdb'}",
              f"traces_dir={tmp_path / 'traces'}", cwd=tmp_path)
    one_line_error(out, "fabric.reconfig_sx", "matches no point")
    assert not (tmp_path / "traces").exists() and not (tmp_path / "s.duckdb").exists()


def test_locked_store_spills_rows_and_merges_them_later(tmp_path):
    store = tmp_path / "s.duckdb"
    wl = REPO / "tests" / "_spill.workload.json"
    from helpers import chain_workload

    from estimator.workloads import io

    io.save(chain_workload([1e-3], [1e-3], 1e-4, [1 << 20]), wl)
    try:
        base = ("estimate", f"workload={wl}", f"store={store}", "write=true")
        assert cli(*base, cwd=tmp_path).returncode == 0
        holder = subprocess.Popen([sys.executable, "-c", f"import duckdb,time; c=duckdb.connect({str(store)!r}); "
                                   "print('held', flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout.readline().strip() == "held"
            out = cli(*base, "fabric.nodes=16", cwd=tmp_path, env={"ESTIMATOR_LOCK_WAIT_S": "0.5"})
            assert out.returncode == 0 and "merged on the next write" in out.stderr, out.stderr
            assert list((tmp_path / "s.duckdb.spill").iterdir())
        finally:
            holder.kill()
            holder.wait()
        out = cli(*base, "fabric.nodes=32", cwd=tmp_path)
        assert out.returncode == 0 and "merged" in out.stderr, out.stderr
        assert not (tmp_path / "s.duckdb.spill").exists()
        import duckdb

        with duckdb.connect(str(store), read_only=True) as con:
            nodes = [r[0] for r in con.sql("SELECT fabric_nodes FROM estimates ORDER BY 1").fetchall()]
        assert nodes == [8, 16, 32]
    finally:
        wl.unlink(missing_ok=True)


def test_stale_temporaries_of_killed_writers_are_removed(tmp_path):
    from estimator.files import atomic_dir, write_atomic

    dead = 2**22 + 12345  # beyond the default pid_max: no live process has it
    stale = tmp_path / f".x.workload.{dead}.abcd1234.json"
    stale.write_text("partial")
    stale_dir = tmp_path / f".figures.{dead}.abcd1234"
    stale_dir.mkdir()
    live = tmp_path / f".y.workload.{os.getpid()}.abcd1234.json"
    live.write_text("in progress")
    write_atomic(tmp_path / "z.json", "{}")
    assert not stale.exists() and not stale_dir.exists() and live.exists()
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "old.png").write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_dir(tmp_path / "figures") as tmp:
            (tmp / "new.png").write_text("new")
            raise RuntimeError("killed mid-build")
    assert [p.name for p in (tmp_path / "figures").iterdir()] == ["old.png"]
    with atomic_dir(tmp_path / "figures") as tmp:
        (tmp / "new.png").write_text("new")
    assert [p.name for p in (tmp_path / "figures").iterdir()] == ["new.png"]
    time.sleep(0)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == [live.name]
