"""What Megatron-core's MoE layer keeps per microbatch (estimator/parallel/memory.py ``moe_mlp_bytes``), hand-counted
from the source (NVIDIA/Megatron-LM@92c8482e, TransformerEngine v2.9; docs/research/h53-moe-memory.md): the combine's
unpermute keeps nothing, each routed row keeps its fp32 probability for the weighted activation, the bias-dropout-add
mask exists only with dropout, a shared expert's fc1 keeps the router's tensor; and a layout that cannot fit is still
refused with one line."""

from __future__ import annotations

from dataclasses import replace

import pytest

import estimator
from estimator.errors import EstimatorError
from estimator.parallel.estimate import validate_hybrid
from estimator.parallel.layout import Layout
from estimator.parallel.memory import moe_mlp_bytes
from estimator.parallel.spec import TransformerSpec

SEQ = 4096


def spec(model: str) -> TransformerSpec:
    return TransformerSpec.from_cfg({**estimator.resolve_config([f"model={model}"])["model"], "seq_len": SEQ})


def layout(tp: int = 1, etp: int | None = None, modules=None) -> Layout:
    par = {"tp": tp, "pp": 1, "dp": 8, "ep": 8, "etp": etp, "global_batch": 8, "sequence_parallel": tp > 1,
           "recompute": "selective" if modules else "none", "recompute_modules": modules}
    return Layout.from_cfg(par, spec("qwen3_30b_a3b"), 8 * tp)


def test_qwen3_moe_layer_keeps_router_rows_and_activation_and_nothing_of_the_combine():
    """Qwen3-30B-A3B (h 2048, 128 experts of 768, top-8), TP 1, 16-bit: per token the router's input (2h) and fp32
    probabilities (4E); per routed row fc1's input (2h), fc1's 2f-wide output the weighted SwiGLU keeps (4f) with the
    row's fp32 probability (4), fc2's input (2f). No unpermute input, no dropout mask."""
    s = spec("qwen3_30b_a3b")
    h, e, k, f = 2048, 128, 8, 768
    assert (s.hidden, s.experts, s.top_k, s.moe_ffn, s.dropout) == (h, e, k, f, 0.0)
    assert moe_mlp_bytes(s, layout()) == pytest.approx(SEQ * (2 * h + 4 * e + k * (2 * h + 4 * f + 4 + 2 * f)))
    # FP8: fc1's and fc2's inputs are TE's 1-byte copies (grouped_linear.py keeps the columnwise FP8 data)
    assert moe_mlp_bytes(s, layout(), fp8=True) == pytest.approx(SEQ * (2 * h + 4 * e + k * (h + 4 * f + 4 + f)))


def test_dropout_adds_the_one_byte_mask_and_a_plain_activation_its_output():
    s = spec("qwen3_30b_a3b")
    h, k, f = s.hidden, s.top_k, s.moe_ffn
    assert moe_mlp_bytes(replace(s, dropout=0.1), layout()) - moe_mlp_bytes(s, layout()) == pytest.approx(SEQ * h)
    # a non-gated expert: the activation keeps its f-wide input, the probability multiply the activation's output
    plain = replace(s, family="gpt")
    assert moe_mlp_bytes(plain, layout()) == pytest.approx(SEQ * (2 * h + 4 * s.experts + k * (2 * h + 2 * f + 4 + 2 * f
                                                                                           + 2 * f)))
    # moe_act recompute drops fc2's input and the plain activation's output, keeps the checkpoint's input (fc1's output)
    assert moe_mlp_bytes(plain, layout(modules=["moe_act"])) == pytest.approx(
        SEQ * (2 * h + 4 * s.experts + k * (2 * h + 2 * f + 4)))


def test_gathered_expert_rows_keep_input_and_probability_per_row():
    """Expert TP 2 (etp = tp = 2, sequence parallel): each rank holds SEQ / 2 tokens, their k rows gathered over the 2
    expert-TP ranks (fc1's input and probability per gathered row), fc1 / fc2 widths split over them."""
    s = spec("qwen3_30b_a3b")
    h, e, k, f = s.hidden, s.experts, s.top_k, s.moe_ffn
    tokens = SEQ / 2
    want = tokens * (2 * h + 4 * e) + k * tokens * 2 * (2 * h + 4) + k * tokens * (4 * f + 2 * f)
    assert layout(tp=2).expert_tp == 2 and moe_mlp_bytes(s, layout(tp=2)) == pytest.approx(want)


@pytest.mark.parametrize("fp8", [False, True])
def test_a_shared_expert_adds_only_its_fc1_and_activation_outputs(fp8):
    """DeepSeek-V3's shared expert (2048 wide): its fc1 keeps the router's 16-bit tensor (TE's Linear saves its input
    as given; under FP8 Megatron-core sets save_original_input on it), so it adds fc1's 2f-wide output (4f) and fc2's
    input (2f, 1 byte under FP8), split over TP 2."""
    ds = spec("deepseek_v3")
    lay = Layout.from_cfg({"tp": 2, "pp": 1, "dp": 16, "ep": 16, "etp": 1, "global_batch": 16,
                           "sequence_parallel": True, "recompute": "none"}, ds, 32)
    f = ds.shared_ffn
    assert f == 2048
    extra = moe_mlp_bytes(ds, lay, fp8) - moe_mlp_bytes(replace(ds, shared_ffn=0), lay, fp8)
    assert extra == pytest.approx(SEQ * (4 + (1 if fp8 else 2)) * f / 2)


def test_qwen3_layout_at_twice_the_micro_batch_is_still_refused_in_one_line():
    """The refused Qwen3-30B-A3B layout (TP 1 PP 2 VP 24 EP 8, FP8) at MBS 4: the memory check still says no, in one line."""
    cfg = estimator.resolve_config(["model=qwen3_30b_a3b", "parallelism=hybrid", "system=dgx_h100", "fabric.nodes=16",
                                    "framework=megatron", "precision=fp8", "parallelism.tp=1", "parallelism.pp=2",
                                    "parallelism.virtual_stages=24", "parallelism.ep=8", "parallelism.zero=1",
                                    "parallelism.recompute=none", "parallelism.fp32_grads=false",
                                    "parallelism.micro_batch_size=4", "parallelism.global_batch=512"])
    with pytest.raises(EstimatorError, match=r"needs \d+\.\d GB per GPU on pipeline stage \d") as err:
        validate_hybrid(cfg)
    assert "\n" not in str(err.value)
