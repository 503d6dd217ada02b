"""Decoder-layer capture (estimator/parallel/layer.py): weight bytes per op, Megatron-LM's fused
kernels (model.fused_kernels=megatron) against the eager layer, and the fused ops' CPU results."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from estimator.compute import megatron_kernels  # noqa: F401  (registers torch.ops.megatron)
from estimator.config import compose
from estimator.errors import EstimatorError
from estimator.parallel.layer import capture_parts
from estimator.parallel.spec import TransformerSpec

SMALL = dict(name="small", family="gpt", hidden=256, layers=2, heads=4, kv_heads=4, ffn=1024, vocab=1024, seq_len=256)


def spec(fused: str, **kw) -> TransformerSpec:
    return TransformerSpec(**{**SMALL, **kw, "fused": fused})


def forward_nodes(part):
    return [n for n in part.nodes if n.phase == "forward" and (n.mem_bytes or n.flops)]


@pytest.mark.parametrize("fused", ["none", "megatron"])
def test_weight_bytes_are_the_parameters_read_once(fused):
    s = spec(fused)
    layer = capture_parts(s, 1, False)["layer"]
    assert layer.params == s.layer_params()
    assert layer.meta["weight_bytes_unpaired_ops"] == 0 and layer.meta["fused_kernels"] == fused
    h, f = s.hidden, s.ffn
    gemms = [n for n in forward_nodes(layer) if n.op == "aten::linear"]
    eager = fused == "none"  # Megatron adds the proj/fc1/fc2 biases inside its fused kernels (skip_bias_add)
    with_bias = ((3 * h, h, True), (h, h, eager), (f, h, eager), (h, f, eager))
    expected = [4 * (o * i + (o if bias else 0)) for o, i, bias in with_bias]
    assert [n.weight_bytes for n in gemms] == expected
    if fused == "megatron":  # every parameter is read once per microbatch in forward, nothing else is constant
        assert sum(n.weight_bytes for n in forward_nodes(layer)) == 4 * s.layer_params()
    big = layer.scaled_to_batch(8)
    for n, m in zip(layer.nodes, big.nodes, strict=True):
        assert m.mem_bytes == pytest.approx(n.weight_bytes + 8 * (n.mem_bytes - n.weight_bytes))


def test_megatron_fused_kernels_move_the_documented_bytes():
    s = spec("megatron")
    n_scores, seq = s.heads * s.seq_len**2, s.seq_len
    m, h, f = seq * s.hidden, s.hidden, s.ffn
    layer = {n.op: n for n in forward_nodes(capture_parts(s, 1, False)["layer"])}
    assert layer["megatron::bias_dropout_add"].mem_bytes == 4 * 3 * m + 4 * h + m  # x, bias, residual; out + mask
    assert layer["megatron::bias_gelu"].mem_bytes == 4 * 2 * seq * f + 4 * f
    tri = (seq + 1) / (2 * seq)  # the causal kernel reads the lower triangle, writes every row
    assert layer["megatron::scaled_upper_triang_masked_softmax"].mem_bytes == round(4 * n_scores * tri) + 4 * n_scores
    assert "aten::masked_fill" not in layer and "aten::div" not in layer
    assert {layer[k].op_class for k in ("megatron::bias_dropout_add", "megatron::bias_gelu")} == {"elementwise"}
    assert layer["megatron::scaled_upper_triang_masked_softmax"].op_class == "softmax"


def test_fused_and_eager_attention_differ_by_the_expected_bytes():
    eager, fused = (capture_parts(spec(k), 1, False)["attention"] for k in ("none", "megatron"))
    seq, n = SMALL["seq_len"], SMALL["heads"] * SMALL["seq_len"] ** 2
    fwd = {k: sum(x.mem_bytes for x in forward_nodes(w)) for k, w in (("eager", eager), ("fused", fused))}
    # eager: div 8N + ones s^2 + triu 2s^2 + masked_fill (8N + s^2) + softmax 8N (1-byte mask);
    # fused: one kernel reading the lower triangle and writing the scores (4N (s+1)/2s + 4N)
    expected = 24 * n + 4 * seq**2 - (round(4 * n * (seq + 1) / (2 * seq)) + 4 * n)
    assert fwd["eager"] - fwd["fused"] == expected
    assert sum(x.flops for x in eager.nodes) == sum(x.flops for x in fused.nodes)


def test_fused_and_eager_layers_have_equal_flops_and_params_but_fewer_bytes():
    eager, fused = (capture_parts(spec(k), 2, False) for k in ("none", "megatron"))
    for part in ("layer", "embedding", "head"):
        assert eager[part].params == fused[part].params
        assert sum(n.flops for n in eager[part].nodes) == sum(n.flops for n in fused[part].nodes)
    eager_b, fused_b = (sum(n.mem_bytes for n in w["layer"].nodes) for w in (eager, fused))
    assert fused_b < 0.85 * eager_b


def test_long_sequences_fall_back_to_the_eager_softmax():
    s = spec("megatron", seq_len=4096, hidden=64, ffn=256)  # fused_softmax.py: seq <= 2048
    ops = {n.op for n in capture_parts(s, 1, False)["attention"].nodes}
    assert "aten::softmax" in ops and "megatron::scaled_upper_triang_masked_softmax" not in ops


def test_fused_kernels_option_per_model_and_errors():
    assert TransformerSpec.from_cfg(compose(["model=megatron_gpt"]).model).fused == "megatron"
    # the published GPT-3 / Llama 2 shapes default to today's Transformer Engine layer (conf/model/*.yaml)
    for model in ("gpt3_175b", "gpt3_13b", "llama2_7b", "llama2_70b"):
        assert TransformerSpec.from_cfg(compose([f"model={model}"]).model).fused == "te"
    assert TransformerSpec.from_cfg(compose(["model=gpt3_175b", "model.fused_kernels=megatron"]).model).fused == "megatron"
    assert TransformerSpec.from_cfg(compose(["model=llama2_7b", "model.fused_kernels=none"]).model).fused == "none"
    with pytest.raises(EstimatorError, match="GPT layer fusions only"):
        TransformerSpec.from_cfg(compose(["model=llama2_7b", "model.fused_kernels=megatron"]).model)
    with pytest.raises(EstimatorError, match="model.fused_kernels must be one of"):
        TransformerSpec.from_cfg(compose(["model=megatron_gpt", "model.fused_kernels=apex"]).model)


def test_fused_ops_compute_what_megatron_computes_on_the_cpu():
    torch.manual_seed(0)
    y, b, r = torch.randn(8, 2, 16), torch.randn(16), torch.randn(8, 2, 16)
    assert torch.allclose(torch.ops.megatron.bias_gelu(y, b), F.gelu(y + b, approximate="tanh"), atol=1e-5)
    out, mask = torch.ops.megatron.bias_dropout_add(y, b, r, 0.25)
    assert mask.dtype == torch.bool and 0 < mask.float().mean() < 1
    assert torch.allclose(out, r + torch.where(mask, (y + b) / 0.75, torch.zeros(())), atol=1e-6)
    x = torch.randn(3, 6, 6)
    causal = torch.ones(6, 6, dtype=torch.bool).triu(1)
    ref = (x * 0.5).masked_fill(causal, float("-inf")).softmax(-1)
    assert torch.allclose(torch.ops.megatron.scaled_upper_triang_masked_softmax(x, 0.5), ref)
