"""Decoder-only transformer shapes (``conf/model/{gpt3_*,llama*,nemotron4_*}.yaml``, ``arch: decoder``).

Three families, as their papers describe them:

* ``gpt``: GPT-2/3 layers (Radford et al. 2019; Brown et al. 2020): LayerNorm with bias, fused
  QKV with bias, GeLU MLP of ``ffn_size`` (4h) with biases, learned position embeddings, LM head
  tied to the token embedding.
* ``llama``: Llama-2 (Touvron et al. 2023): RMSNorm, no biases, rotary positions (no weights),
  grouped-query attention (``num_kv_heads``), SwiGLU MLP (three matrices), untied LM head.
* ``nemotron``: Nemotron-4 (Parmar et al. 2024, arXiv 2402.16819, Sec. 2; NVIDIA 2024, arXiv
  2406.11704, Sec. 2.1): LayerNorm (weight and bias: Transformer Engine's LayerNorm, NeMo's
  ``layernorm1p`` with a zero-centred weight), no bias in any Linear, rotary positions,
  grouped-query attention, a two-matrix MLP with squared ReLU (``relu(x)^2``), untied LM head.
  Modelled as Megatron-core + Transformer Engine run it (``model.fused_kernels=te``) only.

Per model config (``model.position_embedding``, ``model.dropout``): ``learned`` (GPT's table of
``seq_len x h`` weights), ``rope`` (rotary: no weights) or ``none``; hidden and attention dropout
probability. Defaults per family (gpt: learned, 0.1 = GPT-3 / Megatron-LM; llama, nemotron: rope,
0). Only the Transformer Engine layer (``te``) models other positions, and the Megatron-LM 2021 layer (``megatron``)
of family gpt ``alibi`` (BigScience's Megatron-DeepSpeed ``--position-embedding-type alibi``: no position weights, a
bias added to every attention score matrix, :mod:`~estimator.parallel.layer`); ``te`` and the eager PyTorch layer
(``sdpa``) take any dropout (0: no dropout kernel, as ATen's dropout returns its input at p = 0, e.g.
MosaicML's GPT / MPT blocks); the unfused (``none``) and Megatron-LM 2021 (``megatron``) layers are their
families' as published.

Attention width (``model.head_dim``, default null): each of the ``num_heads`` query heads (and
``num_kv_heads`` key/value heads) is ``head_dim`` wide, so the QKV projection is ``h x (heads +
2 kv_heads) head_dim`` and the output projection ``heads head_dim x h``; null means ``h / heads``
(every family above). Qwen3 sets it wider than that (Yang et al. 2025, arXiv 2505.09388; e.g.
hidden 2048, 32 heads of 128).

Query/key normalisation (``model.qk_norm``, default false): an RMSNorm over each query and key head's
``head_dim`` features with one ``head_dim`` weight for all query heads and one for all key heads, after the
QKV projection and before rotary positions (Qwen3: transformers' ``Qwen3Attention.q_norm`` / ``k_norm``;
Megatron-core's ``qk_layernorm``, ``SelfAttention`` builds ``q_layernorm`` / ``k_layernorm`` as TENorm,
NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553 megatron/core/transformer/attention.py
l.1707-1750, applied l.1932-1936). ``2 head_dim`` weights per layer (every TP rank holds them; counted as
the other norms' weights). Modelled as Megatron-core + Transformer Engine run it: family_variant llama
(RMSNorm) and ``model.fused_kernels=te`` only; not with multi-head latent attention (whose latent norms are
always modelled).

Mixture of experts (``num_experts`` E > 0, ``experts_top_k`` k; Mixtral, Jiang et al. 2024): every
layer's MLP is E expert MLPs plus a bias-free router (h x E); each token goes to its top-k experts.
Each expert is ``model.moe_ffn_size`` wide (Megatron-core's ``--moe-ffn-hidden-size``; null =
``ffn_size``, as Mixtral and the Qwen3 presets, which put the expert width in ``ffn_size``), while
``ffn_size`` stays the dense MLP's width. ``model.shared_expert_ffn_size`` (0 = none; Megatron-core's
``--moe-shared-expert-intermediate-size``, the total width of the shared experts; DeepSeek-V3: 2048)
adds a dense MLP of that width that every token runs in every MoE layer, split by tensor parallelism
like the dense MLP and without all-to-all (Megatron-core's ``SharedExpertMLP``, no gate:
NVIDIA/Megatron-LM@0065cf8a8fb6b4b6277d107e5f4feab1a584e84d megatron/core/transformer/moe/shared_experts.py).
``model.first_dense_layers`` k (0 = every layer MoE; Megatron-core's ``--moe-layer-freq
"([0]*k+[1]*(L-k))"``, DeepSeek-V3's ``first_k_dense_replace`` 3): the first k decoder layers have
a dense MLP of ``ffn_size`` instead (``dense_layer``); they sit on the first pipeline stage(s) by
the stage-assignment rule (:func:`~estimator.parallel.layout.layer_kinds`).

Multi-head latent attention (DeepSeek-V2/V3, DeepSeek-AI 2024, arXiv 2405.04434 Sec. 2.1; Megatron-core's
``MLASelfAttention``, ``--multi-latent-attention``: NVIDIA/Megatron-LM@003b4ce2615f4e501ecbc39e01e0f76d237a35d9
megatron/core/transformer/multi_latent_attention.py), set by ``model.kv_lora_rank`` (null / 0 = ordinary
attention): queries down-projected ``h -> q_lora_rank``, RMSNorm, up-projected to ``heads x (qk_head_dim +
qk_rope_head_dim)`` (``model.q_lora_rank`` null: one ``h -> heads x (qk + rope)`` projection); keys and values
down-projected ``h -> kv_lora_rank + qk_rope_head_dim``, RMSNorm on the latent, up-projected ``kv_lora_rank ->
heads x (qk_head_dim + v_head_dim)``; rotary on the rope part (the key's one rope head shared by all heads);
attention with query/key head dim ``qk + rope`` and value head dim ``v_head_dim``; output ``heads x v_head_dim
-> h``. No biases; ``num_kv_heads`` and ``head_dim`` do not apply. Under tensor parallelism the up-projections
and the output projection are split by heads, the down-projections (and their norms) are replicated on every
TP rank (``parallel_mode='duplicated'``). Modelled with ``model.fused_kernels=te`` only.

Multi-token prediction (DeepSeek-V3, arXiv 2412.19437 Sec. 2.2; Megatron-core's ``--mtp-num-layers``,
``model.mtp_layers`` D, 0 = none): each of the D depths is one more decoder layer of the last layer's kind, a
``2h -> h`` projection (``eh_proj``) and three RMSNorms (``enorm``, ``hnorm``, ``final_layernorm``:
NVIDIA/Megatron-LM@13f8f526bed803fd9ab8b8d4ce1ca14bc032bbbc megatron/core/transformer/multi_token_prediction.py,
``get_mtp_layer_spec``), sharing the embedding and the LM head (one more lookup and one more head and loss per
depth), all on the last pipeline stage (``get_mtp_num_layers_to_build``: "we only support put all of MTP layers
on the last pipeline stage").

Parameter counts follow from these shapes (``params``); tests check them against the published
totals and against ``transformers``' own implementation of the same configs built on the meta
device.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from estimator.errors import EstimatorError

FAMILIES = ("gpt", "llama", "nemotron")
FUSED_KERNELS = ("none", "megatron", "te", "sdpa")  # model.fused_kernels (estimator/parallel/layer.py)
FLASH = ("te", "sdpa")  # the model.fused_kernels whose attention core is one fused flash kernel (te_kernels.flash_attention)
POSITIONS = ("learned", "rope", "none", "alibi")  # model.position_embedding
# family -> (position embedding, dropout) as published (module docstring)
FAMILY_DEFAULTS = {"gpt": ("learned", 0.1), "llama": ("rope", 0.0), "nemotron": ("rope", 0.0)}


@dataclass(frozen=True)
class MoeRouter:
    """Megatron-core's router / permutation settings of a MoE model (TransformerConfig fields,
    NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553 megatron/core/transformer/transformer_config.py);
    the defaults are Megatron-core's. Kernels they select: estimator/compute/te_moe_kernels.py."""

    fusion: bool = False  # model.moe_router_fusion (l.944, default False): TE's fused top-k / aux-loss kernels
    permute_fusion: bool = False  # model.moe_permute_fusion (l.941, default False): TE's fused permutations
    aux_loss_coeff: float = 0.0  # model.moe_aux_loss_coeff (l.875, default 0.0): > 0 computes the load-balancing loss
    fp32: bool = False  # model.moe_router_dtype (l.811, default None = the input's dtype): fp32 logits
    pre_softmax: bool = False  # model.moe_router_pre_softmax (l.799, default False): softmax over E before top-k
    score: str = "softmax"  # model.moe_router_score_function (l.808): softmax | sigmoid
    expert_bias: bool = False  # model.moe_router_enable_expert_bias (l.816, default False): sigmoid routing's bias
    # group-limited routing (model.moe_router_num_groups / moe_router_group_topk, Megatron-core's names, default None):
    # each token picks group_topk of num_groups contiguous expert groups, then its top-k experts inside them. Priced in
    # the flex dispatcher's traffic only (estimator/parallel/moe_comm.py units_reached), not in the router's kernels
    num_groups: int | None = None
    group_topk: int | None = None

    @classmethod
    def from_cfg(cls, cfg: Mapping[str, Any]) -> MoeRouter:
        flags = {}
        for key, field in (("moe_router_fusion", "fusion"), ("moe_permute_fusion", "permute_fusion"),
                           ("moe_router_pre_softmax", "pre_softmax"), ("moe_router_enable_expert_bias", "expert_bias")):
            value = cfg.get(key)
            if value is not None and not isinstance(value, bool):
                raise EstimatorError(f"model.{key} must be true or false, got {value!r}")
            flags[field] = bool(value)
        coeff = cfg.get("moe_aux_loss_coeff") or 0.0
        if isinstance(coeff, bool) or not isinstance(coeff, (int, float)) or coeff < 0:
            raise EstimatorError(f"model.moe_aux_loss_coeff must be a non-negative number, got {coeff!r}")
        dtype = cfg.get("moe_router_dtype")
        if dtype not in (None, "fp32"):
            raise EstimatorError(f"model.moe_router_dtype must be null (the input's dtype) or fp32, got {dtype!r} "
                                 "(fp64 routing is not modelled)")
        score = cfg.get("moe_router_score_function") or "softmax"
        if score not in ("softmax", "sigmoid"):
            raise EstimatorError(f"model.moe_router_score_function must be softmax or sigmoid, got {score!r}")
        groups, topk = cfg.get("moe_router_num_groups"), cfg.get("moe_router_group_topk")
        for key, value in (("moe_router_num_groups", groups), ("moe_router_group_topk", topk)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise EstimatorError(f"model.{key} must be a whole number >= 1 or null, got {value!r}")
        if (groups is None) != (topk is None):
            raise EstimatorError("model.moe_router_num_groups and model.moe_router_group_topk are set together "
                                 f"(Megatron-core's group-limited routing), got {groups!r} and {topk!r}")
        experts = cfg.get("num_experts") or 0
        if groups is not None and (topk > groups or (experts and experts % groups)):
            raise EstimatorError(f"model.moe_router_group_topk={topk} of moe_router_num_groups={groups}: the groups "
                                 f"must divide the {experts} experts and the top-k groups be at most all of them")
        # the keys select kernels of the te MoE capture only; a dense or eager / megatron layer has none of them
        return cls(fp32=dtype == "fp32", score=score, aux_loss_coeff=float(coeff), num_groups=groups,
                   group_topk=topk, **flags)


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
    fused: str = "none"  # model.fused_kernels: none | megatron | te | sdpa (estimator/parallel/layer.py)
    position: str = "learned"  # model.position_embedding: learned | rope | none
    dropout: float = 0.1  # hidden and attention dropout probability
    attn_head_dim: int = 0  # model.head_dim; 0 = hidden / heads (the attention is as wide as the hidden state)
    expert_ffn: int = 0  # model.moe_ffn_size; 0 = ffn (each routed expert's MLP width)
    shared_ffn: int = 0  # model.shared_expert_ffn_size; 0 = no shared expert
    dense_layers: int = 0  # model.first_dense_layers: the first k layers have a dense MLP (MoE models)
    mtp: int = 0  # model.mtp_layers: multi-token prediction depths (module docstring)
    mla: tuple[int, ...] = ()  # multi-head latent attention: (q_lora, kv_lora, qk, rope, v); () = none
    router: MoeRouter = MoeRouter()  # the MoE router's and permutation's Megatron-core settings
    qk_norm: bool = False  # model.qk_norm: per-head RMSNorm on q and k (module docstring)

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
        head_dim = cfg.get("head_dim")
        if head_dim is not None and (isinstance(head_dim, bool) or not isinstance(head_dim, int) or head_dim < 1):
            raise EstimatorError(f"model.head_dim must be a positive integer (or null: hidden_size / num_heads), got {head_dim!r}")
        if head_dim is None and ints["hidden_size"] % ints["num_heads"]:
            raise EstimatorError(f"model.hidden_size {ints['hidden_size']} is not divisible by num_heads {ints['num_heads']} "
                                 "(set model.head_dim if the attention width differs from the hidden size)")
        if ints["num_heads"] % kv:
            raise EstimatorError(f"model.num_heads {ints['num_heads']} is not divisible by num_kv_heads {kv}")
        experts = int(cfg.get("num_experts") or 0)
        top_k = int(cfg.get("experts_top_k") or 1)
        if experts and not 1 <= top_k <= experts:
            raise EstimatorError(f"model.experts_top_k must be between 1 and num_experts {experts}, got {top_k}")
        expert_ffn, shared_ffn = _moe_widths(cfg, experts)
        fused = cfg.get("fused_kernels") or "none"
        if fused not in FUSED_KERNELS:
            raise EstimatorError(f"model.fused_kernels must be one of {', '.join(FUSED_KERNELS)}, got {fused!r}")
        if fused == "megatron" and (family != "gpt" or kv != ints["num_heads"]):
            raise EstimatorError(f"{where}: model.fused_kernels=megatron models Megatron-LM's GPT layer fusions only "
                                 "(family_variant gpt, no grouped-query attention); use model.fused_kernels=none or te")
        if fused == "sdpa" and experts:
            raise EstimatorError(f"{where}: model.fused_kernels=sdpa is the eager dense layer; a mixture-of-experts model "
                                 "needs model.fused_kernels=te (or none)")
        if family == "nemotron" and fused != "te":
            raise EstimatorError(f"{where}: family_variant nemotron is modelled as Megatron-core + Transformer Engine run "
                                 f"it; set model.fused_kernels=te (got {fused!r})")
        dense_layers = cfg.get("first_dense_layers") or 0
        if isinstance(dense_layers, bool) or not isinstance(dense_layers, int) or not 0 <= dense_layers < ints["num_layers"]:
            raise EstimatorError(f"model.first_dense_layers must be an integer in [0, num_layers {ints['num_layers']}), "
                                 f"got {dense_layers!r}")
        if dense_layers and not experts:
            raise EstimatorError(f"model.first_dense_layers={dense_layers} needs a mixture-of-experts model (model.num_experts > 0)")
        mla = _mla(cfg, family, fused, where)
        if mla and (kv != ints["num_heads"] or head_dim is not None):
            raise EstimatorError(f"{where}: with multi-head latent attention (model.kv_lora_rank) leave model.num_kv_heads "
                                 "and model.head_dim null (MLA's head widths are qk_head_dim, qk_rope_head_dim, v_head_dim)")
        if shared_ffn and (fused != "te" or family == "gpt"):
            raise EstimatorError(f"{where}: model.shared_expert_ffn_size is modelled as Megatron-core's bias-free shared "
                                 f"expert with model.fused_kernels=te only, got family {family!r}, fused_kernels {fused!r}")
        position, dropout = _position_and_dropout(cfg, family, fused, where)
        return cls(str(cfg.get("name")), family, ints["hidden_size"], ints["num_layers"], ints["num_heads"], int(kv),
                   ints["ffn_size"], ints["vocab_size"], ints["seq_len"], experts, top_k, fused, position, dropout,
                   0 if head_dim is None or head_dim * ints["num_heads"] == ints["hidden_size"] else head_dim,
                   expert_ffn, shared_ffn, dense_layers, _mtp(cfg), mla, MoeRouter.from_cfg(cfg),
                   _qk_norm(cfg, family, fused, mla, where))

    @property
    def gated(self) -> bool:
        """A gated-linear-unit MLP (SwiGLU: three matrices) rather than two matrices."""
        return self.family == "llama"

    @property
    def biases(self) -> bool:
        """Every Linear has a bias (GPT)."""
        return self.family == "gpt"

    @property
    def rmsnorm(self) -> bool:
        """RMSNorm (weight only) rather than LayerNorm (weight and bias)."""
        return self.family == "llama"

    @property
    def head_dim(self) -> int:
        """Width of one attention head: ``model.head_dim`` if set (Qwen3: 128 at hidden 2048 and 32 heads),
        else ``hidden / heads``."""
        return self.attn_head_dim or self.hidden // self.heads

    @property
    def q_head_dim(self) -> int:
        """Query / key head width: ``head_dim``, or MLA's ``qk_head_dim + qk_rope_head_dim``."""
        return self.mla[2] + self.mla[3] if self.mla else self.head_dim

    @property
    def v_head_dim(self) -> int:
        """Value / attention-output head width: ``head_dim``, or MLA's ``v_head_dim``."""
        return self.mla[4] if self.mla else self.head_dim

    def mla_replicated_params(self) -> int:
        """Per layer, MLA's down-projections and latent norms: replicated on every TP rank (0 without MLA)."""
        if not self.mla:
            return 0
        q_lora, kv_lora, _, rope, _ = self.mla
        return (self.hidden + 1) * q_lora + self.hidden * (kv_lora + rope) + kv_lora

    def attention_params(self) -> int:
        """One layer's attention weights (projections, and MLA's latent norms; not the input norm)."""
        h, d = self.hidden, self.head_dim
        if self.mla:
            q_lora, kv_lora, qk, rope, v = self.mla
            q_up = (q_lora or h) * self.heads * (qk + rope)
            return self.mla_replicated_params() + q_up + kv_lora * self.heads * (qk + v) + self.heads * v * h
        qkv_out = (self.heads + 2 * self.kv_heads) * d
        qk_norm = 2 * d if self.qk_norm else 0  # one head_dim weight for the queries, one for the keys
        return h * qkv_out + self.attn_width * h + (qkv_out + h if self.biases else 0) + qk_norm

    @property
    def attn_width(self) -> int:
        """Query / attention-output width ``heads x head_dim`` (the output projection is attn_width x hidden)."""
        return self.heads * self.head_dim

    @property
    def moe_ffn(self) -> int:
        """Width of one routed expert's MLP: ``model.moe_ffn_size``, else ``ffn_size``."""
        return self.expert_ffn or self.ffn

    def kv_heads_per_rank(self, tp: int) -> int:
        """Key/value heads one tensor-parallel rank holds (replicated when tp exceeds them)."""
        return max(1, self.kv_heads // tp)

    def padded_vocab(self, tp: int) -> int:
        """Megatron-LM pads the vocabulary to a multiple of 128 x tp (``--make-vocab-size-divisible-by
        128``) so every tensor-parallel rank holds an equal slice."""
        unit = 128 * tp
        return -(-self.vocab // unit) * unit

    @property
    def tied(self) -> bool:
        return self.family == "gpt"

    @property
    def norm_params(self) -> int:
        return self.hidden if self.rmsnorm else 2 * self.hidden

    # ---- parameter counts ------------------------------------------------------------------
    def layer_params(self) -> int:
        h, attn = self.hidden, self.attention_params()
        mlp = self._mlp_params(self.ffn)
        if self.experts:  # experts + router + shared experts
            mlp = self.expert_layer_params() + h * self.experts + self.shared_params()
        return attn + mlp + 2 * self.norm_params

    def dense_layer(self) -> TransformerSpec:
        """The layer of ``model.first_dense_layers``: this model's layer with a dense MLP of ``ffn_size``."""
        return replace(self, name=f"{self.name}.dense", experts=0, top_k=1, expert_ffn=0, shared_ffn=0, dense_layers=0, mtp=0)

    def _mlp_params(self, f: int) -> int:
        h = self.hidden
        return (3 if self.gated else 2) * h * f + (f + h if self.biases else 0)

    def shared_params(self) -> int:
        """Parameters of one MoE layer's shared expert MLP (0 without one; no biases: Megatron-core's)."""
        return (3 if self.gated else 2) * self.hidden * self.shared_ffn

    def expert_layer_params(self) -> int:
        """Parameters of one layer's routed experts (0 for a dense model): what expert parallelism shards."""
        return self.experts * self._mlp_params(self.moe_ffn)

    def embedding_params(self) -> int:
        pos = self.seq_len * self.hidden if self.position == "learned" else 0
        return self.vocab * self.hidden + pos

    def head_params(self) -> int:
        """Final norm + LM head (0 extra weights when tied to the embedding)."""
        return self.norm_params + (0 if self.tied else self.vocab * self.hidden)

    def mtp_extra_params(self) -> int:
        """One multi-token prediction depth's weights beside its decoder layer: ``eh_proj`` and three norms."""
        return 2 * self.hidden * self.hidden + 3 * self.norm_params

    def params(self) -> int:
        moe = self.layers - self.dense_layers
        dense = self.dense_layers * self.dense_layer().layer_params() if self.dense_layers else 0
        mtp = self.mtp * (self.layer_params() + self.mtp_extra_params())
        return moe * self.layer_params() + dense + mtp + self.embedding_params() + self.head_params()


def _moe_widths(cfg: Mapping[str, Any], experts: int) -> tuple[int, int]:
    """``model.moe_ffn_size`` (0 = ffn_size) and ``model.shared_expert_ffn_size`` (0 = none), checked."""
    out = []
    for key in ("moe_ffn_size", "shared_expert_ffn_size"):
        value = cfg.get(key) or 0
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise EstimatorError(f"model.{key} must be a positive integer (or null / 0: unset), got {value!r}")
        if value and not experts:
            raise EstimatorError(f"model.{key}={value} needs a mixture-of-experts model (model.num_experts > 0)")
        out.append(value)
    return out[0], out[1]


def _mtp(cfg: Mapping[str, Any]) -> int:
    """``model.mtp_layers`` (0 = no multi-token prediction), checked."""
    value = cfg.get("mtp_layers") or 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise EstimatorError(f"model.mtp_layers must be a non-negative integer (0: no multi-token prediction), got {value!r}")
    if value and cfg.get("fused_kernels") != "te":
        raise EstimatorError(f"model.mtp_layers={value} is modelled as Megatron-core's MTP with model.fused_kernels=te only")
    return value


def _qk_norm(cfg: Mapping[str, Any], family: str, fused: str, mla: tuple[int, ...], where: str) -> bool:
    """``model.qk_norm`` (false / null = none), checked (module docstring)."""
    value = cfg.get("qk_norm")
    if value is not None and not isinstance(value, bool):
        raise EstimatorError(f"model.qk_norm must be true or false, got {value!r}")
    if value and (fused != "te" or family != "llama" or mla):
        raise EstimatorError(f"{where}: model.qk_norm is modelled as Megatron-core's TE RMSNorm on q and k: family_variant "
                             f"llama, model.fused_kernels=te and no multi-head latent attention, got {family!r}, {fused!r}"
                             f"{', model.kv_lora_rank set' if mla else ''}")
    return bool(value)


MLA_KEYS = ("q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_rope_head_dim", "v_head_dim")


def _mla(cfg: Mapping[str, Any], family: str, fused: str, where: str) -> tuple[int, ...]:
    """Multi-head latent attention's widths (module docstring), checked; () without ``model.kv_lora_rank``."""
    if not cfg.get("kv_lora_rank"):
        extra = [k for k in MLA_KEYS[:1] + MLA_KEYS[2:] if cfg.get(k)]
        if extra:
            raise EstimatorError(f"model.{extra[0]} is a multi-head latent attention width; set model.kv_lora_rank too")
        return ()
    widths = []
    for key in MLA_KEYS:
        value = cfg.get(key) or 0
        if isinstance(value, bool) or not isinstance(value, int) or value < 0 or (not value and key != "q_lora_rank"):
            raise EstimatorError(f"model.{key} must be a positive integer with model.kv_lora_rank set, got {value!r}")
        widths.append(value)
    if fused != "te" or family != "llama":
        raise EstimatorError(f"{where}: multi-head latent attention (model.kv_lora_rank) is modelled as Megatron-core's "
                             f"MLASelfAttention: family_variant llama and model.fused_kernels=te, got {family!r}, {fused!r}")
    return tuple(widths)


def _position_and_dropout(cfg: Mapping[str, Any], family: str, fused: str, where: str) -> tuple[str, float]:
    """``model.position_embedding`` and ``model.dropout``, checked (module docstring)."""
    default_position, default_dropout = FAMILY_DEFAULTS[family]
    position = cfg.get("position_embedding") or default_position
    if position not in POSITIONS:
        raise EstimatorError(f"model.position_embedding must be one of {', '.join(POSITIONS)}, got {position!r}")
    dropout = cfg.get("dropout")
    dropout = default_dropout if dropout is None else dropout
    if isinstance(dropout, bool) or not isinstance(dropout, int | float) or not 0 <= dropout < 1:
        raise EstimatorError(f"model.dropout must be a probability in [0, 1), got {dropout!r}")
    alibi = position == "alibi" and fused == "megatron" and family == "gpt"  # Megatron-DeepSpeed's (BigScience) ALiBi
    if position == "alibi" and not alibi:
        raise EstimatorError(f"{where}: model.position_embedding=alibi is modelled with family gpt and "
                             f"model.fused_kernels=megatron only (BigScience's Megatron-DeepSpeed), got {family}, {fused}")
    if fused != "te" and position != default_position and not alibi:
        raise EstimatorError(f"{where}: model.position_embedding={position} is modelled with model.fused_kernels=te only; "
                             f"the {fused} layer of family {family} has {default_position} positions")
    # the eager sdpa layer takes any dropout (p = 0: ATen's dropout returns its input, no kernel; layer.py skips it)
    if fused not in ("te", "sdpa") and float(dropout) != default_dropout:
        raise EstimatorError(f"{where}: model.dropout={dropout} is modelled with model.fused_kernels=te or sdpa only; "
                             f"the {fused} layer of family {family} has dropout {default_dropout}")
    if dropout and not FAMILY_DEFAULTS[family][1]:
        raise EstimatorError(f"{where}: model.dropout={dropout}: family {family} is trained without dropout "
                             "(its layer has no dropout); use 0")
    return str(position), float(dropout)
