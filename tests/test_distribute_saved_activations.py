"""Megatron's --distribute-saved-activations (``parallelism.distribute_saved_activations``): a full
recompute's checkpointed layer input split over the TP ranks (memory), gathered back over TP in the
backward (time); ignored with sequence parallelism; a one-line error where it cannot apply."""

from __future__ import annotations

import subprocess
import sys

import pytest

import estimator
from estimator.estimate import estimate
from estimator.parallel.layout import Layout
from estimator.parallel.memory import activation_bytes_per_layer
from estimator.parallel.spec import TransformerSpec

BASE = ["model=gpt3_175b", "parallelism=hybrid", "system=dgx_a100", "fabric.nodes=992", "precision=fp16",
        "parallelism.tp=8", "parallelism.micro_batch_size=8", "parallelism.global_batch=992",
        "parallelism.recompute=full", "parallelism.zero=2", "framework=fsdp",
        "parallelism.sequence_parallel=false"]  # metaseq's Megatron v2.6 had none (with it the input is split already)


def layout(**par):
    cfg = estimator.resolve_config(BASE)
    spec = TransformerSpec.from_cfg(cfg["model"])
    return spec, Layout.from_cfg({**cfg["parallelism"], **par}, spec, 992)


def test_checkpointed_input_is_split_over_tp():
    spec, whole = layout()
    _, split = layout(distribute_saved_activations=True)
    s, b, h = spec.seq_len, 8, spec.hidden
    assert activation_bytes_per_layer(spec, whole) == 2 * s * b * h
    assert activation_bytes_per_layer(spec, split) == 2 * s * b * h / 8
    _, with_sp = layout(distribute_saved_activations=True, sequence_parallel=True)
    assert not with_sp.distribute_saved and with_sp.saved_input_split == 8  # already split: nothing more


def test_published_opt_layout_fits_only_when_distributed_and_pays_one_gather_per_layer():
    with pytest.raises(estimator.EstimatorError, match="needs 87.0 GB per GPU"):
        estimate(estimator.resolve_config(BASE))
    dist = estimate(estimator.resolve_config([*BASE, "parallelism.distribute_saved_activations=true"]))
    gathers = [c for c in dist.collectives if c["group"] == "tp" and c["collective"] == "all_gather"]
    assert len(gathers) == 1 and gathers[0]["count_per_step"] == 96  # one per layer and microbatch
    assert dist.metrics["memory_total_bytes"] < 80e9


def test_needs_full_recompute_and_tensor_parallelism():
    proc = subprocess.run([sys.executable, "-m", "estimator.cli", "estimate", "model=llama3_8b", "parallelism=hybrid",
                           "parallelism.tp=2", "parallelism.recompute=selective",
                           "parallelism.distribute_saved_activations=true"], capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "it needs recompute=full and tp > 1" in proc.stderr
