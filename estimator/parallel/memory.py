"""Memory per GPU of a parallel layout, stage by stage; the largest stage must fit the device.

* Model state, mixed-precision Adam (Rajbhandari et al. 2020, ZeRO, Sec. 3.1): 16-bit weights,
  gradients of ``grad_bytes`` (2, or 4 where the framework keeps fp32 gradients:
  :class:`~estimator.parallel.framework.Framework`), 12 bytes of fp32 master weights + momentum +
  variance per parameter (6 with ``framework.optimizer_state=bf16``, 8 with ``bf16_moments``); ZeRO-1 shards that state,
  ZeRO-2 also the gradients, ZeRO-3 also the weights over the ``dp x cp`` ranks holding a copy
  (expert parameters over the ``edp`` ranks holding the same experts, ``Layout.edp``). ZeRO-3 also holds the gathered weights of the unit
  running and of those prefetched (:func:`zero3_units`, ``Framework.zero3_live``) and, with
  ``Framework.zero3_unit_grad`` (PyTorch FSDP), one unit's unsharded gradient before its reduce-scatter
  (:func:`zero3_unit_grad_bytes`): a layer-backward transient, below. With ``Framework.fsdp_param_bytes`` 4 (FSDP
  gathering fp32 parameters under torch autocast) the gathered units, FSDP1's root unit and the unit gradient are fp32,
  and autocast's bf16 copy of each layer weight is saved by its GEMM for the backward: per held layer, or with full
  recompute for the one layer recomputed (conf/framework/fsdp.yaml ``fsdp_param_bytes`` cites the code).
* Parameters of stage ``i``: its decoder layers (``Layout.stage_layers``) / tp, plus the
  embedding on the first stage and the LM head on the last (a tied head is a second copy when
  ``pp`` > 1); experts split over ``ep`` and over ``etp`` (the experts' tensor-parallel degree).
* Activations per layer and microbatch of ``s / cp`` tokens:

  - eager and Megatron-LM GPT layers (``model.fused_kernels`` none / megatron): Korthikanti et al.
    2022, "Reducing Activation Recomputation in Large Transformer Models", Sec. 4, Table 2 (s
    sequence, b microbatch, h hidden, a heads, t tp): no parallelism ``sbh(34 + 5as/h)``; tensor
    parallel ``sbh(10 + 24/t + 5as/(ht))``; + sequence parallel ``sbh(34 + 5as/h)/t``; selective
    recompute drops the ``5as/h`` term. The eager layer with flash attention (``sdpa``) keeps the same tensors
    but no ``s x s`` one: the formula without ``5as/h`` (flash attention's softmax statistics left out as for
    ``te``; the hand-written RMSNorm's fp32 copies and RoPE's fp32 intermediates that autograd keeps are not
    counted). With ``model.head_dim`` (query width ``w`` != h) the
    ``24/t`` becomes ``(16 + 8w/h)/t``: q, k, v and the output projection's input are ``w`` wide.
  - Megatron-core + Transformer Engine layer (``te``; derived the same way from the tensors each
    op saves for its backward, 16-bit, ``f`` = ffn, ``g`` = key/value width kv_heads x d per TP
    rank, ``w`` = query width heads x head_dim, ``h`` unless ``model.head_dim`` is set): the two
    norms' inputs and outputs ``8h`` (TE's LayerNormLinear saves the norm input and its output;
    split over t with sequence parallelism), q ``2w/t``, k and v ``4g``, the attention output
    ``2w/t`` (also the output projection's input); the MLP: SwiGLU (Llama) its
    ``2f``-wide input ``4f/t`` and output ``2f/t`` (fc2's input), bias-GeLU (GPT) and squared ReLU
    (Nemotron) their input and output ``4f/t``; with dropout (GPT, ``model.dropout`` > 0) the two
    bias-dropout-add keep-masks ``2h`` (1 byte; split with sequence parallelism). For GPT with
    dropout and sequence parallelism that is Korthikanti et al.'s ``34 sbh/t`` without the
    attention-score term. Flash attention keeps no ``s x s`` tensor (its softmax statistics, 4
    bytes per head and token, are left out; attention dropout is drawn inside the kernel, no
    mask), RoPE's fused backward needs no saved input, and selective recompute has nothing left to
    drop. Under ``precision=fp8`` Transformer Engine keeps a GEMM's input for its weight gradient
    in FP8, 1 byte (NVIDIA/TransformerEngine@v1.8 ``module/linear.py``: ``saved_inputmat`` is the
    FP8-cast input; ``module/layernorm_linear.py`` saves ``ln_out`` after its FP8 cast): the two
    norm outputs (QKV and fc1 inputs) take ``h`` instead of ``2h`` (split with sequence
    parallelism), fc2's input (the activation's output, which nothing else keeps) ``f/t`` instead of
    ``2f/t``, and the output projection keeps an FP8 copy of the attention output ``h/t`` besides
    the 16-bit one flash attention's backward reads. With ``model.qk_norm`` (:func:`qk_norm_bytes`) the
    q and k RMSNorms keep what TE's RMSNorm saves (NVIDIA/TransformerEngine@v2.9
    transformer_engine/pytorch/ops/basic/rmsnorm.py l.182-202: ``save_for_backward(x, rstdevs)``, the
    contiguous 16-bit input and the fp32 1/rms of each row, a row being one head of one token): q's
    ``2w/t`` and k's ``2g`` before the norm (flash attention keeps the normalised, rotated q and k
    besides; 16-bit under ``fp8`` too) and ``4 (heads/t + g/d)`` of 1/rms; no
    ``recompute_modules`` entry drops them (``layernorm`` recomputes only the input and pre-MLP norms,
    transformer_layer.py l.470-530; ``core_attn`` checkpoints the core attention alone, attention.py
    l.392-395, NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553), full recompute keeps the
    layer input only.
  - multi-head latent attention (``model.kv_lora_rank``, TE layer only), the same way: the input norm's
    input and output and the second norm's input ``6h`` (split with sequence parallelism), each latent
    norm's input and output ``4 (q_lora + kv_lora)`` (on the rank's own tokens, split with sequence
    parallelism), q and k ``4 heads (qk + rope) / t``, v and the attention output ``4 heads v / t``.
  - Megatron-core's selective recompute of named modules (``parallelism.recompute_modules``, TE layer;
    megatron/core/transformer/transformer_config.py ``recompute_modules`` and the modules that read it,
    NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553): a listed module's saved tensors are dropped
    and only its input is kept (the checkpoint's; ``CheckpointWithoutOutput`` for ``layernorm``,
    ``mla_up_proj``, ``moe_act`` also frees the output's storage, which the next op had saved, and recomputes
    it before that op's backward). ``core_attn``: as ``selective`` (nothing to drop in the TE layer: flash
    attention). ``layernorm`` (transformer_layer.py: only a norm that is its own module; the TE spec fuses the
    ordinary attention's input norm into the QKV Linear and the dense MLP's into fc1, IdentityOp modules, so
    those stay): MLA's input norm output (``2h``, ``h`` with ``fp8``: set_save_original_input makes the
    down-projections keep the discardable original, not an FP8 copy), and the MoE layer's pre-MLP norm
    output (the router's input ``2h``, which a shared expert's fc1 keeps too). ``mla_up_proj``
    (multi_latent_attention.py ``qkv_up_proj_and_rope_apply``, inputs the two latents and the rope key): the
    latent norms' outputs ``2 (q_lora + kv_lora)`` and q, k, v ``2 heads (2 (qk + rope) + v) / t`` (the
    rope'd parts included); the latent norms' inputs stay. ``mlp`` (dense layers only): all of
    :func:`te_dense_mlp_bytes` but the dropout mask (its input, the residual stream with the TE spec's
    IdentityOp pre-MLP norm, is counted with the attention's bytes). ``moe_act`` (experts.py): fc2's input,
    the activation output (``f``; 1 byte with ``fp8``: fc2 then keeps the original, discarded). ``moe``
    (moe_layer.py: the whole route / dispatch / experts / combine checkpointed): everything of
    :func:`moe_mlp_bytes` but its input (the router's ``2h``) and the mask. ``shared_experts``
    (shared_experts.py): the shared expert's fc1 and activation outputs.
  - Recomputation rematerialises one layer at a time: in the layer's backward its recomputed tensors live
    beside everything kept (torch.utils.checkpoint's backward, and Megatron's ``CheckpointFunction``, rerun the
    forward with grad enabled and then run its backward: torch 2.13 torch/utils/checkpoint.py
    l.278-331 ``CheckpointFunction.backward``), so a stage also holds one layer's bytes without recomputation less what
    recomputation kept of it (:func:`recomputed_bytes`; the backward's own activation-gradient buffers are not
    counted). With ``Framework.zero3_unit_grad`` a layer's backward also ends with one ZeRO-3 unit's unsharded
    gradient (:func:`zero3_unit_grad_bytes`): FSDP's post-backward hook runs once the unit's whole flat gradient
    is accumulated, after the backward of the layer's first op, when that layer's recomputed tensors are freed; so
    the layer-backward transient is the larger of the recomputed layer and the unit gradient. (The gradient
    lives on until its reduce-scatter completes on FSDP's post-backward stream, beside the start of the next
    unit's recomputation; that partial overlap, which depends on the reduce-scatter's time against the
    recomputed forward's, is not counted.) On the last stage the loss's backward peak (below) comes before any
    layer's backward, so that stage holds the larger of the loss peak and that transient.
  - full recompute keeps only the layer input ``2sbh`` (/t with sequence parallelism or Megatron's
    ``--distribute-saved-activations``, ``parallelism.distribute_saved_activations``); torchtitan's
    per-op policy (``op``) keeps what :func:`~estimator.parallel.sac.saved_bytes_per_token` lists.
  - MoE layers (:func:`moe_mlp_bytes`, derived like the dense ``19sbh``: 16-bit tensors saved for
    the backward, masks 1 byte): the dense MLP's share of the formula (``3sbh + 16sbh/t``;
    ``19sbh/t`` with sequence parallelism) is replaced by the router's input ``2sbh`` and fp32
    router probabilities ``4sbE``, the dispatch buffer ``2ksbh``, the expert MLP's intermediates
    on those ``ks b`` tokens (GeLU ``4ksbf``; SwiGLU ``6ksbf``), the experts' outputs before the
    weighted combine ``2ksbh`` and the dropout mask ``sbh``; token-width tensors split over the
    ``t`` tensor-parallel ranks (Megatron-core requires sequence parallelism for MoE with t > 1).
    In the TE layer (Megatron-core's MoE layer, :mod:`~estimator.parallel.layer`) what each op
    keeps (NVIDIA/Megatron-LM@92c8482e6dcd11c3666c61bb8d1f7e8d0730ed13, Megatron-Bridge 25.11's; the same in
    core_v0.14.0 and d98e8a64; TransformerEngine v2.9): the router's input ``2h`` (moe_utils.py:964
    RouterGatingLinearFunction saves the 16-bit input) and fp32 probabilities ``4E``; fc1's input, the ``k T``
    routed rows gathered over the experts' TP ranks (``k T etp x h``, 1 byte with ``fp8``: TE's FP8 grouped
    Linears keep the FP8 copy, columnwise only, for the weight gradient: grouped_linear.py:202-204), the
    activation's input, fc1's output (``2f`` SwiGLU / ``f``, 16-bit, ``k T etp x f/etp``) and each row's fp32
    probability (experts.py:897-966: the probabilities are applied inside the activation, the fused weighted
    SwiGLU saving its input and the probabilities, fused_bias_swiglu.py:194-196; a non-gated activation is
    followed by the probability multiply, which keeps the activation's ``f``-wide output too), fc2's input
    (``f``, 1 byte with ``fp8``); the combine keeps nothing of its rows (token_dispatcher.py:834 unpermutes
    without probabilities, so TE's fused unpermute saves only its int32 row map, permutation.py:375-378, and the
    unfused scatter-add none). A shared expert's fc1 keeps the router's tensor, not a copy (16-bit: TE's Linear
    saves its un-gathered input as given, module/linear.py; ``fp8``: shared_experts.py:64-88 sets
    ``save_original_input`` on it), so it adds its fc1 and activation outputs only. The swapped-out share is
    :func:`te_dense_mlp_bytes`; the bias-dropout-add keep-mask ``sbh/t`` with dropout only.

* Microbatches in flight on stage ``i`` (Megatron's 1F1B schedule: the warm-up forwards plus the
  one running; megatron/core/pipeline_parallel/schedules.py ``num_warmup_microbatches = pp - i - 1``
  and, interleaved with ``v`` chunks and ``N`` contiguous microbatches per chunk
  (``Layout.microbatch_group``, default ``pp``), ``(pp - i - 1) x 2 + (v - 1) x N``): ``min(m, pp -
  i)`` microbatches of the stage's layers. Interleaved (:func:`layers_in_flight`): the schedule runs
  the stage's chunks in the order of :func:`~estimator.parallel.layout.schedule_chunks` for its
  forwards and the reverse chunk for its backwards (``get_schedule_table``; with ``N = pp`` chunk
  ``(k mod pp v) // pp`` for its ``k``-th forward, ``get_model_chunk_id``); the warm-up forwards,
  then one forward and one backward at a time; the stage holds, at its peak, the layers of the
  chunks run forward and not yet backward. A larger ``N`` (towards the breadth-first schedule)
  holds more; ``N`` cannot go below ``pp``. With equal chunks that is ``min(m v, 2(pp - i - 1) + (v - 1) pp +
  1)`` chunks of ``layers / (pp v)`` layers (for stage 0, Korthikanti et al. Sec. 4.2.3's ``pp (1 +
  (pp - 1)/(pp v))`` microbatches of ``layers / pp`` layers); a chunk without layers (Llama 3's
  embedding-only and head-only chunks) holds none. The last stage also holds one microbatch's logits
  at the loss backward's peak, with all its in-flight activations still live (``k (s/cp) b V / t``:
  :func:`~estimator.parallel.loss.peak_bytes`, what the loss kernel keeps for its backward plus the
  gradients its backward allocates beside it: ``k`` = 12 for torch's fp32 loss (its fp32 log-softmax,
  nll_loss backward's fp32 gradient and log_softmax backward's output), 6 for torch's 16-bit loss and for
  Megatron's losses (the fp32 softmax and the 16-bit gradient), 4 for the flash-attn / Apex kernels (the
  16-bit logits and a new gradient), 2 for Transformer Engine's (in place)); other embedding-side
  activations and temporary buffers are not counted.
"""

from __future__ import annotations

from dataclasses import replace

from estimator.errors import EstimatorError
from estimator.parallel.framework import Framework
from estimator.parallel.layout import Layout, layer_kinds, schedule_chunks
from estimator.parallel.loss import logit_elements, peak_bytes
from estimator.parallel.sac import saved_bytes_per_token
from estimator.parallel.spec import TransformerSpec

ADAM_BYTES = {"fp32": 12,  # fp32 master weights + Adam momentum + variance per parameter (ZeRO paper Sec. 3.1)
              "bf16": 6,  # the same three in bf16 (Apex DistributedFusedAdam dtype=bf16, store_params=True)
              "bf16_moments": 8}  # fp32 master weights + bf16 momentum + variance (Megatron-core's precision-aware optimizer)
WEIGHT_BYTES = 2  # fp16/bf16 weights
ROUTED_PROB_BYTES = 4  # a routed row's probability as the weighted activation saves it: fp32 with moe_router_dtype fp32
# (NeMo's DeepSeek-V3 recipe) or the flex dispatcher (token_dispatcher.py@92c8482e:1036-1041 casts to fp32); a 16-bit
# router on the all-to-all keeps 2 (moe_utils.py:590 type_as(logits)), not distinguished: 0.03 % of a routed row's bytes


def stage_param_split(spec: TransformerSpec, layout: Layout, stage: int) -> tuple[int, int]:
    """(parameters data-parallel over ``dp x cp``, expert parameters over ``edp``) one GPU
    of pipeline stage ``stage`` holds."""
    experts = layers = 0
    for kind, counts in layer_kinds(spec, layout):  # the dense layers of model.first_dense_layers have no experts
        n = counts[stage]
        experts += n * kind.expert_layer_params() // (layout.expert_tp * layout.ep)
        layers += n * (kind.layer_params() - kind.expert_layer_params() - kind.mla_replicated_params())
    replicated = layout.stage_layers(spec.layers)[stage] * spec.mla_replicated_params()  # on every TP rank
    if spec.mtp and stage == layout.pp - 1:  # multi-token prediction's layers (of the last layer's kind), on the last stage
        experts += spec.mtp * spec.expert_layer_params() // (layout.expert_tp * layout.ep)
        layers += spec.mtp * (spec.layer_params() - spec.expert_layer_params() - spec.mla_replicated_params()
                              + spec.mtp_extra_params())
        replicated += spec.mtp * spec.mla_replicated_params()
    return (layers + end_params(spec, layout, stage)) // layout.tp + replicated, experts


def end_params(spec: TransformerSpec, layout: Layout, stage: int) -> int:
    """Parameters (all TP ranks) of stage ``stage`` outside its decoder layers: the embedding on the first
    stage, the final norm and LM head on the last."""
    v = spec.padded_vocab(layout.tp)
    emb = v * spec.hidden + (spec.embedding_params() - spec.vocab * spec.hidden)
    head = v * spec.hidden + spec.head_params() - (0 if spec.tied else spec.vocab * spec.hidden)
    if layout.pp == 1:
        return emb + head - (v * spec.hidden if spec.tied else 0)
    # (multi-token prediction keeps a copy of the embedding on the last stage)
    return (emb if stage == 0 or (spec.mtp and stage == layout.pp - 1) else 0) + (head if stage == layout.pp - 1 else 0)


def fsdp1_root_params(spec: TransformerSpec, layout: Layout, stage: int) -> float:
    """Parameters per GPU that PyTorch FSDP1 (``framework.fsdp_version=1``, ``zero`` 3) keeps gathered through the
    step: its root unit, the parameters outside every wrapped transformer block (the stage's embedding, final norm
    and LM head, over TP). FSDP1 does not reshard the root after the forward: pytorch/pytorch@3ade90a6aaa939cd6238e
    314c321b9f920db1471 torch/distributed/fsdp/_runtime_utils.py ``_post_forward_reshard``, "Do not free the root's
    parameters in the post-forward for `FULL_SHARD` with the intention that they are immediately used for backward
    computation", ``free_unsharded_flat_params = [not state._is_root and ...]``; it frees them in its
    ``_post_backward_hook`` (``_should_free_in_backward``) once the root's gradient exists, which for the embedding is
    the end of the backward. So at the peak (the loss's backward, every layer's activations held) the root's
    unsharded 16-bit flat parameter is resident besides its shard. The rows' own versions say the same (read from the
    PyPI wheels, torch/distributed/fsdp/fully_sharded_data_parallel.py; docs/research/h81-fsdp-transient.md, Step 3):
    torch 1.12.1 ``_lazy_init`` l.1469-1475 sets the root's ``reshard_after_forward = False``; torch 1.13.1 ``forward``
    l.2707-2714 ``free_unsharded_flat_params = [not self._is_root and ...]``. Not counted: the tied head's gradient
    (V x h, 16-bit) that waits from the loss's backward to the embedding's (h81, Step 3)."""
    return end_params(spec, layout, stage) / layout.tp


def zero3_units(spec: TransformerSpec, layout: Layout, unit: str) -> list[float]:
    """Parameters (per TP rank) of each ZeRO-3 all-gather of one layer: ``layer`` = the whole
    layer; ``module`` = each Linear (norm weights, below DeepSpeed's 1e5-element persistence
    threshold, are not gathered; an MoE layer's experts are one unit)."""
    t, h, d = layout.tp, spec.hidden, spec.head_dim
    dense = spec.layer_params() - spec.expert_layer_params()
    if unit == "layer":
        return [dense / t + spec.expert_layer_params() / (layout.expert_tp * layout.ep)]
    if spec.mla:
        raise EstimatorError(f"framework.zero3_unit={unit}: per-module ZeRO-3 units are modelled for ordinary attention; "
                             f"{spec.name} has multi-head latent attention (use zero3_unit=layer)")
    qkv, proj = h * (spec.heads + 2 * spec.kv_heads) * d, spec.attn_width * h
    if spec.experts:
        mlp = [spec.expert_layer_params() * t / (layout.expert_tp * layout.ep)]  # divided by t below
    elif not spec.gated:  # GPT, Nemotron: fc1 and fc2
        mlp = [h * spec.ffn, h * spec.ffn]
    elif spec.fused == "te":
        mlp = [2 * h * spec.ffn, h * spec.ffn]  # Megatron-core's fc1 (gate and up) and fc2
    else:
        mlp = [h * spec.ffn] * 3
    return [p / t for p in (qkv, proj, *mlp)]


def zero3_unit_grad_bytes(unit: float, grad_bytes: int, param_bytes: int = WEIGHT_BYTES) -> float:
    """Bytes of one ZeRO-3 unit's unsharded gradient before its reduce-scatter (``Framework.zero3_unit_grad``,
    conf/framework/fsdp.yaml cites PyTorch FSDP1's ``_post_backward_hook`` and FSDP2's ``foreach_reduce``): the
    gradient autograd produced for the unit's ``unit`` parameters in their gathered dtype (``param_bytes``:
    ``framework.fsdp_param_bytes``, 2, or 4 for fp32 parameters under autocast) and, when the reduction runs in
    another dtype (``grad_bytes``), its copy in that dtype."""
    return unit * (param_bytes + (grad_bytes if grad_bytes != param_bytes else 0))


def activation_bytes_per_layer(spec: TransformerSpec, layout: Layout, fp8: bool = False) -> float:
    s, b, h, a, t = spec.seq_len // layout.cp, layout.micro_batch_size, spec.hidden, spec.heads, layout.tp
    token_split = t if layout.sequence_parallel else 1
    if layout.recompute == "full":
        return 2 * s * b * h / layout.saved_input_split
    if layout.recompute == "op":  # torchtitan's per-op checkpointing keeps its own set (sac)
        return s * b * saved_bytes_per_token(spec, t, layout.sequence_parallel)
    w = spec.attn_width  # q and the attention output are heads x head_dim wide (h unless model.head_dim)
    if spec.mla:  # multi-head latent attention (module docstring; recompute_modules layernorm / mla_up_proj)
        q_lora, kv_lora, _, _, dv = spec.mla
        up = "mla_up_proj" in layout.modules
        # the input norm's input and the second norm's input, then the input norm's output (FP8 copy with fp8)
        norms = 4 * h / token_split + (0.0 if "layernorm" in layout.modules else (1 if fp8 else 2) * h / token_split)
        latents = (2 if up else 4) * (q_lora + kv_lora) / token_split  # each latent norm's input (and output)
        qkv_out = 2 * spec.heads * ((0 if up else 2 * spec.q_head_dim + dv) + dv) / t  # (q, k, v and) the attention output
        mask = h / token_split if spec.dropout else 0.0
        fp8_copy = spec.heads * dv / t if fp8 else 0.0  # the output projection's FP8 copy of its input
        return s * b * (norms + latents + qkv_out + mask + fp8_copy) + te_dense_mlp_bytes(spec, layout, fp8)
    if spec.fused == "te":  # the attention block's bytes, then the MLP's (te_dense_mlp_bytes)
        kv = 2 * spec.kv_heads_per_rank(t) * spec.head_dim
        mask = h / token_split if spec.dropout else 0.0
        fp8_delta = (w / t - h / token_split) if fp8 else 0.0  # QKV input in FP8, proj's FP8 copy (module docstring)
        return (s * b * (6 * h / token_split + 4 * w / t + 2 * kv + mask + fp8_delta + qk_norm_bytes(spec, t))
                + te_dense_mlp_bytes(spec, layout, fp8))
    attn = 0.0 if "core_attn" in layout.modules or spec.fused == "sdpa" else 5 * a * s / h  # sdpa: flash, no s x s
    split = 16 + 8 * w / h  # Korthikanti's 24 sbh/t: q, k, v and the projection's input (8, width w) + the MLP's 16
    if layout.sequence_parallel:
        return s * b * h * (10 + split + attn) / t
    return s * b * h * (10 + split / t + attn / t)


def qk_norm_bytes(spec: TransformerSpec, t: int) -> float:
    """Bytes per token the q and k RMSNorms (``model.qk_norm``) keep for their backward on a TP rank: each norm's
    16-bit input (q ``2w/t``, k ``2 kv_heads d / t``; not an FP8 copy) and its fp32 1/rms per head (module docstring)."""
    if not spec.qk_norm:
        return 0.0
    heads = spec.heads // t + spec.kv_heads_per_rank(t)  # query heads, key heads on the rank
    return heads * (2 * spec.head_dim + 4)


def te_dense_mlp_bytes(spec: TransformerSpec, layout: Layout, fp8: bool = False, width: int = 0) -> float:
    """The MLP's share of the TE layer's bytes (:func:`activation_bytes_per_layer`): fc1's input (the
    second norm's output, ``2sbh``, split with sequence parallelism), fc1 and activation outputs
    (``6sbf/t`` SwiGLU, ``4sbf/t`` otherwise) and the MLP dropout's keep-mask (``sbh``) if any; with
    ``fp8`` fc1's and fc2's inputs are kept in 1 byte (module docstring). ``width``: the MLP's width
    (0 = ``ffn_size``; a shared expert's)."""
    fc1_in, inner, mask = _te_mlp_parts(spec, layout, fp8, width)
    if not width and not spec.experts and "mlp" in layout.modules:  # recompute_modules mlp (module docstring)
        return mask
    return fc1_in + inner + mask


def _te_mlp_parts(spec: TransformerSpec, layout: Layout, fp8: bool, width: int) -> tuple[float, float, float]:
    """(fc1's input, fc1's and the activation's outputs, dropout mask) bytes of :func:`te_dense_mlp_bytes`."""
    s, b, h, t = spec.seq_len // layout.cp, layout.micro_batch_size, spec.hidden, layout.tp
    split = t if layout.sequence_parallel else 1
    mask = h / split if spec.dropout else 0.0
    per_byte = 1 if fp8 else 2  # fc1's input and fc2's input (the activation's output)
    return s * b * per_byte * h / split, s * b * ((4 if spec.gated else 2) + per_byte) * (width or spec.ffn) / t, s * b * mask


def dense_mlp_bytes(spec: TransformerSpec, layout: Layout) -> float:
    """The MLP's share of Korthikanti et al.'s per-layer formula (Sec. 4.1: 19sbh with a 4h GeLU
    MLP: input 2sbh, fc1 and GeLU outputs 16sbh, dropout mask sbh; t splits the 16sbh, or all of
    it with sequence parallelism)."""
    s, b, h, t = spec.seq_len // layout.cp, layout.micro_batch_size, spec.hidden, layout.tp
    return s * b * h * 19 / t if layout.sequence_parallel else s * b * h * (3 + 16 / t)


def moe_mlp_bytes(spec: TransformerSpec, layout: Layout, fp8: bool = False) -> float:
    """Bytes one GPU saves for the backward of one MoE MLP per microbatch (the module docstring)."""
    s, b, h, t, k = spec.seq_len // layout.cp, layout.micro_batch_size, spec.hidden, layout.tp, spec.top_k
    tokens = s * b / t
    if spec.fused != "te":
        inner = 6 if spec.gated else 4  # SwiGLU: 2f-wide fc1 output + its output; GeLU: fc1 + GeLU outputs
        return tokens * (3 * h + 4 * spec.experts) + k * tokens * (4 * h + inner * spec.moe_ffn)
    per_byte = 1 if fp8 else 2  # what TE's FP8 grouped Linears keep of their inputs
    gather = layout.expert_tp  # routed rows per token on this rank: gathered over the experts' TP (or, tp > 1 without
    # sequence parallelism, where etp = tp: every TP rank routes all the tokens)
    f = spec.moe_ffn
    mods = layout.modules  # recompute_modules (module docstring)
    router_in = 0.0 if "layernorm" in mods else 2 * h  # the pre-MLP norm's output (the router's saved input)
    mask = h if spec.dropout else 0.0  # bias-dropout-add's keep-mask, outside the MoE layer (none without dropout)
    if "moe" in mods:  # the checkpoint keeps the MoE layer's input
        return tokens * (router_in + mask)
    # a shared expert's fc1 keeps the router's tensor (module docstring), so only its fc1 and activation outputs count
    shared = 0.0 if not spec.shared_ffn or "shared_experts" in mods else _te_mlp_parts(spec, layout, fp8, spec.shared_ffn)[1]
    # per routed row (the rows are gathered over the experts' TP ranks, the widths split over them): fc1's input, the
    # activation's input (fc1's 2f-wide / f-wide output, 16-bit) and probability (fp32), fc2's input; a plain
    # activation's output, which the probability multiply keeps (module docstring); nothing of the unpermute
    act_in = (4 if spec.gated else 2) * f
    act_out = 0.0 if spec.gated or "moe_act" in mods else 2 * f
    fc2_in = 0.0 if "moe_act" in mods else per_byte * f
    rows = k * tokens * gather
    routed = tokens * (router_in + mask + 4 * spec.experts) + rows * (per_byte * h + ROUTED_PROB_BYTES)
    return routed + k * tokens * (act_in + act_out + fc2_in) + shared


def layer_activation_bytes(spec: TransformerSpec, layout: Layout, fp8: bool = False) -> float:
    """Bytes one GPU saves for the backward of one layer per microbatch, its MoE MLP's if any."""
    per_layer = activation_bytes_per_layer(spec, layout, fp8)
    if spec.experts and layout.recompute != "full":
        dense_share = te_dense_mlp_bytes(spec, layout, fp8) if spec.fused == "te" else dense_mlp_bytes(spec, layout)
        per_layer += moe_mlp_bytes(spec, layout, fp8) - dense_share
    return per_layer


def layer_bytes(spec: TransformerSpec, layout: Layout, fp8: bool = False) -> list[tuple[tuple[int, ...], float, float]]:
    """Per layer kind (:func:`~estimator.parallel.layout.layer_kinds`): how many layers of it each stage holds, the
    bytes one such layer keeps for its backward per microbatch, and what recomputation rematerialises in that
    layer's backward (its bytes without recomputation less those kept, module docstring; 0 without recomputation).
    The same for every stage: :func:`memory` computes it once."""
    recomputes = layout.recompute != "none" or bool(layout.modules)
    whole = replace(layout, recompute="none", recompute_modules=None, distribute_saved=False)
    out = []
    for kind, counts in layer_kinds(spec, layout):
        kept = layer_activation_bytes(kind, layout, fp8)
        out.append((counts, kept, layer_activation_bytes(kind, whole, fp8) - kept if recomputes else 0.0))
    return out


def recomputed_bytes(spec: TransformerSpec, layout: Layout, stage: int, fp8: bool = False) -> float:
    """What recomputation rematerialises in the backward of the one layer being recomputed on ``stage``: the
    largest over the stage's layer kinds (:func:`layer_bytes`)."""
    return _recomputed(layer_bytes(spec, layout, fp8), stage)


def _recomputed(layers: list[tuple[tuple[int, ...], float, float]], stage: int) -> float:
    return max((again for counts, _kept, again in layers if counts[stage]), default=0.0)


def layers_in_flight(layout: Layout, stage: int, model_layers: int) -> float:
    """Layer-microbatches of activations stage ``stage`` holds at its peak (module docstring)."""
    pp, m, v = layout.pp, layout.microbatches, layout.virtual_stages
    chunks = layout.chunk_layers(model_layers)[stage::pp]  # this stage's v chunks, in order
    if v == 1:
        return min(m, pp - stage) * chunks[0]
    total, group = m * v, layout.microbatch_group or pp
    warmup = min(total, 2 * (pp - stage - 1) + (v - 1) * group)
    order = schedule_chunks(m, v, group)
    forward = [chunks[c] for c in order]
    backward = [chunks[v - 1 - c] for c in order]
    live = peak = sum(forward[:warmup])
    for k in range(total - warmup):  # steady state: one forward, then one backward
        live += forward[warmup + k]
        peak = max(peak, live)
        live -= backward[k]
    return float(peak)


def dense_shards(layout: Layout, fw: Framework) -> int:
    """Ranks one dense parameter's ZeRO-sharded state is split over: the ``dp x cp`` ranks holding a copy, or for
    ZeRO-1 alone ``framework.zero1_group`` of them (InternLM's zero1: sharded within the group, replicated across)."""
    replicas = layout.dp * layout.cp
    return fw.zero1_ranks(replicas) if layout.zero == 1 else replicas


def stage_memory(spec: TransformerSpec, layout: Layout, stage: int, grad_bytes: int = 2,
                 framework: Framework | None = None, fp8: bool = False,
                 layers: list[tuple[tuple[int, ...], float, float]] | None = None,
                 in_flight: float | None = None) -> dict[str, float]:
    """Bytes per GPU of pipeline stage ``stage``: weights, gradients, optimizer state, activations, total;
    ``layers``: :func:`layer_bytes` of the layout, if already computed; ``in_flight``: microbatches of the stage's
    activations held at the peak, instead of the 1F1B schedule's (:func:`layers_in_flight`; DualPipe)."""
    dense, expert = stage_param_split(spec, layout, stage)
    fw = framework or Framework.from_cfg(None)

    def sharded(per_param: float, zero_stage: int) -> float:  # ZeRO shards over the ranks that hold a copy
        if layout.zero < zero_stage:
            return (dense + expert) * per_param
        return dense * per_param / dense_shards(layout, fw) + expert * per_param / layout.edp

    weights, grads = sharded(WEIGHT_BYTES, 3), sharded(grad_bytes, 2)
    optim = sharded(ADAM_BYTES[fw.optimizer_state], 1)
    unit_grad = casts = 0.0
    gathered = fw.fsdp_param_bytes  # bytes per gathered parameter (2, or 4: fp32 under autocast)
    if layout.zero == 3 and fw.fsdp_version == 1:  # FSDP1's root unit, gathered through the step
        weights += fsdp1_root_params(spec, layout, stage) * gathered
    if layout.zero == 3:  # the unit running and those prefetched, gathered
        unit = max(zero3_units(spec, layout, fw.zero3_unit))
        weights += fw.zero3_live(unit) * gathered
        if fw.zero3_unit_grad:  # its unsharded gradient before the reduce-scatter (zero3_unit_grad_bytes)
            unit_grad = zero3_unit_grad_bytes(unit, grad_bytes, gathered)
        if gathered != WEIGHT_BYTES:  # autocast's bf16 copy of each weight, saved by its GEMM for the backward
            casts = max(zero3_units(spec, layout, "layer")) * WEIGHT_BYTES
    layers = layer_bytes(spec, layout, fp8) if layers is None else layers
    kinds = [(counts[stage], kept) for counts, kept, _again in layers]
    # the stage's mix of layer kinds (exact without interleaving, where every layer is held alike)
    per_layer = kinds[0][1] if len(kinds) == 1 else sum(n * b for n, b in kinds) / max(1, sum(n for n, _ in kinds))
    full = layout.recompute == "full"  # autocast's weight copies: of the recomputed layer, or of every held layer
    held = layers_in_flight(layout, stage, spec.layers) if in_flight is None else in_flight * layout.stage_layers(spec.layers)[stage]
    acts = held * (per_layer + (0.0 if full else casts))
    # a layer's backward: the one layer recomputed (recomputed_bytes), then the unit's unsharded gradient once those
    # tensors are freed (module docstring)
    recomputed = _recomputed(layers, stage) + (casts if full else 0.0)
    loss = 0.0
    if stage == layout.pp - 1:  # multi-token prediction's layer (held); the loss's logits at its backward peak (with
        # multi-token prediction's), before any layer's backward: the stage holds the larger of the two moments
        acts += spec.mtp * kinds[-1][1]
        loss = (1 + spec.mtp) * peak_bytes(fw.loss_kernel) * logit_elements(spec, layout)
    if loss > max(recomputed, unit_grad):
        acts += loss
    elif unit_grad > recomputed:  # the unit gradient's moment, reported with the gradients
        grads += unit_grad
    else:
        acts += recomputed
    return {"weights": weights, "gradients": grads, "optimizer": optim, "activations": acts,
            "total": weights + grads + optim + acts}


def memory(spec: TransformerSpec, layout: Layout, grad_bytes: int = 2, framework: Framework | None = None,
           fp8: bool = False) -> dict[str, float]:
    """The stage that needs the most: its bytes per GPU (``stage_memory``) plus ``stage`` (its index);
    ``fp8``: ``precision=fp8``, whose saved inputs are 1 byte where the framework's FP8 Linears keep
    them so (``Framework.fp8_keeps_fp8_inputs``: Transformer Engine; module docstring)."""
    fp8 = fp8 and (framework or Framework.from_cfg(None)).fp8_keeps_fp8_inputs
    layers = layer_bytes(spec, layout, fp8)
    if layout.schedule == "dualpipe":
        stages = [dualpipe_rank(spec, layout, i, grad_bytes, framework, fp8, layers) for i in range(layout.pp)]
    else:
        stages = [stage_memory(spec, layout, i, grad_bytes, framework, fp8, layers) for i in range(layout.pp)]
    peak = max(range(layout.pp), key=lambda i: stages[i]["total"])
    return {**stages[peak], "stage": peak}


def dualpipe_rank(spec: TransformerSpec, layout: Layout, rank: int, grad_bytes: int, framework: Framework | None,
                  fp8: bool, layers) -> dict[str, float]:
    """Bytes per GPU of DualPipe's pipeline rank ``rank``, which holds stages ``rank`` and ``pp - 1 - rank``
    (deepseek-ai/DualPipe@3da1bbe README, the DeepSeek-V3 report's Table 2: parameters 2x, activations ``PP + 1``
    chunks per device against 1F1B's ``PP``): both stages' weights and gradients; their optimizer state sharded
    over the ``2 dp`` ranks holding each stage under ZeRO (half each); activations of ``(pp + 1) / 2`` microbatches
    of each stage (with each stage's own extras: MTP's layer and the logits on the last). The first and last ranks
    hold the embedding and the LM head together, so multi-token prediction shares them physically (arXiv 2412.19437
    Sec. 3.2.3, "Shared Embedding and Output Head for Multi-Token Prediction": "This arrangement enables the physical
    sharing of parameters and gradients"): no embedding copy on the last stage there (:func:`end_params`)."""
    both = [stage_memory(spec, layout, i, grad_bytes, framework, fp8, layers, (layout.pp + 1) / 2)
            for i in (rank, layout.pp - 1 - rank)]
    out = {k: both[0][k] + both[1][k] for k in ("weights", "gradients", "optimizer", "activations")}
    if spec.mtp and rank in (0, layout.pp - 1):  # the MTP's embedding copy, the first stage's own here
        fw = framework or Framework.from_cfg(None)
        copy = end_params(spec, layout, 0) / layout.tp
        for key, per, zero_stage in (("weights", WEIGHT_BYTES, 3), ("gradients", grad_bytes, 2),
                                     ("optimizer", ADAM_BYTES[fw.optimizer_state], 1)):  # sharded as stage_memory does
            out[key] -= copy * per / (dense_shards(layout, fw) if layout.zero >= zero_stage else 1)
    if layout.zero >= 1:
        out["optimizer"] /= 2
    if layout.zero >= 2:
        out["gradients"] /= 2
    if layout.zero >= 3:
        out["weights"] /= 2
    out["total"] = sum(out.values())
    return out


def device_memory(device_memory_bytes: float | None, override: float | None) -> float | None:
    """The capacity a layout must fit: ``parallelism.device_memory_bytes`` if set (bytes the layout may use, as
    stated), else the device's usable memory (``DeviceProfile.usable_memory_bytes``: its datasheet ``memory_bytes``
    as CUDA reports it, less the CUDA context, NCCL's buffers and allocator fragmentation, conf/device/*.yaml);
    None = unchecked."""
    if override:
        return float(override)
    return device_memory_bytes
