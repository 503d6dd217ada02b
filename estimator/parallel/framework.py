"""Training frameworks as data (``framework=megatron|deepspeed|fsdp``; ``conf/framework/<name>.yaml``).

A profile says what a framework does that changes a step's time or memory, each item cited in its
yaml next to the value; :mod:`~estimator.parallel.step` and :mod:`~estimator.parallel.layout` read
only these fields (no per-framework branches elsewhere, no fitted factor):

* ``grad_reduce_overlap`` — the data-parallel gradient reduction overlaps the last microbatch's
  backward (else it runs after the pipeline flush); ``parallelism.dp_overlap`` overrides it.
* ``param_gather_overlap`` — with ZeRO-1/2 the updated weights' all-gather overlaps the next
  step's first forward (else it is exposed at the end of the step).
* ``tp_comm_overlap`` — tensor-parallel collectives overlap the layer's GEMMs (up to their time); only
  with sequence parallelism (both overlap implementations work on its all-gather / reduce-scatter pairs).
* ``tp_overlap_grad_reduce_scatter`` — with ``tp_comm_overlap`` and sequence parallelism, the
  backward's reduce-scatters of the layer inputs' gradients overlap too (Transformer Engine's
  userbuffers overlap every TP GEMM's collective). False for PyTorch's async TP (Inductor's
  micro-pipeline pass): it fuses all-gather -> matmul and matmul -> reduce-scatter, but an input
  gradient that is the sum of several matmuls (wq/wk/wv, w1/w3) is reduce-scattered unfused, so
  those two reduce-scatters per layer stay exposed (pytorch/pytorch#149946).
* ``torch_cp_waits`` — where PyTorch's ring attention (``parallelism.cp_comm=torch|torch_alltoall``) waits each of its
  collectives: ``at_issue`` (the ring as torch.compile traces it, torch 2.6.0-2.7.0: a traced functional collective
  is followed by its ``wait_tensor`` at once and Inductor keeps it there, so every K/V exchange and dK/dV permute is
  exposed in full; a recompute's K/V exchange is the backward's own) or ``next_step`` (where the ring's Python waits,
  as eager runs it: each exchange hidden behind one step's attention); :func:`~estimator.parallel.step.cp_exchange`,
  sources in conf/framework/fsdp.yaml.
* ``tp_overlap_scope`` — with ``tp_comm_overlap``, what a TP collective can hide behind: ``layer``
  (Transformer Engine's userbuffers: ring-exchange and bulk overlaps pair the layer's collectives
  with any of its GEMMs, so the layer's TP time is exposed only beyond its GEMMs' time) or ``gemm``
  (Inductor's micro-pipeline pass decomposes an all-gather with the GEMMs that read its output as
  their left operand, and a reduce-scatter with the one GEMM that produces its input: each
  collective hides only behind those GEMMs; :func:`~estimator.parallel.step.gemm_matched_tp`).
* ``p2p_scatter_gather`` — a pipeline boundary sends ``1 / tp`` of the activations per TP rank
  (Narayanan et al. 2021 Sec. 4.1) instead of every TP rank sending the whole tensor;
  ``p2p_grad_scatter_gather`` the same for the activation gradients sent back in backward. With
  sequence parallelism every framework sends ``1 / tp``: the stage's output is already split.
* ``p2p_partitioned_tensor`` — with ``p2p_scatter_gather``, ``tp`` > 1 and no sequence parallelism, the pipeline boundary is DeepSpeed's
  ``PartitionedTensor``: per microbatch a meta-tensor send and a TP all-gather with its copies at every ``full()``
  (receiving activations; in backward restoring the stage's own output and, with ``p2p_grad_scatter_gather``,
  receiving the gradient), and clones of the ``1 / tp`` parts (:mod:`~estimator.parallel.step`). False: the boundary's
  gathers and copies are not priced.
* ``p2p_gather_on_receive`` — Megatron-LM's scatter/gather: with ``p2p_scatter_gather`` (forward) /
  ``p2p_grad_scatter_gather`` (backward), ``tp`` > 1 and no sequence parallelism, the receiving stage all-gathers each
  ``1 / tp`` part over its TP group before it computes (:mod:`~estimator.parallel.step`); ignored where
  ``p2p_partitioned_tensor`` prices DeepSpeed's own gathers.
* ``interleaved_schedule`` — the pipeline engine supports virtual stages (interleaved 1F1B).
* ``recompute`` — the activation recomputation a run gets when ``parallelism.recompute`` is unset (null):
  the framework's own default (Megatron-core: none), so a plain command prices what the stack does.
* ``zero`` — the ZeRO stage a run gets when ``parallelism.zero`` is unset (null): the framework's own default
  (PyTorch FSDP: 3, full sharding; Megatron-core's distributed optimizer: 1).
* ``fp32_grads_with_bf16`` — with bf16/fp8 training the gradient buffer and its reduction are fp32
  (4 bytes per parameter), else 16-bit.
* ``zero3_unit`` — what ZeRO-3 all-gathers at a time: ``layer`` (an FSDP unit = one transformer
  block) or ``module`` (DeepSpeed's parameter coordinator fetches per submodule: each Linear).
* ``reduce_bucket_params`` — ZeRO-2/3 gradient reduce-scatter bucket (parameters; null = one per
  ZeRO-3 unit / one per microbatch).
* ``zero3_prefetch_params`` / ``zero3_max_live_params`` — how many parameters ZeRO-3 gathers ahead of
  use (null = one unit ahead) and at most keeps gathered (null = no cap): the gathered working set
  is the running unit plus the prefetched ones, within the cap (memory). The gathers run one after
  another on one communication stream, so a deeper prefetch cannot hide a gather slower than the
  compute it overlaps: the step's exposure is per unit (:func:`~estimator.parallel.zero3.zero3_layer`).
* ``zero3_max_reuse_params`` — an engine that releases a unit's gathered parameters after each use
  unless it is needed again within this many parameters' worth of other units (DeepSpeed's
  ``stage3_max_reuse_distance``); with full recompute such a unit is gathered for the recompute
  and again for its backward. Null: one backward gather serves recompute and backward (FSDP,
  Megatron-core: the checkpointed block runs inside its unit).
* ``zero3_list_collectives`` — ZeRO-3's all-gathers and reduce-scatters go through
  ``torch.distributed``'s tensor-list API: per collective, one eager copy per rank of the group
  on the host and ``2 x`` the buffer in HBM copies (and a zero-filled gather buffer), rather than
  flat-buffer collectives (:mod:`~estimator.parallel.zero3`).
* ``zero3_gather_host_per_rank_s`` — host seconds per rank of the group that the engine's own Python
  spends building each all-gather's tensor list (DeepSpeed 2021: one ``narrow`` view per rank), on top of
  c10d's per-rank copy of ``zero3_list_collectives``; 0 for an engine that gathers into one flat buffer.
* ``zero3_sync_per_fetch`` — the engine synchronises the whole device before every unit's
  parameters are used, so host work between units is not hidden behind queued GPU work.
* ``zero3_prefetch_below_live`` — the engine prefetches a unit only when no gather is in flight and
  the parameters it holds gathered are below ``zero3_max_live_params`` (DeepSpeed 2021), so units of
  about that size are gathered on demand (:func:`~estimator.parallel.zero3.prefetched`).
* ``zero3_held_embedding`` — a one-stage model's tied word embedding is a ZeRO-3 *external parameter* of
  the top module (DeepSpeed 2021's recipe for Megatron): gathered once per microbatch before the forward,
  kept gathered through forward and backward, counted against ``zero3_max_live_params`` by the prefetch
  gate, and its gradient reduced after the backward, both exposed
  (:func:`~estimator.parallel.zero3.held_cost`). False: the embedding's ZeRO-3 traffic is not priced.
* ``zero3_unit_grad`` — ZeRO-3 also holds one unit's unsharded gradient when its backward completes, before the
  reduce-scatter: the 16-bit gradient autograd produced (2 bytes per parameter of the unit) and, where the
  reduction runs in another dtype (``grad_bytes`` 4: fp32 reduce), its copy in that dtype (PyTorch FSDP1's
  post-backward hook; FSDP2's reduce-scatter copy-in; conf/framework/fsdp.yaml cites both; memory only: part of
  the layer-backward transient of :mod:`~estimator.parallel.memory`).
* ``zero3_grad_collective`` — how ZeRO-3 reduces gradients: ``reduce_scatter`` (each rank receives
  its shard) or ``all_reduce`` (the whole gradient, then each rank keeps its shard: twice the
  bytes; DeepSpeed 2021's default path).
* ``fp8_keeps_fp8_inputs`` — under ``precision=fp8`` the FP8 Linears keep their inputs for the weight
  gradient in FP8, 1 byte (Transformer Engine), rather than in 16 bits (torchao's ``Float8Linear``
  saves the high-precision input); memory only (:mod:`~estimator.parallel.memory`).
* ``fp8_kernels`` — under ``precision=fp8``, whose casts surround each FP8 GEMM of the layer: ``te``
  (Transformer Engine: one fused cast-transpose per Linear input and output gradient, weights cast once
  per step) or ``torchao`` (torchao's ``Float8Linear``, tensorwise dynamic scaling: an amax and a cast
  per tensor, the weight's every forward and again in backward; :mod:`~estimator.compute.torchao_kernels`)
  or ``torchao_fsdp_fp8`` (the same with FSDP's float8 all-gather and precomputed scales: the weight
  arrives in FP8, no per-microbatch weight cast, one column-major copy of it in backward; ZeRO-3 gathers it in
  1 byte per element, :mod:`~estimator.parallel.zero3`). With sequence-parallel TP both torchao modes run torchao's
  float8 TP styles (float8 all-gathers, amax all-reduces: :mod:`~estimator.parallel.fp8_amax`).
* ``fp8_recipe`` — with ``fp8_kernels=te``, Transformer Engine's scaling recipe (Megatron-LM ``--fp8-recipe``):
  ``delayed`` (scales from the amax history: the cast-transpose above), ``tensorwise`` (current scaling: an
  amax pass over each tensor before its cast) or ``blockwise`` (1x128 blocks: one quantize kernel writing
  both FP8 layouts and their scales); ``mxfp8`` is Blackwell-only and refused (no Blackwell device is
  modelled). Kernels and sources: :mod:`~estimator.compute.te_kernels`.
* ``attention_kernel`` — which fused (flash) attention kernel the layer's attention op runs:
  ``cudnn`` (Transformer Engine's fused attention, cuDNN's kernel on Hopper), ``flash2``
  (FlashAttention-2: PyTorch SDPA's flash backend, the flash-attn 2 package), ``flash1``
  (FlashAttention-1: the flash-attn 0.x / 1.x CUDA kernels) or ``triton`` (flash-attn's 2022
  Triton kernel, llm-foundry's ``attn_impl: triton``); the device prices
  each at its own measured rate (:func:`~estimator.compute.device.node_times`). Only the ``te``
  layer has a fused attention op; the eager and Megatron layers run attention as GEMMs + softmax.
* ``fused_softmax`` — whose ``FusedScaleMaskSoftmax.is_kernel_available`` decides, per micro-batch and heads per rank,
  whether ``model.fused_kernels=megatron``'s causal softmax runs the fused kernel or Megatron's fp32 torch fallback:
  ``megatron`` (NVIDIA/Megatron-LM from Aug 2021) or ``bigscience_2022`` (bigscience-workshop/Megatron-DeepSpeed from
  Oct 2021 to 6 Mar 2022, whose batch-per-block check reads the head count as the key length); one of
  :data:`~estimator.compute.megatron_softmax.SOFTMAX_RULES`, conditions and sources at
  :func:`~estimator.compute.megatron_softmax.fused_softmax_available`. Read only by the megatron layer.
* ``loss_kernel`` — which cross-entropy kernel the LM loss runs, one of
  :data:`~estimator.parallel.loss.LOSS_KERNELS` (Megatron's unfused or fused fp32 loss, torch's eager
  fp32 or bf16 loss, Transformer Engine's, flash-attn's xentropy or Triton loss), priced from its
  passes over the logits; ``loss_metric_passes`` extra forward-only fp32 cross-entropies per
  microbatch (a training metric on every batch) (:mod:`~estimator.parallel.loss`).
* ``optimizer_state`` — the dtype of Adam's state: ``fp32`` (fp32 master weights, momentum and
  variance: 12 bytes per parameter, ZeRO paper Sec. 3.1) or ``bf16`` (Apex's DistributedFusedAdam
  with ``dtype=bf16``, NeMo's ``optim.dtype: bf16``: a bf16 copy of the parameters, kept by its
  default ``store_params=True``, plus bf16 momentum and variance: 6 bytes) or ``bf16_moments`` (fp32
  master weights with bf16 momentum and variance: 8 bytes; Megatron-core's precision-aware optimizer with
  ``exp_avg_dtype`` / ``exp_avg_sq_dtype`` bf16); memory and the
  optimizer step's HBM traffic (:mod:`~estimator.parallel.memory`, :mod:`~estimator.parallel.step`).
* ``moe_dispatcher`` — Megatron-core's MoE token dispatcher: ``alltoall`` (k copies of each token over one NCCL
  all-to-all) or the ``flex`` dispatcher's ``deepep`` / ``hybridep`` backend (each token once per destination
  rank and once per remote node, forwarded over NVLink; no chunk sort); ``moe_a2a_overlap`` — Megatron-core's
  ``overlap_moe_expert_parallel_comm`` with ``delay_wgrad_compute``: one microbatch's forward and another's
  backward run merged, each layer's all-to-alls behind the other's compute (:mod:`~estimator.parallel.moe_comm`);
  ``moe_a2a_delay_wgrad`` — with it, ``delay_wgrad_compute`` (true: the pair Megatron-Bridge sets; false:
  ``overlap_moe_expert_parallel_comm`` alone, the experts' weight gradients computed with their data gradients,
  before the dispatch's backward; also read for ``parallelism.schedule=dualpipe``'s merged chunks);
  ``moe_dispatcher_sms`` — the SMs the flex dispatcher's kernels hold while they run (Megatron-core's
  ``moe_flex_dispatcher_num_sms``; null: the backend's default, :data:`~estimator.parallel.moe_comm.DISPATCHER_SMS`);
  ``moe_shared_expert_overlap`` — Megatron-core's ``moe_shared_expert_overlap``: a shared expert's fc1 runs on a side
  stream behind the dispatch all-to-all and its fc2 behind the combine, forward and backward, instead of whole before
  the router (:func:`~estimator.parallel.moe_comm.shared_hidden`); ``moe_permute_fusion_into_hybridep`` — Megatron-core's
  ``moe_permute_fusion_into_hybridep`` (``hybridep`` only): HybridEP's dispatch kernel writes each token's rows in
  expert order and its combine kernel reads them so, so the layer runs no permute / unpermute kernel in forward or
  backward (``layer.capture_parts``' ``hybridep``; sources in conf/framework/megatron.yaml); ``moe_dispatch_fp8`` — the flex dispatcher's
  dispatches (forward, and the output gradients' in backward) carry FP8 rows with one fp32 scale per 1x128 tile, the
  combines BF16, as DeepSeek-V3 trains (arXiv 2412.19437 Sec. 3.3.4) with DeepEP's FP8 dispatch; Megatron-core's
  dispatchers pass BF16 (false; :data:`~estimator.parallel.moe_comm.FP8_ROW_BYTES`).

* ``fsdp_version`` — PyTorch FSDP's generation under ``zero`` 3 (null for other frameworks): ``1``
  (``FullyShardedDataParallel``: the root unit's parameters, those outside every wrapped transformer block — the
  embedding, the final norm and the LM head in the Composer / fms-fsdp wrappings — stay gathered from the forward to
  their gradient at the end of the backward, :func:`~estimator.parallel.memory.fsdp1_root_params`) or ``2``
  (``fully_shard``: the stacks that use it shard the embedding and head as their own units; nothing kept). It also
  names the HBM copies the engine makes around its flat-buffer collectives (null: none priced): FSDP1 casts the shard
  before each all-gather, concatenates the parameters' gradients into the flat gradient on the compute stream (autograd)
  and casts / pre-divides the gradient before the reduce-scatter; FSDP2 casts and copies the shard in before each
  all-gather, copies the result out into the parameters after it and the gradients into the reduce-scatter buffer,
  both on the compute stream; bytes and sources in :func:`~estimator.parallel.zero3.engine_copies`.
* ``attention_host_sync`` — the model's attention synchronises the host with the device at every call (flash-attn
  0.2.x ``FlashMHA`` given a ``key_padding_mask``, as MosaicGPT always does: ``unpad_input``'s ``torch.nonzero`` and
  ``.item()``). Under ZeRO-3 the next unit's all-gather is then issued only after the host passes the attention, so
  it hides behind the rest of the layer only (:func:`~estimator.parallel.zero3.zero3_layer`). The sync's own GPU
  idle gaps (two per call, about a kernel launch each) are not priced.
* ``fp8_param_gather`` — with ``precision=fp8`` and ``zero`` 1 or 2, Megatron-core's ``fp8_param_gather``
  (DistributedDataParallelConfig; NeMo's ``MegatronMixedPrecision(fp8_params / fp8_param_gather=True)``): the decoder
  layers' GEMM weights are kept as FP8 tensors and the distributed optimizer's all-gather of the updated weights moves
  them at 1 byte per element, the embedding, LM head and norms at 2 (:func:`~estimator.parallel.step.fp8_gathered_params`;
  the gradients' reduce-scatter is unchanged). Expert weights (``edp`` group) and ZeRO-3 gathers stay 16-bit here.
  Default false (Megatron-core's default; NeMo recipes turn it on with ``fp8_param_gather``).
* ``fsdp_param_bytes`` — bytes per element of the parameters ZeRO-3 gathers (PyTorch FSDP's ``MixedPrecision``
  ``param_dtype``): ``2`` (a 16-bit ``param_dtype``, or a 16-bit engine) or ``4`` (FSDP1, ``fsdp_version`` 1 only,
  with ``param_dtype`` None or float32 under torch autocast: Composer's ``mixed_precision: DEFAULT`` up to v0.13.1). With 4 under ``zero`` 3 the
  all-gathers move fp32 parameters, the gathered units, the root unit and the unit gradient are fp32 in memory, and
  autocast casts every weight to bf16 on the compute stream at each forward execution (kept for the backward: per
  held layer, or the recomputed layer) and its bf16 weight gradient back to fp32
  (:func:`~estimator.parallel.zero3.engine_copies`, :func:`~estimator.parallel.memory.stage_memory`).

* ``bf16_grad_reduce`` — with ``precision=bf16`` and ``zero`` 1, how the data-parallel gradients are reduced:
  ``zero`` (as the ZeRO stage says: a reduce-scatter of the gradient buffer, in its dtype) or ``all_reduce_bf16``
  (DeepSpeed's BF16_Optimizer under the pipeline engine: the whole fp32 gradient buffer all-reduced, cast to bf16 for
  the wire and back, each rank then updating its shard: one all-reduce of 2 bytes per parameter plus two cast passes
  over the buffer at the device's elementwise memory rate).
* ``bf16_grad_accum_bytes`` — with ``precision=bf16``, HBM bytes per parameter and microbatch the engine moves to add
  the backward's bf16 gradients into its fp32 accumulation buffer outside the GEMMs (DeepSpeed's BF16_Optimizer
  ``update_hp_grads``: 18); 0 when the accumulation is fused or not separate. Priced in every backward (``zero`` 0 or 1:
  DeepSpeed runs ZeRO-2/3 through its ZeRO optimizers, not BF16_Optimizer; also for ``bf16_step_grad_bytes``).
* ``bf16_step_grad_bytes`` — with ``precision=bf16``, HBM bytes per (unsharded) parameter the step spends on the fp32
  gradient buffer outside the reduction and the optimizer (BF16_Optimizer: the grad-norm read and the buffer's
  ``zero_()``: 8); 0 when not priced. Exposed at the end of the step.

* ``fp16_grad_reduce`` — with ``precision=fp16`` and ``zero`` 1, how the data-parallel gradients are reduced: ``zero``
  (as the ZeRO stage says: a reduce-scatter of the 16-bit gradients) or ``all_reduce`` (DeepSpeed's ZeRO stage-1
  optimizer from v0.4.4 to v0.12.x, contiguous gradients forced off: each 5e8-element bucket flattened and all-reduced
  whole, each rank then keeping its shard: one all-reduce of 2 bytes per parameter).
* ``fp16_param_bytes`` — with ``precision=fp16`` and ``zero`` 1, HBM bytes per parameter of the stage the engine
  moves once per step outside the collectives and the optimizer (DeepSpeed's ZeRO-1: the bucket's flatten, ``div_``
  and copy back, c10d's copy-out of the list all-gather of the weights: 16); in ``optimizer_s``, any ``dp``.
* ``fp16_shard_bytes`` — the same per parameter of the rank's optimizer shard (DeepSpeed's ZeRO-1 ``step()``: the
  overflow check, the fp64 grad norm, the flatten and fp32 cast, the unscale, the fp32 gradient read by Adam and the
  fp32 -> fp16 copy-back's read: 52); in ``optimizer_s``.
* ``fp16_grad_accum_bytes`` — with ``precision=fp16`` and ``zero`` 0 or 1, HBM bytes per parameter of the stage and
  microbatch after the first that the engine moves to accumulate the backward's 16-bit gradients outside the GEMMs
  (autograd's in-place ``param.grad += grad`` under DeepSpeed's ZeRO-1: 6); 0 when fused or not separate. Spread over
  the ``m`` backward slots: ``(m - 1) / m`` of it in each.

* ``zero1_group`` — with ``zero`` 1, the data-parallel ranks that share one copy of the optimizer state (InternLM's
  ``parallel.zero1``: its ``ZERO1`` process group of that many consecutive data-parallel ranks); null = the whole
  ``dp x cp`` group (ZeRO-1 as the paper and Megatron's distributed optimizer shard). A smaller group replicates the
  state across groups: the optimizer step and the state's memory are per ``zero1_group`` shard, and the updated
  weights are exchanged within the group only (the gradients are still reduced over the whole group:
  ``bf16_grad_reduce``).
* ``param_exchange`` — with ``zero`` 1, how the updated 16-bit weights reach the other ranks of the shard group:
  ``all_gather`` (one all-gather of the flat buffer, Megatron's distributed optimizer) or ``broadcast`` (one broadcast
  per owner rank of its flat shard, one after the other on one communicator: InternLM's ``broadcast_params``).
* ``grad_bucket_sync`` — with ``zero`` 1 and ``grad_reduce_overlap``, the engine synchronises the whole device before
  each gradient bucket's reduction (InternLM's ``_reduce_and_copy``: ``torch.cuda.synchronize()``), so the reductions
  run one at a time and the backward waits at each bucket boundary for the previous bucket's; the last bucket is
  reduced after the backward, exposed whole. Buckets of ``reduce_bucket_params`` parameters in backward order
  (:func:`~estimator.parallel.step.bucket_sync_tail`). False: the reduction hides behind the last backward up to its
  length (:func:`~estimator.parallel.overlap.behind`).
* ``grad_bucket_copy_bytes`` — with ``grad_bucket_sync``, HBM bytes per parameter the engine moves around each bucket's
  collective on the communication stream (InternLM: the bucket's flatten, the in-place ``div_`` by the group size,
  the copy back into the gradients: 12), at the device's elementwise memory rate, part of the bucket's reduction.
* ``shard_step_bytes`` — with ``zero`` 1, HBM bytes per parameter of the rank's optimizer shard that ``step()`` moves
  outside the Adam update (InternLM's HybridZeroOptimizer: overflow check, grad norm, flatten, fp32 cast, unscale,
  the fp32 -> 16-bit copy back: 44), any precision; in ``optimizer_s``.
* ``adam_step_bytes`` — HBM bytes per parameter of the shard the Adam update itself moves; null: the fused Adam of
  ``optimizer_state`` (:data:`~estimator.parallel.step.ADAM_STEP_BYTES`). PyTorch 1.13's eager ``torch.optim.AdamW``
  on one fp32 tensor: 92 (conf/framework/internlm.yaml).
* ``grad_add_bytes`` — with 16-bit gradients (``bf16`` / ``fp8`` without ``fp32_grads_with_bf16``) and ``zero`` 0 or
  1, HBM bytes per parameter of the stage and microbatch after the first that autograd moves adding the backward's
  gradients into ``param.grad`` outside the GEMMs (read both, write one: 6); spread over the ``m`` backward slots,
  ``(m - 1) / m`` of it in each, as ``fp16_grad_accum_bytes`` under fp16.
* ``norm_rerun_bytes`` — with ``recompute`` none, HBM bytes per element of a layer's ``tokens x hidden`` activation that
  the block's own checkpoint of its pre-norm regions reruns in every backward (InternLM's
  ``dropout_selective_checkpoint``: the residual add, the ``.float()`` casts and the two apex RMSNorms on fp32 inputs:
  30), at the device's elementwise memory rate, in the backward slot; 0: none.
* ``zero3_root_unit`` — with ``zero`` 3 (FSDP2), the parameters outside the blocks (token embedding, final norm,
  LM head) form the root module's unit (torchtitan's ``fully_shard(model)``): gathered once before the forward,
  exposed whole; kept through the backward; reduce-scattered after it, exposed whole
  (:func:`~estimator.parallel.zero3.zero3_root`). False: those parameters' ZeRO-3 traffic is not priced.
* ``zero3_keep_last_unit`` — with ``zero`` 3, the last block's unit is not resharded after the forward (torchtitan's
  ``fsdp_reshard_after_forward`` "default" without PP: ``reshard_after_forward = int(layer_id) < len(model.layers) -
  1``, pytorch/torchtitan@0da8901b torchtitan/models/llama/parallelize_llama.py l.346-359), so the backward's first
  block needs no gather (the step's exposed first backward gather is dropped).
* ``grad_clip`` — the step clips the gradients' global norm with PyTorch's ``clip_grad_norm_`` over the rank's
  gradient shards (torchtitan's ``training.max_norm``): a foreach norm reading them, one all-reduce of the norm, a
  foreach multiply reading and writing them (:mod:`~estimator.parallel.step`, "Gradient clipping"), in ``optimizer_s``.

A config without a ``framework`` subtree (a hand-built dict) gets ``conf/framework/megatron.yaml``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from functools import cache
from typing import Any

from estimator.compute.device import ATTENTION_KERNELS
from estimator.compute.megatron_softmax import check_softmax_rule
from estimator.errors import EstimatorError
from estimator.parallel.layer import FP8_RECIPES, check_fp8_recipe, fp8_mode
from estimator.parallel.layout import RECOMPUTE, check_zero
from estimator.parallel.loss import LOSS_KERNELS
from estimator.parallel.moe_comm import DISPATCHERS

ZERO3_UNITS = ("layer", "module")
TP_OVERLAP_SCOPES = ("layer", "gemm")
GRAD_COLLECTIVES = ("reduce_scatter", "all_reduce")
OPTIMIZER_STATES = ("fp32", "bf16", "bf16_moments")
BF16_GRAD_REDUCES = ("zero", "all_reduce_bf16")
FP16_GRAD_REDUCES = ("zero", "all_reduce")
PARAM_EXCHANGES = ("all_gather", "broadcast")
TORCH_CP_WAITS = ("at_issue", "next_step")  # framework.torch_cp_waits (conf/framework/fsdp.yaml cites both)
FSDP_PARAM_BYTES = (2, 4)  # framework.fsdp_param_bytes: a 16-bit param_dtype, or fp32 under autocast (FSDP1)
OPTIONAL = ("reduce_bucket_params", "zero3_prefetch_params", "zero3_max_live_params",
            "zero3_max_reuse_params")  # parameter counts; null = none
DEFAULT = "megatron"


@dataclass(frozen=True)
class Framework:
    name: str
    grad_reduce_overlap: bool
    param_gather_overlap: bool
    tp_comm_overlap: bool
    tp_overlap_grad_reduce_scatter: bool
    tp_overlap_scope: str
    p2p_scatter_gather: bool
    p2p_grad_scatter_gather: bool
    interleaved_schedule: bool
    p2p_partitioned_tensor: bool
    p2p_gather_on_receive: bool
    fp32_grads_with_bf16: bool
    zero3_unit: str
    zero3_list_collectives: bool
    zero3_sync_per_fetch: bool
    zero3_gather_host_per_rank_s: float
    zero3_grad_collective: str
    attention_kernel: str
    zero3_prefetch_below_live: bool
    zero3_unit_grad: bool
    zero3_held_embedding: bool
    fp8_keeps_fp8_inputs: bool
    fp8_kernels: str
    fp8_recipe: str
    optimizer_state: str
    loss_kernel: str
    loss_metric_passes: int
    fused_softmax: str
    moe_dispatcher: str
    moe_a2a_overlap: bool
    moe_a2a_delay_wgrad: bool
    moe_shared_expert_overlap: bool
    moe_permute_fusion_into_hybridep: bool
    recompute: str
    zero: int
    bf16_grad_reduce: str
    bf16_grad_accum_bytes: float
    bf16_step_grad_bytes: float
    fp16_grad_reduce: str
    fp16_param_bytes: float
    fp16_shard_bytes: float
    fp16_grad_accum_bytes: float
    torch_cp_waits: str
    moe_dispatcher_sms: int | None = None
    moe_dispatch_fp8: bool = False  # the flex dispatcher's dispatches in FP8 with 1x128 scales (moe_comm FP8_ROW_BYTES)
    fp8_param_gather: bool = False  # FP8 GEMM weights all-gathered in FP8 by the distributed optimizer (step.fp8_gathered_params)
    attention_host_sync: bool = False  # the attention syncs host and device each call (flash-attn 0.2.x unpad_input)
    fsdp_param_bytes: int = 2  # bytes per gathered parameter element (FSDP MixedPrecision param_dtype): 2 or 4
    fsdp_version: int | None = None  # PyTorch FSDP generation: 1 (FullyShardedDataParallel) or 2 (fully_shard); null
    reduce_bucket_params: float | None = None
    zero3_prefetch_params: float | None = None
    zero3_max_live_params: float | None = None
    zero3_max_reuse_params: float | None = None
    zero1_group: int | None = None  # null: the whole dp x cp group
    param_exchange: str = "all_gather"
    grad_bucket_sync: bool = False
    grad_bucket_copy_bytes: float = 0.0
    shard_step_bytes: float = 0.0
    adam_step_bytes: float | None = None  # null: the fused Adam of optimizer_state
    grad_add_bytes: float = 0.0
    norm_rerun_bytes: float = 0.0
    grad_clip: bool = False  # the step clips the gradient norm (torch clip_grad_norm_, foreach): step.py prices it
    zero3_root_unit: bool = False  # FSDP2's root unit (embedding, final norm, head), zero3.zero3_root
    zero3_keep_last_unit: bool = False  # the last block is not resharded after forward: no backward gather for it

    @classmethod
    def from_cfg(cls, cfg: Mapping[str, Any] | None) -> Framework:
        data = dict(cfg) if cfg else _default()
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise EstimatorError(f"framework: unknown key(s) {unknown}; known: {sorted(known)}")
        missing = sorted(k for k in known - set(data) if k not in OPTIONAL)
        if missing:
            raise EstimatorError(f"framework {data.get('name')!r}: missing key(s) {missing}")
        for f in fields(cls):
            value = data.get(f.name)
            if f.type == "bool" and not isinstance(value, bool):
                raise EstimatorError(f"framework.{f.name} must be true or false, got {value!r}")
        if data["zero3_unit"] not in ZERO3_UNITS:
            raise EstimatorError(f"framework.zero3_unit must be one of {', '.join(ZERO3_UNITS)}, got {data['zero3_unit']!r}")
        if data["tp_overlap_scope"] not in TP_OVERLAP_SCOPES:
            raise EstimatorError(f"framework.tp_overlap_scope must be one of {', '.join(TP_OVERLAP_SCOPES)}, "
                                 f"got {data['tp_overlap_scope']!r}")
        if data["zero3_grad_collective"] not in GRAD_COLLECTIVES:
            raise EstimatorError(f"framework.zero3_grad_collective must be one of {', '.join(GRAD_COLLECTIVES)}, "
                                 f"got {data['zero3_grad_collective']!r}")
        if data["optimizer_state"] not in OPTIMIZER_STATES:
            raise EstimatorError(f"framework.optimizer_state must be one of {', '.join(OPTIMIZER_STATES)}, "
                                 f"got {data['optimizer_state']!r}")
        if data["fp8_kernels"] not in FP8_RECIPES:
            raise EstimatorError(f"framework.fp8_kernels must be one of {', '.join(FP8_RECIPES)}, got {data['fp8_kernels']!r}")
        check_fp8_recipe(data["fp8_kernels"], data["fp8_recipe"])
        if data["attention_kernel"] not in ATTENTION_KERNELS:
            raise EstimatorError(f"framework.attention_kernel must be one of {', '.join(ATTENTION_KERNELS)}, "
                                 f"got {data['attention_kernel']!r}")
        check_softmax_rule(data["fused_softmax"])
        if data["loss_kernel"] not in LOSS_KERNELS:
            raise EstimatorError(f"framework.loss_kernel must be one of {', '.join(LOSS_KERNELS)}, got {data['loss_kernel']!r}")
        if data["moe_dispatcher"] not in DISPATCHERS:
            raise EstimatorError(f"framework.moe_dispatcher must be one of {', '.join(DISPATCHERS)}, "
                                 f"got {data['moe_dispatcher']!r}")
        check_zero(data["zero"], "framework.zero")
        if data["recompute"] not in RECOMPUTE:
            raise EstimatorError(f"framework.recompute must be one of {', '.join(RECOMPUTE)}, got {data['recompute']!r}")
        if data["bf16_grad_reduce"] not in BF16_GRAD_REDUCES:
            raise EstimatorError(f"framework.bf16_grad_reduce must be one of {', '.join(BF16_GRAD_REDUCES)}, "
                                 f"got {data['bf16_grad_reduce']!r}")
        if data["fp16_grad_reduce"] not in FP16_GRAD_REDUCES:
            raise EstimatorError(f"framework.fp16_grad_reduce must be one of {', '.join(FP16_GRAD_REDUCES)}, "
                                 f"got {data['fp16_grad_reduce']!r}")
        for key in ("bf16_grad_accum_bytes", "bf16_step_grad_bytes", "fp16_param_bytes", "fp16_shard_bytes",
                    "fp16_grad_accum_bytes", "grad_bucket_copy_bytes", "shard_step_bytes", "grad_add_bytes", "norm_rerun_bytes"):
            value = data[key]
            if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
                raise EstimatorError(f"framework.{key} must be a number of bytes per parameter >= 0, got {value!r}")
        if data["torch_cp_waits"] not in TORCH_CP_WAITS:
            raise EstimatorError(f"framework.torch_cp_waits must be one of {', '.join(TORCH_CP_WAITS)}, "
                                 f"got {data['torch_cp_waits']!r}")
        if data["param_exchange"] not in PARAM_EXCHANGES:
            raise EstimatorError(f"framework.param_exchange must be one of {', '.join(PARAM_EXCHANGES)}, "
                                 f"got {data['param_exchange']!r}")
        group = data["zero1_group"]
        if group is not None and (isinstance(group, bool) or not isinstance(group, int) or group < 1):
            raise EstimatorError(f"framework.zero1_group must be a whole number of ranks >= 1 or null, got {group!r}")
        adam = data["adam_step_bytes"]
        if adam is not None and (isinstance(adam, bool) or not isinstance(adam, int | float) or not adam > 0):
            raise EstimatorError(f"framework.adam_step_bytes must be a number of bytes per parameter > 0 or null, got {adam!r}")
        version = data.get("fsdp_version")
        if version is not None and (isinstance(version, bool) or version not in (1, 2)):
            raise EstimatorError(f"framework.fsdp_version must be 1, 2 or null, got {version!r}")
        pbytes = data["fsdp_param_bytes"]
        if isinstance(pbytes, bool) or pbytes not in FSDP_PARAM_BYTES:
            raise EstimatorError(f"framework.fsdp_param_bytes must be {' or '.join(map(str, FSDP_PARAM_BYTES))}, "
                                 f"got {pbytes!r}")
        if pbytes == 4 and version != 1:  # the fp32-gather path read is FSDP1's (zero3.engine_copies)
            raise EstimatorError(f"framework.fsdp_param_bytes=4 is modelled for framework.fsdp_version=1 "
                                 f"(FullyShardedDataParallel under autocast), got fsdp_version {version!r}")
        sms = data.get("moe_dispatcher_sms")
        if sms is not None and (isinstance(sms, bool) or not isinstance(sms, int) or sms <= 0):
            raise EstimatorError(f"framework.moe_dispatcher_sms must be a whole number of SMs > 0 or null, got {sms!r}")
        per_rank = data["zero3_gather_host_per_rank_s"]
        if isinstance(per_rank, bool) or not isinstance(per_rank, int | float) or not per_rank >= 0:
            raise EstimatorError(f"framework.zero3_gather_host_per_rank_s must be a number of seconds >= 0, got {per_rank!r}")
        passes = data["loss_metric_passes"]
        if isinstance(passes, bool) or not isinstance(passes, int) or passes < 0:
            raise EstimatorError(f"framework.loss_metric_passes must be a whole number >= 0, got {passes!r}")
        for key in OPTIONAL:
            value = data.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value <= 0):
                raise EstimatorError(f"framework.{key} must be a positive number of parameters or null, got {value!r}")
        return cls(**{**data, "name": str(data["name"])})

    def fp8(self, precision: str, device: str = "") -> bool | str:
        """The layer capture's ``fp8`` under ``precision``: False, or the kernels and scaling recipe (``layer.fp8_mode``)."""
        return fp8_mode(self.fp8_kernels, self.fp8_recipe, device) if precision == "fp8" else False

    def zero3_live(self, unit: float) -> float:
        """Parameters ZeRO-3 holds gathered when units of ``unit`` parameters run (see the module doc)."""
        live = unit + max(unit, self.zero3_prefetch_params or 0.0)
        return min(live, max(unit, self.zero3_max_live_params)) if self.zero3_max_live_params else live

    def grad_bytes(self, precision: str) -> int:
        """Bytes per gradient element in the buffer and on the wire."""
        return 4 if self.fp32_grads_with_bf16 and precision in ("bf16", "fp8") else 2

    def zero1_ranks(self, replicas: int) -> int:
        """Ranks sharing one copy of the ZeRO-1 optimizer state among ``replicas`` data-parallel copies
        (``zero1_group``, which :meth:`check_zero1_group` has checked divides them; null: all of them)."""
        return replicas if self.zero1_group is None else max(1, min(self.zero1_group, replicas))

    def check_zero1_group(self, replicas: int, zero: int) -> None:
        """One-line error unless ``zero1_group`` divides the ``replicas`` data-parallel ranks under ZeRO-1: InternLM
        asserts ``data_parallel_size % zero1_parallel_size == 0`` (InternLM@c18bec9 internlm/core/context/
        parallel_context.py l.412), which also refuses a group larger than the data-parallel ranks."""
        if zero == 1 and self.zero1_group is not None and replicas % self.zero1_group:
            raise EstimatorError(f"framework.zero1_group={self.zero1_group} must divide the data-parallel ranks "
                                 f"(dp x cp = {replicas}), as InternLM asserts")


@cache
def _default() -> dict[str, Any]:
    import yaml

    from estimator.config import conf_dir

    return dict(yaml.safe_load((conf_dir() / "framework" / f"{DEFAULT}.yaml").read_text()))
