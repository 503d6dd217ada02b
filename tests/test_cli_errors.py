"""Bad input through the real CLI: one line naming the input and the problem, exit 2, nothing written."""

import subprocess
import sys

import pytest

from tests.conftest import REPO


def run_cli(*args, cwd=REPO):
    return subprocess.run(
        [sys.executable, "-m", "estimator.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


@pytest.mark.parametrize(
    "args, needle",
    [
        (["estimate", "model=nosuchmodel"], "unknown model 'nosuchmodel'"),
        (["estimate", "fabric=nosuchfabric"], "unknown fabric 'nosuchfabric'"),
        (["estimate", "fabric.nodes=0"], "fabric.nodes"),
        (["estimate", "fabric.bandwidth_Bps=-5"], "bandwidth_Bps"),
        (["estimate", "fabric.nodez=8"], "nodez"),
        # a key other presets of the group name (the Qwen3 presets' qk_norm): where it is and how to add it
        (["estimate", "model=llama3_8b", "model.qk_norm=true"],
         "unknown parameter 'qk_norm' in model (this model preset does not name it; qwen3_235b_a22b, qwen3_30b_a3b do: "
         "add it with +model.qk_norm=VALUE)"),
        (["estimate", "model=llama3_8b", "parallelism.tp=3"], "tp x pp = 3 does not divide"),
        (["estimate", "model=llama3_8b", "system=dgx_a100", "precision=fp8"], "device a100 has no fp8"),
        (["estimate", "model=llama3_8b", "system=dgx_h100", "precision=fp8", "framework.fp8_recipe=mxfp8"], "fp8_recipe=mxfp8 is Blackwell-only"),
        (["frobnicate"], "unknown command 'frobnicate'"),
        (["collective", "fabric.nodes=64", "collective=all_reduce", "algorithm=nosuchalgo"], "nosuchalgo"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, args, needle):
    store = tmp_path / "store.duckdb"
    traces = tmp_path / "traces"  # empty: a bad config must fail before any capture
    traces.mkdir()
    extra = [f"store={store}", "write=true", f"traces_dir={traces}"] if args[0] == "estimate" else []
    out = run_cli(*args, *extra)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], out.stderr
    assert "Traceback" not in out.stderr
    assert not store.exists() and not any(traces.iterdir())


def test_corrupt_trace_is_named(tmp_path):
    bad = tmp_path / "broken.workload.json"
    bad.write_text('{"format": "estimator.workload", "format_version": 1, "nodes": [')
    store = tmp_path / "s.duckdb"
    out = run_cli("estimate", f"workload={bad}", f"store={store}", "write=true")
    assert out.returncode == 2
    assert "broken.workload.json" in out.stderr and "not valid JSON" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert not store.exists()
