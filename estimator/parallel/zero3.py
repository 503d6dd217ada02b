"""ZeRO-3 per decoder layer and microbatch: the weights' all-gathers and the gradients'
reduce-scatters of the layer's units, and how much of them the layer's compute hides, as the
framework's engine runs them (``framework.zero3_*``, :mod:`~estimator.parallel.framework`; every
value cited in ``conf/framework/*.yaml``).

* Units (:func:`~estimator.parallel.memory.zero3_units`): the whole layer (FSDP, Megatron-core) or
  each Linear (DeepSpeed fetches per module). A unit is gathered before its forward and again for
  its backward. With full recompute the backward first re-runs the forward: one gather serves both
  when the checkpointed block runs inside its unit (``zero3_max_reuse_params`` null); an engine
  that releases parameters by reuse distance gathers the unit for the recompute and keeps it for
  the backward only if the parameters used in between -- the later units' recompute and backward,
  twice their parameters -- stay under ``zero3_max_reuse_params``; otherwise it gathers it again.
* Overlap, one unit ahead: a unit's gather runs while the previous unit computes, so it is exposed
  beyond the compute of one unit's share of the layer (the layer's compute split by parameters).
  Overlap is not free: NCCL's kernels hold SMs and HBM bandwidth, so the compute they overlap runs
  slower, by ``interference`` (``parallelism.comm_interference``) of the overlapped time.
* Prefetch gated by the live parameters (``zero3_prefetch_below_live``, DeepSpeed v0.3.13-v0.5.4):
  the engine prefetches only when no gather is in flight and the parameters it holds gathered
  (fetched, prefetched, or kept for reuse) are below ``zero3_max_live_params``
  (:func:`prefetched` replays its rule over the unit trace). A unit not prefetched is gathered
  when it is needed, exposed whole. The engine hooks every module, so a module without parameters
  between two units is a prefetch chance too (stage3.py v0.3.13 l.1062-1152: the pre-forward hook of
  every module calls prefetch_next_sub_modules; fetch_sub_module synchronises only for a module with
  parameters): Megatron's attention runs FusedScaleMaskSoftmax and Dropout modules between its QKV
  and output Linears, so once QKV is released the output Linear can be prefetched there (forward and
  recompute; its gather then hides behind its own share of the layer, as any prefetched unit's). The
  chance at the layer's own pre-forward hook (before the input LayerNorm) is not one: only the norm
  runs before QKV. Pre-backward hooks of parameterless modules are not replayed.
* A parameter kept gathered through the whole forward and backward (``zero3_held_embedding``: the
  tied word embedding as an external parameter of the top module) counts against
  ``zero3_max_live_params`` at every prefetch (:func:`held_params`), and is gathered and its gradient
  reduced once per microbatch, exposed (:func:`held_cost`).
  In backward the same links also carry the unit's gradient reduction (in ``reduce_bucket_params``
  buckets, or one per unit): a reduce-scatter, or with ``zero3_grad_collective: all_reduce`` an
  all-reduce of the whole bucket (DeepSpeed 2021: flattened, divided and copied back, 3 x 2 bytes
  of HBM traffic per gradient byte). The first unit of each pass waits for its gather whole
  (:attr:`Zero3Layer.first_gather`, :attr:`Zero3Layer.last_gather`).
* Tensor-list collectives (``zero3_list_collectives``, DeepSpeed v0.3.13-v0.5): every all-gather
  and reduce-scatter costs, besides NCCL's time (priced by the fabric), one eager copy per rank of
  the group on the host (``n x device.launch_s``: c10d copies each slice between the list and its
  flat buffer) and HBM copies on the
  communication stream at the device's memory bandwidth: the zero-filled gather buffer plus every
  slice copied out of c10d's flat buffer (3x the gathered bytes), every gradient slice copied in
  (2x the bytes). An engine whose Python builds the list itself adds ``zero3_gather_host_per_rank_s``
  per rank to each all-gather's host time (DeepSpeed 2021: a ``narrow`` view per rank); an all-reduce
  of a flattened bucket has no list and no per-rank host time.
* Flat-buffer engines' own copies (``fsdp_version``, PyTorch FSDP; :func:`engine_copies`, sources there): FSDP
  casts each unit's fp32 shard to 16 bits (FSDP2 also copies it into the all-gather buffer) on a side stream ahead of
  the all-gather, serial with it, so that time joins the gather's (1/n of the unit: the rank's shard); FSDP2 copies
  the gathered buffer out into the unit's parameters on the compute stream after every all-gather, and copies the
  unit's 16-bit gradients into the reduce-scatter buffer in the reduction dtype on (or waited for by) the compute
  stream before every reduce-scatter; FSDP1's parameters are views of its flat buffer (no copy-out), but autograd
  concatenates their gradients into the flat gradient on the compute stream, and its post-backward stream casts that
  gradient to the reduction dtype and pre-divides it before the reduce-scatter, serial with it. All at the device's
  elementwise memory rate; compute-stream copies are added to the unit's compute, exposed, and lengthen the window
  that hides the next gather. Work on the rank's shard after the reduction (post-divide, cast back, accumulation)
  is not priced (1/n of the unit, on the reduction's stream). FSDP1 gathering fp32 parameters under torch autocast
  (``fsdp_param_bytes`` 4: Composer's mixed precision ``DEFAULT`` up to v0.13.1) moves 4 bytes per parameter in each
  all-gather and instead casts every weight to bf16 on the compute stream at each forward execution (the recompute's
  too), casts the bf16 weight gradients back to fp32 and concatenates fp32 gradients, all added to the unit's compute
  and exposed like the other compute-stream copies. FSDP2 with torchao's float8 all-gather (``framework.fp8_kernels=
  torchao_fsdp_fp8`` under ``precision=fp8``) gathers one byte per parameter, its side-stream cast writes float8 and
  its copy-out moves float8 bytes (:data:`FP8_GATHER_BYTES`, :func:`engine_copies`).
* A model whose attention synchronises the host with the device (``attention_host_sync``: flash-attn 0.2.x's
  ``unpad_input`` under MosaicGPT, conf/framework/fsdp.yaml) lets the host run at most to the next attention ahead of
  the GPU: the next unit's gather is issued only once the host has passed this layer's attention, so it hides behind
  the layer's compute from the attention on (``issue_after``: the share before it, the QKV projection by FLOPs, ln_1's
  few FLOPs left out), in the forward and in the full recompute that opens each unit's backward (BACKWARD_POST issues the previous
  unit's gather in the post-backward hook, which the host reaches after the recompute's attention). The same sync
  bounds the gathered units to the running one and the next (no CPU run-ahead), as ``zero3_live`` counts.
* Host work between units (``zero3_sync_per_fetch``): an engine that synchronises the device
  before each unit leaves the GPU idle while the host enqueues the next gather, so that host time
  is exposed whole; otherwise the host runs ahead and only host time beyond the unit's compute is.
  Of that host time, c10d's per-rank copies are launched after the NCCL kernel (PyTorch 1.7/1.8
  ``ProcessGroupNCCL::allgather``: ``collective()`` enqueues ``ncclAllGather`` inside its NCCL group,
  then its ``post`` callback calls ``outputTensors[i][j].copy_(outputFlattened[i][j], true)`` per rank
  on the NCCL stream), so the gather runs while the host launches them: a gather's own time counts
  only beyond those ``n x device.launch_s`` (the engine's list building, ``zero3_gather_host_per_rank_s``,
  comes before the NCCL launch and does not overlap it).
  A reduce-scatter is enqueued after its unit's backward kernels, so its host time hides behind
  them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from estimator.compute.device import DeviceProfile
from estimator.errors import EstimatorError
from estimator.parallel.framework import Framework
from estimator.parallel.layout import Layout
from estimator.parallel.memory import WEIGHT_BYTES, zero3_units
from estimator.parallel.overlap import behind
from estimator.parallel.spec import TransformerSpec

GATHER_COPIES = 3  # HBM bytes per gathered byte: zero-filled buffer (write) + slice copy-out (read + write)
REDUCE_COPIES = 2  # per reduced byte: slice copy-in (read + write)
ALL_REDUCE_COPIES = 6  # per reduced byte: flatten, divide by the world size, copy back (each read + write)


FP32_MASTER = 4  # FSDP's sharded parameters stay fp32 under mixed precision (conf/framework/fsdp.yaml optimizer_state)
# torchao's float8 all-gather (framework.fp8_kernels=torchao_fsdp_fp8: Float8LinearConfig enable_fsdp_float8_all_gather
# with precompute_float8_dynamic_scale_for_fsdp): FSDP2 gathers each decoder Linear weight as float8 bytes
# (pytorch/ao@890e0ac8 torchao/float8/fsdp_utils.py l.218-236 fsdp_pre_all_gather returns float8_tensor._data, one byte
# per element, and the scale as metadata). A layer unit's norm weights (2 h of its ~12 h^2 parameters) still go in
# bf16: counted at 1 byte with the rest.
FP8_GATHER_BYTES = 1


@dataclass(frozen=True)
class EngineCopies:
    """HBM bytes an engine moves around its flat-buffer collectives (module docstring), per parameter."""
    gather_in: float = 0.0  # per parameter of the rank's shard, on the all-gather's side stream before each gather
    gather_out: float = 0.0  # per parameter of the unit, on the compute stream after each all-gather
    grad_compute: float = 0.0  # per parameter of the unit, on (or waited for by) the compute stream, each backward
    grad_stream: float = 0.0  # per parameter of the unit, on the reduction's stream before each reduce-scatter
    autocast: float = 0.0  # per parameter of the unit, on the compute stream at each forward execution (recompute too)


def engine_copies(fsdp_version: int | None, grad_bytes: int, param_bytes: int = WEIGHT_BYTES,
                  fp8_gather: bool = False) -> EngineCopies:
    """The copies PyTorch FSDP ``fsdp_version`` (1 or 2; None: not FSDP, none priced) makes, with gradients reduced
    in ``grad_bytes`` per element (16-bit weights and gradients under mixed precision, fp32 sharded parameters) and
    parameters gathered in ``param_bytes`` (``framework.fsdp_param_bytes``; 4: fp32 under autocast, FSDP1 only,
    below). Sources: torch 2.13.0 (commit
    cf30153c4c131c8164ee7798e5022d810682e2cb), torch/distributed/fsdp/; FSDP2 of torch 2.4-2.7 at
    pytorch/pytorch@415cc2628922556efc715d17fa31ac6bab58df36 torch/distributed/_composable/fsdp/_fsdp_collectives.py.
    ``fp8_gather``: FSDP2 all-gathers torchao's float8 weights (:data:`FP8_GATHER_BYTES`, the module docstring)."""
    if fsdp_version == 2 and fp8_gather:
        return EngineCopies(
            # torchao's WeightWithDynamicFloat8CastTensor.fsdp_pre_all_gather (pytorch/ao@890e0ac8
            # torchao/float8/fsdp_utils.py l.218-236) casts the fp32 shard straight to float8 with the precomputed
            # scale (read 4, write 1) and returns its data, which all_gather_copy_in copies in (read 1, write 1)
            gather_in=FP32_MASTER + FP8_GATHER_BYTES + 2 * FP8_GATHER_BYTES,
            # split_with_sizes_copy of the float8 bytes into each parameter (read 1, write 1); fsdp_post_all_gather
            # (l.238-270) wraps them in a Float8Tensor with the scale, no copy
            gather_out=2 * FP8_GATHER_BYTES,
            grad_compute=WEIGHT_BYTES + grad_bytes,  # the gradients are 16-bit as without it (below)
            grad_stream=0.0)
    if fsdp_version == 2:
        return EngineCopies(
            # _fully_shard/_fsdp_collectives.py l.414-423 _get_param_all_gather_inputs: _foreach_copy_ of the fp32
            # shard into a param_dtype buffer (read 4, write 2); l.263-276 all_gather_copy_in: _foreach_copy_ into the
            # all-gather input (read 2, write 2); on all_gather_copy_in_stream in forward / pre-backward
            # (_fsdp_param_group.py l.116-126); 2024's composable FSDP2 the same two: FSDPParam.all_gather_input's
            # _to_dtype_if_needed(self._sharded_param_data, self.param_dtype), then 415cc26's all_gather_copy_in_impl
            gather_in=FP32_MASTER + WEIGHT_BYTES + 2 * WEIGHT_BYTES,
            # l.431-493 foreach_all_gather_copy_out: split_with_sizes_copy from the gathered buffer into each
            # parameter (read 2, write 2), run by wait_for_unshard (_fsdp_param_group.py l.417-488) on the current stream
            gather_out=2 * WEIGHT_BYTES,
            # l.603 + l.778-787 foreach_reduce: chunk_cat of the 16-bit gradients into the reduce_dtype input, on the
            # current stream (415cc26 foreach_reduce: on the reduce-scatter stream, then
            # current_stream.wait_stream(reduce_scatter_stream): the compute stream waits for it)
            grad_compute=WEIGHT_BYTES + grad_bytes,
            # l.812-869 _get_gradient_divide_factors: fp32 / bf16 reduce with ReduceOp.AVG, no divide kernel
            grad_stream=0.0)
    if fsdp_version == 1 and param_bytes == FP32_MASTER:
        # param_dtype None / float32 under torch autocast (Composer's mixed_precision DEFAULT up to v0.13.1,
        # conf/framework/fsdp.yaml fsdp_param_bytes): torch 1.13.1 all-gathers the fp32 shard itself (flat_param.py
        # l.627 / l.766: the low-precision shard only with _uses_param_mixed_precision); torch 1.12.1's explicit
        # param_dtype=float32 (Composer v0.11.1) copies the shard fp32 -> fp32 first (fully_sharded_data_parallel.py
        # _cast_param_shards_to_dtype, 1/n of the unit): not priced
        return EngineCopies(
            # autocast's cast of each weight (and bias) to bf16 at every forward execution, on the compute stream
            # (aten::_to_copy: read 4, write 2); the parameters are views of the flat parameter, not leaves, so
            # autocast's weight cache (leaf tensors only) does not keep them across uses
            autocast=FP32_MASTER + WEIGHT_BYTES,
            # the cast's backward turns each bf16 weight gradient into fp32 (read 2, write 4), then autograd
            # concatenates the fp32 views' gradients into the flat gradient (read 4, write 4)
            grad_compute=WEIGHT_BYTES + FP32_MASTER + 2 * FP32_MASTER,
            # 1.12.1 l.2762-2773 _post_backward_hook, post-backward stream: .to(reduce_dtype) when it differs (read 4,
            # write grad_bytes), then the pre-divide of that copy (read and write grad_bytes)
            grad_stream=(FP32_MASTER + grad_bytes if grad_bytes != FP32_MASTER else 0.0) + 2 * grad_bytes)
    if fsdp_version == 1:
        return EngineCopies(
            # _flat_param.py l.1342-1356 _use_low_precision_shard: _mp_shard.copy_ casts the fp32 shard (read 4,
            # write 2) in pre_unshard, on the pre-unshard stream the unshard stream waits for (_runtime_utils.py
            # l.293-296); l.1440-1480 all-gathers straight into the padded flat parameter, whose views the
            # parameters are: no copy-out
            gather_in=FP32_MASTER + WEIGHT_BYTES,
            # _flat_param.py l.1876-1930: the parameters are torch.split views of the flat parameter, so autograd's
            # SplitWithSizesBackward0 concatenates their 16-bit gradients into the flat gradient (aten::cat: read 2,
            # write 2) on the compute stream
            grad_compute=2 * WEIGHT_BYTES,
            # _runtime_utils.py l.751-764 _post_backward_hook, on the post-backward stream: .to(reduce_dtype) when it
            # differs (read 2, write grad_bytes); l.852 _reduce_grad: the pre-divide (world size >= 2: factor >= 2,
            # algorithms/_comm_hooks/default_hooks.py l.38-41) reads and writes the unit's gradient
            grad_stream=(WEIGHT_BYTES + grad_bytes if grad_bytes != WEIGHT_BYTES else 0.0) + 2 * grad_bytes)
    return EngineCopies()


class Pricer(Protocol):
    def price(self, group: str, collective: str, nbytes: float, size: int, count: float) -> float: ...


@dataclass(frozen=True)
class Zero3Layer:
    fwd_exposed: float  # per layer and microbatch, forward
    bwd_exposed: float  # per layer and microbatch, backward (with its recompute forward)
    first_gather: float  # the forward's first unit, waited for whole (once per stage and microbatch)
    last_gather: float  # the backward's first unit (the layer's last)
    comm: float  # all ZeRO-3 communication of the layer, exposed or not (host time not included)
    gathers: int  # all-gathers of the layer per microbatch
    interference: float = 0.0  # compute slow-down from the overlapped traffic (in fwd/bwd_exposed)
    copies: float = 0.0  # the engine's compute-stream copies (fsdp_version; in fwd/bwd_exposed)


def gather_host(fw: Framework, device: DeviceProfile, size: int) -> tuple[float, float]:
    """(host seconds per all-gather of a list-collective engine -- its per-rank list building and c10d's per-rank
    copy launches --, of which run beside the gather: the copy launches, which c10d issues after the NCCL kernel,
    when the engine synchronises the device before each fetch; module docstring). (0, 0) without list collectives."""
    lists = fw.zero3_list_collectives
    host = size * (device.launch_s + fw.zero3_gather_host_per_rank_s) if lists else 0.0
    during = size * device.launch_s if lists and fw.zero3_sync_per_fetch else 0.0
    return host, during


def gather_s(pricer: Pricer, fw: Framework, params: float, size: int, count: float, pbytes: float, cp: EngineCopies,
             hbm: float) -> tuple[float, float]:
    """(the all-gather of ``params`` per rank in ``pbytes`` per parameter alone, with its list copies
    (``zero3_list_collectives``) and the engine's copy-in added); ``count``: such gathers per step."""
    coll = pricer.price("dp", "all_gather", params * pbytes, size, count)
    return coll, (coll + (GATHER_COPIES * params * WEIGHT_BYTES / hbm if fw.zero3_list_collectives else 0.0)
                  + cp.gather_in * params / size / hbm)


def reduce_copies(fw: Framework) -> int:
    """HBM bytes per reduced gradient byte besides the reduction: a bucket's flatten / divide / copy-back for an
    all-reduce, a list reduce-scatter's copies, none else."""
    if fw.zero3_grad_collective == "all_reduce":
        return ALL_REDUCE_COPIES
    return REDUCE_COPIES if fw.zero3_list_collectives else 0


def held_params(spec: TransformerSpec, L: Layout, fw: Framework) -> float:
    """Parameters per rank that ZeRO-3 keeps gathered through a microbatch's whole forward and backward
    (``framework.zero3_held_embedding``): the tied word embedding (``padded vocab / tp x hidden``) of a
    one-stage model, registered as an external parameter of the top module (module docstring); else 0."""
    if not (fw.zero3_held_embedding and spec.tied and L.pp == 1):
        return 0.0
    return float(spec.padded_vocab(L.tp) * spec.hidden // L.tp)


@dataclass(frozen=True)
class OutsideCost:
    """ZeRO-3 traffic per microbatch of parameters outside the blocks' units (:func:`outside_cost`), exposed whole."""
    gather: float = 0.0  # their all-gather before the forward's first kernel (collective, copies, host)
    reduce: float = 0.0  # their gradient's reduction after the backward's last kernel (collective and copies)
    comm: float = 0.0  # the two collectives alone


def outside_cost(params: float, size: int, fw: Framework, pricer: Pricer, device: DeviceProfile, precision: str,
                 grad_bytes: int, count: float) -> OutsideCost:
    """``params`` parameters per rank, sharded over ``size`` ranks, gathered once before a microbatch's forward and
    their gradient reduced once after its backward (``count`` microbatches per step), with nothing to hide behind:
    both waited for whole. Priced as a block's unit is (:func:`zero3_layer`): the all-gather in ``fsdp_param_bytes``
    with the engine's copy-in (:func:`engine_copies`) and, with ``zero3_list_collectives``, the list copies and host
    time (c10d's copy launches overlapping it under ``zero3_sync_per_fetch``), then the copy-out; the reduction
    (``zero3_grad_collective``) in ``grad_bytes`` with its copies, the engine's gradient copies on either stream
    included (the step waits for both)."""
    hbm = device.memory_rate("elementwise", precision)
    cp = engine_copies(fw.fsdp_version, grad_bytes, fw.fsdp_param_bytes)
    ag, ag_copied = gather_s(pricer, fw, params, size, count, fw.fsdp_param_bytes, cp, hbm)
    red = pricer.price("dp", fw.zero3_grad_collective, params * grad_bytes, size, count)
    host, during = gather_host(fw, device, size)
    gather = host + max(0.0, ag_copied - during) + cp.gather_out * params / hbm
    reduce = red + reduce_copies(fw) * grad_bytes * params / hbm + (cp.grad_compute + cp.grad_stream) * params / hbm
    return OutsideCost(gather, reduce, ag + red)


def held_cost(spec: TransformerSpec, L: Layout, fw: Framework, pricer: Pricer, device: DeviceProfile,
              precision: str, grad_bytes: int, count: float) -> OutsideCost:
    """The all-gather and the gradient reduction of :func:`held_params` once per microbatch (``count``
    microbatches per step, :func:`outside_cost`): gathered by the top module's pre-forward fetch before any compute is
    queued, and its gradient -- complete only when the embedding lookup's backward, the backward's last kernel, has
    run -- reduced in the last bucket, whose reduction the backward's epilogue waits for (module docstring)."""
    v = held_params(spec, L, fw)
    size = L.dp * L.cp
    if not v or size <= 1:
        return OutsideCost()
    return outside_cost(v, size, fw, pricer, device, precision, grad_bytes, count)


def backward_gathers(units: list[float], fw: Framework, recompute: str) -> list[int]:
    """All-gathers of each unit in the backward pass, its recompute forward included (module docstring)."""
    if recompute != "full" or fw.zero3_max_reuse_params is None:
        return [1] * len(units)
    return [1 + (2 * sum(units[i + 1:]) >= fw.zero3_max_reuse_params) for i in range(len(units))]


Event = tuple[int, int, str]  # (layer, unit, pass): pass f forward, r recompute forward, b backward
GAP = -1  # an Event's unit: the pre-forward hook of a module without parameters (a prefetch chance only)


def prefetched(units: list[float], fw: Framework, recompute: str, held: float = 0.0) -> dict[str, list[bool]]:
    """Whether each unit's gather of a layer in the middle of the model was prefetched (issued while an
    earlier unit ran), per pass ``f``, ``r`` (recompute forward, when it gathers apart) and ``b``; a
    ``b`` unit kept since its recompute is not gathered, its flag is True. Without the live-parameter
    gate every unit is prefetched (module docstring). ``held``: parameters kept gathered through the
    whole forward and backward (:func:`held_params`), counted against ``zero3_max_live_params``."""
    k = len(units)
    if not fw.zero3_prefetch_below_live or fw.zero3_max_live_params is None:
        return {p: [True] * k for p in "frb"}
    separate = recompute == "full" and fw.zero3_max_reuse_params is not None

    def forward_of(layer: int, pass_: str) -> list[Event]:
        # the attention's parameterless modules (softmax, dropout) between its QKV and output Linear: a prefetch
        # chance after QKV's release (module docstring)
        events = [(layer, i, pass_) for i in range(k)]
        return events[:1] + [(layer, GAP, pass_)] + events[1:] if k > 1 else events

    def backward_of(layer: int) -> list[Event]:
        rc = forward_of(layer, "r") if separate else []
        return rc + [(layer, i, "b") for i in reversed(range(k))]

    fwd = _replay([e for layer in range(3) for e in forward_of(layer, "f")], units, fw, held)
    bwd = _replay([e for layer in (2, 1, 0) for e in backward_of(layer)], units, fw, held)
    flags = {**fwd, **bwd}
    return {p: [flags.get((1, i, p), True) for i in range(k)] for p in "frb"}


def _replay(trace: list[Event], units: list[float], fw: Framework, base: float = 0.0) -> dict[Event, bool]:
    """DeepSpeed 2021's PartitionedParameterCoordinator over ``trace`` (runtime/zero/stage3.py at v0.3.13:
    fetch_sub_module, prefetch_next_sub_modules, release_sub_module): per event, was its unit gathered
    before it was needed (prefetched, or kept since an earlier use). ``base``: parameters held gathered
    throughout (counted in ``total_available_parameter_numel``, never released inside the trace)."""
    held: dict[tuple[int, int], float] = {}  # gathered or in flight, by (layer, unit)
    flight: set[tuple[int, int]] = set()
    out = {}
    for p, event in enumerate(trace):
        unit, gap = event[:2], event[1] == GAP
        if not gap:  # a module without parameters fetches nothing and does not synchronise
            out[event] = unit in held
            if unit not in held or unit in flight:  # gathered now or waited for: the engine synchronises
                flight.clear()
            held[unit] = units[event[1]]
        if not flight and base + sum(held.values()) < fw.zero3_max_live_params:
            ahead = 0.0
            for later in trace[p + 1:]:
                if later[1] != GAP and later[:2] not in held:
                    held[later[:2]] = units[later[1]]
                    flight.add(later[:2])
                    ahead += units[later[1]]
                    if ahead >= (fw.zero3_prefetch_params or 0.0):
                        break
        if gap:
            continue
        reuse = next((q for q in range(p + 1, len(trace)) if trace[q][:2] == unit), None)
        between = math.inf if reuse is None else sum(units[e[1]] for e in trace[p + 1:reuse] if e[1] != GAP)
        if between >= (fw.zero3_max_reuse_params or 0.0):
            del held[unit]
    return out


def zero3_layer(spec: TransformerSpec, L: Layout, fw: Framework, pricer: Pricer, device: DeviceProfile,
                precision: str, grad_bytes: int, fwd: float, bwd: float, rc: float, count: float,
                interference: float = 0.0, issue_after: float = 0.0) -> Zero3Layer:
    """ZeRO-3 of one layer and microbatch (module docstring); ``fwd``, ``bwd`` and ``rc`` are the layer's
    forward, backward and recompute-forward compute, ``count`` the layer-microbatches per step,
    ``interference`` the compute slow-down per second of overlapped communication (module docstring);
    ``issue_after``: the share of a forward execution the host must wait through before it can issue the next
    unit's gather (``framework.attention_host_sync``: the layer's forward up to its attention), cut from the window
    that hides the gather in the forward and, with full recompute, from the recompute's part of the backward's."""
    units = zero3_units(spec, L, fw.zero3_unit)
    total, size = sum(units), L.dp * L.cp
    b_gathers = backward_gathers(units, fw, L.recompute)
    separate = L.recompute == "full" and fw.zero3_max_reuse_params is not None  # recompute has its own gathers
    lists = fw.zero3_list_collectives
    hbm = device.memory_rate("elementwise", precision)
    host, during = gather_host(fw, device, size)  # per all-gather; ``during`` runs beside it
    reduce_host = size * device.launch_s if lists and fw.zero3_grad_collective == "reduce_scatter" else 0.0

    def gathers_of(u: float) -> int:
        return sum(1 + g for v, g in zip(units, b_gathers, strict=True) if v == u)

    # torchao's float8 all-gather (FP8_GATHER_BYTES)
    fp8_gather = fw.fsdp_version == 2 and fw.fp8(precision) == "torchao_fsdp_fp8"
    pbytes = FP8_GATHER_BYTES if fp8_gather else fw.fsdp_param_bytes
    cp = engine_copies(fw.fsdp_version, grad_bytes, fw.fsdp_param_bytes, fp8_gather)
    ag = {u: gather_s(pricer, fw, u, size, count * gathers_of(u), pbytes, cp, hbm)[1] for u in sorted(set(units))}
    reduce = fw.zero3_grad_collective
    if fw.reduce_bucket_params:  # buckets of reduce_bucket_params, each layer's share of them
        bucket = min(fw.reduce_bucket_params, total * sum(L.stage_layers(spec.layers)) / L.pp)
        rs_layer = pricer.price("dp", reduce, bucket * grad_bytes, size, count * total / bucket) * total / bucket
        rs = {u: rs_layer * u / total for u in units}
    else:
        rs = {u: pricer.price("dp", reduce, u * grad_bytes, size, count * units.count(u)) for u in sorted(set(units))}
    rs = {u: t + (reduce_copies(fw) * grad_bytes + cp.grad_stream) * u / hbm for u, t in rs.items()}

    def beyond(t: float, window: float) -> float:
        return max(0.0, t - window)

    def host_exposed(window: float) -> float:
        return host if fw.zero3_sync_per_fetch else beyond(host, window)

    slowed = 0.0  # the interference charged over the layer's windows

    def exposed(gather: float, other: float, window: float, ahead: bool) -> float:
        """A gather and the reduction behind it on the same links against their compute window
        (:func:`~estimator.parallel.overlap.behind`); a gather not prefetched is waited for whole."""
        nonlocal slowed
        late, slow = behind(gather + other, window, interference) if ahead else behind(other, window, interference)
        slowed += slow
        return late if ahead else gather + late

    pf = prefetched(units, fw, L.recompute, held_params(spec, L, fw))
    left = {u: max(0.0, t - during) for u, t in ag.items()}  # each gather after the host's copy launches
    exp_f = exp_b = copied = 0.0
    for i, (u, g) in enumerate(zip(units, b_gathers, strict=True)):
        # the engine's compute-stream copies: after each gather, and the gradient's before its reduction
        out_u, grad_u = cp.gather_out * u / hbm, cp.grad_compute * u / hbm
        cast_u = cp.autocast * u / hbm  # autocast's weight casts, each forward execution (the recompute's: in r_u)
        recast = cast_u if L.recompute == "full" else 0.0
        f_u = fwd * u / total + out_u + cast_u
        b_u, r_u = bwd * u / total + grad_u + (g - 1) * out_u, rc * u / total + recast
        if not separate:
            b_u += out_u  # the backward's one gather (with the recompute: r_u's)
        else:
            r_u += out_u
        exp_f += out_u + cast_u
        exp_b += g * out_u + grad_u + recast
        copied += (1 + g) * out_u + grad_u + cast_u + recast
        exp_f += host_exposed(f_u) + exposed(left[u], 0.0, f_u * (1 - issue_after), pf["f"][i])
        if separate:  # the recompute forward's gather, and the backward's if the unit was released meanwhile
            again = g == 2
            exp_b += host_exposed(r_u) + exposed(left[u], 0.0, r_u, pf["r"][i])
            exp_b += (host_exposed(b_u) if again else 0.0) + exposed(left[u] if again else 0.0, rs[u], b_u, pf["b"][i])
        else:
            after = issue_after if L.recompute == "full" else 0.0  # the recompute's own sync (module docstring)
            exp_b += host_exposed(b_u + r_u) + exposed(left[u], rs[u], b_u + r_u * (1 - after), pf["b"][i])
        exp_b += beyond(reduce_host, b_u)  # the reduce-scatter's host time, behind the unit's backward kernels
    comm = sum((1 + g) * ag[u] + rs[u] for u, g in zip(units, b_gathers, strict=True))
    return Zero3Layer(exp_f, exp_b, ag[units[0]], ag[units[-1]], comm, len(units) + sum(b_gathers), slowed,
                      copied)


def zero3_root(spec: TransformerSpec, L: Layout, fw: Framework, pricer: Pricer, device: DeviceProfile, precision: str,
               grad_bytes: int, count: float) -> OutsideCost:
    """FSDP2's root unit per microbatch (``framework.zero3_root_unit``, :func:`outside_cost`): the parameters
    outside the transformer blocks -- token embedding, final norm, LM head, per TP rank -- which torchtitan shards
    with ``fully_shard(model)`` on the root module (pytorch/torchtitan@0da8901b
    torchtitan/models/llama/parallelize_llama.py l.346-369, @820504e2 torchtitan/models/llama3/parallelize_llama.py
    l.344-367: only the blocks get units of their own). Forward: the root's all-gather is the step's first collective,
    before the embedding, with nothing to hide behind: waited for whole, with its copies (:func:`engine_copies`).
    FSDP2 never reshards the root after forward (torch/distributed/_composable/fsdp/_fsdp_state.py
    ``FSDPState._lazy_init``, torch 2.4-2.7: "For the root, do not reshard after forward since for training, the
    parameters would be freed and all-gathered immediately", ``post_forward_mesh_info = None``): no backward gather.
    Backward: the root's inputs (token ids) need no gradient, so no post-backward hook fires for it and its gradients
    are reduce-scattered in ``_root_post_backward_final_callback`` after the whole backward, which the step waits
    for: exposed whole, with the chunk_cat copy into the reduce-dtype buffer. ``count``: microbatches per step."""
    if L.pp > 1:
        raise EstimatorError(f"framework.zero3_root_unit=true: FSDP2's root unit is modelled without pipeline "
                             f"parallelism, got parallelism.pp={L.pp} (need 1)")
    size = L.dp * L.cp
    params = (1 if spec.tied else 2) * spec.padded_vocab(L.tp) * spec.hidden / L.tp + spec.hidden
    # gathered in fsdp_param_bytes, not float8: the embedding and the LM head stay 16-bit (torchtitan's float8
    # converter skips "output")
    return outside_cost(params, size, fw, pricer, device, precision, grad_bytes, count)
