"""Transformer Engine's FP8 amax all-reduces across ranks, by scaling recipe (``framework.fp8_recipe``).

Sources: NVIDIA/TransformerEngine@d0067d0d (TE), NVIDIA/Megatron-LM@d98e8a64 (MC). Each all-reduce carries
fp32 amaxes (:data:`AMAX_BYTES`), so it is latency-bound: priced on its group's fabric by the tool's collective
pricing (alpha term included), and exposed whole, since TE issues every one of them blocking on the compute stream.

* ``delayed`` (``DelayedScaling``, ``reduce_amax=True`` by default, TE quantization.py l.137-146): every TE module
  appends its forward amaxes (``3`` per GEMM: input, weight, output) and backward amaxes (``2`` per GEMM: output
  gradient, input gradient; TE module/base.py l.1139) to one global buffer per recipe and group, once, the first
  time it runs (quantization.py l.525-564); the buffer is never emptied, so it holds every delayed-scaling module
  of the rank. The whole forward buffer is concatenated and all-reduced (MAX, ``async_op=False``,
  quantization.py l.647-654, l.656-684) when the outermost ``fp8_autocast`` exits (l.772-782), the backward
  buffer in the backward of the autocast's first FP8 module (module/linear.py l.1442, l.1467-1469;
  layernorm_mlp.py l.917, l.1810). Megatron-core wraps each TransformerBlock's forward in one outer autocast
  for the delayed recipe (MC transformer/transformer_block.py l.619-629), so: one forward and one backward
  all-reduce per model chunk (with layers) and microbatch, of ``4 x 3 x GEMMs`` and ``4 x 2 x GEMMs`` bytes
  of all the stage's layers. The group: MC passes ``get_amax_reduction_group(with_context_parallel=True,
  tp_only_amax_red=False)`` (fp8_utils.py l.857-866), the ``tp x cp x dp`` ranks (parallel_state.py
  l.1877-1884; ``tp_only_amax_red`` would narrow it to ``tp x cp``, not modelled). Other frameworks using TE
  pass no group (the world), the same ranks when ``pp = 1``.
* ``tensorwise`` (``Float8CurrentScaling``): each quantize computes its tensor's amax; a quantizer with
  ``with_amax_reduction`` all-reduces it (4 bytes) over its group and waits before scaling and casting
  (csrc/quantizer.cpp l.1008-1028). TE sets that group only where the tensor is sharded over TP by sequence
  parallelism: the input of a column-parallel Linear (forward: module/linear.py l.351-355,
  layernorm_linear.py l.233-237, layernorm_mlp.py l.406-410) and the output gradient of a row-parallel one
  (backward: linear.py l.818-825, layernorm_linear.py l.732-740, layernorm_mlp.py l.1154-1158); none without
  sequence parallelism or at ``tp = 1`` (module/_common.py l.20-32). Per layer: the QKV input (MLA: the query
  and key/value up-projections' inputs, 2) and the MLP's fc1 input forward, the attention projection's and
  fc2's output gradients backward (a MoE layer: its shared expert's only; TE's GroupedLinear sets no
  reduction group). A full recompute repeats the forward's.
* ``blockwise`` (``Float8BlockScaling``): per-block scales, no global amax: ``Float8BlockQuantizer`` has no
  ``with_amax_reduction``, so TE's ``set_quantizer_amax_reduction_group`` leaves it alone (module/_common.py
  l.30; tensor/float8_blockwise_tensor.py l.28): no all-reduce.

Not modelled: FP8 attention (``fp8_dpa``)'s amaxes, weight amaxes reduced after the optimizer step with FP8
parameters, the delayed recipe's recompute bookkeeping, and the small scale-update kernel after each reduction.
"""

from __future__ import annotations

from estimator.parallel.layout import Layout
from estimator.parallel.sac import gemm_widths
from estimator.parallel.spec import TransformerSpec

AMAX_BYTES = 4  # one fp32 amax (TE's amax_history / amax buffers are float32: quantization.py, csrc/quantizer.cpp)
DELAYED_FWD_AMAXES = 3  # per GEMM: input, weight, output (TE module/base.py l.1139 num_gemms * 3)
DELAYED_BWD_AMAXES = 2  # per GEMM: output gradient, input gradient (l.1139 num_gemms * 2)


def te_gemms(spec: TransformerSpec, ep: int) -> int:
    """TE GEMMs of one decoder layer on a rank (each Linear one, a GroupedLinear one per local expert): QKV (MLA:
    its down- and up-projections) and the attention projection; fc1 and fc2 of the dense MLP, or of each local
    expert and the shared expert."""
    attention = (5 if spec.mla[0] else 4) if spec.mla else 2  # MLA: q_down (with q_lora), q_up, kv_down, kv_up, proj
    if spec.experts:
        return attention + 2 * (spec.experts // ep) + (2 if spec.shared_ffn else 0)
    return attention + 2


def tensorwise_per_layer(spec: TransformerSpec, L: Layout) -> tuple[int, int]:
    """(forward, backward) 4-byte TP all-reduces of one layer per microbatch under current scaling (module
    docstring): column-parallel inputs forward, row-parallel output gradients backward; none without sequence
    parallelism or at ``tp = 1``."""
    if L.tp == 1 or not L.sequence_parallel:
        return 0, 0
    mlp = (1 if spec.shared_ffn else 0) if spec.experts else 1
    return (2 if spec.mla else 1) + mlp, 1 + mlp


def delayed_bytes(spec_layers: list[tuple[TransformerSpec, int]], ep: int) -> tuple[float, float]:
    """(forward, backward) bytes of the delayed recipe's fused amax all-reduce on a rank holding ``n`` layers of
    each kind ``(spec, n)``: every amax of every TE module it holds (module docstring)."""
    gemms = sum(n * te_gemms(spec, ep) for spec, n in spec_layers)
    return AMAX_BYTES * DELAYED_FWD_AMAXES * gemms, AMAX_BYTES * DELAYED_BWD_AMAXES * gemms


# ---- torchao's float8 tensor parallelism (framework.fp8_kernels=torchao / torchao_fsdp_fp8 with TP) -----------------
# torchtitan swaps its TP plan to torchao's float8 styles whenever the float8 converter runs tensorwise scaling:
# pytorch/torchtitan@3faaa1a0 torchtitan/parallelisms/parallelize_llama.py l.132-152, @9dec370a l.148-168 (on with
# float8), @820504e2 torchtitan/models/llama3/parallelize_llama.py l.153-171 (``enable_float8_tensorwise_tp``: every
# float8 recipe but rowwise); the block plan l.179-197: PrepareFloat8ModuleInput before the attention and the MLP
# (sequence-sharded norm output -> replicated), Float8ColwiseParallel on wq / wk / wv / w1 / w3, Float8RowwiseParallel
# (output Shard(1)) on wo / w2. torchao's styles (pytorch/ao@6243040807b9 torchao/float8/float8_tensor_parallel.py):
# * the all-gathers carry float8. PrepareFloat8ModuleInput casts the sequence-sharded input before the redistribute to
#   Replicate (l.170-179 docstring: "the float8 cast happens before the all-gather"); Float8RowwiseParallel's output
#   passes NoopFwToFloat8BwDynamic after its redistribute to Shard(1) (l.142-150), so the backward casts the output
#   gradient to float8_e5m2 first and the redistribute's backward all-gathers it in float8. The reduce-scatters
#   (the row-parallel outputs forward, the gathered inputs' gradients backward) carry the 16-bit GEMM outputs.
# * every cast of a DTensor takes a global amax: torchao/float8/float8_utils.py l.57-69 tensor_to_amax is
#   torch.max(torch.abs(x)), which on a sharded DTensor leaves a partial max that the scale's clamp all-reduces over
#   the TP ranks (the same 4-byte latency-bound collective as TE's current scaling above). Per block and microbatch:
#   forward, the two PrepareFloat8ModuleInput inputs (float8_tensor_parallel.py l.170-220), the two row-parallel
#   inputs (Float8RowwiseParallel._prepare_input_fn l.113-135: the attention output and the MLP's gated product,
#   sharded on the last dim) and every TP-sharded weight (torchao/float8/float8_linear.py l.301-339:
#   Float8Linear.forward casts self.weight with _get_weight_scale / _cast_weight_to_float8_t before the matmul);
#   backward, every GEMM's output gradient (NoopFwToFloat8BwDynamic in both styles' _prepare_output_fn, l.83-87,
#   l.146-150). The backward's own casts (float8_linear.py l.140-240) find those operands already float8
#   (tensor_already_casted_to_fp8) and cast nothing. With FSDP's float8 all-gather (torchao_fsdp_fp8) the weights
#   arrive as float8 with scales computed once per step: no weight amax in the layer. A full recompute repeats the
#   forward's. Per-op SAC saves ``aten.max`` (torchtitan parallelize_llama.py _save_list) but not the collective after
#   it; the all-reduces its recompute may repeat (those feeding the recomputed gathers and GEMMs) are not counted.
TORCHAO_TP_GATHER_BYTES = 1  # float8 (e4m3 forward, e5m2 backward) elements on the TP all-gathers


def torchao_tp(spec: TransformerSpec, L: Layout, fp8: bool | str) -> bool:
    """Whether torchao's float8 TP styles run (above): torchao's kernels under FP8 on a sequence-parallel TP group."""
    return fp8 in ("torchao", "torchao_fsdp_fp8") and L.tp > 1 and L.sequence_parallel and not spec.experts


def torchao_tp_per_layer(spec: TransformerSpec, L: Layout, fp8: bool | str) -> tuple[int, int]:
    """(forward, backward) 4-byte TP amax all-reduces of one dense layer per microbatch under torchao's float8 TP
    styles (above): forward the two module inputs, the two row-parallel inputs and (without FSDP's float8 all-gather)
    each GEMM's weight, backward each GEMM's output gradient; none when the styles do not run."""
    if not torchao_tp(spec, L, fp8):
        return 0, 0
    gemms = len(gemm_widths(spec, L.tp))  # wq wk wv wo + w1 w3 w2 (non-gated: fc1 fc2)
    weights = 0 if fp8 == "torchao_fsdp_fp8" else gemms
    return 4 + weights, gemms
