"""Every command-line value is checked before any capture, import or write (issue #26):
interpolations of any kind, Hydra runtime settings, non-boolean booleans, out-of-range numbers,
bad grid points, unknown model names, key typos, oversized ``-m`` expansions and exports. Each is
one line on stderr, exit 2, and nothing is created in the working folder."""

from __future__ import annotations

import json

import pytest
from test_hardening_cli import cli, one_line_error

CASES = [
    (("estimate", "model.name=${now:%Y}"), "interpolation"),
    (("estimate", "fabric.name=${hydra:runtime.cwd}"), "interpolation"),
    (("estimate", "model.name=${fabric.name}"), "interpolation"),
    (("estimate", "model.name=${oc.select:fabric.name,x}"), "interpolation"),
    (("sweep", "sweep.grid={fabric.nodes:[${oc.env:HOME}]}"), "interpolation"),
    (("estimate", "hydra.searchpath=[file:///tmp]"), "Hydra's runtime settings"),
    (("estimate", "hydra.run.dir=/tmp/x"), "Hydra's runtime settings"),
    (("estimate", "write=maybe"), "write must be true or false, got 'maybe'"),
    (("estimate", "write=1"), "write must be true or false"),
    (("sweep", "sweep_force=maybe"), "sweep_force must be true or false"),
    (("validate", "pin=maybe"), "pin must be true or false"),
    (("collective", "show_schedule=maybe"), "show_schedule must be true or false"),
    (("export", "w", "export.astrasim=maybe"), "export.astrasim must be true or false"),
    (("sweep", "ray.local_pool=yes"), "ray.local_pool must be true or false"),
    (("sql", "SELECT 1", "sql_rows=-1"), "sql_rows must be a whole number >= 1"),
    (("sql", "SELECT 1", "sql_rows=abc"), "sql_rows must be a whole number >= 1"),
    (("sweep", "ray.in_process_below=-1"), "ray.in_process_below must be a non-negative whole number"),
    (("validate", "validation.margin_pct=-1"), "validation.margin_pct must be a non-negative number"),
    (("validate", "validation.margin_pct=nan"), "validation.margin_pct"),
    (("collective", "bytes=-5"), "bytes must be a non-negative number"),
    (("estimate", "fabric.alpha_s=abc"), "fabric.alpha_s must be a number"),
    (("sweep", "sweep.grid={fabric.nodes:[9223372036854775807]}"), "limits.devices"),
    (("sweep", "sweep.grid={fabric.nodes:[8],parallelism.bucket_cap_bytes:[abc]}"), "must be a number"),
    (("sweep", "sweep.grid={fabric.nodes:[8]}", "fabric.alpha_s=abc"), "fabric.alpha_s must be a number"),
    (("estimate", "model.name=nosuchmodel"), "no trace"),
    (("capture", "model.name=nosuchmodel"), "no trace"),
    (("estimate", "fabirc.nodes=8"), "did you mean 'fabric'"),
    (("estimate", "fabirc=ideal"), "did you mean 'fabric'"),
    (("estimate", "fabric.nodez=8"), "did you mean 'nodes'"),
    (("sweep", "ray.adress=x"), "did you mean 'address'"),
    (("estimate", "-m", "fabric.nodes=range(1,100000)"), "limits.multirun_points"),
    (("estimate", "-m", "fabric.nodes=8,16", "batch_size=1,2", "limits.multirun_points=3"), "4 points"),
    (("estimate", "-m", "fabric.nodes=interval(1,4)"), "-m takes lists"),
]


@pytest.mark.parametrize("args,needle", CASES, ids=[" ".join(a) for a, _ in CASES])
def test_bad_values_fail_before_any_work(tmp_path, args, needle):
    workload = tmp_path / "w.workload.json"
    workload.write_text(json.dumps({"format": "estimator.workload", "format_version": 1, "name": "w", "devices": 2,
                                    "batch_size": 1, "nodes": [{"id": 0, "name": "a"}]}))
    args = tuple(str(workload) if a == "w" else a for a in args)
    extra = (f"store={tmp_path / 's.duckdb'}", f"traces_dir={tmp_path / 'traces'}") if args[0] != "validate" \
        else (f"store={tmp_path / 's.duckdb'}",)
    one_line_error(cli(*args, *extra, cwd=tmp_path, timeout=120), needle)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.workload.json"]


def test_values_of_the_right_type_pass(tmp_path):
    """The checks refuse only what is wrong: numbers for float keys may be written as ints or
    in exponent form, booleans as true/false."""
    out = cli("collective", "bytes=1e6", "show_schedule=false", "fabric.nodes=8", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    out = cli("sql", "SELECT 1 AS one", "sql_rows=5", f"store={tmp_path / 'none.duckdb'}", cwd=tmp_path)
    one_line_error(out, "no results store")  # got past the value checks


def test_export_refuses_one_file_per_device_beyond_the_limit(tmp_path):
    path = tmp_path / "many.workload.json"
    path.write_text(json.dumps({"format": "estimator.workload", "format_version": 1, "name": "w", "devices": 131072,
                                "batch_size": 1, "nodes": [{"id": 0, "name": "a", "kind": "collective",
                                                            "collective": "all_reduce", "comm_bytes": 8.0}]}))
    one_line_error(cli("export", str(path), f"export.out={tmp_path / 'x'}", cwd=tmp_path), "limits.export_files")
    assert not (tmp_path / "x").exists()


def test_compose_cache_is_evicted(tmp_path, monkeypatch):
    from estimator import config

    monkeypatch.setenv("ESTIMATOR_CACHE", str(tmp_path))
    monkeypatch.setattr(config, "CACHE_FILES", 8)
    config._compose_cached.cache_clear()
    try:
        for nodes in range(2, 30):
            config.compose([f"fabric.nodes={nodes}"])
    finally:
        config._compose_cached.cache_clear()
    cached = list((tmp_path / "compose").glob("*.json"))
    assert 4 <= len(cached) <= 8
