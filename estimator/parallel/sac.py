"""Per-op selective activation checkpointing (``parallelism.recompute=op``), as torchtitan runs it.

torchtitan's ``activation_checkpoint.mode = "selective"`` with ``selective_ac_option = "op"`` (its
Llama 3 8B training config) wraps each transformer block in ``checkpoint_wrapper`` with a policy of
``torch.utils.checkpoint.create_selective_checkpoint_contexts`` (torchtitan
``parallelize_llama.py`` ``_apply_ac_to_transformer_block``, Dec 2024 - Jun 2025): the outputs of
``aten.mm``, of the SDPA flash / efficient attention kernels and of the functional
``reduce_scatter_tensor`` are saved, except every second ``mm`` of the block (a counter per block
call, in call order); every other op is recomputed in the backward. What the model takes from it:

* **GEMMs recomputed**: the block's GEMMs in forward call order -- Llama's ``wq, wk, wv, wo`` then
  ``w1, w3, w2`` (``w2(silu(w1(x)) * w3(x))``); a non-gated MLP ``fc1, fc2`` -- every even position
  (``wk``, ``wo``, ``w3``; non-gated ``wk``, ``wo``, ``fc2``). Their share of the forward GEMM FLOPs
  is :func:`recomputed_gemm_fraction` (with tensor parallelism every GEMM narrows by ``tp``, the
  key/value ones to ``max(1, kv_heads / tp)`` heads). The recompute also reruns every pointwise op of
  the forward (norms, RoPE, activation, residual adds): the step prices those as the layer's
  forward time outside its GEMMs and attention kernel.
* **Tensor parallelism** (torchtitan's sequence-parallel plan): the two sequence all-gathers before
  attention and the MLP are functional collectives outside the save list, so the recompute
  repeats them; the reduce-scatters are saved. Without sequence parallelism the all-reduce after
  ``wo`` (recomputed) is repeated.
* **Memory** (:func:`saved_bytes_per_token`): what the backward needs and the policy keeps, 16-bit:
  the block input, the saved GEMM outputs it needs (``wq``'s, ``wv``'s, ``w1``'s / ``fc1``'s) and
  the attention output; the softmax statistics (4 bytes per head and token) are left out as in the
  TE layer. Everything else is rebuilt from those during the backward.

Dense layers only: the policy on MoE layers (router and grouped GEMMs) is not modelled (one-line
error).
"""

from __future__ import annotations

from estimator.errors import EstimatorError
from estimator.parallel.spec import TransformerSpec


def _head_widths(spec: TransformerSpec, tp: int) -> tuple[float, float]:
    """(query, key/value) projection widths per TP rank of a dense block; MoE is a one-line error."""
    if spec.experts or spec.mla:
        raise EstimatorError("parallelism.recompute=op (torchtitan's per-op checkpointing) is modelled for dense "
                             f"layers of ordinary attention only; {spec.name} has experts or latent attention: use "
                             "selective or full")
    return spec.heads * spec.head_dim / tp, spec.kv_heads_per_rank(tp) * spec.head_dim


def gemm_widths(spec: TransformerSpec, tp: int) -> list[float]:
    """Output x input elements of each GEMM of one block per TP rank, in forward call order."""
    h, (q, kv) = spec.hidden, _head_widths(spec, tp)
    mlp = [h * spec.ffn / tp] * (3 if spec.gated else 2)
    return [h * q, h * kv, h * kv, h * q, *mlp]


def recomputed_gemm_fraction(spec: TransformerSpec, tp: int) -> float:
    """Share of a block's forward GEMM FLOPs that the per-op policy recomputes (every second GEMM)."""
    widths = gemm_widths(spec, tp)
    return sum(widths[1::2]) / sum(widths)


def saved_bytes_per_token(spec: TransformerSpec, tp: int, sequence_parallel: bool) -> float:
    """16-bit bytes per token of one block that the per-op policy keeps for the backward."""
    q, kv = _head_widths(spec, tp)
    split = tp if sequence_parallel else 1
    # block input, wq's and wv's outputs, the attention output, w1's / fc1's output
    return 2 * (spec.hidden / split + q + kv + q + spec.ffn / tp)
