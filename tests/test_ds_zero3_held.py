"""DeepSpeed 2021 ZeRO-3 keeps the tied word embedding gathered through forward and backward (an external parameter
of the top module, docs/research/h102-ds-zero3.md): it counts against stage3_max_live_parameters in the prefetch gate,
and its gather and gradient reduction are paid once per microbatch, exposed."""

from __future__ import annotations

import pytest

import estimator
from estimator.estimate import estimate
from estimator.parallel.framework import Framework
from estimator.parallel.layout import Layout
from estimator.parallel.memory import zero3_units
from estimator.parallel.spec import TransformerSpec
from estimator.parallel.zero3 import GATHER_COPIES, held_params, prefetched

SHAPE_175B = ["model.hidden_size=12288", "model.num_layers=96", "model.num_heads=96", "model.ffn_size=49152"]
SHAPE_530B = ["model.hidden_size=20480", "model.num_layers=105", "model.num_heads=128", "model.ffn_size=81920"]


def framework(*overrides):
    return Framework.from_cfg(estimator.resolve_config(["parallelism=hybrid", "framework=deepspeed_2021",
                                                        *overrides])["framework"])


def spec(model, *shape):
    return TransformerSpec.from_cfg(estimator.resolve_config([f"model={model}", *shape])["model"])


LAYOUT = Layout(1, 1, 64, 1, 1, 1, 3, False, "full")


def test_the_held_embedding_is_the_tied_word_embedding_of_one_stage():
    ds, gpt = framework(), spec("megatron_gpt", *SHAPE_175B)
    assert held_params(gpt, LAYOUT, ds) == 51200 * 12288  # vocabulary 51,200 (no TP padding at tp 1) x hidden
    assert held_params(gpt, LAYOUT, framework("framework.zero3_held_embedding=false")) == 0
    assert held_params(gpt, Layout(1, 2, 32, 1, 1, 1, 3, False, "full"), ds) == 0  # two stages: not this case
    assert held_params(spec("llama2_7b"), LAYOUT, ds) == 0  # untied LM head: the embedding is used in its module only
    for name in ("deepspeed", "fsdp", "megatron", "internlm"):  # the other engines: not priced
        cfg = estimator.resolve_config(["parallelism=hybrid", f"framework={name}"])["framework"]
        assert not Framework.from_cfg(cfg).zero3_held_embedding


def test_the_held_embedding_closes_the_prefetch_gate():
    ds = framework()
    gpt = spec("megatron_gpt", *SHAPE_175B)
    units = zero3_units(gpt, LAYOUT, "module")  # QKV 453M, output 151M, fc1 604M, fc2 604M
    assert prefetched(units, ds, "full") == {p: [True] * 4 for p in "frb"}  # no Linear alone reaches 1e9
    # with the 629M embedding held: QKV (1.08e9 live) and fc1 (1.23e9) close the gate; once QKV is released the
    # attention's softmax hook prefetches the output Linear, which (0.78e9 live) opens it for fc1; backward: fc2
    # kept since its recompute, QKV prefetched while the output Linear runs
    assert prefetched(units, ds, "full", held_params(gpt, LAYOUT, ds)) == {
        "f": [False, True, True, False], "r": [False, True, True, False], "b": [True, False, False, True]}
    big = spec("megatron_gpt", *SHAPE_530B)
    # 530B: the 1.05e9-element embedding alone reaches 1e9: nothing is prefetched (not at the softmax hook either),
    # only fc2 kept for its backward
    assert prefetched(zero3_units(big, LAYOUT, "module"), ds, "full", held_params(big, LAYOUT, ds)) == {
        "f": [False] * 4, "r": [False] * 4, "b": [False, False, False, True]}


def test_a_parameterless_module_between_two_units_is_a_prefetch_chance():
    ds = framework()
    # 530B without the held embedding: QKV (1.26e9) closes the gate at its own hook; after its release the
    # softmax / dropout modules' hooks prefetch the output Linear, whose gather no longer waits whole
    units = zero3_units(spec("megatron_gpt", *SHAPE_530B), LAYOUT, "module")
    assert prefetched(units, ds, "full")["f"][:2] == [False, True]
    # a single unit per layer (FSDP-style units) has no gap: the same as before
    assert prefetched([sum(units)], ds, "full")["f"] == [False]


def run(*extra):
    n = 256
    return estimate(estimator.resolve_config([
        "model=megatron_gpt", *SHAPE_175B, "parallelism=hybrid", "system=dgx_a100", f"fabric.nodes={n}",
        "parallelism.tp=1", "parallelism.pp=1", "parallelism.zero=3", f"parallelism.global_batch={n}",
        "parallelism.recompute=full", "framework=deepspeed_2021", "precision=fp16", *extra]))


def test_the_held_embedding_is_gathered_and_reduced_once_per_microbatch_exposed():
    held, off = run(), run("framework.zero3_held_embedding=false",
                           "framework.zero3_prefetch_below_live=false")
    gate_only = run("framework.zero3_prefetch_below_live=false")
    v_bytes = 51200 * 12288 * 2
    rows = [c for c in held.collectives if c["bytes"] == v_bytes]
    assert {c["collective"] for c in rows} == {"all_gather", "all_reduce"}
    assert all(c["count_per_step"] == held.metrics["microbatches"] for c in rows)
    assert not [c for c in off.collectives if c["bytes"] == v_bytes]
    colls = sum(c["time_s"] for c in rows)
    # without the gate the held embedding adds its two collectives (plus copies and host time) to the exposed time
    assert gate_only.metrics["zero3_exposed_time_s"] - off.metrics["zero3_exposed_time_s"] >= colls
    # and the gate it closes exposes more gathers still
    assert held.metrics["zero3_exposed_time_s"] > gate_only.metrics["zero3_exposed_time_s"]
    assert held.metrics["iter_time_s"] > gate_only.metrics["iter_time_s"] > off.metrics["iter_time_s"]


class FlatPricer:
    """Every all-gather takes ``t`` seconds, every reduction none."""

    def __init__(self, t):
        self.t = t

    def price(self, group, collective, nbytes, size, count):
        return self.t if collective == "all_gather" else 0.0


def test_the_gather_runs_while_the_host_launches_c10ds_copies():
    from estimator.compute.device import DeviceProfile
    from estimator.parallel.zero3 import zero3_layer

    ds = framework()
    device = DeviceProfile.from_dict(estimator.resolve_config(["device=a100"])["device"])
    big = spec("megatron_gpt", *SHAPE_530B)
    lay = Layout(1, 1, 2240, 1, 1, 1, 3, False, "full")
    during = 2240 * device.launch_s  # c10d's per-rank copy launches after the NCCL kernel: 11.2 ms

    def fwd(t):  # the forward's exposure of one layer (every unit gathered on demand: the embedding is held)
        return zero3_layer(big, lay, ds, FlatPricer(t), device, "fp16", 2, 0.1, 0.2, 0.1, 1.0).fwd_exposed

    # the largest unit's list copies in HBM (zero-filled buffer, slices copied out) on top of NCCL's time
    copies = GATHER_COPIES * max(zero3_units(big, lay, "module")) * 2 / device.memory_rate("elementwise", "fp16")
    assert copies < during
    # a gather (with its list copies) shorter than the copy launches adds nothing; a longer one only its excess
    assert fwd(0.0) == pytest.approx(fwd((during - copies) / 2), abs=1e-12)
    assert fwd(during + 1.0) - fwd(during) == pytest.approx(4 * 1.0)  # four on-demand gathers per layer, 1 s longer
