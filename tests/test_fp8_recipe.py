"""framework.fp8_recipe: Transformer Engine's FP8 scaling recipe (estimator.compute.te_kernels). ``delayed`` (the
default) is the capture as before; ``tensorwise`` (current scaling) adds one amax pass per quantized tensor;
``blockwise`` replaces the cast-transpose by the 1x128 quantize with its scales; ``mxfp8`` and bad values refused."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from dataclasses import replace

import pytest

import estimator
from estimator.errors import EstimatorError
from estimator.estimate import estimate
from estimator.parallel.framework import Framework
from estimator.parallel.layer import capture_parts, fp8_mode
from estimator.parallel.spec import TransformerSpec
from tests.conftest import REPO

CAST, AMAX, BLOCK = "te::fp8_cast_transpose", "te::fp8_amax", "te::fp8_block_quantize"
MULTI, GROUPED_CAST, GROUPED_AMAX, GROUPED_BLOCK = ("te::fp8_multi_cast_transpose", "te::fp8_grouped_cast_transpose",
                                                    "te::fp8_grouped_amax", "te::fp8_grouped_block_quantize")
FP8_OPS = (CAST, AMAX, BLOCK)
LINEARS = 4  # the te Llama layer's GEMMs: fused QKV, output projection, fc1 (gate and up), fc2


def spec(model="llama3_8b", **kw):
    cfg = estimator.resolve_config([f"model={model}", "model.fused_kernels=te"])["model"]
    return replace(TransformerSpec.from_cfg(cfg), layers=2, **kw)


def layer(fp8, s=None, *moe):
    return capture_parts(s or spec(seq_len=512), 1, False, 1, fp8, *moe)["layer"]


def rows(part, skip=()):
    return [(n.op, n.phase, n.flops, n.mem_bytes, n.weight_bytes) for n in part.nodes if n.op not in skip]


def counts(part):
    return Counter((n.op, n.phase) for n in part.nodes if n.op in FP8_OPS)


def total(part, op, phase):
    return sum(n.mem_bytes for n in part.nodes if n.op == op and n.phase == phase)


def test_delayed_is_the_default_and_todays_capture():
    for name in ("megatron", "deepspeed", "deepspeed_2021", "fsdp"):
        fw = Framework.from_cfg(estimator.resolve_config(["parallelism=hybrid", f"framework={name}"])["framework"])
        assert fw.fp8_recipe == "delayed" and fw.fp8("fp8") == "te" and fw.fp8("bf16") is False
    assert fp8_mode("te", "delayed") == "te" and fp8_mode("torchao") == "torchao"
    delayed, before = layer(fp8_mode("te", "delayed")), layer(True)
    assert delayed.name == before.name  # the same capture tag, so the same cache entry
    assert rows(delayed) == rows(before)
    assert counts(delayed) == {(CAST, "forward"): LINEARS, (CAST, "backward"): LINEARS}


def test_tensorwise_adds_exactly_one_amax_read_per_quantized_tensor():
    delayed, current = layer("te"), layer(fp8_mode("te", "tensorwise"))
    assert rows(current, skip=(AMAX,)) == rows(delayed)  # every other op, bytes included, as under delayed
    assert counts(current) == {(CAST, "forward"): LINEARS, (CAST, "backward"): LINEARS,
                               (AMAX, "forward"): LINEARS, (AMAX, "backward"): LINEARS}
    for phase in ("forward", "backward"):
        # the cast-transpose moves 4 B per element (2 read + 1 + 1 written), the amax reads the 2 B again and
        # writes one fp32 value: capture units are twice the real bytes (halved for 16-bit training)
        casts = [n for n in current.nodes if n.op == CAST and n.phase == phase]
        amaxes = [n for n in current.nodes if n.op == AMAX and n.phase == phase]
        assert [a.mem_bytes for a in amaxes] == [c.mem_bytes // 2 + 2 * 4 for c in casts]
        assert all(a.flops == 0 and a.weight_bytes == 2 * 4 for a in amaxes)  # the amax write does not scale with the batch


def test_blockwise_quantize_writes_both_fp8_layouts_and_a_scale_per_128_elements():
    delayed, block = layer("te"), layer(fp8_mode("te", "blockwise"))
    assert rows(block, skip=(BLOCK,)) == rows(delayed, skip=(CAST,))  # the GEMMs priced as before
    assert counts(block) == {(BLOCK, "forward"): LINEARS, (BLOCK, "backward"): LINEARS}
    for phase in ("forward", "backward"):
        # real bytes per element: 2 + 1 + 1 + 2 x 4 / 128 = 4.0625 against the cast-transpose's 4
        assert total(block, BLOCK, phase) * 64 == total(delayed, CAST, phase) * 65
    s = spec(seq_len=512)
    fwd_in = 512 * s.hidden  # the QKV input: s x h elements, 8 capture bytes each under delayed
    first = next(n for n in block.nodes if n.op == BLOCK)
    assert first.mem_bytes == 8 * fwd_in + fwd_in // 8


@pytest.mark.parametrize("recipe", ["tensorwise", "blockwise"])
def test_moe_grouped_inputs_are_quantized_like_a_linear(recipe):
    """TE GroupedLinear quantizes per expert (te_kernels.grouped_casts, h84): delayed scaling's one multi-tensor
    cast-transpose, current scaling's per-expert amax + cast-transpose, blockwise's per-expert quantize; each grouped
    op moves the bytes of its dense counterpart over the whole grouped tensor, and the dense Linears keep theirs."""
    s = replace(spec("qwen3_30b_a3b"), seq_len=256)
    moe = (None, 8, True)  # etp = tp, ep 8, alltoall (sorts)
    experts = s.experts // 8
    delayed, other = layer("te", s, *moe), layer(fp8_mode("te", recipe), s, *moe)
    grouped = sum(1 for n in delayed.nodes if n.op == "te::grouped_linear")
    assert grouped == 2  # fc1 and fc2 of the rank's experts, one op each
    casts = counts(delayed)
    multi = [n for n in delayed.nodes if n.op == MULTI]
    assert Counter(n.phase for n in multi) == {"forward": 2, "backward": 2}  # fc1 / fc2 inputs, their output gradients
    quant = GROUPED_CAST if recipe == "tensorwise" else GROUPED_BLOCK
    assert [(n.phase, n.input_shapes) for n in other.nodes if n.op == quant] == [(n.phase, n.input_shapes) for n in multi]
    for m, q in zip(multi, (n for n in other.nodes if n.op == quant), strict=True):
        assert q.mem_bytes == (m.mem_bytes if recipe == "tensorwise" else m.mem_bytes * 65 // 64)
    every = (*FP8_OPS, MULTI, GROUPED_CAST, GROUPED_AMAX, GROUPED_BLOCK)
    assert rows(other, skip=every) == rows(delayed, skip=every)  # every other op, bytes included, as under delayed
    if recipe == "tensorwise":  # one amax per dense cast; per grouped cast one amax op over its experts' slices
        assert counts(other) == casts + Counter({(AMAX, p): n for (_, p), n in casts.items()})
        amax = [n for n in other.nodes if n.op == GROUPED_AMAX]
        assert [a.mem_bytes for a in amax] == [m.mem_bytes // 2 + 2 * 4 * experts for m in multi]
    else:
        assert counts(other) == Counter({(BLOCK, p): n for (_, p), n in casts.items()})


def test_recipes_order_the_estimate_and_delayed_leaves_it_unchanged():
    base = ["model=llama3_8b", "model.num_layers=4", "model.seq_len=1024", "system=dgx_h100", "framework=megatron",
            "parallelism=hybrid", "parallelism.global_batch=16", "parallelism.tp=2", "parallelism.pp=1", "precision=fp8"]
    runs = {r: estimate(estimator.resolve_config([*base, f"framework.fp8_recipe={r}"])).metrics
            for r in ("delayed", "tensorwise", "blockwise")}
    times = {r: m["iter_time_s"] for r, m in runs.items()}
    assert estimate(estimator.resolve_config(base)).metrics["iter_time_s"] == times["delayed"]
    # (a fixed layout: the search may pick another per recipe) the GPU's casts and amax kernels: both other recipes
    # compute more than delayed's cast-transpose; on the step, delayed also pays its amax all-reduces over the
    # tp x dp ranks and blockwise none (test_fp8_amax)
    compute = {r: m["compute_time_s"] for r, m in runs.items()}
    assert compute["tensorwise"] > compute["delayed"] and compute["blockwise"] > compute["delayed"]
    assert runs["delayed"]["fp8_amax_time_s"] > 0.0 and runs["blockwise"]["fp8_amax_time_s"] == 0.0
    assert times["tensorwise"] > times["delayed"]
    bf16 = [*base[:-1], "precision=bf16"]  # the recipe is read only under precision=fp8
    assert (estimate(estimator.resolve_config([*bf16, "framework.fp8_recipe=blockwise"])).metrics["iter_time_s"]
            == estimate(estimator.resolve_config(bf16)).metrics["iter_time_s"])


@pytest.mark.parametrize(("overrides", "message"), [
    (["framework.fp8_recipe=current"], "^framework.fp8_recipe must be one of delayed, tensorwise, blockwise, mxfp8, got 'current'$"),
    (["framework=fsdp", "framework.fp8_kernels=torchao", "framework.fp8_recipe=tensorwise"],
     "^framework.fp8_recipe=tensorwise is a Transformer Engine recipe; fp8_kernels=torchao"),
])
def test_bad_values_are_one_line_errors(overrides, message):
    cfg = estimator.resolve_config(["parallelism=hybrid", *overrides])
    with pytest.raises(EstimatorError, match=message) as err:
        Framework.from_cfg(cfg["framework"])
    assert "\n" not in str(err.value)
    with pytest.raises(EstimatorError, match="^fp8 kernels must be one of"):
        capture_parts(spec(seq_len=128), 1, False, 1, "te_mxfp8")


def test_mxfp8_is_refused_on_hopper_with_exit_2():
    cfg = estimator.resolve_config(["model=llama3_8b", "model.num_layers=2", "system=dgx_h100", "parallelism=hybrid",
                                    "precision=fp8", "framework.fp8_recipe=mxfp8"])
    with pytest.raises(EstimatorError, match="^framework.fp8_recipe=mxfp8 is Blackwell-only .* device h100 is not Blackwell"):
        estimate(cfg)
    done = subprocess.run([sys.executable, "-m", "estimator.cli", "estimate", "model=llama3_8b", "system=dgx_h100",
                           "precision=fp8", "framework.fp8_recipe=mxfp8"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Blackwell-only" in done.stderr
