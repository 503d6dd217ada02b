"""``model.head_dim``: attention heads wider (or narrower) than ``hidden_size / num_heads``, as Qwen3 has them.

Checked against Hugging Face's own Qwen3 implementation built on the meta device (parameters), against the
default when the value equals ``hidden / heads`` (nothing moves), in the captured layer (the QKV and output
GEMMs are ``heads x head_dim`` wide) and in the activation memory; a bad value is a one-line error.
"""

from __future__ import annotations

import pytest

import estimator
from estimator.errors import EstimatorError
from estimator.parallel.layer import capture_parts
from estimator.parallel.layout import Layout
from estimator.parallel.memory import activation_bytes_per_layer
from estimator.parallel.spec import TransformerSpec

# Qwen3-8B's shape (huggingface.co/Qwen/Qwen3-8B config.json): hidden 4096, 36 layers, 32 heads of 128 (= h / heads),
# 8 KV heads, intermediate 12288, vocabulary 151936, untied head. WIDE: the same with heads of 192 (attention 6144).
QWEN3 = dict(name="qwen3_like", arch="decoder", family_variant="llama", hidden_size=4096, num_layers=36, num_heads=32,
             num_kv_heads=8, ffn_size=12288, vocab_size=151936, seq_len=4096, fused_kernels="te")


def spec(**change) -> TransformerSpec:
    return TransformerSpec.from_cfg({**QWEN3, **change})


def test_head_dim_equal_to_hidden_over_heads_changes_nothing():
    assert spec(head_dim=128) == spec() == spec(head_dim=None)
    assert spec().head_dim == 128 and spec().attn_width == 4096


@pytest.mark.parametrize("head_dim", [128, 192, 64])
def test_parameters_match_transformers_qwen3(head_dim):
    torch = pytest.importorskip("torch")
    from transformers import Qwen3Config, Qwen3ForCausalLM

    s = spec(head_dim=head_dim, qk_norm=True)  # Qwen3's per-head q/k RMSNorm: 2 x head_dim weights per layer
    with torch.device("meta"):
        hf = Qwen3ForCausalLM(Qwen3Config(hidden_size=s.hidden, intermediate_size=s.ffn, num_hidden_layers=s.layers,
                                          num_attention_heads=s.heads, num_key_value_heads=s.kv_heads, head_dim=head_dim,
                                          vocab_size=s.vocab, tie_word_embeddings=False))
    assert sum(p.numel() for p in hf.parameters()) == s.params()
    assert s.params() - spec(head_dim=head_dim).params() == 2 * head_dim * s.layers


def test_captured_layer_uses_the_head_width():
    narrow, wide = spec(), spec(head_dim=192)
    f_narrow = capture_parts(narrow, 1, False)["layer"].forward_flops
    f_wide = capture_parts(wide, 1, False)["layer"].forward_flops
    # per token: QKV 2 h (heads + 2 kv) d and the output projection 2 h heads d grow with d; attention with d too
    s, h, a, kv = narrow.seq_len, narrow.hidden, narrow.heads, narrow.kv_heads
    gemm_delta = 2 * s * h * (a + 2 * kv) * 64 + 2 * s * h * a * 64
    assert f_wide - f_narrow >= gemm_delta
    assert f_wide - f_narrow < 1.5 * gemm_delta + 4 * s * s * a * 64  # plus the causal attention's share at most


def test_activation_memory_counts_the_wider_query_and_output():
    layout = Layout(tp=4, pp=1, dp=1, ep=1, micro_batch_size=1, microbatches=1, zero=1, sequence_parallel=True,
                    recompute="none")
    narrow, wide = spec(), spec(head_dim=192)
    s, w_delta = narrow.seq_len, (192 - 128) * narrow.heads
    # q and the attention output (2 bytes each) are w wide per TP rank; k and v grow with d too (2 bytes each, kv heads)
    kv_delta = 2 * 2 * (192 - 128) * narrow.kv_heads // 4
    assert activation_bytes_per_layer(wide, layout) - activation_bytes_per_layer(narrow, layout) == \
        pytest.approx(s * (4 * w_delta / 4 + kv_delta))


@pytest.mark.parametrize("bad", [0, -128, 1.5, True, "128"])
def test_bad_head_dim_is_a_one_line_error(bad):
    with pytest.raises(EstimatorError, match="model.head_dim must be a positive integer"):
        spec(head_dim=bad)


def test_uneven_hidden_needs_head_dim():
    with pytest.raises(EstimatorError, match="set model.head_dim"):
        spec(hidden_size=4100)
    assert spec(hidden_size=4100, head_dim=128).attn_width == 4096


def test_cli_override_and_bad_value(capsys):
    from estimator.cli import main

    args = ["estimate", "system=dgx_h100", "fabric.nodes=8", "model=llama3_8b", "parallelism=hybrid",
            "parallelism.global_batch=8", "output=json"]
    for value, code in (("128", 0), ("-1", 2)):
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_info:
            main([*args, f"model.head_dim={value}"])
        assert exit_info.value.code == code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "model.head_dim" in err[0]
    assert estimator.resolve_config(["model=llama3_8b"])["model"]["head_dim"] is None
