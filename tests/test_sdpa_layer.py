"""The eager PyTorch decoder layer with a fused attention core (model.fused_kernels=sdpa; estimator/parallel/layer.py):
its kernels against the eager (none) and Transformer Engine (te) layers, its op list, its refusals."""

from __future__ import annotations

import pytest

import estimator
from estimator.config import compose
from estimator.errors import EstimatorError
from estimator.parallel.estimate import validate_hybrid
from estimator.parallel.layer import capture_whole_layer
from estimator.parallel.spec import TransformerSpec

# One forward of the sdpa Llama layer, kernel by kernel, as the eager sources run it (torchtitan@c22d1a8
# torchtitan/models/norms.py l.87-92 RMSNorm, llama/model.py l.76-102 apply_rotary_emb, l.179 wq/wk/wv, l.240
# FeedForward; transformers LlamaRMSNorm): views (reshape, view_as_complex, ...) launch nothing and are not listed.
RMSNORM = ["aten::to",  # x.float(): bf16 -> fp32
           "aten::pow", "aten::mean", "aten::add", "aten::rsqrt", "aten::mul",  # x * rsqrt(mean(x^2) + eps), fp32
           "aten::type_as",  # back to bf16
           "aten::mul"]  # * weight
ROPE = ["aten::to", "aten::mul", "aten::type_as"]  # q.float(), complex multiply by freqs_cis, cast back
LLAMA_FORWARD = (RMSNORM + ["aten::linear"] * 3  # wq, wk, wv
                 + ROPE + ROPE  # q, k
                 + ["te::flash_attention", "aten::linear", "aten::add"]  # SDPA flash, wo, residual
                 + RMSNORM + ["aten::linear", "aten::silu", "aten::linear", "aten::mul", "aten::linear"]  # w2(silu(w1 x) * w3 x)
                 + ["aten::add"])
assert len(LLAMA_FORWARD) == 34
# GPT (HF GPT-2 / nanoGPT / MPT with LPLayerNorm): one layer_norm kernel in bf16, the fused QKV GEMM with its bias,
# flash attention, the output GEMM + bias, residual dropout (p = 0.1) and add, the MLP with GeLU as one kernel
GPT_FORWARD = ["aten::layer_norm", "aten::linear", "te::flash_attention", "aten::linear", "aten::native_dropout",
               "aten::add", "aten::layer_norm", "aten::linear", "aten::gelu", "aten::linear", "aten::native_dropout",
               "aten::add"]


def llama(fused: str, *overrides: str) -> TransformerSpec:
    return TransformerSpec.from_cfg(compose(["model=llama3_8b", "model.seq_len=8192", f"model.fused_kernels={fused}",
                                             *overrides]).model)


def gpt(fused: str, *overrides: str) -> TransformerSpec:
    return TransformerSpec.from_cfg(compose(["model=megatron_gpt", "model.hidden_size=768", "model.num_layers=12",
                                             "model.num_heads=12", "model.ffn_size=3072", "model.seq_len=2048",
                                             f"model.fused_kernels={fused}", *overrides]).model)


def kernels(layer, phase="forward"):
    return [n for n in layer.nodes if n.phase == phase and (n.mem_bytes or n.flops)]


def hbm(layer) -> float:
    return sum(n.mem_bytes for n in layer.nodes)


@pytest.fixture(scope="module")
def llama_layers():
    return {f: capture_whole_layer(llama(f), 1, False) for f in ("te", "sdpa", "none")}


def test_sdpa_moves_more_bytes_than_te_and_fewer_than_the_eager_scores(llama_layers):
    te, sdpa, none = (hbm(llama_layers[f]) for f in ("te", "sdpa", "none"))
    assert te < sdpa < none
    # eager norms / RoPE / SwiGLU: at least a third more than the fused kernels' bytes, far from the s x s scores
    assert 1.3 * te < sdpa < 0.5 * none


def test_sdpa_attention_is_te_flash_attention(llama_layers):
    def flash(layer):
        return [(n.op, n.flops, n.mem_bytes, n.weight_bytes) for n in layer.nodes if "flash" in n.op]
    assert len(flash(llama_layers["sdpa"])) == 2  # forward and backward
    assert flash(llama_layers["sdpa"]) == flash(llama_layers["te"])
    # same GEMMs and attention: equal FLOPs; equal parameters (fc1 = gate + up)
    assert sum(n.flops for n in llama_layers["sdpa"].nodes) == sum(n.flops for n in llama_layers["te"].nodes)
    assert llama_layers["sdpa"].params == llama_layers["te"].params
    g_sdpa, g_te = capture_whole_layer(gpt("sdpa"), 1, False), capture_whole_layer(gpt("te"), 1, False)
    assert flash(g_sdpa) == flash(g_te)


def test_sdpa_forward_is_the_eager_sources_kernel_list(llama_layers):
    assert [n.op for n in kernels(llama_layers["sdpa"])] == LLAMA_FORWARD
    assert [n.op for n in kernels(capture_whole_layer(gpt("sdpa"), 1, False))] == GPT_FORWARD


def test_sdpa_gpt_without_dropout_launches_no_dropout_kernel():
    """MosaicML's GPT / MPT blocks (dropout 0): ATen's dropout returns its input at p = 0, so no kernel runs."""
    no_drop = capture_whole_layer(gpt("sdpa", "model.dropout=0.0"), 1, False)
    assert [n.op for n in kernels(no_drop)] == [op for op in GPT_FORWARD if op != "aten::native_dropout"]
    assert hbm(no_drop) < hbm(capture_whole_layer(gpt("sdpa"), 1, False))
    with pytest.raises(EstimatorError, match="model.dropout=0.0 is modelled with model.fused_kernels=te or sdpa only"):
        gpt("none", "model.dropout=0.0")
    with pytest.raises(EstimatorError, match="position_embedding=none is modelled with model.fused_kernels=te only"):
        gpt("sdpa", "model.position_embedding=none")


def test_fp32_casts_and_norm_internals_move_their_real_bytes(llama_layers):
    s, h = 8192, 4096
    cast, square = kernels(llama_layers["sdpa"])[:2]
    # capture units are twice the real bytes: the bf16 -> fp32 cast reads 2 and writes 4 bytes per element, pow in
    # fp32 reads and writes 4 each (an fp32-captured layer would state 8 for both)
    assert cast.mem_bytes == 2 * (2 + 4) * s * h
    assert square.mem_bytes == 2 * (4 + 4) * s * h


def test_sdpa_with_tensor_and_sequence_parallelism():
    layer = capture_whole_layer(llama("sdpa"), 2, True)
    ops = kernels(layer)
    assert [n.op for n in ops] == LLAMA_FORWARD
    assert ops[0].input_shapes[0][0] == 8192 // 2  # the norm on the rank's own tokens
    flash = next(n for n in ops if n.op == "te::flash_attention")
    assert [shape[2] for shape in flash.input_shapes[:3]] == [16, 4, 4]  # 32 / 2 query heads, 8 / 2 KV heads


def test_sdpa_refusals():
    with pytest.raises(EstimatorError, match="fused_kernels=sdpa"):
        TransformerSpec.from_cfg(compose(["model=mixtral_8x7b", "model.fused_kernels=sdpa"]).model)
    with pytest.raises(EstimatorError, match="set model.fused_kernels=te"):
        TransformerSpec.from_cfg(compose(["model=nemotron4_15b", "model.fused_kernels=sdpa"]).model)
    base = ["model=llama3_8b", "model.fused_kernels=sdpa", "parallelism=hybrid", "system=dgx_h100", "fabric.nodes=8"]
    for precision, needle in (("fp32", "flash attention runs in 16 bits only"), ("fp8", "precision=fp8 needs the Transformer")):
        with pytest.raises(EstimatorError, match=needle) as err:
            validate_hybrid(estimator.resolve_config([*base, f"precision={precision}"]))
        assert "\n" not in str(err.value)
    with pytest.raises(EstimatorError, match="cp=2: context parallelism"):
        validate_hybrid(estimator.resolve_config([*base, "precision=bf16", "parallelism.cp=2"]))
    validate_hybrid(estimator.resolve_config([*base, "precision=bf16"]))
    with pytest.raises(EstimatorError, match="fused_kernels must be one of none, megatron, te, sdpa"):
        llama("flash")
