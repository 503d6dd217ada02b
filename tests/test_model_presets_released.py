"""Presets of models NVIDIA's and others' published tables train (llama2_13b, mistral_7b, mixtral_8x22b, gpt3_5b,
gpt3_20b): the released configs' parameter counts, built with transformers' own classes on the meta device, and the
NeMo GPT-3 shapes the validation rows of those tables state."""

from __future__ import annotations

import pytest

import estimator
from estimator.parallel.spec import TransformerSpec
from estimator.validation import load_rows
from estimator.validation.predict import composed_config

VALIDATION = estimator.files.REPO_ROOT / "validation"


def spec(model: str) -> TransformerSpec:
    return TransformerSpec.from_cfg(estimator.resolve_config([f"model={model}", "parallelism=hybrid"])["model"])


def hf_params(cls_name: str, **config) -> int:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    with torch.device("meta"):
        model = getattr(transformers, f"{cls_name}ForCausalLM")(getattr(transformers, f"{cls_name}Config")(**config))
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("model, cls_name", [("llama2_13b", "Llama"), ("mistral_7b", "Mistral"),
                                             ("mixtral_8x22b", "Mixtral")])
def test_released_configs_have_transformers_parameter_counts(model, cls_name):
    s = spec(model)
    extra = {"num_local_experts": s.experts, "num_experts_per_tok": s.top_k} if s.experts else {}
    published = hf_params(cls_name, hidden_size=s.hidden, num_hidden_layers=s.layers, num_attention_heads=s.heads,
                          num_key_value_heads=s.kv_heads, intermediate_size=s.ffn, vocab_size=s.vocab, **extra)
    assert s.params() == published
    cfg = estimator.resolve_config([f"model={model}"])["model"]
    assert abs(published / cfg["published_params"] - 1) < 0.01  # the count the model's authors state


@pytest.mark.parametrize("model", ["gpt3_5b", "gpt3_20b"])
def test_nemo_gpt3_presets_are_the_shapes_the_launcher_rows_state(model):
    """nfl2405-gpt3-{5b,20b}-* price gpt3_175b with the launcher yaml's shape as overrides: the preset is that shape."""
    (row,) = [r for r in load_rows(VALIDATION) if r.id == f"nfl2405-{model.replace('_', '-')}-fp8-64gpu"]
    assert TransformerSpec.from_cfg(composed_config(row)["model"]).params() == spec(model).params()


@pytest.mark.parametrize("model, published_tolerance", [("deepseek_v3", 0.001), ("kimi_k2", 0.03),
                                                         ("deepseek_v2_lite", 0.001)])
def test_deepseek_style_presets_have_transformers_parameter_counts(model, published_tolerance):
    """DeepSeek-V3 and Kimi K2 (multi-head latent attention, shared expert, first dense layers) against transformers'
    DeepseekV3ForCausalLM on the meta device (DeepSeek-V2-Lite's shapes, no query compression, are the same
    modules); the multi-token prediction module is in neither count (transformers' class has none). Kimi K2's model
    card rounds its total to 1T."""
    s = spec(model)
    q_lora, kv_lora, qk, rope, v = s.mla
    published = hf_params("DeepseekV3", hidden_size=s.hidden, num_hidden_layers=s.layers, num_attention_heads=s.heads,
                          num_key_value_heads=s.heads, intermediate_size=s.ffn, moe_intermediate_size=s.moe_ffn,
                          n_routed_experts=s.experts, n_shared_experts=s.shared_ffn // s.moe_ffn,
                          num_experts_per_tok=s.top_k, first_k_dense_replace=s.dense_layers, q_lora_rank=q_lora or None,
                          kv_lora_rank=kv_lora, qk_nope_head_dim=qk, qk_rope_head_dim=rope, v_head_dim=v,
                          vocab_size=s.vocab, tie_word_embeddings=False)
    mtp = s.mtp * (s.layer_params() + s.mtp_extra_params())  # DeepSeek-V3's one MTP depth: not in transformers' class
    assert s.params() - mtp == published
    cfg = estimator.resolve_config([f"model={model}"])["model"]
    assert abs(published / cfg["published_params"] - 1) < published_tolerance
    if s.mtp:  # the released checkpoint's "14B of the MTP module weights" hold their own embedding and head copies
        assert abs((mtp + s.embedding_params() + s.vocab * s.hidden) / 14e9 - 1) < 0.05
