"""``model.qk_norm``: Qwen3's per-head RMSNorm on q and k (Megatron-core's ``qk_layernorm``) in the TE layer.

Off, nothing moves (the spec, the capture, the memory). On, the captured layer gains per norm a contiguous copy
of the strided q (k) view and TE's fused RMSNorm forward and one fused kernel backward, at the bytes stated in
estimator/parallel/layer.py; the activation memory gains each norm's 16-bit input and fp32 1/rms per (token,
head) under every recompute mode but full; the parameters 2 x head_dim per layer. The Qwen3 presets set it.
"""

from __future__ import annotations

from collections import Counter

import pytest

import estimator
from estimator.errors import EstimatorError
from estimator.parallel.layer import capture_parts
from estimator.parallel.layout import Layout
from estimator.parallel.memory import activation_bytes_per_layer, layer_activation_bytes, qk_norm_bytes
from estimator.parallel.spec import TransformerSpec

# a small Qwen3-like layer: 8 query heads and 2 KV heads of 64 (attention 512 wide against hidden 256)
SMALL = dict(name="qk_small", arch="decoder", family_variant="llama", hidden_size=256, num_layers=2, num_heads=8,
             num_kv_heads=2, head_dim=64, ffn_size=512, vocab_size=1000, seq_len=128, fused_kernels="te")
MOE = dict(num_experts=4, experts_top_k=2)
ADDED = ("aten::contiguous", "te::rmsnorm", "te::rmsnorm_backward")


def spec(**change) -> TransformerSpec:
    return TransformerSpec.from_cfg({**SMALL, **change})


def _ops(workload) -> list[tuple]:
    return [(n.phase, n.op, n.input_shapes, n.mem_bytes, n.flops) for n in workload.nodes]


def test_off_is_the_default():
    assert spec() == spec(qk_norm=False) == spec(qk_norm=None) and not spec().qk_norm
    assert spec(qk_norm=True) != spec() and qk_norm_bytes(spec(), 1) == 0.0


@pytest.mark.parametrize("extra", [{}, MOE], ids=["dense", "moe"])
@pytest.mark.parametrize(("tp", "sp"), [(1, False), (2, True)])
def test_on_adds_two_norms_forward_and_backward_at_the_stated_bytes(extra, tp, sp):
    off, on = capture_parts(spec(**extra), tp, sp), capture_parts(spec(qk_norm=True, **extra), tp, sp)
    s, d, nh, nkv = SMALL["seq_len"], SMALL["head_dim"], SMALL["num_heads"] // tp, max(1, SMALL["num_kv_heads"] // tp)
    for part in off:
        if part != "layer":
            assert _ops(on[part]) == _ops(off[part])  # core attention, embedding, head: untouched
    a, b = _ops(off["layer"]), _ops(on["layer"])
    added = Counter(b) - Counter(a)
    assert not Counter(a) - Counter(b)  # nothing removed
    # the only ops beside them: the norm weights' gradient hand-off (aten::detach, no bytes, no FLOPs)
    assert {op for (_, op, *_), n in added.items() if op not in ADDED} == {"aten::detach"}
    assert all(mem == 0 for (_, op, _, mem, _), n in added.items() if op == "aten::detach")
    norms = sorted((phase, op, shapes[0], mem, flops) for (phase, op, shapes, mem, flops), n in added.items()
                   for _ in range(n) if op in ADDED)
    e = 4  # the capture runs in fp32: 4 bytes an element (the compute model scales to the precision)
    expected = []
    for heads in (nh, nkv):
        x = s * heads * d * e  # one sequence's q (k) on the rank
        expected += [("forward", "aten::contiguous", (s, 1, heads, d), 2 * x, 0.0),  # read the view, write a copy
                     ("forward", "te::rmsnorm", (s, 1, heads, d), 2 * x + d * e, 0.0),  # read x and w, write y
                     ("backward", "te::rmsnorm_backward", (s, 1, heads, d), 3 * x + 2 * d * e, 0.0)]  # dy, x, w -> dx, dw
    assert norms == sorted(expected)
    assert on["layer"].params - off["layer"].params == 2 * d


def test_the_norms_run_between_the_qkv_split_and_rope():
    ops = [n.op for n in capture_parts(spec(qk_norm=True), 1, False)["layer"].nodes if n.phase == "forward"]
    split = ops.index("aten::split_with_sizes")
    assert ops[split + 1:split + 5] == ["aten::contiguous", "te::rmsnorm", "aten::contiguous", "te::rmsnorm"]
    assert ops[split + 5:split + 7] == ["te::rope", "te::rope"]


def _layout(**change) -> Layout:
    return Layout(**{**dict(tp=2, pp=1, dp=1, ep=1, micro_batch_size=2, microbatches=1, zero=1,
                            sequence_parallel=True, recompute="none"), **change})


@pytest.mark.parametrize("layout", [
    _layout(), _layout(tp=1, sequence_parallel=False), _layout(tp=4), _layout(recompute="selective"),
    _layout(recompute="selective", recompute_modules=("layernorm", "core_attn")),
    _layout(recompute="selective", recompute_modules=("mlp",)),
], ids=["tp2-sp", "tp1", "tp4-kv-replicated", "selective", "layernorm+core_attn", "mlp"])
@pytest.mark.parametrize("fp8", [False, True])
def test_memory_grows_by_the_norms_inputs_and_rstd(layout, fp8):
    s, b, d, t = SMALL["seq_len"], layout.micro_batch_size, SMALL["head_dim"], layout.tp
    heads = SMALL["num_heads"] // t + max(1, SMALL["num_kv_heads"] // t)  # query heads, key heads on the rank
    per_token = heads * (2 * d + 4)  # 16-bit input (fp8 too) + fp32 1/rms, per head
    for extra in ({}, MOE):
        grow = layer_activation_bytes(spec(qk_norm=True, **extra), layout, fp8) - \
            layer_activation_bytes(spec(**extra), layout, fp8)
        assert grow == pytest.approx(s * b * per_token)


def test_full_recompute_keeps_only_the_layer_input():
    layout = _layout(recompute="full")
    assert activation_bytes_per_layer(spec(qk_norm=True), layout) == activation_bytes_per_layer(spec(), layout)


def test_qwen3_presets_set_it_and_count_its_weights():
    for name, layers in (("qwen3_30b_a3b", 48), ("qwen3_235b_a22b", 94)):
        cfg = estimator.resolve_config([f"model={name}"])
        qwen = TransformerSpec.from_cfg(cfg["model"])
        assert qwen.qk_norm and qwen.head_dim == 128
        without = TransformerSpec.from_cfg({**cfg["model"], "qk_norm": False})
        assert qwen.params() - without.params() == 2 * 128 * layers
    for name in ("llama3_8b", "mixtral_8x7b", "deepseek_v3"):  # their published architectures have no q/k norm
        assert not TransformerSpec.from_cfg(estimator.resolve_config([f"model={name}"])["model"]).qk_norm


@pytest.mark.parametrize(("change", "needle"), [
    (dict(qk_norm="yes"), "model.qk_norm must be true or false"),
    (dict(qk_norm=1), "model.qk_norm must be true or false"),
    (dict(qk_norm=True, fused_kernels="none"), "model.qk_norm is modelled as Megatron-core's TE RMSNorm"),
    (dict(qk_norm=True, family_variant="gpt"), "model.qk_norm is modelled as Megatron-core's TE RMSNorm"),
    (dict(qk_norm=True, head_dim=None, kv_lora_rank=64, q_lora_rank=0, qk_head_dim=32, qk_rope_head_dim=16,
          v_head_dim=32, num_kv_heads=None), "model.kv_lora_rank set"),
])
def test_bad_qk_norm_is_a_one_line_error(change, needle):
    with pytest.raises(EstimatorError, match=needle) as err:
        spec(**change)
    assert "\n" not in str(err.value)


def test_off_leaves_the_qwen3_estimate_at_its_earlier_value():
    """tests/test_moe_comm.py's pinned Qwen3-30B-A3B run, priced before model.qk_norm existed (h57)."""
    from estimator.estimate import estimate
    from tests.test_moe_comm import QWEN

    def run(*extra):
        # the run as pinned: Megatron's recompute default was selective then (framework.recompute none since the
        # seventeenth stop) and the data-parallel interference a flat 0.15 (H100's NCCL SM share since the eighteenth)
        return estimate(estimator.resolve_config(["parallelism=hybrid", "parallelism.recompute=selective",
                                                  "parallelism.comm_interference=0.15", *QWEN, *extra])).metrics["iter_time_s"]
    off = run("model.qk_norm=false")
    assert off == pytest.approx(35.76042496680612, rel=1e-12)
    assert run() > off  # the norms cost time
