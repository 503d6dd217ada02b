"""Transformer Engine's FP8 amax all-reduces (estimator.parallel.fp8_amax): current scaling (``tensorwise``)
all-reduces 4-byte amaxes over TP for sequence-parallel tensors (2 forward + 2 backward per layer), delayed
scaling one fused buffer per chunk and pass over the ``tp x cp x dp`` ranks, blockwise none."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

import estimator
from estimator.estimate import estimate
from estimator.parallel.fp8_amax import AMAX_BYTES, delayed_bytes, te_gemms, tensorwise_per_layer
from estimator.parallel.spec import TransformerSpec


def run(recipe, *overrides, layers=4, gpus=8, tp=8):
    return estimate(estimator.resolve_config([
        "model=llama3_8b", f"model.num_layers={layers}", "model.seq_len=2048", "system=dgx_h100", "framework=megatron",
        "parallelism=hybrid", f"fabric.nodes={gpus}", f"parallelism.tp={tp}", "parallelism.pp=1",
        "parallelism.global_batch=8", "precision=fp8", f"framework.fp8_recipe={recipe}", *overrides]))


def amax_rows(est):
    return [c for c in est.collectives if c["collective"] == "all_reduce" and c["bytes"] < 1024]


def test_tensorwise_at_tp8_with_sp_pays_four_latency_bound_tp_all_reduces_per_layer():
    small, big = (run("tensorwise", "parallelism.sequence_parallel=true", layers=n) for n in (4, 8))
    (row,) = amax_rows(small)
    m = small.metrics["microbatches"]
    assert (row["group"], row["bytes"], row["group_size"]) == ("tp", AMAX_BYTES, 8)
    assert row["count_per_step"] == 4 * 4 * m  # (QKV + fc1 inputs, proj + fc2 output gradients) x layers x microbatches
    assert row["time_s"] > 1e-6  # latency-bound: the alpha term, not 4 bytes over NVLink
    assert small.metrics["fp8_amax_time_s"] == pytest.approx(row["count_per_step"] * row["time_s"])
    assert big.metrics["fp8_amax_time_s"] == pytest.approx(2 * small.metrics["fp8_amax_time_s"])  # grows with the count
    assert small.metrics["fp8_amax_time_s"] < small.metrics["exposed_comm_time_s"]  # counted as exposed
    assert run("blockwise", "parallelism.sequence_parallel=true").metrics["fp8_amax_time_s"] == 0.0


@pytest.mark.parametrize("overrides", [("parallelism.tp=1",), ("parallelism.sequence_parallel=false",)])
def test_tensorwise_without_sharded_tensors_adds_none(overrides):
    est = run("tensorwise", *overrides)
    assert est.metrics["fp8_amax_time_s"] == 0.0 and amax_rows(est) == []


def test_delayed_reduces_each_chunks_buffer_over_tp_cp_dp_per_microbatch_and_pass():
    est = run("delayed", "parallelism.sequence_parallel=true", gpus=16, tp=4, layers=4)
    rows = sorted(amax_rows(est), key=lambda c: c["bytes"])
    m = est.metrics["microbatches"]
    assert [(c["group"], c["group_size"], c["count_per_step"]) for c in rows] == [("amax", 16, m)] * 2  # tp 4 x dp 4
    assert [c["bytes"] for c in rows] == [4 * 2 * 4 * 4, 4 * 3 * 4 * 4]  # backward, forward: 4 B x amaxes x GEMMs x layers
    assert est.metrics["fp8_amax_time_s"] == pytest.approx(m * sum(c["time_s"] for c in rows))
    single = run("delayed", gpus=1, tp=1)  # one rank: TE skips the reduction (world size 1)
    assert single.metrics["fp8_amax_time_s"] == 0.0 and amax_rows(single) == []


def test_delayed_interleaved_pays_one_reduction_per_chunk():
    cfg = ["parallelism.pp=2", "parallelism.virtual_stages=2", "parallelism.sequence_parallel=true"]
    est = run("delayed", *cfg, gpus=16, tp=4, layers=8)
    m = est.metrics["microbatches"]
    assert {c["count_per_step"] for c in amax_rows(est)} == {2 * m}  # 2 chunks per rank
    assert {c["group_size"] for c in amax_rows(est)} == {8}  # tp 4 x dp 2 (pp not in the group)


def test_gemm_counts_and_bytes():
    cfg = estimator.resolve_config(["model=llama3_8b", "model.fused_kernels=te"])["model"]
    dense = TransformerSpec.from_cfg(cfg)
    assert te_gemms(dense, 1) == 4
    moe = replace(dense, experts=8, top_k=2, expert_ffn=1024, shared_ffn=1024)
    assert te_gemms(moe, 2) == 2 + 2 * 4 + 2
    assert delayed_bytes([(dense, 10), (moe, 1)], 2) == (4 * 3 * 52, 4 * 2 * 52)
    sp = SimpleNamespace(tp=8, sequence_parallel=True)
    assert tensorwise_per_layer(dense, sp) == (2, 2) and tensorwise_per_layer(moe, sp) == (2, 2)
    assert tensorwise_per_layer(replace(moe, shared_ffn=0), sp) == (1, 1)
