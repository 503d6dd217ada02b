"""Step time of a hybrid-parallel layout: per-rank compute from the layer capture, communication
priced where each group sits, the 1F1B pipeline paced by its slowest stage.

Model (each line is an assumption; sources in the module docstrings of ``layer``/``memory``/
``framework`` and in ``conf/framework/*.yaml``):

* Per microbatch and stage ``i``: its ``n_i`` captured layers (``Layout.stage_layers``) forward and
  backward, plus the embedding (first stage) and the LM head and loss (last stage; the loss as the
  framework's kernel runs it, :mod:`~estimator.parallel.loss`); with ``pp = 1``
  one rank runs both. Recompute adds one more forward of each layer (``full``), of its core
  attention (``selective``), of what torchtitan's per-op policy drops (``op``, :mod:`sac`) or of
  Megatron-core's ``recompute_modules`` (:func:`module_recompute_cost`: a recomputed dense MLP or MoE
  layer also repeats its MLP half's forward TP collectives and, MoE, its dispatch and combine
  all-to-alls; the other modules' collectives, e.g. ``mla_up_proj``'s latent gather, are not repeated
  here) to the backward. Under ``precision=fp8`` the decoder layers' Linears
  run as Transformer Engine FP8 GEMMs and the embedding and LM head stay BF16 (Megatron's output
  layer is not a TE module).
* Tensor parallelism (Megatron-LM, Shoeybi et al. 2019 Sec. 3): per layer 2 all-reduces of the
  ``s/cp x b x h`` activations in forward and 2 in backward (2 more when full recompute reruns the
  forward), 1 in the embedding's forward; with sequence parallelism each all-reduce becomes a
  reduce-scatter + all-gather pair of the same buffer (Korthikanti et al. 2022 Sec. 4.2.2). Not
  overlapped, unless the framework overlaps TP communication with the layer's GEMMs under sequence
  parallelism (``tp_comm_overlap``: exposed = what exceeds the GEMMs' time; PyTorch's async TP leaves the
  backward's two input-gradient reduce-scatters exposed, ``tp_overlap_grad_reduce_scatter``).
* Context parallelism (``cp`` > 1; :func:`cp_exchange`), as Transformer Engine runs it for
  Megatron-core (``parallelism.cp_comm``, TE's ``cp_comm_type``). ``ring`` (Megatron-core's default,
  ``AttnFuncWithCPAndKVP2P``): each layer's attention runs in ``cp`` steps; between steps every
  rank sends its current K/V chunk (``2 x s/cp x b x kv_heads/tp x d`` 16-bit values) to the next
  rank of the CP ring while computing on the chunk it holds, so each of the ``cp - 1`` exchanges is
  exposed only beyond one step's attention compute (``attention / cp``). Backward: the K/V chunks
  travel the ring again together with their partial gradients dK/dV (the ring reduce-scatter of
  the K/V gradients): twice the bytes per step, against ``attention backward / cp``. The sends
  are priced as pipeline-style point-to-point transfers of all CP rings at once where the CP group
  sits (:func:`~estimator.parallel.placement.p2p_cost`). ``all_gather`` (Llama 3, Dubey et al. 2024
  Sec. 3.3.2: "we first all-gather the key (K) and value (V) tensors, and then compute attention
  output for the local query (Q) tensor chunk ... the all-gather communication latency is exposed
  in the critical path"; TE's ``AttnFuncWithCPAndKVAllGather``, which cites that section): forward
  all-gathers K and V over the CP group (two collectives, each gathering ``s x b x kv_heads/tp x
  d``), then attention runs on the rank's two query chunks; backward gathers K and V again (TE
  saves only the local chunks), runs the attention backward and reduce-scatters dK and dV (two
  more collectives). Every one of them is exposed (TE issues them synchronously on the compute
  stream). ``torch`` (PyTorch's ``torch.distributed.tensor.experimental.context_parallel`` as
  torchtitan runs it, rotate method all-gather, load-balanced; docs/research/h32-evidence.md
  section 2c, docs/research/h88-torch-cp.md): SDPA receives K and V after torchtitan's Llama repeated them to
  the query heads, so the exchange carries ``heads/tp`` heads, not ``kv_heads/tp``; one all-gather of
  ``cat(K, V)`` per pass; every step's partial output is merged into an fp32 output (``convert_to_f32``); the
  backward ring exchanges K and V again, sends each step's dK/dV on around the ring in fp32 (one all-to-all permute
  per step) and adds every step's dQ/dK/dV into fp32 accumulators. ``torch_alltoall`` (rotate method "alltoall"):
  instead of the all-gather, ``cp - 1`` permutes of ``cat(K, V)`` per pass. Where each collective is waited, and
  how many K/V exchanges run, is ``framework.torch_cp_waits``: ``at_issue`` (the default; the ring as
  torch.compile traces it at torch 2.6.0-2.7.0, docs/research/h94-inductor-reorder.md): every collective is waited
  right after it is issued, so each is exposed in full, and AOT's graphs hold fewer K/V exchanges than the Python
  issues (the backward ring's all-gather merged with the forward's by CSE: none in backward without a recompute,
  one shared by the recompute and the backward ring with one; the permute counts in :func:`cp_exchange`);
  ``next_step`` (the ring's Python, eager): the gather waited at the second step, each permute after the next
  step's attention (backward), so each is exposed beyond one step's attention, the last dK/dV permute (waited after
  the loop) in full; K/V are exchanged in forward, in backward and again by a recompute. The merges,
  accumulations and copies are memory-bound passes priced at the device's elementwise memory rate, as
  Inductor fuses them under torchtitan's ``torch.compile`` (:func:`torch_cp_bytes`). All
  modes: a recompute (``selective`` or ``full``) reruns the attention forward in backward (its K/V exchange
  as ``torch_cp_waits`` says for the torch modes).
* Layer kinds (``model.first_dense_layers``; :func:`~estimator.parallel.layout.layer_kinds`): a stage's
  layers are priced by kind, the dense layers (captured as ``spec.dense_layer()``, with the dense
  MLP's TP collectives and no all-to-all) and the MoE layers each with their own capture.
* Multi-token prediction (``model.mtp_layers`` D, :mod:`~estimator.parallel.spec`): the last stage runs, per
  microbatch and depth, the MTP projection, one more layer of the last layer's kind (its TP / EP communication
  included, and counted in the stage's compute time), one more embedding lookup, LM head and loss.
* Pipeline (Narayanan et al. 2021 Sec. 2.2, 1F1B): stage ``i``'s slot is ``t_f,i + t_b,i + 2 v
  t_p2p``; the slowest slot paces the steady state and every stage's slot passes once through the
  fill and drain: step = ``m x max_i slot_i + (sum_i slot_i - max_i slot_i) / v`` (with equal
  stages: ``(m + (pp - 1)/v) x slot``, the classic bubble of ``(pp - 1)/v`` slots). Interleaved
  with ``v`` model chunks per rank, a stage's slot is all its chunks' layers (``Layout.chunk_layers``,
  which may be uneven: Llama 3 405B's embedding-only first chunk), and the fill and drain pass
  each other stage's slot once divided by ``v`` (its average chunk). A boundary sends ``s/cp x b x h`` 16-bit values
  per microbatch each way, split over the TP ranks when the framework scatters/gathers them
  (``p2p_scatter_gather`` forward, ``p2p_grad_scatter_gather`` backward) or when sequence
  parallelism already splits them (a stage's output is sequence-partitioned over its TP ranks:
  Megatron's ``get_tensor_shapes`` sends ``s / tp`` tokens with ``sequence_parallel``), all
  boundaries at once; ``t_p2p`` is the mean of the two sends.
* DualPipe (``parallelism.schedule=dualpipe``; DeepSeek-V3, arXiv 2412.19437 Sec. 3.2.1 and Table 2;
  deepseek-ai/DualPipe@3da1bbe dualpipe/dualpipe.py): rank ``i`` holds stage ``i`` and stage ``pp - 1 - i`` and runs
  ``m / 2`` microbatches from each end, so its per-microbatch slot is the mean of the two stages' ``t_f + t_b`` (the
  heavy last stage, LM head and MTP, paired with the light first); the slowest rank paces ``m`` slots. Bubble: Table
  2's ``(PP/2 - 1)(F&B + B - 3W)``, ``F&B`` the rank's merged slot, ``B`` its backward, ``W`` its weight-gradient
  GEMMs (half the Linears' backward GEMM time, the core attention having no weights). The merged chunks hide the MoE
  all-to-alls (:func:`~estimator.parallel.moe_comm.merged_exposure` for the chunks DualPipe merges,
  :func:`~estimator.parallel.moe_comm.dualpipe_merged_fraction`) and the pipeline sends ("both all-to-all and PP
  communication can be fully hidden", Sec. 3.2.1): ``pp_p2p_time_s`` counts them, none exposed. Each rank reduces both
  stages' gradients; ZeRO shards each stage's state over its ``2 dp`` holders (memory:
  :func:`~estimator.parallel.memory.dualpipe_rank`). Not modelled: the warm-up's unhidden sends, the extra ranks of
  the ``2 dp`` gradient groups (priced as ``dp``-rank groups carrying both stages' bytes), DualPipeV.
* DeepSpeed's pipeline engine with TP (``framework.p2p_partitioned_tensor``, ``tp`` > 1, ``p2p_scatter_gather``;
  microsoft/DeepSpeed@v0.5.10 deepspeed/runtime/pipe/engine.py, utils.py ``PartitionedTensor``): a stage's output is
  partitioned over its TP ranks (a clone of the rank's ``1/tp``) and sent with a small int64 meta tensor (one more
  point-to-point send); the receiver clones what it received, clones it again at the forward and rebuilds the whole
  tensor (``full()``: a TP all-gather of the ``s x b x h`` activation plus :data:`PARTITION_FULL_BYTES` HBM bytes per
  byte of it and the local part's copy). In backward the producing stage rebuilds its own output the same way (its data
  was dropped after partitioning) and, with ``p2p_grad_scatter_gather`` (partitioned gradients, v0.5.5 on), rebuilds
  the received gradient too (a second ``full()``, a second meta send), the receiving stage clones the gradient's part
  before sending it. Per stage and microbatch in its forward / backward slot; the all-gathers and meta sends are output
  ``p2p_gather_time_s`` (inside ``exposed_comm_time_s``), the copies at the elementwise memory rate count as compute.
  The host syncs of ``meta.tolist()`` per ``full()`` are not priced. Not with sequence parallelism (the stacks read had
  none; a stage's output is then already split and sent as it is, as for every framework).
* Megatron-LM's scatter/gather at the pipeline boundaries (``framework.p2p_gather_on_receive``, ``tp`` > 1, no sequence
  parallelism; NVIDIA/Megatron-LM@6985e58938d40ad91ac07b0fddcfad8132e1447e megatron/p2p_communication.py l.132-141,
  megatron/mpu/random.py l.122-133 ``gather_split_1d_tensor``): every received ``1/tp`` part (activations in forward
  with ``p2p_scatter_gather``, their gradients in backward with ``p2p_grad_scatter_gather``) is all-gathered over the
  TP group into a fresh buffer by ``torch.distributed.all_gather`` on a list of views (c10d's flat output copied out:
  one read and one write of the whole tensor), synchronously before the stage computes: per chunk a stage receives,
  exposed, in ``p2p_gather_time_s``; the copy at the elementwise memory rate counts as compute.
* Expert parallelism (MoE models, ``ep`` > 1; Megatron-core MoE): each MoE layer's dispatch and
  combine all-to-alls of ``k T h`` 16-bit values per rank (the flex dispatcher's per-node and per-rank rows, with
  group-limited routing and FP8 dispatch: :mod:`~estimator.parallel.moe_comm`) (``T = s b / (tp cp)`` tokens with
  sequence parallelism) over the ``ep`` group, in forward, backward and again in a full recompute
  (or ``recompute_modules`` with ``moe``);
  not overlapped, unless ``framework.moe_a2a_overlap`` (merged 1F1B) or ``framework.moe_shared_expert_overlap``
  (the shared expert's fc1 behind the dispatch, fc2 behind the combine, each pass: exposed = what exceeds that part
  of the shared expert's captured time; :mod:`~estimator.parallel.moe_comm`). The expert groups fold a stage's ``tp x cp x dp`` ranks as ``etp x ep x edp``
  (:meth:`~estimator.parallel.layout.Layout.expert_strides`). With ``model.fused_kernels=te`` and
  sequence parallelism (Megatron-core requires it for MoE with tp > 1) the MLP's half of the
  layer's TP collectives is the dispatcher's: an all-gather of the ``k T etp`` routed rows over the
  ``etp`` experts' TP ranks and a reduce-scatter back (``k x`` the sequence gather's bytes at
  ``etp = tp``; none at ``etp = 1``), plain NCCL collectives that TP-communication overlap does not
  hide. A shared expert (``model.shared_expert_ffn_size``) adds the dense MLP's TP collectives
  (the same as the attention's, and overlapped like them). Expert gradients are reduced over the ``edp`` ranks holding the same experts, after the
  dense gradients.
* Data parallelism (gradients of ``framework.grad_bytes`` per element, over the ``dp x cp`` ranks
  holding the same weights): ``zero`` 0: one all-reduce after the last microbatch; 1: a
  reduce-scatter, then the updated 16-bit weights' all-gather; with ``grad_reduce_overlap`` the
  reduction overlaps the last microbatch's backward, with ``param_gather_overlap`` the all-gather
  overlaps the next step's first forward (exposed: what exceeds them). ``zero`` 2: the gradients
  are sharded, so every microbatch's gradients are reduce-scattered during its backward (exposed
  beyond that backward's compute), and the weights' all-gather follows the step. ``zero`` 3
  (:func:`~estimator.parallel.zero3.zero3_layer`): the weights are also sharded and gathered unit by unit
  (``framework.zero3_unit``) right before use, in forward and in backward, one unit ahead; a
  unit's gather hides behind the compute of one unit's share of the layer, the backward's link
  also carries the gradients' reduce-scatter (in ``framework.reduce_bucket_params`` buckets), and
  the first unit of each pass is exposed whole. Gathers are priced as collectives over the
  ``dp x cp`` group, so their latency grows with the group (a ring all-gather takes ``n - 1``
  steps) and their exposure grows with scale instead of being hidden. Hidden is not free: the
  compute a DP / ZeRO collective overlaps runs slower by ``interference`` of the overlapped time
  (``parallelism.comm_interference``; output ``interference_s``).
* Tied word embedding (``spec.tied``, ``pp`` > 1): the first stage's embedding and the last stage's LM head are one
  weight, so after the pipeline flush its gradient (``padded vocab / tp x hidden`` elements per TP rank, in the
  gradient buffer's dtype) is all-reduced between the two stages, the ``tp x dp`` such 2-rank groups at once, before
  the step and not overlapped: DeepSpeed's pipeline engine (microsoft/DeepSpeed@56c522386878df2513ccb548de76b50191ae3af7
  pipe/schedule.py l.234-237: ReduceTiedGrads before ReduceGrads and OptimizerStep; pipe/engine.py l.233-248
  all_reduce of the tied weight's fp32 ``_hp_grad`` under bf16; groups per (dp, tp) fiber, pipe/module.py l.438-480),
  Megatron-LM's embedding group (bigscience-workshop/Megatron-DeepSpeed@55f8cf8b megatron/training.py l.476-498, the
  Megatron-LM code; Megatron-core: NVIDIA/Megatron-LM@d98e8a64 megatron/core/distributed/finalize_model_grads.py
  l.258, l.676, after ``finish_grad_sync``). Added to the first and the last stage's tail (output
  ``tied_grad_time_s``, inside ``dp_exposed_time_s``). Multi-token prediction's embedding copy on the last stage (an
  all-reduce of the same size, Megatron-core) is not priced.
* bf16 engines with their own fp32 gradient buffer (``framework.bf16_grad_reduce`` / ``bf16_grad_accum_bytes`` /
  ``bf16_step_grad_bytes``, :mod:`~estimator.parallel.framework`; DeepSpeed's BF16_Optimizer): with ``zero`` 1 the
  gradients may be all-reduced whole in bf16 (cast from and back to the fp32 buffer: two passes of ``4 + 2`` bytes per
  parameter) instead of reduce-scattered; every backward adds its bf16 gradients into the fp32 buffer
  (``bf16_grad_accum_bytes`` per parameter of the stage, in the stage's backward slot); every step reads the buffer
  for the grad norm and zeroes it (``bf16_step_grad_bytes`` per parameter, in ``optimizer_s``). All at the device's
  elementwise memory rate. Only with ``zero`` 0 or 1 (DeepSpeed runs ZeRO-2/3 through its ZeRO optimizers instead).
* fp16 engines (``framework.fp16_grad_reduce`` / ``fp16_param_bytes`` / ``fp16_shard_bytes`` / ``fp16_grad_accum_bytes``,
  :mod:`~estimator.parallel.framework`; DeepSpeed's ZeRO stage-1 optimizer, microsoft/DeepSpeed@v0.5.10
  deepspeed/runtime/zero/stage_1_and_2.py, sources in conf/framework/deepspeed.yaml): with ``zero`` 1 the gradients may be
  all-reduced whole (``all_reduce``) instead of reduce-scattered; the step moves ``fp16_param_bytes`` per parameter of
  the stage and ``fp16_shard_bytes`` per parameter of the rank's shard through HBM (in ``optimizer_s``); every backward
  but the first adds its gradients into ``param.grad`` (``fp16_grad_accum_bytes`` per parameter of the stage, ``(m - 1) /
  m`` of it in each backward slot; ``zero`` 0 or 1). All at the device's elementwise memory rate.
* ZeRO-1 engines with their own shard group and reduction schedule (``framework.zero1_group`` / ``param_exchange`` /
  ``grad_bucket_sync`` / ``grad_bucket_copy_bytes`` / ``shard_step_bytes`` / ``adam_step_bytes`` / ``grad_add_bytes``,
  :mod:`~estimator.parallel.framework`; InternLM's HybridZeroOptimizer, sources in conf/framework/internlm.yaml): the
  optimizer state may be sharded over ``zero1_group`` consecutive data-parallel ranks (replicated across groups), so the
  step updates ``1 / zero1_group`` of the parameters and the weights are exchanged within that group only, as one
  broadcast per owner rank (``broadcast``) or an all-gather; the gradients (all-reduced whole over the ``dp x cp`` group
  with ``bf16_grad_reduce=all_reduce_bf16``) may be reduced bucket by bucket behind a device-wide synchronise
  (:func:`bucket_sync_tail`: one reduction at a time, the backward waits for the previous bucket at each boundary, the
  last bucket exposed after the backward), each bucket with ``grad_bucket_copy_bytes`` of HBM copies per parameter on
  the communication stream; the step moves ``shard_step_bytes`` per shard parameter besides Adam's ``adam_step_bytes``
  (null: the fused Adam below); with 16-bit gradients every microbatch after the first adds ``grad_add_bytes`` per
  parameter in the backward (``(m - 1) / m`` of it per slot); without recompute every backward reruns the block's
  checkpointed pre-norm regions, ``norm_rerun_bytes`` per element of each layer's ``tokens x hidden`` activation.
* FP8 amax all-reduces (``precision=fp8`` with TE's kernels; :mod:`~estimator.parallel.fp8_amax`, sources there):
  ``delayed``: one fused all-reduce of the rank's whole amax buffer per model chunk and microbatch, forward and
  backward, over the ``tp x cp x dp`` ranks; ``tensorwise``: a 4-byte TP all-reduce per sequence-parallel tensor
  (2 forward, 2 backward per layer); ``blockwise``: none. All blocking on the compute stream: exposed whole
  (output ``fp8_amax_time_s``, inside ``exposed_comm_time_s``). torchao's float8 tensor parallelism
  (``fp8_kernels=torchao`` / ``torchao_fsdp_fp8`` with sequence-parallel TP, torchtitan's plan): its TP all-gathers
  carry float8 (1 byte per element; the reduce-scatters stay 16-bit), and every cast of a sharded tensor all-reduces
  its 4-byte amax over TP, forward the two module inputs, the two row-parallel inputs and each weight (none with
  FSDP's float8 all-gather), backward each GEMM's output gradient (:mod:`~estimator.parallel.fp8_amax`, sources
  there). With FSDP's float8 all-gather (``torchao_fsdp_fp8``), torchao's ``precompute_float8_dynamic_scale_for_fsdp``
  after the optimizer step reads every float8 weight's fp32 shard once (a foreach inf-norm) and all-reduces their
  amaxes in one collective over the FSDP group (pytorch/ao@890e0ac8 torchao/float8/fsdp_utils.py l.27-74; torchtitan
  registers it as an optimizer step post-hook, pytorch/torchtitan@0da8901b torchtitan/train.py l.224-226), in
  ``optimizer_s``.
* Gradient clipping (``framework.grad_clip``): PyTorch's ``clip_grad_norm_`` with foreach (torchtitan
  ``dist_utils.clip_grad_norm_``, pytorch/torchtitan@0da8901b torchtitan/distributed/utils.py l.245-305, called with
  ``foreach=True`` at train.py l.334-339) reads each gradient of the rank's shard for ``torch._foreach_norm``
  (``get_total_norm``), reduces the norm once (``total_norm.full_tensor()`` of the DTensor's partial norm: one
  all-reduce of 4 bytes over the ranks holding shards, priced over ``tp x cp x dp``; DTensor's stacking of norms of
  mixed placements under TP is not counted), then ``torch._foreach_mul_`` scales every gradient by the clamped
  coefficient, read and write, unconditionally (torch/nn/utils/clip_grad.py ``_clip_grads_with_norm_``: the
  multiply "avoids a ``if clip_coef < 1:`` conditional which can require a CPU <=> device synchronization"):
  :data:`CLIP_PASSES` passes of the gradient dtype per element at the elementwise memory rate, in ``optimizer_s``.
* Optimizer: fused Adam streams 32 bytes per (unsharded) parameter through HBM (fp32 master,
  momentum and variance read and written, 16-bit gradient read, 16-bit weight written); with a
  bf16 state (``framework.optimizer_state=bf16``) 16: the three in bf16, the same gradient and weight;
  ``bf16_moments`` 24: the fp32 master read and written, the two moments in bf16, the same gradient and weight.
* Circuits (fabrics whose groups get their own circuits, the OCS): the step pays the
  reconfigurations of its circuit plan (:mod:`~estimator.parallel.circuits`), exposed.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from estimator.compute.device import DeviceProfile, node_times
from estimator.compute.megatron_softmax import fused_softmax_available
from estimator.errors import EstimatorError
from estimator.fabrics.base import Fabric
from estimator.parallel.circuits import plan
from estimator.parallel.fp8_amax import (
    AMAX_BYTES,
    TORCHAO_TP_GATHER_BYTES,
    delayed_bytes,
    tensorwise_per_layer,
    torchao_tp,
    torchao_tp_per_layer,
)
from estimator.parallel.framework import Framework
from estimator.parallel.layer import capture_parts
from estimator.parallel.layout import Layout, layer_kinds
from estimator.parallel.loss import logit_elements, loss_times
from estimator.parallel.memory import dense_shards, end_params, memory, stage_param_split
from estimator.parallel.moe_comm import (
    dispatch_time,
    dualpipe_merged_fraction,
    ep_split,
    fc1_share,
    flex_strides,
    merged_exposure,
    merged_fraction,
    nccl_a2a_ctas,
    shared_hidden,
    sm_share,
)
from estimator.parallel.overlap import behind
from estimator.parallel.placement import group_cost, p2p_cost, p2p_pricing, strides
from estimator.parallel.sac import gemm_widths, recomputed_gemm_fraction
from estimator.parallel.spec import TransformerSpec
from estimator.parallel.zero3 import FP32_MASTER, OutsideCost, Zero3Layer, held_cost, zero3_layer, zero3_root

ACT_BYTES = 2  # 16-bit activations on the wire
CLIP_PASSES = 3  # clip_grad_norm_'s passes over each gradient element (module docstring, "Gradient clipping")
FP32_BYTES = 4
WEIGHT_BYTES = 2  # 16-bit weights gathered by ZeRO
FP8_PARAM_BYTES = 1  # an FP8 weight's bytes in the distributed optimizer's all-gather (framework.fp8_param_gather)
# DeepSpeed's PartitionedTensor.full() (microsoft/DeepSpeed@v0.5.10 deepspeed/runtime/utils.py l.703-731), HBM bytes per
# byte of the full tensor besides the all-gather: torch.zeros of the flat buffer (write 1), PyTorch 1.10/1.11 c10d's
# copy-out of a list all-gather (read 1, write 1), the final .clone() (read 1, write 1); the local part's copy-in (2 per
# byte of the part) is added where it is used
PARTITION_FULL_BYTES = 5


def partition_meta_bytes(tp: int) -> int:
    """Bytes of PartitionedTensor.to_meta() (utils.py l.733-748): int64 [ndim, 3 sizes, num_parts, rank, tp + 1 offsets]."""
    return 8 * (1 + 3 + 2 + tp + 1)
ADAM_STEP_BYTES = {"fp32": 32, "bf16": 16, "bf16_moments": 24}  # per parameter and optimizer state dtype, see the module docstring


@dataclass(frozen=True)
class PartTimes:
    fwd: float
    bwd: float
    fwd_flops: float
    bwd_flops: float
    fwd_gemm: float  # seconds of tensor-core ops (what TP communication can hide behind)
    bwd_gemm: float


def hybridep_permute(fw: Framework) -> str | None:
    """The layer capture's ``hybridep``: None unless the flex dispatcher's HybridEP backend; then its permute kernel
    (``"standalone"``) or, with ``framework.moe_permute_fusion_into_hybridep``, fused into its dispatch / combine."""
    if fw.moe_dispatcher != "hybridep":
        return None
    return "fused" if fw.moe_permute_fusion_into_hybridep else "standalone"


@lru_cache(maxsize=1024)
def part_times(spec: TransformerSpec, tp: int, sp: bool, mbs: int, device: DeviceProfile, precision: str,
               cp: int = 1, attention_kernel: str = "cudnn", etp: int | None = None, ep: int = 1,
               sorts: bool = True, fp8_kernels: bool | str = "te", hybridep: str | None = None,
               softmax_rule: str = "megatron", causal_share: float = 1.0) -> dict[str, PartTimes]:
    """Seconds and FLOPs of each captured part of one layer (and the embedding and head) per microbatch;
    ``causal_share``: the share of the attention forward's FLOPs run in causal calls
    (:func:`attention_causal_share`)."""
    out = {}
    for name, (scaled, prec) in part_workloads(spec, tp, sp, mbs, precision, cp, etp, ep, sorts, fp8_kernels, hybridep,
                                               softmax_rule).items():
        t = node_times(scaled, device, prec, attention_kernel, causal_share)
        phase = np.array([n.phase for n in scaled.nodes])
        flops = np.array([n.flops for n in scaled.nodes])
        gemm = np.array([n.op_class in ("matmul", "attention") for n in scaled.nodes])
        fw, bw = phase == "forward", phase == "backward"
        out[name] = PartTimes(float(t[fw].sum()), float(t[bw].sum()), float(flops[fw].sum()), float(flops[bw].sum()),
                              float(t[fw & gemm].sum()), float(t[bw & gemm].sum()))
    return out


def part_args(spec: TransformerSpec, L: Layout, fw: Framework, device: DeviceProfile, precision: str) -> tuple:
    """The arguments :func:`part_times` prices a layer kind of ``spec`` with under layout ``L`` and framework ``fw``
    (``part_times(spec, *part_args(...))``; the per-op breakdown, :mod:`~estimator.parallel.ops`, reads the same)."""
    return (L.tp, L.sequence_parallel, L.micro_batch_size, device, precision, L.cp, fw.attention_kernel, L.expert_tp,
            L.ep, fw.moe_dispatcher == "alltoall", fw.fp8(precision), hybridep_permute(fw), fw.fused_softmax,
            attention_causal_share(L))


def part_workloads(spec: TransformerSpec, tp: int, sp: bool, mbs: int, precision: str, cp: int = 1,
                   etp: int | None = None, ep: int = 1, sorts: bool = True, fp8_kernels: bool | str = "te",
                   hybridep: str | None = None, softmax_rule: str = "megatron") -> dict[str, tuple[Any, str]]:
    """Part name -> (its captured workload at ``mbs`` sequences, the precision :func:`part_times` prices it at)."""
    out = {}
    fp8 = fp8_kernels if precision == "fp8" else False  # the FP8 casts (Framework.fp8: kernels and scaling recipe), or none
    moe = (None, 1)  # one capture per distinct layer: a dense one, or Megatron-core's MoE layer by its experts' TP degree,
    if spec.experts and spec.fused == "te":  # its local experts (the grouped GEMMs read each one's weights) and whether a
        # rank regroups its received rows by expert (``sorts``: the alltoall dispatcher, moe_comm), and whether the
        # dispatcher is HybridEP, its permute standalone or fused into its kernels (``hybridep``, layer.capture_parts)
        moe = (None if etp == tp else etp, ep, sorts, hybridep)
    # Megatron's fused softmax runs only where its checks pass at this micro-batch (framework.fused_softmax's code)
    s = spec.seq_len // cp
    fused_softmax = spec.fused != "megatron" or fused_softmax_available(softmax_rule, mbs, spec.heads // tp, s, s)
    for name, w in capture_parts(spec, tp, sp, cp, fp8, *moe, fused_softmax=fused_softmax).items():
        out[name] = (w.scaled_to_batch(mbs), "bf16" if fp8 and name in ("embedding", "head") else precision)
    return out


def attention_causal_share(L: Layout) -> float:
    """The share of a rank's attention-forward FLOPs that run in causal kernel calls. PyTorch's ring attention
    (``cp_comm=torch`` / ``torch_alltoall``, load balance on; torch/distributed/tensor/experimental/_attention.py
    ``_templated_ring_attention`` and ``_is_causal_behavior``, docs/research/h100-cp-attn.md) calls SDPA ``cp``
    times per pass, each on the same FLOPs (``2c x 2c`` causal, then ``2c x c`` or ``c x 2c`` unmasked for the
    rank's ``2c`` tokens): only step 0 is causal, so ``1 / cp``. Every other layout: 1 (one causal call, or a
    context-parallel kernel not read here)."""
    return 1.0 / L.cp if L.cp > 1 and L.cp_comm in ("torch", "torch_alltoall") else 1.0


def recompute_cost(spec: TransformerSpec, L: Layout, layer: PartTimes, attn: PartTimes, hbm: float) -> tuple[float, float]:
    """(seconds, FLOPs) of one layer's recompute per microbatch: nothing, the core attention's forward
    (``selective``), the whole forward (``full``), per-op SAC's share (``op``, :mod:`sac`): its
    recomputed GEMMs plus every forward op outside the GEMMs and the attention kernel, or the listed
    modules' forward (``recompute_modules``, :func:`module_recompute_cost`; ``hbm``: the device's
    elementwise memory rate, bytes/s)."""
    if L.recompute == "op":
        frac = recomputed_gemm_fraction(spec, L.tp)
        gemm_s, gemm_flops = layer.fwd_gemm - attn.fwd_gemm, layer.fwd_flops - attn.fwd_flops
        return frac * gemm_s + (layer.fwd - layer.fwd_gemm), frac * gemm_flops
    if L.recompute_modules is not None:
        return module_recompute_cost(spec, L, layer, attn, hbm)
    return {"none": (0.0, 0.0), "selective": (attn.fwd, attn.fwd_flops), "full": (layer.fwd, layer.fwd_flops)}[L.recompute]


def mlp_flops(spec: TransformerSpec, L: Layout, width: float) -> float:
    """Forward FLOPs of an MLP ``width`` wide on a rank's tokens: ``2 T h f (3 gated | 2) / t``."""
    tokens = (spec.seq_len // L.cp) * L.micro_batch_size
    return 2 * tokens * (3 if spec.gated else 2) * spec.hidden * width / L.tp


def outside_attention(layer: PartTimes, attn: PartTimes, flops: float) -> tuple[float, float]:
    """(forward, backward) seconds of a module of ``flops`` forward FLOPs outside the core attention: its share of
    that part's FLOPs times that part's seconds (its elementwise ops spread in proportion)."""
    other = layer.fwd_flops - attn.fwd_flops
    share = flops / other if other else 0.0
    return share * (layer.fwd - attn.fwd), share * (layer.bwd - attn.bwd)


def module_recompute_cost(spec: TransformerSpec, L: Layout, layer: PartTimes, attn: PartTimes,
                          hbm: float) -> tuple[float, float]:
    """(seconds, FLOPs) of re-running the forward of Megatron-core's ``recompute_modules`` once in one layer's
    backward per microbatch. The layer is captured as one workload whose ops are not labelled by module, so:
    ``core_attn`` is the captured core attention (as ``selective``); the GEMM modules are priced by their share
    of the layer's forward FLOPs outside the core attention, at that part's seconds per FLOP (its elementwise
    ops spread in proportion): ``mla_up_proj`` the query and key/value up-projections (``2 T (q_lora or h)
    heads (qk + rope) / t + 2 T kv_lora heads (qk + v) / t``), ``mlp`` the dense MLP (dense layers only),
    ``moe`` the router, the routed experts' ``k`` MLPs and the shared expert, ``shared_experts`` the shared
    expert alone (``2 T h f (3 gated | 2) / t`` for an MLP of width ``f``); the memory-bound ones by their bytes
    at the device's elementwise rate: ``layernorm`` each standalone norm (MLA's input norm, the MoE layer's
    pre-MLP norm; the TE spec fuses the others into a Linear, which Megatron-core leaves alone) reads and
    writes ``2h`` per token of the rank, ``moe_act`` reads fc1's output and writes the activation's for the
    ``k`` routed rows. The collectives inside the recomputed modules are priced in :func:`layer_cost`."""
    mods, t, h = L.modules, L.tp, spec.hidden
    tokens = (spec.seq_len // L.cp) * L.micro_batch_size
    flops = 0.0
    if "mla_up_proj" in mods:
        q_lora, kv_lora, qk, rope, dv = spec.mla
        flops += 2 * tokens * spec.heads * ((q_lora or h) * (qk + rope) + kv_lora * (qk + dv)) / t
    if "mlp" in mods and not spec.experts:
        flops += mlp_flops(spec, L, spec.ffn)
    if "moe" in mods and spec.experts:
        flops += 2 * tokens * h * spec.experts / t + spec.top_k * mlp_flops(spec, L, spec.moe_ffn) + mlp_flops(spec, L, spec.shared_ffn)
    elif "shared_experts" in mods and spec.experts:
        flops += mlp_flops(spec, L, spec.shared_ffn)
    seconds = outside_attention(layer, attn, flops)[0]
    nbytes = 0.0
    if "layernorm" in mods:
        norms = (1 if spec.mla else 0) + (1 if spec.experts else 0)
        nbytes += norms * tokens / (t if L.sequence_parallel else 1) * 4 * h
    if "moe_act" in mods and "moe" not in mods and spec.experts:  # k T f / t elements in, whatever etp
        nbytes += spec.top_k * tokens * spec.moe_ffn / t * ACT_BYTES * ((2 if spec.gated else 1) + 1)
    seconds += nbytes / hbm if hbm else 0.0
    if "core_attn" in mods:
        seconds, flops = seconds + attn.fwd, flops + attn.fwd_flops
    return seconds, flops


class _Pricer:
    """Prices collectives of the parallel groups where they sit and records them (the ``collectives`` rows)."""

    def __init__(self, fabric: Fabric, stride: dict[str, int], algorithm: str):
        self.fabric, self.stride, self.algorithm = fabric, stride, algorithm
        self.colls: list[dict[str, Any]] = []

    def _record(self, group, collective, algo, nbytes, size, stride, count, how, t):
        self.colls.append({"idx": len(self.colls), "group": group, "collective": collective, "algorithm": algo,
                           "bytes": float(nbytes), "group_size": size, "stride": stride, "count_per_step": count,
                           "pricing": how, "time_s": t, "ready_s": 0.0, "start_s": 0.0})

    def price(self, group: str, collective: str, nbytes: float, size: int, count: float) -> float:
        stride = self.stride.get(group, 1)
        t, algo, how = group_cost(self.fabric, collective, nbytes, size, stride, self.algorithm)
        if size > 1 and nbytes > 0:
            self._record(group, collective, algo, nbytes, size, stride, count, how, t)
        return t

    def p2p(self, group: str, nbytes: float, stages: int, count: float) -> float:
        stride = self.stride[group]
        t = p2p_cost(self.fabric, nbytes, stride, stages)
        if stages > 1 and nbytes > 0:
            self._record(group, "p2p", "direct", nbytes, 2, stride, count, p2p_pricing(self.fabric), t)
        return t

    def pair_all_reduce(self, group: str, nbytes: float, count: float) -> float:
        """An all-reduce between two ranks (the tied embedding's first and last stage). A fabric that prices a group
        by its own structure may have no two-rank group there (SiPAC's groups are sub-SiPACs of ``r^k`` CUs); then the
        pair swaps the buffer, a point-to-point transfer each way at once: the bytes per direction a two-rank ring
        all-reduce moves."""
        try:
            return self.price(group, "all_reduce", nbytes, 2, count)
        except EstimatorError:
            return self.p2p(group, nbytes, 2, count)


def torch_cp_bytes(cp: int, q_elems: float, alltoall: bool = False) -> tuple[float, float]:
    """HBM bytes of the elementwise work PyTorch's ring attention (``cp_comm=torch``) adds to one layer's
    forward and backward pass, each on its slowest rank (the next collective waits for it). ``q_elems``:
    elements of the rank's local query, ``s/cp x b x heads/tp x d``.

    As torchtitan ran it, compiled: ``torch.compile(block, fullgraph=True)`` traces the ring's Python
    (torch/distributed/tensor/experimental/_attention.py ``_templated_ring_attention`` and
    ``_templated_ring_attention_backward``; load balance on, ``convert_to_f32``, all-gather rotater) and
    Inductor fuses its pointwise ops. Rank ``r`` runs ``r`` later steps with its whole query (``i <= r``, the
    first half of the received K/V) and ``cp - 1 - r`` with the query's second half (``i > r``). Forward:
    ``cat(K, V)`` at the query heads written for the all-gather; the merges of all steps fuse into one pass
    after the last SDPA that reads each step's 16-bit output once and writes the 16-bit result, except that
    each second-half step's ``_partial_update`` (``torch.cat``) writes and reads back the fp32 output.
    Backward: K and V read once and written twice (their contiguous copies and the gather input); per step
    the fp32 ``cat(dK, dV)`` written for the permute and the received one read, the step's 16-bit dK/dV
    added in the same pass; a whole-query step's ``_partial_update`` of dK and dV writes and reads two fp32
    tensors; dQ as the forward's output (every step's 16-bit dQ read once, an fp32 write and read per
    second-half step, one 16-bit write); the last received fp32 dK/dV cast to 16 bits. The per-step
    logsumexp (``1/d`` of the output) is left out. The passes were read off Inductor's generated code for a
    replica of the two loops with the SDPA calls opaque (docs/research/h88-torch-cp.md). ``alltoall`` (rotate
    method "alltoall"): every step but the first and last also copies the received ``cat(K, V)`` into the
    next one it sends (read and written once per pass), a copy the all-gather rotater's unused cat skips."""
    n, e = cp, q_elems
    kv = 2 * e * ACT_BYTES  # cat(K, V) of the local tokens at the query heads, 16-bit
    dkv = 2 * e * FP32_BYTES  # one step's cat(dK, dV), fp32
    resend = max(0, n - 2) * 2 * kv if alltoall else 0.0
    fwd = bwd = 0.0
    for r in range(n):
        full, half = r, n - 1 - r
        outputs = ACT_BYTES * e * (2 + full + half / 2) + half * 2 * FP32_BYTES * e
        b = (3 * kv + 2 * e * ACT_BYTES + dkv  # K/V read and copied twice; step 0: its dK/dV read, the fp32 cat written
             + full * (dkv + e * ACT_BYTES + 2 * 2 * e * FP32_BYTES + dkv)  # received, half dK/dV, 2 fp32 cats, sent
             + half * (dkv + 2 * e * ACT_BYTES + dkv)  # received, whole dK/dV, sent
             + outputs  # dQ, as the forward's output
             + dkv + kv)  # the last dK/dV received in fp32, written in 16 bits
        fwd, bwd = max(fwd, kv + outputs + resend), max(bwd, b + resend)
    return fwd, bwd


def cp_exchange(spec: TransformerSpec, L: Layout, pricer: _Pricer, attn: PartTimes, per_step: float,
                hbm: float, torch_waits: str = "at_issue") -> tuple[float, float, float]:
    """(exposed forward, exposed backward, all communication) seconds of one layer's context-parallel
    K/V exchange per microbatch, by ``L.cp_comm`` (module docstring); zeros without context
    parallelism. ``hbm``: the device's elementwise memory rate (bytes/s) for ``torch``'s fp32 merges.
    ``torch_waits`` (``framework.torch_cp_waits``, ``torch`` / ``torch_alltoall`` only): ``at_issue`` -- the ring as
    torch.compile traces it (torch 2.6.0-2.7.0): each functional collective is waited right where it is issued, so
    every K/V exchange and dK/dV permute is exposed in full, and AOT's graphs hold fewer K/V exchanges than the
    Python issues (below); ``next_step`` -- each wait where the ring's Python places it (eager): exposed beyond one
    step's attention, the last dK/dV permute in full; K/V exchanged in forward, backward and a recompute.

    K/V exchanges per layer under ``at_issue``, read off the generated code of torch 2.6.0's ring in a compiled
    Llama block (docs/research/h94-inductor-reorder.md): all-gather -- one in the forward graph; the backward ring's
    gather is the same expression as the forward's, so AOT merges it (CSE): without a recompute the backward graph
    reuses the saved gathered K/V and gathers nothing, with full recompute it gathers once for the recompute and
    the backward ring. alltoall -- ``2 cp - 3`` permutes in the forward graph (its own ``cp - 1`` and the backward
    ring's ``cp - 2`` later ones, whose inputs are forward values: the partitioner computes them there and saves
    them), ``cp - 1`` in the backward graph, and ``cp - 2`` more with a recompute (cp 4 without recompute; cp 4
    and 8 with full recompute)."""
    if L.cp == 1:
        return 0.0, 0.0, 0.0
    tokens = (spec.seq_len // L.cp) * L.micro_batch_size
    local = tokens * spec.kv_heads_per_rank(L.tp) * spec.head_dim * ACT_BYTES
    reruns = 1 if L.reruns_attention else 0  # a recompute reruns the attention forward, exchange included
    if L.cp_comm in ("torch", "torch_alltoall"):
        alltoall = L.cp_comm == "torch_alltoall"
        traced = torch_waits == "at_issue"
        q_elems = tokens * max(1, spec.heads // L.tp) * spec.head_dim  # K and V repeated to the query heads
        step_f, step_b = attn.fwd / L.cp, attn.bwd / L.cp  # one step's attention, what an exchange hides behind
        if alltoall:  # cp - 1 permutes of cat(K, V) per pass, each sent before a step's SDPA, waited at the next
            n_f, n_b = ((2 * L.cp - 3, L.cp - 1 + reruns * (L.cp - 2)) if traced
                        else (L.cp - 1, (L.cp - 1) * (1 + reruns)))
            kv = pricer.p2p("cp", 2 * q_elems * ACT_BYTES, L.cp, per_step * (n_f + n_b))
            if traced:
                kv_f, kv_b = n_f * kv, n_b * kv
            else:  # the recompute's exposure is counted with cp_f below
                kv_f, kv_b = ((L.cp - 1) * max(0.0, kv - step) for step in (step_f, step_b))
        else:  # one all-gather of cat(K, V) per pass, waited at the second step (eager)
            n_f, n_b = (1, reruns) if traced else (1, 1 + reruns)
            kv = pricer.price("cp", "all_gather", L.cp * 2 * q_elems * ACT_BYTES, L.cp, per_step * (n_f + n_b))
            kv_f, kv_b = (kv, reruns * kv) if traced else (max(0.0, kv - step_f), max(0.0, kv - step_b))
        kv_comm = (n_f + n_b) * kv
        permute = pricer.p2p("cp", 2 * q_elems * FP32_BYTES, L.cp, per_step * L.cp)  # dK, dV in fp32, each step
        merges, accumulate = (nbytes / hbm for nbytes in torch_cp_bytes(L.cp, q_elems, alltoall))
        cp_f = kv_f + merges
        if traced:  # every permute waited at once; the backward graph's K/V exchanges counted in kv_b
            cp_b = kv_b + L.cp * permute + accumulate + reruns * merges
        else:
            cp_b = kv_b + (L.cp - 1) * max(0.0, permute - step_b) + permute + accumulate + reruns * cp_f
        return cp_f, cp_b, kv_comm + L.cp * permute
    if L.cp_comm == "ring":
        ring_f = pricer.p2p("cp", 2 * local, L.cp, per_step * (L.cp - 1) * (1 + reruns))
        ring_b = pricer.p2p("cp", 4 * local, L.cp, per_step * (L.cp - 1))
        cp_f = (L.cp - 1) * max(0.0, ring_f - attn.fwd / L.cp)
        cp_b = (L.cp - 1) * max(0.0, ring_b - attn.bwd / L.cp) + reruns * cp_f
        return cp_f, cp_b, (L.cp - 1) * ((1 + reruns) * ring_f + ring_b)
    # all_gather: K and V each gathered whole (cp x local; nccl-tests' all_gather size is the output)
    gather = pricer.price("cp", "all_gather", L.cp * local, L.cp, per_step * 2 * (2 + reruns))
    scatter = pricer.price("cp", "reduce_scatter", L.cp * local, L.cp, per_step * 2)  # dK, dV
    cp_f, cp_b = 2 * gather, 2 * (1 + reruns) * gather + 2 * scatter
    return cp_f, cp_b, cp_f + cp_b


def _half_count(n: int) -> int | float:
    return n // 2 if n % 2 == 0 else n / 2  # counts stay integers where they are


def mla_gather(spec: TransformerSpec, act: float) -> float | None:
    """Bytes of multi-head latent attention's sequence-parallel all-gather (None without MLA): the
    latents ``q_lora + kv_lora`` and the key's rope part, gathered before the up-projections
    (multi_latent_attention.py: the up-projections are column-parallel with sequence parallelism, the
    rope key gathered on its own), instead of the ``h``-wide norm output."""
    if not spec.mla:
        return None
    q_lora, kv_lora, _, rope, _ = spec.mla
    return act * ((q_lora or spec.hidden) + kv_lora + rope) / spec.hidden


def _tp_half(pricer: _Pricer, group: str, nbytes: float, size: int, sp: bool, per_step: float, n_rc: int,
             n_op: int, halves: int = 1, gather_bytes: tuple[float, ...] | None = None) -> tuple[float, float, float]:
    """(forward, backward, one reduce-scatter) seconds of one half of a layer's tensor-parallel
    collectives per microbatch (the attention's or the MLP's): with sequence parallelism an all-gather
    + reduce-scatter pair each way (and again in a full recompute; per-op SAC repeats the gather),
    else an all-reduce. ``halves``: how many halves of the layer run these same collectives (their
    counts per step are recorded once); ``gather_bytes``: each half's all-gather bytes when they differ
    from the reduce-scatter's (MLA), the values returned then per half on average."""
    if sp:
        sizes = gather_bytes or (nbytes,) * halves
        ags = {g: pricer.price(group, "all_gather", g, size, _half_count(per_step * sizes.count(g) * (4 + n_rc + n_op)))
               for g in sorted(set(sizes))}
        redo = ags[sizes[0]] if len(ags) == 1 else sum(ags[g] for g in sizes) / halves
        rs = pricer.price(group, "reduce_scatter", nbytes, size, _half_count(per_step * halves * (4 + n_rc)))
        one = rs + redo
    else:
        redo = one = pricer.price(group, "all_reduce", nbytes, size, _half_count(per_step * halves * (4 + n_rc + n_op)))
        rs = 0.0
    return one, (1 + n_rc / 2) * one + n_op / 2 * redo, rs


def gemm_matched_tp(spec: TransformerSpec, tp: int, linear_fwd_s: float, attn: tuple[float, float],
                    mlp: tuple[float, float], n_rc: int, n_op: int, grad_rs_overlap: bool) -> tuple[float, float]:
    """(forward, backward) exposed seconds of one layer's sequence-parallel TP collectives per microbatch when each
    hides only behind its own GEMMs (``framework.tp_overlap_scope: gemm``, Inductor's micro-pipeline pass; the
    pairing is cited in conf/framework/fsdp.yaml). ``linear_fwd_s``: the layer's forward Linear GEMMs (split by
    their FLOPs; an input- or weight-gradient GEMM costs its forward's time); ``attn`` / ``mlp``: the (all-gather,
    reduce-scatter) seconds of each half. Forward: the all-gather behind the GEMMs reading it (wq/wk/wv; w1/w3 or
    fc1), the reduce-scatter behind its producer (wo; w2 or fc2). Backward: the output-gradient all-gather behind
    the input-gradient GEMM of wo / the down projection; the input-gradient reduce-scatters whole unless
    ``grad_rs_overlap`` (then behind the input-gradient GEMMs that sum into them); per-op SAC's repeated gathers
    behind the recomputed GEMMs they feed (every second GEMM: wk; w3, none for fc1); a full recompute repeats
    the forward's exposure."""
    widths = gemm_widths(spec, tp)
    per = linear_fwd_s / sum(widths)
    qkv, wo, up, down = sum(widths[:3]) * per, widths[3] * per, sum(widths[4:-1]) * per, widths[-1] * per
    (ag_a, rs_a), (ag_m, rs_m) = attn, mlp

    def exposed(comm: float, gemm: float) -> float:
        return max(0.0, comm - gemm)

    fwd = exposed(ag_a, qkv) + exposed(rs_a, wo) + exposed(ag_m, up) + exposed(rs_m, down)
    bwd = exposed(ag_a, wo) + exposed(ag_m, down)
    bwd += exposed(rs_a, qkv) + exposed(rs_m, up) if grad_rs_overlap else rs_a + rs_m
    if n_op:
        again = [w * per if i % 2 else 0.0 for i, w in enumerate(widths)]
        bwd += exposed(ag_a, sum(again[:3])) + exposed(ag_m, sum(again[4:-1]))
    return fwd, bwd + n_rc / 2 * fwd


@dataclass(frozen=True)
class LayerCost:
    """One kind of decoder layer per microbatch (``layout.layer_kinds``): its captured parts and
    seconds, forward and backward with their exposed communication."""
    layer: PartTimes
    attn: PartTimes
    fwd: float  # compute + exposed TP / EP / CP / ZeRO-3 communication
    bwd: float
    grad_window: float  # the backward without recompute (what the gradients' reduction can hide behind)
    rc: float
    rc_flops: float
    tp_f: float
    tp_b: float
    tp_layer: float  # all its TP communication, exposed or not
    ep_one: float
    ep_runs: int  # all-to-alls per layer and microbatch: dispatch and combine, forward, backward, recomputes
    ep_exposed: float  # of their time, what the layer's compute does not hide (moe_a2a_overlap, moe_shared_expert_overlap)
    cp_f: float
    cp_b: float
    cp_comm: float
    z3: Zero3Layer
    amax: float = 0.0  # current scaling's 4-byte TP amax all-reduces (fp8_amax), forward + backward, all exposed


def layer_cost(spec: TransformerSpec, L: Layout, fw: Framework, pricer: _Pricer, device: DeviceProfile, precision: str,
               per_step: float, grad_bytes: int, interference: float, interference_stated: bool = False) -> LayerCost:
    """Seconds of one layer of ``spec``'s kind per microbatch (the module docstring's TP, EP, CP and ZeRO-3
    items); ``per_step``: layer-microbatches of this kind per step on the busiest rank (collective counts)."""
    parts = part_times(spec, *part_args(spec, L, fw, device, precision))
    layer, attn = parts["layer"], parts["attention"]
    act = (spec.seq_len // L.cp) * L.micro_batch_size * spec.hidden * ACT_BYTES
    n_rc = 2 if L.recompute == "full" else 0
    n_op = (2 if L.sequence_parallel else 1) if L.recompute == "op" else 0  # per-op SAC's repeated collectives (sac)
    # ---- tensor parallelism per layer and microbatch: the attention's and the MLP's collectives
    mlp = ("tp", act, L.tp)
    moe_dispatcher = spec.experts and spec.fused == "te" and (L.sequence_parallel or L.expert_tp != L.tp)
    if moe_dispatcher:  # Megatron-core's MoE layer: no sequence gather; the dispatcher gathers the k x T routed
        # rows over the experts' TP ranks after the all-to-all and reduce-scatters them before the combine
        mlp = ("tp" if L.expert_tp == L.tp else "etp", act * spec.top_k * L.expert_tp / L.tp, L.expert_tp)
    attention = ("tp", act, L.tp)
    shared = 1 if spec.shared_ffn else 0  # a shared expert's TP collectives are the dense MLP's: counted with the attention's
    fp8_gathers = None  # torchao's float8 TP styles all-gather float8 (fp8_amax: dense layers only)
    if torchao_tp(spec, L, fw.fp8(precision)):
        fp8_gathers = (act * TORCHAO_TP_GATHER_BYTES / ACT_BYTES,) * (2 + shared)
    if mlp == attention and not spec.mla:  # one record of the layer's TP collectives (both halves alike)
        attn_f, attn_b, attn_rs = mlp_f, mlp_b, mlp_rs = _tp_half(pricer, *attention, L.sequence_parallel, per_step, n_rc,
                                                                  n_op, 2 + shared, fp8_gathers)
    else:
        joint = 1 if mlp == attention else 0  # MLA with a dense MLP: one record of the halves' alike reduce-scatters
        # MLA gathers its narrower latents (mla_gather), the shared expert and a dense MLP the h-wide norm output
        gathers = (mla_gather(spec, act), *(act,) * (shared + joint)) if spec.mla else None
        halves = 1 + shared + joint
        one_f, one_b, one_rs = _tp_half(pricer, *attention, L.sequence_parallel, per_step, n_rc, n_op, halves, gathers)
        attn_f, attn_b, attn_rs = (1 + shared) * one_f, (1 + shared) * one_b, (1 + shared) * one_rs
        if joint:  # (per half on average: the layer's total is what counts without the MoE dispatcher)
            mlp_f, mlp_b, mlp_rs = one_f, one_b, one_rs
        else:
            mlp_f, mlp_b, mlp_rs = _tp_half(pricer, *mlp, L.sequence_parallel or moe_dispatcher, per_step, n_rc, n_op)
    tp_layer = attn_f + attn_b + mlp_f + mlp_b  # all of it, exposed or not
    # TP overlap needs sequence parallelism: TE's userbuffers and Inductor's micro-pipeline pass overlap the all-gather /
    # reduce-scatter pairs it makes (Megatron-LM@d98e8a64 megatron/training/arguments.py l.1441-1442 asserts
    # sequence_parallel with --tp-comm-overlap); without it the all-reduces run exposed
    tp_overlap = fw.tp_comm_overlap and L.sequence_parallel
    if tp_overlap and fw.tp_overlap_scope == "gemm" and not (spec.experts or spec.mla):  # each behind its own GEMMs
        tp_f, tp_b = gemm_matched_tp(spec, L.tp, layer.fwd_gemm - attn.fwd_gemm, (attn_f - attn_rs, attn_rs),
                                     (mlp_f - mlp_rs, mlp_rs), n_rc, n_op, fw.tp_overlap_grad_reduce_scatter)
    elif tp_overlap:  # hidden behind the layer's GEMMs (not the MoE dispatcher's: plain NCCL collectives)
        # async TP: the backward's input-gradient reduce-scatters run unfused (framework docstring)
        hidden_f, hidden_b, rs = (attn_f, attn_b, attn_rs) if moe_dispatcher else (attn_f + mlp_f, attn_b + mlp_b, attn_rs + mlp_rs)
        unfused = 0.0 if fw.tp_overlap_grad_reduce_scatter else rs
        hidden_f, hidden_b = max(0.0, hidden_f - layer.fwd_gemm), unfused + max(0.0, hidden_b - unfused - layer.bwd_gemm)
        tp_f, tp_b = (hidden_f + mlp_f, hidden_b + mlp_b) if moe_dispatcher else (hidden_f, hidden_b)
    else:
        tp_f, tp_b = attn_f + mlp_f, attn_b + mlp_b
    # recompute_modules mlp (dense layer) / moe (MoE layer): the MLP half's forward TP collectives again in the backward
    # (TE's Linears gather and scatter inside the checkpointed module), exposed as in the forward unless the layer's
    # TP overlap hid them there; the all-to-alls of a recomputed MoE layer too (its checkpoint wraps dispatch and combine)
    mlp_again = ("moe" if spec.experts else "mlp") in L.modules
    n_moe = 2 if mlp_again and spec.experts else 0
    if mlp_again and (moe_dispatcher or not tp_overlap):
        tp_b, tp_layer = tp_b + mlp_f, tp_layer + mlp_f
    if L.distribute_saved:  # the backward gathers the checkpointed input over TP before the recompute
        gather = pricer.price("tp", "all_gather", act, L.tp, per_step)
        tp_b, tp_layer = tp_b + gather, tp_layer + gather
    # ---- expert parallelism: dispatch + combine of each MoE layer, in forward and backward (moe_comm)
    ep_one = 0.0
    if spec.experts and L.ep > 1:
        tokens = (spec.seq_len // L.cp) * L.micro_batch_size / L.tp
        ep_one = dispatch_time(pricer, fw.moe_dispatcher, tokens, spec.hidden, spec.experts, spec.top_k, L.ep,
                               per_step * (4 + n_rc + n_moe), (spec.router.num_groups, spec.router.group_topk),
                               fw.moe_dispatch_fp8, device.hybridep_rail_Bps)
    # ---- context parallelism: the K/V exchange of each layer's attention (cp_exchange)
    cp_f, cp_b, cp_comm = cp_exchange(spec, L, pricer, attn, per_step, device.memory_rate("elementwise", precision),
                                      fw.torch_cp_waits)
    rc, rc_flops = recompute_cost(spec, L, layer, attn, device.memory_rate("elementwise", precision))
    f_layer, b_layer = layer.fwd + tp_f + cp_f, layer.bwd + rc + tp_b + cp_b
    ep_f, ep_b = 2 * ep_one, (2 + n_rc + n_moe) * ep_one
    dualpipe = L.schedule == "dualpipe"
    # the NCCL all-to-all's CTAs over the ep group's nodes (moe_comm.nccl_a2a_ctas), unless comm_interference is
    # stated; the flex dispatchers hold their own SMs (sm_share reads neither)
    a2a_ctas = (nccl_a2a_ctas(device, *ep_split(pricer.fabric, L.ep, pricer.stride.get("ep", 1)))
                if ep_one and fw.moe_dispatcher == "alltoall" and not interference_stated else None)
    if (fw.moe_a2a_overlap or dualpipe) and ep_one:  # merged forward / backward (moe_comm; check() refuses the recomputes)
        experts_f, experts_b = outside_attention(layer, attn, spec.top_k * mlp_flops(spec, L, spec.moe_ffn))
        merged = merged_exposure(ep_one, f_layer - experts_f, experts_f, b_layer - experts_b, experts_b,
                                 fw.moe_a2a_delay_wgrad)
        # compute slowed while the hidden exchange holds SMs
        merged += sm_share(fw, device, interference, a2a_ctas) * max(0.0, 4 * ep_one - merged)
        share = (dualpipe_merged_fraction(L.microbatches, L.pp) if dualpipe
                 else merged_fraction(L.microbatches, L.pp, L.virtual_stages, L.microbatch_group))
        ep_f = ep_b = share * merged / 2 + (1 - share) * 2 * ep_one
    elif fw.moe_shared_expert_overlap and ep_one:  # the shared expert's fc1 / fc2 behind dispatch / combine (moe_comm)
        shared_f, shared_b = outside_attention(layer, attn, mlp_flops(spec, L, spec.shared_ffn))
        one = fc1_share(spec.gated)
        (ep_f, hid_f), (exp_b, hid_b) = (shared_hidden(ep_one, one * t, (1 - one) * t) for t in (shared_f, shared_b))
        slowed = sm_share(fw, device, interference, a2a_ctas)  # the exchange's SMs, taken from the shared GEMMs
        ep_f += slowed * hid_f
        ep_b = exp_b + slowed * hid_b + (n_rc + n_moe) / 2 * ep_f  # a recompute reruns the forward's overlap
    f_layer, b_layer = f_layer + ep_f, b_layer + ep_b
    # ---- FP8 current scaling: the sequence-sharded tensors' amaxes all-reduced over TP before their casts (fp8_amax)
    amax_f = amax_b = 0.0
    fp8_mode = fw.fp8(precision)
    if fp8_mode in ("te_tensorwise", "torchao", "torchao_fsdp_fp8"):
        n_f, n_b = (tensorwise_per_layer(spec, L) if fp8_mode == "te_tensorwise"
                    else torchao_tp_per_layer(spec, L, fp8_mode))
        if n_f + n_b:
            one = pricer.price("tp", "all_reduce", AMAX_BYTES, L.tp, per_step * (n_f * (1 + n_rc // 2) + n_b))
            amax_f, amax_b = n_f * one, (n_b + n_rc // 2 * n_f) * one
    f_layer, b_layer = f_layer + amax_f, b_layer + amax_b
    # ---- ZeRO-3: per-unit weight gathers (and gradient reduce-scatters) around each layer
    z3 = Zero3Layer(0.0, 0.0, 0.0, 0.0, 0.0, 0)
    if L.zero == 3 and L.dp * L.cp > 1:
        issue_after = 0.0
        if fw.attention_host_sync and layer.fwd_flops:  # the gather waits for the host to pass the attention's sync:
            # the layer's forward before it is the QKV projection (ln_1 not counted), its share by FLOPs
            tokens = (spec.seq_len // L.cp) * L.micro_batch_size
            qkv = 2 * tokens * spec.hidden * (spec.heads + 2 * spec.kv_heads) * spec.head_dim / L.tp
            issue_after = min(1.0, qkv / layer.fwd_flops)
        z3 = zero3_layer(spec, L, fw, pricer, device, precision, grad_bytes, layer.fwd, layer.bwd, rc, per_step,
                         interference, issue_after)
        f_layer, b_layer = f_layer + z3.fwd_exposed, b_layer + z3.bwd_exposed
    return LayerCost(layer, attn, f_layer, b_layer, layer.bwd + tp_b + ep_b + cp_b + amax_b, rc, rc_flops,
                     tp_f, tp_b, tp_layer, ep_one, 4 + n_rc + n_moe, ep_f + ep_b, cp_f, cp_b, cp_comm, z3, amax_f + amax_b)


def fp8_gathered_params(spec: TransformerSpec, L: Layout, stage: int) -> float:
    """Parameters per GPU of pipeline stage ``stage``, of its data-parallel (non-expert) group, that Megatron-core's
    distributed optimizer all-gathers in FP8 with ``fp8_param_gather`` (``framework.fp8_param_gather``): the decoder
    layers' Transformer Engine GEMM weights, which TE keeps as ``Float8Tensor`` (``fp8_model_init``) and which
    Megatron-core puts in a ``torch.uint8`` parameter buffer, so their all-gather moves 1 byte per element
    (NVIDIA/Megatron-LM@ea651a3b78b9b0c1dfd83975ff28853e38e5abaa (core_v0.13.1)
    megatron/core/distributed/distributed_data_parallel.py l.222-237: buffers grouped by (param_dtype, grad_dtype),
    ``param_dtype = torch.uint8`` for a Float8Tensor; the gradients keep the 16-bit "fake" dtype, so the
    reduce-scatter is unchanged). The rest stays 16-bit: the embedding, the final norm and the LM head (Megatron-core's
    output layer is a ColumnParallelLinear, not a TE module) and each layer's two norm weights (TE's LayerNormLinear /
    LayerNormMLP keep ``layer_norm_weight`` in the parameter dtype). Linear biases and multi-token-prediction /
    MLA extras are counted with the GEMM weights (none in the rows that set the key)."""
    d, _ = stage_param_split(spec, L, stage)
    n = L.stage_layers(spec.layers)[stage]
    keep = (end_params(spec, L, stage) + n * 2 * spec.norm_params) / L.tp
    return max(0.0, d - keep)


def bucket_sync_tail(segments: list[tuple[float, float]], bucket: float | None, reduce_s) -> tuple[float, float, float]:
    """(seconds the step grows by beyond the last backward, all reduction seconds, of which overlapped with compute) of a
    gradient reduction run bucket by bucket with a device-wide synchronise before each bucket (``framework.grad_bucket_sync``;
    InternLM's HybridZeroOptimizer, InternLM/InternLM@c18bec9361684189aadf6ffb724f9dfe48288eb0
    internlm/solver/optimizer/hybrid_zero_optim.py: ``_store_and_try_reduce_grads_by_bucket`` reduces the bucket when the
    next gradient would overflow ``reduce_bucket_size`` elements; ``_reduce_and_copy`` calls ``torch.cuda.synchronize()``
    and then launches the bucket's reduction on its communication stream; ``step()`` reduces the last bucket after the
    backward and synchronises again).

    ``segments``: (parameters, seconds) of the last microbatch's backward in order (head, layers last to first,
    embedding), each segment's gradients produced evenly over its seconds; ``bucket``: parameters per bucket (null:
    one bucket, reduced after the backward); ``reduce_s(params)``: seconds of one bucket's reduction. A bucket full at
    compute time ``r`` (on the backward's own clock) is launched when both the compute queued so far and the previous
    bucket's reduction have finished: the backward stalls by what the previous reduction outlasts the compute between
    the two boundaries; the last bucket starts after the backward (and the previous reduction) and is waited for."""
    total = sum(p for p, _ in segments)
    span = sum(t for _, t in segments)
    if total <= 0:
        return 0.0, 0.0, 0.0
    size = min(bucket or total, total)
    flushed = max(0, int(np.ceil(total / size - 1e-9)) - 1)  # buckets reduced during the backward; the last one after it

    def ready(x: float) -> float:  # backward time at which x parameters' gradients exist
        t = cum = 0.0
        for p, sec in segments:
            if p > 0 and cum + p >= x:
                return t + sec * (x - cum) / p
            cum, t = cum + p, t + sec
        return span

    one = reduce_s(size) if flushed else 0.0
    stall = end = 0.0
    for k in range(1, flushed + 1):
        r = ready(k * size)
        start = max(r + stall, end)
        stall, end = start - r, start + one
    last = reduce_s(total - flushed * size)
    finish = max(span + stall, end) + last
    return finish - span, flushed * one + last, max(0.0, flushed * one - stall)


def step_time(spec: TransformerSpec, layout: Layout, fabric: Fabric, device: DeviceProfile, precision: str,
              algorithm: str = "default", dp_overlap: bool | None = None, framework: Framework | None = None,
              interference: float = 0.0, interference_stated: bool = False,
              parts_out: dict[str, Any] | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(metrics, collectives) of one training step; ``interference``: the compute slow-down per second of
    data-parallel / ZeRO communication it overlaps (module docstring); ``interference_stated``: it was stated
    (``parallelism.comm_interference``), so it also prices the SMs of the NCCL all-to-all (else
    :func:`~estimator.parallel.moe_comm.nccl_a2a_ctas`). ``parts_out``: a dict this fills with the terms
    ``compute_time_s`` is summed from on the slowest pipeline rank (:func:`compute_terms`; read by the per-op
    breakdown, :mod:`~estimator.parallel.ops`); nothing else changes."""
    L = layout
    fw = framework or Framework.from_cfg(None)
    overlap = fw.grad_reduce_overlap if dp_overlap is None else dp_overlap
    grad_bytes = fw.grad_bytes(precision)
    parts = part_times(spec, *part_args(spec, L, fw, device, precision))
    emb, head = parts["embedding"], parts["head"]
    stride = strides(L.order, L.tp, L.dp, L.pp, L.cp)
    if spec.experts:
        stride.update(L.expert_strides(stride))  # the expert layers' etp / ep / edp groups
        stride.update(flex_strides(fabric, L.ep, stride["ep"]))  # the flex dispatcher's rail and node exchanges
    stride["dpcp"] = stride["cp"] if L.cp > 1 else stride["dp"]  # the gradient group: dp x cp ranks (cp inside dp)
    stride["amax"] = min(stride["tp"], stride["cp"], stride["dp"])  # delayed FP8's tp x cp x dp group (fp8_amax), as if contiguous
    stride["embd"] = (L.pp - 1) * stride["pp"]  # the tied embedding's group: the first and the last pipeline stage
    pricer = _Pricer(fabric, {**stride, "dp": stride["dpcp"], "zero1": stride["dpcp"]}, algorithm)  # zero1: inside dp
    m, stages, v = L.microbatches, L.stage_layers(spec.layers), L.virtual_stages
    act = (spec.seq_len // L.cp) * L.micro_batch_size * spec.hidden * ACT_BYTES
    # each kind of layer (model.first_dense_layers: dense, then MoE) with its layers per stage; collective
    # counts are per rank: the kind's layer-microbatches per step on the rank holding most of them
    kinds = [(layer_cost(kind, L, fw, pricer, device, precision, m * max(n), grad_bytes, interference,
                         interference_stated), n)
             for kind, n in layer_kinds(spec, L) if sum(n)]
    z3_first = max(c.z3.first_gather for c, _ in kinds)  # the first unit of each pass, exposed whole
    z3_last = max(c.z3.last_gather for c, _ in kinds)
    # the embedding ZeRO-3 keeps gathered through each microbatch (framework.zero3_held_embedding): its gather before
    # the forward, its gradient's reduction after the backward, exposed (one stage only)
    z3_held = z3_root = OutsideCost()
    if L.zero == 3 and L.dp * L.cp > 1:
        z3_held = held_cost(spec, L, fw, pricer, device, precision, grad_bytes, m)
        if fw.zero3_keep_last_unit:  # the last block stays gathered from its forward to its backward
            z3_last = 0.0
        if fw.zero3_root_unit:  # FSDP2's root unit: gathered before the forward, reduced after the backward
            z3_root = zero3_root(spec, L, fw, pricer, device, precision, grad_bytes, m)
            z3_first, z3_last = z3_first + z3_root.gather, z3_last + z3_root.reduce

    def per_stage(i: int, value) -> float:  # the stage's layers' sum of a per-layer quantity
        return sum(n[i] * value(c) for c, n in kinds)

    def per_model(value) -> float:
        return sum(sum(n) * value(c) for c, n in kinds)

    tp_emb = pricer.price("tp", "all_reduce", act, L.tp, m)
    # ---- pipeline: per-stage slots, the slowest paces the steady state
    t_p2p = 0.0  # one send each way per microbatch and chunk: activations forward, their gradients backward
    if L.pp > 1:
        splits = (fw.p2p_scatter_gather, fw.p2p_grad_scatter_gather)
        sends = {act / (L.tp if split or L.sequence_parallel else 1) for split in splits}
        t_p2p = sum(pricer.p2p("pp", nbytes, L.pp, 2 * m * v / len(sends)) for nbytes in sends) / len(sends)
    loss_f, loss_b = loss_times(fw.loss_kernel, logit_elements(spec, L), device, precision, fw.loss_metric_passes)
    # multi-token prediction on the last stage: per depth its projection, a layer of the last layer's kind (with its
    # communication), one more embedding lookup, head and loss
    last, mtp = kinds[-1][0], parts.get("mtp")
    mtp_f = spec.mtp * (mtp.fwd + last.fwd + emb.fwd + tp_emb + head.fwd + loss_f) if mtp else 0.0
    mtp_b = spec.mtp * (mtp.bwd + last.bwd + emb.bwd + head.bwd + loss_b) if mtp else 0.0
    ends_f = [(emb.fwd + tp_emb if i == 0 else 0.0) + (head.fwd + loss_f + mtp_f if i == L.pp - 1 else 0.0) for i in range(L.pp)]
    ends_b = [(emb.bwd if i == 0 else 0.0) + (head.bwd + loss_b + mtp_b if i == L.pp - 1 else 0.0) for i in range(L.pp)]
    t_f = [per_stage(i, lambda c: c.fwd) + ends_f[i] + z3_first + z3_held.gather for i in range(L.pp)]
    t_b = [per_stage(i, lambda c: c.bwd) + ends_b[i] + z3_last + z3_held.reduce for i in range(L.pp)]
    # ---- FP8 delayed scaling: one fused amax all-reduce per chunk (with layers) and microbatch, each pass (fp8_amax)
    amax_delayed = [0.0] * L.pp  # per stage and microbatch, forward + backward, exposed
    if fw.fp8(precision) == "te" and L.tp * L.cp * L.dp > 1:
        chunks = [sum(1 for j, n in enumerate(L.chunk_layers(spec.layers)) if n and j % L.pp == i) for i in range(L.pp)]
        for i in range(L.pp):
            fwd_b, bwd_b = delayed_bytes([(k, n[i]) for k, n in layer_kinds(spec, L)], L.ep)
            ar_f, ar_b = (pricer.price("amax", "all_reduce", b, L.tp * L.cp * L.dp, m * chunks[i]) for b in (fwd_b, bwd_b))
            t_f[i], t_b[i] = t_f[i] + chunks[i] * ar_f, t_b[i] + chunks[i] * ar_b
            amax_delayed[i] = chunks[i] * (ar_f + ar_b)
    # ---- ZeRO-2: every microbatch's gradients reduce-scattered during its backward
    dense = [stage_param_split(spec, L, i) for i in range(L.pp)]
    # ---- bf16 engines that add each backward's bf16 gradients into an fp32 buffer outside the GEMMs (BF16_Optimizer)
    hbm = device.memory_rate("elementwise", precision)
    bf16 = precision == "bf16" and L.zero <= 1  # DeepSpeed runs ZeRO-2/3 through its ZeRO optimizers, not BF16_Optimizer
    accum = [(d + e) * fw.bf16_grad_accum_bytes / hbm if bf16 else 0.0 for d, e in dense]
    # ---- fp16 engines whose backward adds each microbatch's gradients into param.grad outside the GEMMs (autograd's
    # in-place add under DeepSpeed's ZeRO-1): every microbatch but the first, spread over the m backward slots
    fp16 = precision == "fp16" and L.zero <= 1
    if fp16 and fw.fp16_grad_accum_bytes:
        accum = [a + (d + e) * fw.fp16_grad_accum_bytes / hbm * (m - 1) / m for a, (d, e) in zip(accum, dense, strict=True)]
    if grad_bytes == WEIGHT_BYTES and precision != "fp16" and L.zero <= 1 and fw.grad_add_bytes:  # autograd's add (16-bit)
        accum = [a + (d + e) * fw.grad_add_bytes / hbm * (m - 1) / m for a, (d, e) in zip(accum, dense, strict=True)]
    if fw.norm_rerun_bytes and L.recompute == "none":  # the block's own pre-norm checkpoint, rerun in every backward
        elems = (spec.seq_len // L.cp) * L.micro_batch_size * spec.hidden / (L.tp if L.sequence_parallel else 1)
        accum = [a + sum(n[i] for _, n in kinds) * elems * fw.norm_rerun_bytes / hbm for i, a in enumerate(accum)]
    t_b = [t_b[i] + accum[i] for i in range(L.pp)]
    edp = L.edp  # data-parallel copies of an expert
    slowed_z2 = [0.0] * L.pp  # ZeRO-2's interference per stage and microbatch
    late_z2, rs_z2 = [0.0] * L.pp, [0.0] * L.pp  # its reduce-scatter per microbatch: beyond the backward, and whole
    if L.zero == 2:
        for i, (d, e) in enumerate(dense):
            rs_z2[i] = pricer.price("dp", "reduce_scatter", (d + e) * grad_bytes, L.dp * L.cp, m)
            late_z2[i], slowed_z2[i] = behind(rs_z2[i], t_b[i] if overlap else 0.0, interference)
            t_b[i] += late_z2[i]
    # ---- DeepSpeed's PartitionedTensor at the pipeline boundaries (framework.p2p_partitioned_tensor, tp > 1)
    gather_f, gather_b, copies_f, copies_b = ([0.0] * L.pp for _ in range(4))
    if fw.p2p_partitioned_tensor and fw.p2p_scatter_gather and L.pp > 1 and L.tp > 1 and not L.sequence_parallel:
        gp = fw.p2p_grad_scatter_gather
        part = act / L.tp
        # full() calls per microbatch on the busiest stage: a middle one (input + output side), or with pp 2 stage 0
        busiest = (1 if L.pp > 2 else 0) + 1 + (1 if gp else 0)
        ag = pricer.price("tp", "all_gather", act, L.tp, m * busiest)
        meta = pricer.p2p("pp", partition_meta_bytes(L.tp), L.pp, m * (2 if gp else 1))
        full_hbm = (PARTITION_FULL_BYTES * act + 2 * part) / hbm  # zeros, local copy, c10d copy-out, clone
        clone = 2 * part / hbm
        for i in range(L.pp):
            if i > 0:  # input side: forward receives, clones twice, gathers; backward clones the partitioned gradient
                gather_f[i] += ag + meta
                copies_f[i] += full_hbm + 2 * clone
                copies_b[i] += clone if gp else 0.0
            if i < L.pp - 1:  # output side: forward partitions (a clone); backward restores the output, gathers the gradient
                copies_f[i] += clone
                gather_b[i] += ag + (ag + meta if gp else 0.0)
                copies_b[i] += full_hbm * (2 if gp else 1)
    elif fw.p2p_gather_on_receive and L.pp > 1 and L.tp > 1 and not L.sequence_parallel:
        # Megatron-LM's gather_split_1d_tensor per received part: each stage receives once per chunk and microbatch,
        # activations in forward (not stage 0's first chunk: the data loader) and gradients in backward (not the last
        # stage's last chunk: the loss)
        ag = pricer.price("tp", "all_gather", act, L.tp, 2 * m * v)
        copy_out = 2 * act / hbm
        for i in range(L.pp):
            if fw.p2p_scatter_gather:
                n_f = v - (1 if i == 0 else 0)
                gather_f[i], copies_f[i] = n_f * ag, n_f * copy_out
            if fw.p2p_grad_scatter_gather:
                n_b = v - (1 if i == L.pp - 1 else 0)
                gather_b[i], copies_b[i] = n_b * ag, n_b * copy_out
    t_f = [t_f[i] + gather_f[i] + copies_f[i] for i in range(L.pp)]  # zeros without boundary gathers
    t_b = [t_b[i] + gather_b[i] + copies_b[i] for i in range(L.pp)]
    dualpipe = L.schedule == "dualpipe"

    def at_rank(x, i: int) -> float:  # a per-stage value on pipeline rank i (DualPipe: the mean of its two stages)
        return (x[i] + x[L.pp - 1 - i]) / 2 if dualpipe else x[i]

    if dualpipe:  # each rank runs stage i and stage pp-1-i, m/2 microbatches each, its boundary sends hidden (docstring)
        slots = [at_rank([t_f[k] + t_b[k] for k in range(L.pp)], i) for i in range(L.pp)]
        slowest = max(range(L.pp), key=lambda i: slots[i])
        last_c = kinds[-1][0]
        w_head = head.bwd_gemm + (spec.mtp * (mtp.bwd_gemm + last_c.layer.bwd_gemm - last_c.attn.bwd_gemm + head.bwd_gemm)
                                  if mtp else 0.0)
        w = [(per_stage(i, lambda c: c.layer.bwd_gemm - c.attn.bwd_gemm) + (w_head if i == L.pp - 1 else 0.0)) / 2
             for i in range(L.pp)]  # the weight-gradient GEMMs: half the Linears' backward GEMM time
        bubble = (L.pp / 2 - 1) * max(0.0, slots[slowest] + at_rank(t_b, slowest) - 3 * at_rank(w, slowest))
    else:
        slots = [t_f[i] + t_b[i] + 2 * v * t_p2p for i in range(L.pp)]
        slowest = max(range(L.pp), key=lambda i: slots[i])
        bubble = (sum(slots) - slots[slowest]) / v
    pipeline = m * slots[slowest] + bubble
    # ---- tied word embedding (pp > 1): its gradient all-reduced between the first and the last stage after the
    # pipeline flush, in the gradient buffer's dtype, before the step (DeepSpeed's ReduceTiedGrads, Megatron's
    # embedding-group all-reduce; sources in the module docstring), exposed on those two stages
    tied, tied_stages = 0.0, (0, L.pp - 1)
    if spec.tied and L.pp > 1:
        tied = pricer.pair_all_reduce("embd", spec.padded_vocab(L.tp) * spec.hidden // L.tp * grad_bytes, 1)
    bf16_allreduce = bf16 and L.zero == 1 and fw.bf16_grad_reduce == "all_reduce_bf16"  # (zero 0: a plain all-reduce)
    fp16_allreduce = fp16 and L.zero == 1 and fw.fp16_grad_reduce == "all_reduce"  # DeepSpeed's ZeRO-1: whole buckets
    # ---- data parallel / ZeRO-0/1/2: after the last microbatch (per stage; the slowest sets the tail)
    dp_exposed, t_dp, slowed_dp = 0.0, 0.0, 0.0
    z1 = fw.zero1_ranks(L.dp * L.cp)  # ZeRO-1's shard group (framework.zero1_group): the weights' exchange
    if fw.grad_bucket_sync and L.ep > 1:
        raise EstimatorError("framework.grad_bucket_sync: the bucket-by-bucket reduction is modelled for dense models "
                             "(ep 1) only")

    def reduce_s(group: str, params: float, size: int, count: float = 1) -> float:  # one gradient reduction
        nbytes = params * grad_bytes
        if L.zero == 0 or fp16_allreduce:  # fp16: each bucket whole (DeepSpeed ZeRO-1; fp16_allreduce: zero 1 only)
            return pricer.price(group, "all_reduce", nbytes, size, count)
        if bf16_allreduce and size > 1:  # the whole buffer cast to bf16, all-reduced, cast back (BF16_Optimizer)
            return (pricer.price(group, "all_reduce", params * WEIGHT_BYTES, size, count)
                    + (params * 2 * (grad_bytes + WEIGHT_BYTES) / hbm if grad_bytes != WEIGHT_BYTES else 0.0))
        if L.zero == 1:
            return pricer.price(group, "reduce_scatter", nbytes, size, count)
        return 0.0  # ZeRO-2: reduce-scattered in every backward (above)

    def exchange_s(group: str, params: float, size: int, fp8_params: float = 0.0) -> float:  # the updated weights
        # to the shard group: 16-bit, but for the ``fp8_params`` of them kept and gathered in FP8 (1 byte)
        nbytes = params * WEIGHT_BYTES - fp8_params * (WEIGHT_BYTES - FP8_PARAM_BYTES)
        if group == "dp" and L.zero == 1 and z1 < size:
            group, size = "zero1", z1
        if fw.param_exchange == "broadcast" and L.zero == 1:  # one broadcast per owner rank of its shard
            return size * pricer.price(group, "broadcast", nbytes / size, size, size)
        return pricer.price(group, "all_gather", nbytes, size, 1)

    # framework.fp8_param_gather: the decoder layers' GEMM weights gathered in FP8 (fp8_gathered_params)
    fp8_gather = fw.fp8_param_gather and precision == "fp8" and L.zero in (1, 2)
    fp8_stage = [fp8_gathered_params(spec, L, i) if fp8_gather else 0.0 for i in range(L.pp)]
    fp8_held = [fp8_stage[i] + fp8_stage[L.pp - 1 - i] for i in range(L.pp)] if dualpipe else fp8_stage  # as `held`

    v_params = spec.padded_vocab(L.tp) * spec.hidden // L.tp  # the embedding / LM head per TP rank
    # DualPipe: a rank holds two stages' weights and reduces both stages' gradients (each over the 2 dp ranks holding
    # that stage: the bytes per rank of one dp group's reduction, the group's extra ranks not priced)
    held = [tuple(a + b for a, b in zip(dense[i], dense[L.pp - 1 - i], strict=True)) for i in range(L.pp)] if dualpipe else dense
    for i, (d, e) in enumerate(held):
        grads = [("dp", d, L.dp * L.cp)] if L.ep == 1 else [("dp", d, L.dp * L.cp), ("edp", e, edp)]
        t_grad = t_after = 0.0
        for group, params, size in grads:  # the two groups' reductions one after the other (Megatron-core)
            if L.zero in (0, 1, 2) and not (fw.grad_bucket_sync and overlap and L.zero in (0, 1)):
                t_grad += reduce_s(group, params, size)
            if L.zero in (1, 2):
                t_after += exchange_s(group, params, size, fp8_held[i] if group == "dp" else 0.0)
        gather_window = t_f[i] if fw.param_gather_overlap else 0.0
        gather_late, gather_slow = behind(t_after, gather_window, interference)
        if fw.grad_bucket_sync and overlap and L.zero in (0, 1) and L.dp * L.cp > 1:
            # the last backward in gradient order: head (+ loss), the stage's layers (recompute included: each
            # checkpointed block reruns inside its backward), the embedding; the layers' parameters spread evenly
            head_p = v_params if i == L.pp - 1 and not (spec.tied and L.pp == 1) else 0
            emb_p = v_params if i == 0 else 0
            n_layers = sum(n[i] for _, n in kinds)
            body = max(0, d - head_p - emb_p)
            segments = [(head_p, (head.bwd + loss_b + mtp_b) if i == L.pp - 1 else 0.0)]
            per_layer = accum[i] / n_layers if n_layers else 0.0  # the engine's own backward passes, spread over the layers
            segments += ([(body / n_layers, c.bwd + per_layer) for c, n in reversed(kinds) for _ in range(n[i])]
                         if n_layers else [(body, accum[i])])
            segments.append((emb_p, emb.bwd if i == 0 else 0.0))
            bucket = fw.reduce_bucket_params

            def one_bucket(p: float, d=d, bucket=bucket) -> float:  # its collective (count: full buckets per step) + copies
                count = max(1, int(d // p)) if bucket and p >= bucket else 1
                return reduce_s("dp", p, L.dp * L.cp, count) + p * fw.grad_bucket_copy_bytes / hbm

            grad_late, t_grad, hidden = bucket_sync_tail(segments, bucket, one_bucket)
            grad_slow = interference * hidden
            grad_late += grad_slow
        else:
            window = per_stage(i, lambda c: c.grad_window) if overlap else 0.0  # the last backward (recompute not counted)
            grad_late, grad_slow = behind(t_grad, window, interference)
        tail = grad_late + gather_late + (tied if i in tied_stages else 0.0)  # the tied all-reduce: serial with it
        if tail >= dp_exposed:
            dp_exposed, slowed_dp = tail, grad_slow + gather_slow
        t_dp = max(t_dp, t_grad + t_after)
    pricer.colls[:] = _dedupe(pricer.colls)
    n_local = sum(held[slowest])
    d_s, e_s = held[slowest]
    copies = 2 if dualpipe else 1  # DualPipe's two copies of each stage share its optimizer shards (ZeRO over 2 dp)
    opt_params = (d_s / dense_shards(L, fw) + e_s / edp) / copies if L.zero >= 1 else n_local
    adam_bytes = fw.adam_step_bytes or ADAM_STEP_BYTES[fw.optimizer_state]
    optimizer = opt_params * adam_bytes / device.memory_rate("optimizer", precision)
    if L.zero == 1:  # the ZeRO-1 engine's own passes over its shard in step() (framework.shard_step_bytes)
        optimizer += opt_params * fw.shard_step_bytes / hbm
    if bf16:  # the bf16 engine's own passes over its whole fp32 gradient buffer in step() (grad norm, zeroing)
        optimizer += n_local * fw.bf16_step_grad_bytes / hbm
    if fp16 and L.zero == 1:  # the fp16 ZeRO-1 engine's own passes: per stage parameter and per shard parameter
        optimizer += (n_local * fw.fp16_param_bytes + opt_params * fw.fp16_shard_bytes) / hbm
    if fw.grad_clip:  # clip_grad_norm_ over the rank's gradients (module docstring, "Gradient clipping")
        grad_params = opt_params if L.zero >= 2 else n_local
        optimizer += CLIP_PASSES * grad_params * grad_bytes / hbm
        optimizer += pricer.price("amax", "all_reduce", AMAX_BYTES, L.tp * L.cp * L.dp, 1)
    if fw.fp8(precision) == "torchao_fsdp_fp8" and L.zero == 3 and L.dp * L.cp > 1 and not spec.mla:
        # torchao's precompute_float8_dynamic_scale_for_fsdp after the step (module docstring, "FP8 amax")
        layers = sum(n[slowest] for _, n in kinds)
        fp8_shard = layers * sum(gemm_widths(spec, L.tp)) / (L.dp * L.cp)
        optimizer += fp8_shard * FP32_MASTER / hbm
        amaxes = layers * len(gemm_widths(spec, L.tp))  # one per float8 weight
        optimizer += pricer.price("dp", "all_reduce", AMAX_BYTES * amaxes, L.dp * L.cp, 1)
    # ---- circuits: dimension -> (group size, phases per step), see estimator/parallel/circuits.py
    counts = {g: sum(c["count_per_step"] for c in pricer.colls if c["group"] == g) for g in ("tp", "etp", "ep", "cp")}
    z3_gathers = sum(m * max(n) * c.z3.gathers for c, n in kinds)
    # the experts' TP collectives ride the TP dimension's circuits (the same ranks when etp = tp)
    circuits = plan(fabric, {"tp": (L.tp, counts["tp"] + counts["etp"]), "cp": (L.cp, counts["cp"]), "ep": (L.ep, counts["ep"] / 2),
                             "pp": (L.pp, 2 * m * v), "dp": (L.dp * L.cp, 1 + z3_gathers),
                             "edp": (edp, 1 if L.ep > 1 else 0)})
    total = pipeline + dp_exposed + optimizer + circuits.reconfig_s
    # ---- accounting (per stage of the slowest pipeline rank)

    def slowest_sum(value) -> float:  # per microbatch on the slowest rank (DualPipe: the mean of its two stages)
        return at_rank([per_stage(i, value) for i in range(L.pp)], slowest)

    def slowest_at(x) -> float:
        return at_rank(x, slowest)

    emb_tp = slowest_at([tp_emb if i == 0 else 0.0 for i in range(L.pp)])
    comp_f = slowest_sum(lambda c: c.layer.fwd) + slowest_at(ends_f) - emb_tp + slowest_at(copies_f)
    comp_b = slowest_sum(lambda c: c.layer.bwd + c.rc) + slowest_at(ends_b) + slowest_at(accum) + slowest_at(copies_b)
    compute = m * (comp_f + comp_b) + optimizer
    if parts_out is not None:
        parts_out.update(compute_terms(spec, L, kinds, parts, slowest, dualpipe, (loss_f, loss_b), (mtp_f, mtp_b),
                                       slowest_at(accum), (slowest_at(copies_f), slowest_at(copies_b)), optimizer,
                                       (comp_f, comp_b, compute)))
    ep_comm = m * slowest_sum(lambda c: c.ep_runs * c.ep_one)
    ep_exposed = m * slowest_sum(lambda c: c.ep_exposed)
    tp_comm = m * (slowest_sum(lambda c: c.tp_layer) + emb_tp)
    tp_exposed = m * (slowest_sum(lambda c: c.tp_f + c.tp_b) + emb_tp)
    cp_exposed = m * slowest_sum(lambda c: c.cp_f + c.cp_b)
    zero3 = m * (slowest_sum(lambda c: c.z3.fwd_exposed + c.z3.bwd_exposed) + z3_first + z3_last + z3_held.gather
                 + z3_held.reduce)
    p2p = 2 * m * t_p2p if dualpipe else (m + (L.pp - 1) / v) * 2 * v * t_p2p
    p2p_exposed = 0.0 if dualpipe else p2p  # DualPipe's sends run behind the merged chunks (docstring)
    part_gather = m * (slowest_at(gather_f) + slowest_at(gather_b))  # boundary TP all-gathers (and DeepSpeed's meta sends), exposed
    z2_exposed, z2_comm = m * slowest_at(late_z2), m * slowest_at(rs_z2)  # ZeRO-2, in the slowest stage's slots
    amax = m * (slowest_sum(lambda c: c.amax) + slowest_at(amax_delayed))  # FP8 amax all-reduces, exposed whole
    exposed = tp_exposed + ep_exposed + p2p_exposed + part_gather + dp_exposed + z2_exposed + cp_exposed + zero3 + amax + circuits.reconfig_s
    gb = L.global_batch
    scale = gb * L.tp * L.cp / L.micro_batch_size  # captured FLOPs are per rank and microbatch
    ends_flops = emb.fwd_flops + emb.bwd_flops + head.fwd_flops + head.bwd_flops
    mtp_flops = spec.mtp * (mtp.fwd_flops + mtp.bwd_flops + last.layer.fwd_flops + last.layer.bwd_flops + ends_flops) if mtp else 0.0
    model_flops = scale * (per_model(lambda c: c.layer.fwd_flops + c.layer.bwd_flops) + ends_flops + mtp_flops)
    hw_flops = model_flops + scale * per_model(lambda c: c.rc_flops)
    peak = device.tensor_peak(precision)
    mem = memory(spec, L, grad_bytes, fw, precision == "fp8")
    metrics = {
        "layout": L.label(), "tp": L.tp, "cp": L.cp, "pp": L.pp, "dp": L.dp, "ep": L.ep, "zero": L.zero,
        "micro_batch_size": L.micro_batch_size, "microbatches": m, "global_batch": gb,
        "sequence_parallel": L.sequence_parallel, "recompute": L.recompute, "placement_order": L.order,
        "virtual_stages": v, "stage_layers": ",".join(str(n) for n in stages), "slowest_stage": slowest,
        "framework": fw.name, "loss_kernel": fw.loss_kernel,
        "loss_time_s": m * (loss_f + loss_b),  # the LM loss on the last stage, per step (inside compute there)
        "iter_time_s": total, "compute_time_s": compute, "exposed_comm_time_s": exposed,
        "exposed_comm_share": exposed / total, "bubble_time_s": bubble, "tp_comm_time_s": tp_comm,
        "pp_p2p_time_s": p2p, "p2p_gather_time_s": part_gather, "dp_comm_time_s": t_dp + z2_comm, "dp_exposed_time_s": dp_exposed + z2_exposed,
        "zero3_exposed_time_s": zero3, "optimizer_s": optimizer,
        "zero3_comm_time_s": m * (slowest_sum(lambda c: c.z3.comm) + z3_held.comm + z3_root.comm),
        "zero3_copy_time_s": m * slowest_sum(lambda c: c.z3.copies),  # FSDP's compute-stream copies (in zero3_exposed)
        "interference_s": m * (slowest_sum(lambda c: c.z3.interference) + slowest_at(slowed_z2)) + slowed_dp,
        "cp_comm_time_s": m * slowest_sum(lambda c: c.cp_comm), "cp_exposed_time_s": cp_exposed,
        "forward_s": m * comp_f, "backward_s": m * comp_b,
        "fp8_amax_time_s": amax, "tied_grad_time_s": tied,
        "comm_time_s": (tp_comm + ep_comm + p2p + part_gather + t_dp + z2_comm + amax + m * slowest_sum(lambda c: c.cp_comm + c.z3.comm)
                        + m * (z3_held.comm + z3_root.comm)
                        + (tied if slowest in tied_stages else 0.0)),
        "ep_comm_time_s": ep_comm, "ep_exposed_time_s": ep_exposed, "reconfig_time_s": circuits.reconfig_s,
        "circuit_reconfigs_per_step": circuits.reconfigs_per_step, "circuit_plan": circuits.label(),
        "tokens_per_s": gb * spec.seq_len / total, "samples_per_s": gb / total,
        "model_flops_per_step": model_flops, "mfu": model_flops / (total * L.gpus * peak),
        "tflops_per_gpu": hw_flops / total / L.gpus / 1e12,
        "params": spec.params(), "memory_peak_stage": mem.pop("stage"),
        **{f"memory_{k}_bytes": val for k, val in mem.items()},
    }
    return metrics, pricer.colls


def compute_terms(spec: TransformerSpec, L: Layout, kinds: list, parts: dict[str, PartTimes], slowest: int,
                  dualpipe: bool, loss: tuple[float, float], mtp: tuple[float, float], accum: float,
                  copies: tuple[float, float], optimizer: float, totals: tuple[float, float, float]) -> dict[str, Any]:
    """What :func:`step_time` sums ``compute_time_s`` from, on the slowest pipeline rank, per microbatch: each layer
    kind (its spec, its :class:`LayerCost`, its layers on each of the rank's stages), the pipeline stages the rank runs
    with their weights (DualPipe: two stages, half each), the embedding and LM head parts, the loss, multi-token
    prediction, the gradient-accumulation passes and boundary copies; then the optimizer step per step and the
    step's own per-microbatch forward, backward and per-step compute totals (``totals``)."""
    stages = [(slowest, 0.5), (L.pp - 1 - slowest, 0.5)] if dualpipe else [(slowest, 1.0)]
    specs = [k for k, n in layer_kinds(spec, L) if sum(n)]
    return {"microbatches": L.microbatches, "pp": L.pp, "stages": stages, "slowest_stage": slowest,
            "kinds": [(k, c, n) for k, (c, n) in zip(specs, kinds, strict=True)], "parts": parts,
            "loss": loss, "mtp": mtp, "accum": accum, "copies": copies, "optimizer": optimizer,
            "forward": totals[0], "backward": totals[1], "compute": totals[2]}


def _dedupe(colls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per distinct (group, collective, bytes) priced (per-stage loops price the same
    collective once per stage); counts are per step on one pipeline, so the first row stands."""
    seen, out = set(), []
    for c in colls:
        key = (c["group"], c["collective"], c["bytes"], c["count_per_step"])
        if key not in seen:
            seen.add(key)
            out.append({**c, "idx": len(out)})
    return out
