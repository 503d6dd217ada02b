"""ZeRO-2 reduce-scatters every microbatch's gradients during its backward (estimator/parallel/step.py). The part
that the backward does not hide lengthens each pipeline slot; the breakdown must show it: ``dp_exposed_time_s``
and ``exposed_comm_time_s`` carry it and ``dp_comm_time_s`` / ``comm_time_s`` the reduce-scatters' whole time (they
once carried neither, so an fp32-gradient run's extra seconds appeared in no column)."""

from __future__ import annotations

import pytest

import estimator
from estimator.estimate import estimate

# Llama 3 405B's 16,384-GPU layout (Dubey et al. 2024 Table 4; validation/llm.csv), FSDP without resharding (zero 2)
BASE = ["model=llama3_405b", "system=dgx_h100", "fabric.nodes=16384", "parallelism=hybrid", "parallelism.tp=8",
        "parallelism.pp=16", "parallelism.global_batch=2048", "parallelism.micro_batch_size=1", "model.seq_len=8192",
        "precision=bf16", "framework=fsdp", "parallelism.zero=2", "parallelism.virtual_stages=8",
        "parallelism.recompute=none", "parallelism.sequence_parallel=true"]


def run(*extra: str) -> dict:
    return estimate(estimator.resolve_config([*BASE, *extra])).metrics


def test_the_step_time_an_fp32_reduce_scatter_adds_is_in_the_exposed_columns():
    bf16, fp32 = run("parallelism.fp32_grads=false"), run("parallelism.fp32_grads=true")
    longer = fp32["iter_time_s"] - bf16["iter_time_s"]
    assert longer > 0.5  # twice the bytes over a 128-rank ring across nodes: no longer hidden by the backward
    shown = (fp32["dp_exposed_time_s"] - bf16["dp_exposed_time_s"]) + (fp32["bubble_time_s"] - bf16["bubble_time_s"])
    assert shown == pytest.approx(longer, rel=0.02)
    assert fp32["exposed_comm_time_s"] - bf16["exposed_comm_time_s"] == pytest.approx(
        fp32["dp_exposed_time_s"] - bf16["dp_exposed_time_s"], rel=1e-9)


def test_zero2_reduce_scatters_count_in_the_communication_time():
    result = estimate(estimator.resolve_config(BASE))
    dp = [c for c in result.collectives if c["group"] == "dp"]
    rs = max(c["time_s"] for c in dp if c["collective"] == "reduce_scatter")  # the slowest stage's, 16 per step
    ag = max(c["time_s"] for c in dp if c["collective"] == "all_gather")  # the weights' one gather after the step
    assert {c["count_per_step"] for c in dp if c["collective"] == "reduce_scatter"} == {16}
    assert result.metrics["dp_comm_time_s"] == pytest.approx(16 * rs + ag, rel=1e-6)
