"""Megatron-LM's scatter/gather at pipeline boundaries (framework.p2p_gather_on_receive; estimator/parallel/step.py):
the receiving stage all-gathers every 1/tp part over its TP group, exposed, only with tp > 1, pp > 1 and no sequence
parallelism (megatron/p2p_communication.py l.132-141 at NVIDIA/Megatron-LM@6985e58)."""

from __future__ import annotations

import pytest

import estimator
from estimator.estimate import estimate

BASE = ["system=dgx_a100", "fabric.nodes=64", "model=megatron_gpt", "parallelism=hybrid", "precision=fp16",
        "framework=megatron", "model.hidden_size=4096", "model.num_layers=16", "model.num_heads=32",
        "model.ffn_size=16384", "parallelism.micro_batch_size=1", "parallelism.global_batch=64",
        "parallelism.recompute=full", "parallelism.tp=8", "parallelism.pp=4", "parallelism.sequence_parallel=false"]


def run(*overrides: str) -> dict:
    return estimate(estimator.resolve_config([*BASE, *overrides])).metrics


def test_the_profile_states_it():
    for name, on in (("megatron", True), ("deepspeed", False), ("fsdp", False)):
        cfg = estimator.resolve_config(["parallelism=hybrid", f"framework={name}"])
        assert cfg["framework"]["p2p_gather_on_receive"] is on, name


def test_receiving_stages_gather_and_wait():
    on, off = run(), run("framework.p2p_gather_on_receive=false")
    assert on["p2p_gather_time_s"] > 0 and off["p2p_gather_time_s"] == 0
    assert on["iter_time_s"] > off["iter_time_s"] + on["p2p_gather_time_s"] * 0.99  # exposed, plus the copy-out


def test_a_direction_gathers_only_when_its_sends_are_split():
    # the slowest stage here is the last (it holds the LM head): it receives activations in forward and no gradient
    # in backward, so its gathers follow the forward split only
    both = run()
    assert both["slowest_stage"] == 3
    assert run("framework.p2p_grad_scatter_gather=false")["p2p_gather_time_s"] == pytest.approx(
        both["p2p_gather_time_s"], rel=1e-9)
    assert run("framework.p2p_scatter_gather=false")["p2p_gather_time_s"] == 0


@pytest.mark.parametrize("change", [["parallelism.sequence_parallel=true"], ["parallelism.tp=1"], ["parallelism.pp=1"]])
def test_nothing_to_gather(change):
    assert run(*change)["p2p_gather_time_s"] == 0
