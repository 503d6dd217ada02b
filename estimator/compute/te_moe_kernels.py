"""The token permutations of Megatron-core's MoE layer as PyTorch custom ops (namespace ``te``): the
memory passes around the experts' GEMMs that a captured MoE layer (``estimator.parallel.layer``,
``model.fused_kernels=te``) records, one op per kernel.

Megatron-core's all-to-all token dispatcher (``MoEAlltoAllTokenDispatcher``,
megatron/core/transformer/moe/token_dispatcher.py at ``core_v0.13.0``; NeMo / Megatron-Bridge MoE
recipes set ``moe_permute_fusion = True``, e.g. Megatron-Bridge
``src/megatron/bridge/recipes/qwen/h100/qwen3_moe.py``) runs, per MoE layer and microbatch, on a
rank's ``T`` tokens with top-``k`` routing:

* ``moe_permute`` ("permutation 1", TE's fused ``moe_permute_with_probs``;
  transformer_engine/common/triton/permutation.py ``_permute_kernel``): each token's row is read once
  and written to each of its ``k`` destinations, grouped by expert: reads ``T x h``, writes ``kT x h``.
  Its backward gathers the ``k`` gradient rows of each token and sums them (reads ``kT x h``, writes
  ``T x h``).
* ``moe_sort_chunks`` ("permutation 2", TE's ``moe_sort_chunks_by_index``, only when a rank holds
  more than one expert): after the all-to-all the received rows arrive by source rank; they are
  regrouped by local expert (``[ranks, experts] -> [experts, ranks]`` chunks), and back after the
  experts. Reads and writes all ``N`` rows each time, and again in backward.
* ``moe_unpermute`` ("unpermutation 1", ``_unpermute_kernel``): each token's ``k`` expert outputs
  are read, weighted by their router probabilities and summed into the token's row: reads ``kT x h``
  and the ``T x k`` probabilities, writes ``T x h``. Its backward (``_unpermute_bwd_with_merging_probs_kernel``)
  reads the gradient row once and each of the ``k`` forward inputs (for the probabilities'
  gradient), writes the ``k`` input gradients and the ``T x k`` probability gradients.

The all-to-alls and the experts' tensor-parallel all-gather / reduce-scatter between them are
communication (priced in ``estimator.parallel.step``). Bytes are the capture's generic rule
(distinct tensor inputs + outputs), which matches the kernels' reads and writes above. The CPU
implementations compute the real result for the balanced routing the capture assumes (``k``
destinations per token, equal chunks per rank and expert).
"""

from __future__ import annotations

import torch
from torch import Tensor


# ---- permutation 1: token rows to their k expert slots ----------------------------------------------
@torch.library.custom_op("te::moe_permute", mutates_args=())
def moe_permute(x: Tensor, k: int) -> Tensor:
    return x.repeat_interleave(k, 0)


@moe_permute.register_fake
def _(x, k):
    return x.new_empty((x.shape[0] * k, *x.shape[1:]))


@torch.library.custom_op("te::moe_permute_backward", mutates_args=())
def moe_permute_backward(grad: Tensor, k: int) -> Tensor:
    return grad.view(grad.shape[0] // k, k, *grad.shape[1:]).sum(1)


@moe_permute_backward.register_fake
def _(grad, k):
    return grad.new_empty((grad.shape[0] // k, *grad.shape[1:]))


def _permute_setup(ctx, inputs, output):
    ctx.k = inputs[1]


moe_permute.register_autograd(lambda ctx, grad: (torch.ops.te.moe_permute_backward(grad, ctx.k), None),
                              setup_context=_permute_setup)


# ---- permutation 2: received chunks regrouped by local expert ---------------------------------------
@torch.library.custom_op("te::moe_sort_chunks", mutates_args=())
def moe_sort_chunks(x: Tensor, ranks: int, experts: int) -> Tensor:
    """Rows as ``[ranks, experts]`` equal chunks, returned as ``[experts, ranks]``."""
    return x.reshape(ranks, experts, -1, *x.shape[1:]).transpose(0, 1).reshape(x.shape)


@moe_sort_chunks.register_fake
def _(x, ranks, experts):
    return torch.empty_like(x)


def _sort_setup(ctx, inputs, output):
    ctx.ranks, ctx.experts = inputs[1], inputs[2]


moe_sort_chunks.register_autograd(  # the inverse regrouping
    lambda ctx, grad: (torch.ops.te.moe_sort_chunks(grad, ctx.experts, ctx.ranks), None, None),
    setup_context=_sort_setup)


# ---- unpermutation 1: k weighted expert outputs summed back into each token's row -------------------
@torch.library.custom_op("te::moe_unpermute", mutates_args=())
def moe_unpermute(y: Tensor, probs: Tensor) -> Tensor:
    t, k = probs.shape
    return (y.view(t, k, *y.shape[1:]) * probs.view(t, k, *([1] * (y.dim() - 1)))).sum(1)


@moe_unpermute.register_fake
def _(y, probs):
    return y.new_empty((probs.shape[0], *y.shape[1:]))


@torch.library.custom_op("te::moe_unpermute_backward", mutates_args=())
def moe_unpermute_backward(grad: Tensor, y: Tensor, probs: Tensor) -> tuple[Tensor, Tensor]:
    t, k = probs.shape
    rows = y.view(t, k, -1)
    g = grad.reshape(t, 1, -1)
    return (g * probs.view(t, k, 1)).reshape(y.shape), (rows * g).sum(-1)


@moe_unpermute_backward.register_fake
def _(grad, y, probs):
    return torch.empty_like(y), torch.empty_like(probs)


def _unpermute_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


moe_unpermute.register_autograd(lambda ctx, grad: torch.ops.te.moe_unpermute_backward(grad, *ctx.saved_tensors),
                                setup_context=_unpermute_setup)
