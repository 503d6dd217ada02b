"""ZeRO-3 as each engine runs it (estimator/parallel/zero3.py, conf/framework/*.yaml): DeepSpeed 2021's
re-gathers around full recompute, tensor-list collectives with a device sync per fetch, all-reduced
gradients, its prefetch gated by the live parameters, and its pipeline's partitioned activations with
whole gradients."""

from __future__ import annotations

import pytest

import estimator
from estimator.errors import EstimatorError
from estimator.estimate import estimate
from estimator.parallel.framework import Framework
from estimator.parallel.layout import Layout
from estimator.parallel.memory import zero3_units
from estimator.parallel.spec import TransformerSpec
from estimator.parallel.zero3 import backward_gathers, prefetched


def framework(name, *overrides):
    return Framework.from_cfg(estimator.resolve_config(["parallelism=hybrid", f"framework={name}", *overrides])["framework"])


def spec(model):
    return TransformerSpec.from_cfg(estimator.resolve_config([f"model={model}"])["model"])


def zero3(n, name, *extra, model="gpt3_175b", rc="full"):
    return estimate(estimator.resolve_config([
        f"model={model}", "parallelism=hybrid", "system=dgx_a100", f"fabric.nodes={n}", "parallelism.tp=1",
        "parallelism.pp=1", "parallelism.zero=3", f"parallelism.global_batch={n}", f"parallelism.recompute={rc}",
        f"framework={name}", "precision=fp16", *extra]))


def test_reuse_distance_decides_the_backward_gathers():
    ds, fsdp = framework("deepspeed_2021"), framework("fsdp")
    lay = Layout(1, 1, 64, 1, 1, 1, 3, False, "full")
    big, small = zero3_units(spec("gpt3_175b"), lay, "module"), zero3_units(spec("gpt3_13b"), lay, "module")
    # GPT-3 175B Linears: 453M, 151M, 604M, 604M. After its recompute forward fc1 waits for fc2's recompute and
    # backward (2 x 604M >= DeepSpeed's 1e9 stage3_max_reuse_distance): released and gathered again; fc2 is used next
    assert backward_gathers(big, ds, "full") == [2, 2, 2, 1]
    assert backward_gathers(small, ds, "full") == [1, 1, 1, 1]  # GPT-3 13B: every distance under 1e9
    assert backward_gathers(big, ds, "none") == [1, 1, 1, 1]  # no recompute: one gather for the backward
    assert backward_gathers([sum(big)], fsdp, "full") == [1]  # FSDP: the unit's gather serves recompute and backward


def test_deepspeed_2021_pays_host_time_per_rank_and_gathers_more():
    n = 256
    old = zero3(n, "deepspeed_2021")
    flat = zero3(n, "deepspeed_2021", "framework.zero3_list_collectives=false", "framework.zero3_sync_per_fetch=false")
    # 4 Linears forward, 7 gathers in backward per layer, and the held word embedding once per microbatch (h102)
    gathers = old.metrics["microbatches"] * (96 * (4 + 7) + 1)
    ag = [c for c in old.collectives if c["collective"] == "all_gather"]
    assert sum(c["count_per_step"] for c in ag) == gathers
    launch = estimator.resolve_config(["device=a100"])["device"]["launch_s"]
    # with a device sync per fetch, every gather's n per-rank copies are enqueued while the GPU idles
    assert old.metrics["zero3_exposed_time_s"] - flat.metrics["zero3_exposed_time_s"] >= gathers * n * launch
    modern = zero3(n, "deepspeed")
    assert modern.metrics["zero3_exposed_time_s"] < old.metrics["zero3_exposed_time_s"]


def test_deepspeed_2021_all_reduces_its_gradients():
    old, modern = zero3(64, "deepspeed_2021", model="gpt3_13b"), zero3(64, "deepspeed", model="gpt3_13b")
    reduce = {name: {c["collective"] for c in r.collectives if c["group"] == "dp" and c["collective"] != "all_gather"}
              for name, r in (("old", old), ("modern", modern))}
    assert reduce == {"old": {"all_reduce"}, "modern": {"reduce_scatter"}}


def test_host_time_grows_with_the_group():
    def exposed(n):
        return zero3(n, "deepspeed_2021", model="gpt3_13b").metrics["zero3_exposed_time_s"]

    small, large = exposed(64), exposed(1024)
    # host time per collective is n x launch_s: 16x the ranks, at least 8x the exposure at equal compute per GPU
    assert large > 8 * small


def test_bad_grad_collective_is_a_one_line_error():
    with pytest.raises(EstimatorError, match="zero3_grad_collective must be one of reduce_scatter, all_reduce") as err:
        framework("deepspeed", "framework.zero3_grad_collective=allgather")
    assert "\n" not in str(err.value)


def linears(h):
    return [3 * h * h, h * h, 4 * h * h, 4 * h * h]  # QKV, attention output, fc1, fc2 (GPT, ffn 4h)


def test_live_parameters_gate_the_prefetch():
    ds = framework("deepspeed_2021")
    # GPT-3 175B (h 12288): no Linear reaches 1e9, the gate never closes: every gather one module ahead
    assert prefetched(linears(12288), ds, "full") == {p: [True] * 4 for p in "frb"}
    # 530B (h 20480): holding QKV (1.26e9) or fc1 (1.68e9) closes the gate, so fc2 is gathered on demand; the
    # output Linear is prefetched at the attention's softmax hook once QKV is released (h102), fc1 while the output
    # Linear (0.42e9) runs. Backward: fc2 is kept since its recompute (its flag stays True), fc1 and the output
    # Linear wait, QKV is prefetched
    assert prefetched(linears(20480), ds, "full") == {"f": [False, True, True, False],
                                                     "r": [False, True, True, False],
                                                     "b": [True, False, False, True]}
    # engines without the gate (FSDP, today's DeepSpeed as modelled) prefetch every unit
    for name in ("fsdp", "deepspeed"):
        assert prefetched(linears(20480), framework(name), "full") == {p: [True] * 4 for p in "frb"}


def test_gated_prefetch_exposes_the_530b_gathers_only():
    shape_530b = ["model.hidden_size=20480", "model.num_layers=105", "model.num_heads=128", "model.ffn_size=81920"]
    off = "framework.zero3_prefetch_below_live=false"

    def exposed(*extra, model="gpt3_175b"):
        return zero3(256, "deepspeed_2021", *extra, model=model).metrics

    gated, free = exposed(*shape_530b), exposed(*shape_530b, off)
    ag = {c["bytes"]: c["time_s"] for c in zero3(256, "deepspeed_2021", *shape_530b).collectives
          if c["collective"] == "all_gather"}
    fc = ag[max(ag)]  # an fc1/fc2 gather (1.68e9 parameters)
    # per layer at least fc2 forward, fc2 recompute and fc1 backward now wait whole
    assert gated["zero3_exposed_time_s"] - free["zero3_exposed_time_s"] >= 105 * 3 * fc * 0.9
    # 175B without the held embedding (h102): nothing gated
    held_off = "framework.zero3_held_embedding=false"
    assert exposed(held_off)["zero3_exposed_time_s"] == exposed(held_off, off)["zero3_exposed_time_s"]


def test_deepspeed_2021_builds_each_gather_list_in_python():
    n = 256
    with_loop = zero3(n, "deepspeed_2021")
    without = zero3(n, "deepspeed_2021", "framework.zero3_gather_host_per_rank_s=0")
    gathers = with_loop.metrics["microbatches"] * (96 * (4 + 7) + 1)  # + the held word embedding's (h102)
    per_rank = framework("deepspeed_2021").zero3_gather_host_per_rank_s
    assert per_rank == pytest.approx(3.3e-6)  # one view op per rank (conf/framework/deepspeed_2021.yaml cites it)
    # a device sync per fetch exposes the whole loop of every gather: n views each
    added = with_loop.metrics["zero3_exposed_time_s"] - without.metrics["zero3_exposed_time_s"]
    assert added == pytest.approx(gathers * n * per_rank, rel=1e-6)
    # engines that gather into one flat buffer build no list
    assert {framework(name).zero3_gather_host_per_rank_s for name in ("deepspeed", "fsdp", "megatron")} == {0.0}


@pytest.mark.parametrize("value", ["-1e-6", "true", "abc"])
def test_bad_gather_host_time_is_a_one_line_error(value):
    with pytest.raises(EstimatorError, match="zero3_gather_host_per_rank_s must be a number of seconds >= 0") as err:
        framework("deepspeed_2021", f"framework.zero3_gather_host_per_rank_s={value}")
    assert "\n" not in str(err.value)
