"""EP overlap without delayed weight gradients (h90, docs/research/h90-qwen3-facts.md): ``framework.moe_a2a_delay_wgrad``
false is Megatron-core's ``overlap_moe_expert_parallel_comm`` without ``delay_wgrad_compute``: the experts' whole
backward runs before the dispatch's backward is issued, so that all-to-all no longer hides behind their weight
gradients (model_chunk_schedule_plan.py ``run``)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import estimator
from estimator.parallel.framework import Framework
from estimator.parallel.moe_comm import merged_exposure


def test_without_the_delay_the_dispatch_backward_waits_for_the_whole_expert_backward():
    # a2a 1, experts' backward 2 (nothing else): delayed, the dispatch's backward runs beside the weight gradients
    # (exposed 4 - 2 = 2); not delayed, it waits for both halves (exposed 5 - 2 = 3)
    assert merged_exposure(1.0, 0.0, 0.0, 0.0, 2.0) == pytest.approx(2.0)
    assert merged_exposure(1.0, 0.0, 0.0, 0.0, 2.0, delay_wgrad=False) == pytest.approx(3.0)
    for a2a in (1e-4, 1e-3, 3e-3, 1e-2):  # never less exposed without the delay, and the same with nothing to hide
        args = (a2a, 2e-3, 3e-3, 4e-3, 6e-3)
        assert merged_exposure(*args, delay_wgrad=False) >= merged_exposure(*args) - 1e-15
    assert merged_exposure(1.0, 0.0, 0.0, 0.0, 0.0, delay_wgrad=False) == merged_exposure(1.0, 0.0, 0.0, 0.0, 0.0)


def test_the_delay_is_the_default_in_every_framework():
    for name in ("megatron", "deepspeed", "deepspeed_2021", "fsdp"):
        fw = Framework.from_cfg(estimator.resolve_config(["parallelism=hybrid", f"framework={name}"])["framework"])
        assert fw.moe_a2a_delay_wgrad is True


def _iter_time(*extra: str) -> float:
    args = ["model=qwen3_30b_a3b", "system=dgx_h100", "fabric.nodes=16", "parallelism=hybrid", "parallelism.tp=1",
            "parallelism.pp=1", "parallelism.ep=16", "parallelism.global_batch=1024", "precision=bf16",
            "parallelism.recompute=none", "model.moe_router_fusion=true", "framework.moe_dispatcher=hybridep",
            "output=json", *extra]
    out = subprocess.run([sys.executable, "-m", "estimator.cli", "estimate", *args], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)["iter_time_s"]


def test_the_key_moves_only_the_overlapped_run():
    overlapped = _iter_time("framework.moe_a2a_overlap=true")
    assert _iter_time("framework.moe_a2a_overlap=true", "framework.moe_a2a_delay_wgrad=false") >= overlapped
    assert _iter_time("framework.moe_a2a_delay_wgrad=false") == _iter_time()  # read only with the overlap
