"""Layer captures kept on disk (issue #27): keyed by every argument and the capture's sources, a
hit equals a fresh capture, a corrupt entry is ignored and rewritten, and a repeated large-model
CLI estimate does not import torch."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from estimator.parallel import layer
from estimator.parallel.spec import TransformerSpec
from estimator.workloads import capture_cache
from estimator.workloads.capture_cache import disk_cached, entry_path, key_of, source_files
from tests.conftest import REPO

TINY = TransformerSpec(name="tiny", family="gpt", hidden=64, layers=2, heads=4, kv_heads=4, ffn=256, vocab=512,
                       seq_len=32)
raw_capture = layer.capture_parts.__wrapped__.__wrapped__  # below lru_cache and disk_cached


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ESTIMATOR_CACHE", str(tmp_path))
    return tmp_path / "captures"


def test_a_hit_equals_a_fresh_capture_and_a_corrupt_entry_is_rewritten(cache_dir):
    cached = layer.capture_parts.__wrapped__  # the disk cache, without the in-process lru_cache
    fresh = raw_capture(TINY, 2, True)
    first = cached(TINY, 2, True)
    entries = list(cache_dir.glob("*.json"))
    assert len(entries) == 1 and first == fresh
    assert cached(TINY, 2, True) == fresh  # read back from the file
    assert set(fresh) == {"layer", "attention", "embedding", "head"}
    for damage in (b"{not json", b"", json.dumps({"format": "estimator.capture_cache", "version": 1}).encode()):
        entries[0].write_bytes(damage)
        assert cached(TINY, 2, True) == fresh
        assert json.loads(entries[0].read_text())["format"] == "estimator.capture_cache"  # rewritten whole
    doc = json.loads(entries[0].read_text())
    doc["value"]["workloads"]["layer"]["nodes"][0]["flops"] = -1.0  # an invalid workload: ignored
    entries[0].write_text(json.dumps(doc))
    assert cached(TINY, 2, True) == fresh


def test_every_argument_enters_the_key(cache_dir):
    fn = raw_capture
    base = key_of(fn, (TINY, 2, False), {})
    assert key_of(fn, (TINY,), {"tp": 2, "sp": False}) == base  # however the arguments are passed
    paths = {entry_path(base)}
    for field in dataclasses.fields(TransformerSpec):
        value = getattr(TINY, field.name)
        if dataclasses.is_dataclass(value):  # a nested settings record (the MoE router): one of its fields changed
            first = dataclasses.fields(value)[0].name
            other = dataclasses.replace(value, **{first: not getattr(value, first)})
        else:
            other = value + "x" if isinstance(value, str) else value + (1,) if isinstance(value, tuple) else value + 1
        paths.add(entry_path(key_of(fn, (dataclasses.replace(TINY, **{field.name: other}), 2, False), {})))
    paths.add(entry_path(key_of(fn, (TINY, 4, False), {})))
    paths.add(entry_path(key_of(fn, (TINY, 2, True), {})))
    assert len(paths) == len(dataclasses.fields(TransformerSpec)) + 3


def test_a_parameter_added_later_with_a_default_enters_the_key(cache_dir):
    def before(spec, tp):
        return None

    def after(spec, tp, precision="bf16"):
        return None

    after.__qualname__ = before.__qualname__
    k1, k2 = key_of(before, (TINY, 2), {}), key_of(after, (TINY, 2), {})
    assert k1 is not None and k2 is not None and entry_path(k1) != entry_path(k2)
    assert key_of(after, (TINY, 2), {"precision": "fp8"}) != k2


def test_uncacheable_arguments_and_a_disabled_cache_compute_every_time(cache_dir, monkeypatch):
    calls = []

    @disk_cached
    def part(x, extra=None):
        calls.append(x)
        return raw_capture(TINY, 1, False)

    part(1, extra=object())  # no plain form: computed, not cached
    part(1, extra=object())
    assert len(calls) == 2 and not cache_dir.exists()
    part(1)
    part(1)
    assert len(calls) == 3 and len(list(cache_dir.glob("*.json"))) == 1
    monkeypatch.setenv("ESTIMATOR_CACHE", "off")
    part(1)
    assert len(calls) == 4


def test_the_source_digest_follows_lazy_and_parenthesised_imports(tmp_path, monkeypatch):
    pkg = tmp_path / "estimator" / "fake"
    pkg.mkdir(parents=True)
    (tmp_path / "estimator" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from estimator.fake.b import g\n    return g()\n")
    (pkg / "b.py").write_text("from estimator.fake import (\n    c,\n)\nfrom estimator.fake.d import h as g\n")
    (pkg / "c.py").write_text("X = 1\n")
    (pkg / "d.py").write_text("def h():\n    return 1\n")
    (pkg / "unused.py").write_text("Y = 1\n")
    monkeypatch.setattr(capture_cache, "PACKAGE_ROOT", tmp_path)
    for fn in (capture_cache.source_files, capture_cache._environment_digest):
        fn.cache_clear()
    try:
        names = {p.name for p in source_files("estimator.fake.a")}
        assert names == {"__init__.py", "a.py", "b.py", "c.py", "d.py"}
        before = capture_cache._environment_digest("estimator.fake.a")
        (pkg / "d.py").write_text("def h():\n    return 2\n")
        capture_cache._environment_digest.cache_clear()
        assert capture_cache._environment_digest("estimator.fake.a") != before
    finally:
        for fn in (capture_cache.source_files, capture_cache._environment_digest):
            fn.cache_clear()


def test_the_real_capture_key_covers_its_modules():
    files = {str(p.relative_to(REPO)) for p in source_files("estimator.parallel.layer")}
    assert {"estimator/parallel/layer.py", "estimator/parallel/spec.py", "estimator/workloads/capture.py",
            "estimator/workloads/flops.py", "estimator/workloads/graph.py",
            "estimator/compute/megatron_kernels.py"} <= files


def test_a_repeated_large_model_cli_estimate_reads_the_cache_without_torch(tmp_path):
    args = ["estimate", "model=llama2_7b", "parallelism=hybrid", "fabric=ideal", "fabric.nodes=16",
            "parallelism.tp=8", "output=json"]
    code = (f"import sys, json\nfrom estimator.cli import run\nrun({args!r})\n"
            "print(json.dumps('torch' in sys.modules))")
    env = {**os.environ, "ESTIMATOR_CACHE": str(tmp_path), "PYTHONPATH": str(REPO)}
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env,
                           timeout=600) for _ in range(2)]
    for out in runs:
        assert out.returncode == 0, out.stderr
    (first, torch_first), (second, torch_second) = (r.stdout.strip().splitlines() for r in runs)
    assert json.loads(torch_first) is True and json.loads(torch_second) is False
    a, b = json.loads(first), json.loads(second)
    assert a["iter_time_s"] == b["iter_time_s"] and a["mfu"] == b["mfu"]
    assert len(list((tmp_path / "captures").glob("*.json"))) == 1
