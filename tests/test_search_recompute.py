"""The layout search and activation recompute (estimator/parallel/search.py): with ``parallelism.recompute`` unstated
the search tries the framework's default, then ``selective``, then ``full`` on each layout and keeps the fastest step
that fits; a stated recompute is kept as is."""

from __future__ import annotations

import pytest

import estimator
from estimator.estimate import estimate

# Llama 3 8B on one DGX H100 at a small batch (the cheap search of tests/test_default_layout.py)
H100 = ["model=llama3_8b", "system=dgx_h100", "fabric.nodes=8", "parallelism.global_batch=64", "precision=bf16"]
# 20 GB per GPU: no layout of 8 GPUs holds Llama 3 8B's activations without recompute (checked below)
TIGHT = "parallelism.device_memory_bytes=20e9"


def run(*overrides):
    return estimate(estimator.resolve_config([*H100, *overrides])).metrics


def test_unstated_recompute_is_searched_when_only_a_recompute_fits():
    with pytest.raises(estimator.EstimatorError, match=r"no layout of llama3_8b on 8 GPUs fits 20.0 GB .* recompute none$"):
        run(TIGHT, "parallelism.recompute=none")
    m = run(TIGHT)
    assert m["recompute"] in ("selective", "full") and f"rc={m['recompute']}" in m["layout"]
    assert m["searched"] == "tp, pp, recompute" and m["memory_total_bytes"] <= 20e9


def test_a_stated_recompute_is_never_changed():
    m = run("parallelism.recompute=none")
    assert m["recompute"] == "none" and m["searched"] == "tp, pp"
    sel = run("parallelism.recompute=selective")  # kept although none would fit at a faster step
    assert sel["recompute"] == "selective" and "rc=selective" in sel["layout"] and sel["searched"] == "tp, pp"


def test_a_layout_that_fits_without_recompute_at_a_faster_step_keeps_none():
    m = run()
    assert m["recompute"] == "none" and "rc=none" in m["layout"]
    for mode in ("selective", "full"):
        assert m["iter_time_s"] < run(f"parallelism.recompute={mode}")["iter_time_s"]


@pytest.mark.parametrize("layout", [("parallelism.tp=2", "parallelism.pp=1"), ("parallelism.tp=1", "parallelism.pp=2"),
                                    ("parallelism.tp=4", "parallelism.pp=2", "parallelism.micro_batch_size=2")])
def test_more_recompute_is_never_faster_on_one_layout(layout):
    """The search's assumption (it stops at the first recompute mode that fits a layout)."""
    times = [run(*layout, f"parallelism.recompute={mode}", "parallelism.device_memory_bytes=1e12")["iter_time_s"]
             for mode in ("none", "selective", "full")]
    assert times[0] < times[1] < times[2]


def test_a_framework_defaulting_to_selective_searches_selective_then_full():
    from estimator.parallel.estimate import setup_hybrid

    search_in = setup_hybrid(estimator.resolve_config([*H100, "framework=fsdp"])).placement[1]
    assert search_in["recomputes"] == ("selective", "full")
    assert setup_hybrid(estimator.resolve_config([*H100, "parallelism.recompute=op", "framework=fsdp"])).placement[1]["recomputes"] is None
