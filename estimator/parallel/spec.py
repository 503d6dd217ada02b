"""Decoder-only transformer shapes (``conf/model/{gpt3_*,llama*}.yaml``, ``arch: decoder``).

Two families, as their papers describe them:

* ``gpt``: GPT-2/3 layers (Radford et al. 2019; Brown et al. 2020): LayerNorm with bias, fused
  QKV with bias, GeLU MLP of ``ffn_size`` (4h), learned position embeddings, LM head tied to the
  token embedding.
* ``llama``: Llama-2 (Touvron et al. 2023): RMSNorm, no biases, rotary positions (no weights),
  grouped-query attention (``num_kv_heads``), SwiGLU MLP (three matrices), untied LM head.

Mixture of experts (``num_experts`` E > 0, ``experts_top_k`` k; Mixtral, Jiang et al. 2024): every
layer's MLP is E expert MLPs of ``ffn_size`` plus a bias-free router (h x E); each token goes to
its top-k experts.

Parameter counts follow from these shapes (``params``); tests check them against the published
totals and against ``transformers``' own implementation of the same configs built on the meta
device.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from estimator.errors import EstimatorError

FAMILIES = ("gpt", "llama")
FUSED_KERNELS = ("none", "megatron", "te")  # model.fused_kernels (estimator/parallel/layer.py)


@dataclass(frozen=True)
class TransformerSpec:
    name: str
    family: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    seq_len: int
    experts: int = 0  # 0 = dense; >0 = mixture-of-experts MLP in every layer
    top_k: int = 1
    fused: str = "none"  # model.fused_kernels: none | megatron | te (estimator/parallel/layer.py)

    @classmethod
    def from_cfg(cls, cfg: Mapping[str, Any]) -> TransformerSpec:
        where = f"model {cfg.get('name')!r}"
        if cfg.get("arch") != "decoder":
            raise EstimatorError(f"{where}: parallelism=hybrid needs a decoder-only model (arch: decoder), got arch {cfg.get('arch')!r}")
        family = cfg.get("family_variant") or "gpt"
        if family not in FAMILIES:
            raise EstimatorError(f"{where}: family_variant must be one of {FAMILIES}, got {family!r}")
        ints = {}
        for key in ("hidden_size", "num_layers", "num_heads", "ffn_size", "vocab_size", "seq_len"):
            value = cfg.get(key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise EstimatorError(f"model.{key} must be a positive integer, got {value!r}")
            ints[key] = value
        kv = cfg.get("num_kv_heads") or ints["num_heads"]
        if ints["hidden_size"] % ints["num_heads"]:
            raise EstimatorError(f"model.hidden_size {ints['hidden_size']} is not divisible by num_heads {ints['num_heads']}")
        if ints["num_heads"] % kv:
            raise EstimatorError(f"model.num_heads {ints['num_heads']} is not divisible by num_kv_heads {kv}")
        experts = int(cfg.get("num_experts") or 0)
        top_k = int(cfg.get("experts_top_k") or 1)
        if experts and not 1 <= top_k <= experts:
            raise EstimatorError(f"model.experts_top_k must be between 1 and num_experts {experts}, got {top_k}")
        fused = cfg.get("fused_kernels") or "none"
        if fused not in FUSED_KERNELS:
            raise EstimatorError(f"model.fused_kernels must be one of {', '.join(FUSED_KERNELS)}, got {fused!r}")
        if fused == "megatron" and (family != "gpt" or kv != ints["num_heads"]):
            raise EstimatorError(f"{where}: model.fused_kernels=megatron models Megatron-LM's GPT layer fusions only "
                                 "(family_variant gpt, no grouped-query attention); use model.fused_kernels=none or te")
        if fused == "te" and (family != "llama" or experts):
            raise EstimatorError(f"{where}: model.fused_kernels=te models Megatron-core / Transformer Engine's dense Llama "
                                 "layer (family_variant llama, no experts); use model.fused_kernels=none")
        return cls(str(cfg.get("name")), family, ints["hidden_size"], ints["num_layers"], ints["num_heads"], int(kv),
                   ints["ffn_size"], ints["vocab_size"], ints["seq_len"], experts, top_k, fused)

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def padded_vocab(self, tp: int) -> int:
        """Megatron-LM pads the vocabulary to a multiple of 128 x tp (``--make-vocab-size-divisible-by
        128``) so every tensor-parallel rank holds an equal slice."""
        unit = 128 * tp
        return -(-self.vocab // unit) * unit

    @property
    def tied(self) -> bool:
        return self.family == "gpt"

    # ---- parameter counts ------------------------------------------------------------------
    def layer_params(self) -> int:
        h, d = self.hidden, self.head_dim
        qkv_out = (self.heads + 2 * self.kv_heads) * d
        if self.family == "gpt":
            attn = h * qkv_out + qkv_out + h * h + h
            mlp = 2 * h * self.ffn + self.ffn + h
            norms = 4 * h  # two LayerNorms, weight + bias
        else:
            attn = h * qkv_out + h * h
            mlp = 3 * h * self.ffn
            norms = 2 * h  # two RMSNorm weights
        if self.experts:
            mlp = self.expert_layer_params() + h * self.experts  # experts + router
        return attn + mlp + norms

    def expert_layer_params(self) -> int:
        """Parameters of one layer's experts (0 for a dense model): what expert parallelism shards."""
        if not self.experts:
            return 0
        h = self.hidden
        one = 2 * h * self.ffn + self.ffn + h if self.family == "gpt" else 3 * h * self.ffn
        return self.experts * one

    def embedding_params(self) -> int:
        pos = self.seq_len * self.hidden if self.family == "gpt" else 0
        return self.vocab * self.hidden + pos

    def head_params(self) -> int:
        """Final norm + LM head (0 extra weights when tied to the embedding)."""
        final_norm = 2 * self.hidden if self.family == "gpt" else self.hidden
        return final_norm + (0 if self.tied else self.vocab * self.hidden)

    def params(self) -> int:
        return self.layers * self.layer_params() + self.embedding_params() + self.head_params()
