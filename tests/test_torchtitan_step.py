"""torchtitan's step work the audit of docs/research/h101-titan-8b.md added: torchao's float8 TP styles (float8
all-gathers, amax all-reduces of sharded tensors), FSDP2's float8 weight all-gather and its per-step scale
precompute, gradient clipping, FSDP2's root unit and the last block kept gathered."""

from __future__ import annotations

import pytest

import estimator
from estimator.estimate import estimate
from estimator.parallel.fp8_amax import AMAX_BYTES, torchao_tp_per_layer
from estimator.parallel.layout import Layout
from estimator.parallel.spec import TransformerSpec
from estimator.parallel.zero3 import FP8_GATHER_BYTES, FP32_MASTER, engine_copies

LAYERS, SEQ = 4, 2048


def run(*overrides, gpus=8, tp=1, precision="bf16"):
    return estimate(estimator.resolve_config([
        "model=llama3_8b", f"model.num_layers={LAYERS}", f"model.seq_len={SEQ}", "system=dgx_h100", "framework=fsdp",
        "parallelism=hybrid", f"fabric.nodes={gpus}", f"parallelism.tp={tp}", "parallelism.pp=1",
        f"parallelism.micro_batch_size={2 if tp > 1 else 1}",
        f"parallelism.global_batch={2 * gpus // tp if tp > 1 else gpus}",
        "parallelism.zero=3", "parallelism.recompute=op", f"precision={precision}", *overrides]))


def colls(est, group, collective):
    return [c for c in est.collectives if c["group"] == group and c["collective"] == collective]


def tp8(*overrides, precision="fp8"):
    return run("parallelism.sequence_parallel=true", *overrides, gpus=16, tp=8, precision=precision)


def test_torchao_tp_gathers_float8_and_reduce_scatters_16_bit():
    act = 2 * SEQ * 4096 * 2  # micro-batch 2, hidden 4096, 16-bit
    for kernels, gather in (("torchao", act / 2), ("torchao_fsdp_fp8", act / 2), ("te", act)):
        est = tp8(f"framework.fp8_kernels={kernels}")
        (ag,) = colls(est, "tp", "all_gather")
        (rs,) = colls(est, "tp", "reduce_scatter")
        assert (ag["bytes"], rs["bytes"]) == (gather, act), kernels
    bf16 = tp8("framework.fp8_kernels=torchao", precision="bf16")  # no FP8: the styles do not run
    assert colls(bf16, "tp", "all_gather")[0]["bytes"] == act


def test_torchao_tp_amax_all_reduces_per_layer():
    spec = TransformerSpec.from_cfg(estimator.resolve_config(["model=llama3_8b"])["model"])
    sp, no_sp = (Layout(tp=8, pp=1, dp=2, ep=1, micro_batch_size=1, microbatches=1, zero=3, sequence_parallel=s,
                        recompute="op") for s in (True, False))
    assert torchao_tp_per_layer(spec, sp, "torchao") == (11, 7)  # 2 module inputs + 2 row inputs + 7 weights; 7 grads
    assert torchao_tp_per_layer(spec, sp, "torchao_fsdp_fp8") == (4, 7)  # float8 weights arrive scaled
    assert torchao_tp_per_layer(spec, no_sp, "torchao") == (0, 0)
    assert torchao_tp_per_layer(spec, sp, "te") == (0, 0)
    est = tp8("framework.fp8_kernels=torchao")
    (row,) = [c for c in colls(est, "tp", "all_reduce") if c["bytes"] == AMAX_BYTES]
    assert row["count_per_step"] == 18 * LAYERS * est.metrics["microbatches"]
    assert est.metrics["fp8_amax_time_s"] == pytest.approx(row["count_per_step"] * row["time_s"])
    assert run("framework.fp8_kernels=torchao", precision="fp8").metrics["fp8_amax_time_s"] == 0.0  # tp 1: no DTensor


def test_fsdp_float8_all_gather_moves_one_byte_per_weight():
    plain, fp8ag = (run(f"framework.fp8_kernels={k}", precision="fp8") for k in ("torchao", "torchao_fsdp_fp8"))
    (ag16,), (ag8,) = colls(plain, "dp", "all_gather"), colls(fp8ag, "dp", "all_gather")
    assert ag8["bytes"] == pytest.approx(ag16["bytes"] / 2)
    assert fp8ag.metrics["zero3_comm_time_s"] < plain.metrics["zero3_comm_time_s"]
    assert fp8ag.metrics["zero3_copy_time_s"] < plain.metrics["zero3_copy_time_s"]  # float8 copy-out
    copies = engine_copies(2, 4, 2, fp8_gather=True)
    assert (copies.gather_in, copies.gather_out) == (FP32_MASTER + 3 * FP8_GATHER_BYTES, 2 * FP8_GATHER_BYTES)
    assert engine_copies(2, 4, 2) != copies  # the 16-bit path is unchanged by the flag's default


def test_fsdp_float8_precompute_reads_the_float8_shards_after_the_step():
    plain, fp8ag = (run(f"framework.fp8_kernels={k}", precision="fp8") for k in ("torchao", "torchao_fsdp_fp8"))
    extra = fp8ag.metrics["optimizer_s"] - plain.metrics["optimizer_s"]
    spec = TransformerSpec.from_cfg(estimator.resolve_config(["model=llama3_8b"])["model"])
    linear = 4096 * (4096 + 2 * 1024 + 4096) + 3 * 4096 * spec.ffn  # wq wk wv wo, w1 w3 w2
    read = LAYERS * linear / 8 * FP32_MASTER
    assert extra > 0
    assert 1e12 < read / extra < 3.35e12  # the read at H100's elementwise rate, plus one small all-reduce
    rows = [c for c in colls(fp8ag, "dp", "all_reduce") if c["bytes"] == AMAX_BYTES * 7 * LAYERS]
    assert len(rows) == 1


def test_grad_clip_passes_over_the_gradient_shard():
    off, on = run(), run("framework.grad_clip=true")
    extra = on.metrics["optimizer_s"] - off.metrics["optimizer_s"]
    shard = on.metrics["params"] / 8
    assert extra > 0
    # 3 fp32 passes over the shard (norm read, multiply read + write) at roughly 3 TB/s, plus one tiny all-reduce
    assert 3 * 4 * shard / 3.35e12 < extra < 3 * 4 * shard / 1.5e12
    assert on.metrics["iter_time_s"] - off.metrics["iter_time_s"] == pytest.approx(extra)


def test_root_unit_gathered_before_forward_and_reduced_after_backward():
    off, on = run(), run("framework.zero3_root_unit=true")
    spec = TransformerSpec.from_cfg(estimator.resolve_config(["model=llama3_8b"])["model"])
    root = 2 * spec.padded_vocab(1) * 4096 + 4096

    def added(kind: str) -> set:
        return {c["bytes"] for c in colls(on, "dp", kind)} - {c["bytes"] for c in colls(off, "dp", kind)}

    gathers, reduces = added("all_gather"), added("reduce_scatter")
    assert gathers == {root * 2} and reduces == {root * 4}  # bf16 gather, fp32 reduce (reduce_dtype float32)
    grown = on.metrics["zero3_exposed_time_s"] - off.metrics["zero3_exposed_time_s"]
    ag = next(c for c in colls(on, "dp", "all_gather") if c["bytes"] == root * 2)
    rs = next(c for c in colls(on, "dp", "reduce_scatter") if c["bytes"] == root * 4)
    assert grown > ag["time_s"] + rs["time_s"]  # both exposed whole, with their copies
    assert on.metrics["iter_time_s"] - off.metrics["iter_time_s"] == pytest.approx(grown)
    with pytest.raises(estimator.EstimatorError, match="zero3_root_unit"):
        estimate(estimator.resolve_config([
            "model=llama3_8b", "model.num_layers=4", "system=dgx_h100", "framework=fsdp", "parallelism=hybrid",
            "fabric.nodes=16", "parallelism.tp=1", "parallelism.pp=2", "parallelism.global_batch=16",
            "parallelism.zero=3", "framework.zero3_root_unit=true"]))


def test_keep_last_unit_drops_the_first_backward_gather():
    off, on = run(), run("framework.zero3_keep_last_unit=true")
    saved = off.metrics["zero3_exposed_time_s"] - on.metrics["zero3_exposed_time_s"]
    (ag,) = colls(off, "dp", "all_gather")
    assert saved >= ag["time_s"]  # the layer's gather (and its copy-in) no longer waited for whole
    assert off.metrics["iter_time_s"] - on.metrics["iter_time_s"] == pytest.approx(saved)
