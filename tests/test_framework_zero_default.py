"""parallelism.zero unset takes the framework's own ZeRO stage (framework.zero): PyTorch FSDP full sharding (3),
Megatron-core's distributed optimizer (1); a stated parallelism.zero wins; a bad framework.zero is one line."""

from __future__ import annotations

import pytest

import estimator
from estimator.errors import EstimatorError
from estimator.estimate import estimate

BASE = ["system=dgx_h100", "fabric.nodes=8", "model=llama3_8b", "parallelism=hybrid", "precision=bf16",
        "parallelism.tp=1", "parallelism.pp=1", "parallelism.global_batch=8", "parallelism.recompute=full"]


def layout(*extra: str) -> str:
    return estimate(estimator.resolve_config([*BASE, *extra])).metrics["layout"]


@pytest.mark.parametrize("framework, stage", [("fsdp", "zero3"), ("megatron", "zero1"), ("deepspeed", "zero1"),
                                              ("internlm", "zero1")])
def test_unset_zero_is_the_frameworks(framework, stage):
    assert f" {stage} " in layout(f"framework={framework}")


def test_stated_zero_wins():
    assert " zero2 " in layout("framework=fsdp", "parallelism.zero=2")
    assert " zero3 " in layout("framework=megatron", "parallelism.zero=3")


@pytest.mark.parametrize("value", ["5", "true", "one", "-1"])
def test_bad_framework_zero_is_refused(value):
    with pytest.raises(EstimatorError, match="framework.zero must be 0, 1, 2 or 3"):
        layout("framework=fsdp", f"framework.zero={value}")


def test_bad_parallelism_zero_is_refused_by_the_same_check():
    with pytest.raises(EstimatorError, match="parallelism.zero must be 0, 1, 2 or 3, got 4"):
        layout("framework=fsdp", "parallelism.zero=4")
