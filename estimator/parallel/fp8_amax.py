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
