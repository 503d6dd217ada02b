"""The kernels of Megatron-core's MoE layer around and inside the experts as PyTorch custom ops
(namespace ``te``), one op per GPU kernel, for the captured MoE layer (``estimator.parallel.layer``,
``model.fused_kernels=te``). The full table (kernel, bytes / FLOPs, source line) is
docs/research/h54-moe-kernels.md. Sources: NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553
(``MLM``: megatron/core/transformer/moe/) and NVIDIA/TransformerEngine@d0067d0da6cb01811b8072a7d304f0e00344ce2b
(``TE``); ``T`` tokens of the rank, ``E`` experts, top-``k``, hidden ``h``, ``N`` rows an expert rank holds.

Router (``model.moe_router_fusion``, MLM transformer_config.py l.944, default False):

* ``moe_topk_score`` / ``_backward`` (fused: TE ``fused_topk_with_score_function``,
  transformer_engine/pytorch/csrc/extensions/router.cpp l.65-155, l.278-340): one kernel reads the
  ``T x E`` logits and writes the probabilities (logit dtype), the bool routing map and the fp32
  intermediate it saves; its backward reads the map, the intermediate and the probabilities' gradient and
  writes the logits' gradient. Unfused (MLM moe_utils.py l.766-955) the layer captures the aten ops.
* ``moe_aux_scores`` / ``_backward`` (fused ``fused_score_for_moe_aux_loss``, router.cpp l.342-418): the
  aux loss's own scores (fp32) and routing map from the logits; ``moe_aux_loss`` / ``_backward``
  (``fused_moe_aux_loss``, router.cpp l.420-490): reads the ``T x E`` fp32 scores and the tokens per
  expert, writes a scalar; its backward writes the ``T x E`` gradient (fp32).
* ``router_gemm`` / ``router_gemm_fp32`` / ``cast`` (``model.moe_router_dtype=fp32``, MLM moe_utils.py
  l.1357-1440 ``RouterGatingLinearFunction``): forward one GEMM of the 16-bit input and weight writing fp32
  logits (TE ``general_gemm`` with an fp32 output); backward casts the weight and the input to fp32, runs
  the input- and weight-gradient GEMMs in fp32 (TF32 tensor cores: TE
  transformer_engine/common/gemm/cublaslt_gemm.cu l.445-449 ``CUBLAS_COMPUTE_32F_FAST_TF32``; priced at
  the matmul rate of the run's precision, the TF32 rate is not modelled) and casts both gradients back.

Token dispatcher (``MoEAlltoAllTokenDispatcher``, MLM token_dispatcher.py; ``model.moe_permute_fusion``,
transformer_config.py l.941, default False; unfused, the layer captures moe_utils.py's aten ops):

* ``moe_row_id_map_pass{1,2,3}`` (fused permute, TE transformer_engine/pytorch/triton/permutation.py
  l.24-118 ``make_row_id_map``): three Triton kernels building the ``T x (2E + 1)`` int32 map from the
  bool routing map (pass 1 reads the map, writes ``T x E`` int32 block cumsums; pass 2 reads and rewrites
  them; pass 3 reads them and writes each token's ``k`` rows, ``k`` experts and count).
* ``moe_permute`` (TE ``moe_permute_with_probs``, ``_permute_kernel``): each token's row read once and
  written to its ``k`` slots, with its ``k`` probabilities: reads ``T x h`` and the ``T x E``
  probabilities' ``k`` routed entries, writes ``kT x h`` and ``kT`` probabilities. Backward
  (``unpermute_with_mask_map`` with ``permuted_probs``) sums the ``k`` gradient rows of each token and
  scatters the probabilities' gradient into ``T x E``.
* ``moe_chunk_sort_map`` + ``moe_sort_chunks`` (TE ``moe_sort_chunks_by_index(_with_probs)``,
  permutation.py l.1110-1160: ``make_chunk_sort_map`` writes an ``N`` int32 map, ``sort_chunks_by_map``
  moves the rows (and, on the dispatch side, their probabilities)), only when a rank holds more than one
  expert: ``[ranks, experts] -> [experts, ranks]`` chunks and back; backward reuses the map.
* ``moe_host_sync``: the dispatcher's D2H copy of the split sizes and ``d2h_event.synchronize()``
  (token_dispatcher.py l.921-960, at ``before_ep_alltoall`` with EP > 1, l.596): the host waits for the
  GPU, so the GPU runs dry and the next kernel starts one host launch later. Priced at the device's
  per-op launch floor (``launch_s``): its bytes are the few split sizes copied.
* ``moe_unpermute`` (token_dispatcher.py l.891 calls ``unpermute`` without probabilities: the experts
  applied them; TE ``_unpermute_kernel``): reads ``kT x h``, writes ``T x h``. Backward
  (``moe_unpermute_mask_map_backward_no_probs``, permutation.py l.672-790): reads ``T x h``, writes
  ``kT x h``.

Experts (``TEGroupedMLP``, MLM experts.py l.840-1047):

* ``grouped_linear`` / ``_dgrad`` / ``_wgrad`` (TE ``GroupedLinear``, module/grouped_linear.py l.875
  ``general_grouped_gemm`` -> cublaslt_gemm.cu l.977-1011: one cuBLAS GEMM per local expert over the
  rank's compute streams): ``E_local`` GEMMs of ``N / E_local`` rows each, so each op reads (dgrad) or
  writes (wgrad) all ``E_local`` experts' weights. One op per grouped GEMM; the host issues one cuBLASLt
  call per expert (each builds its descriptors and queries the heuristic, cublaslt_gemm.cu l.437-722 at
  v2.9), so the op is floored at ``E_local`` launches (``estimator.compute.device.GROUPED_LAUNCHES``). Through
  TE v2.16 (Megatron-Bridge 26.06) the path is the same (v2.16 cublaslt_gemm.cu l.972-1068: the CUTLASS
  grouped GEMM is opt-in, ``NVTE_USE_CUTLASS_GROUPED_GEMM`` default false).
* ``moe_fp8_pad`` / ``moe_fp8_unpad`` (FP8 only: MLM experts.py ``TEGroupedMLP`` builds TE's
  ``Fp8Padding`` / ``Fp8Unpadding`` over its local experts when ``config.fp8``, NVIDIA/Megatron-LM@0d8e0714cd29
  (core_r0.15, Megatron-Bridge 25.11) l.837-840 and forward l.880-887, l.977-978; core_v0.17.0 l.247-248,
  l.347-350, l.402): the rows of each expert padded to a multiple of 16 before fc1 (and the ``[N, 1]``
  probabilities), fc2's output unpadded. TE ``module/fp8_padding.py`` / ``fp8_unpadding.py`` (v2.9, v2.16):
  when every expert's count is already a multiple of 16 nothing runs, else one
  ``fused_multi_row_padding`` / ``_unpadding`` kernel (``common/util/padding.cu``, one launch per 64
  experts) copies all rows; backward the inverse kernel on the gradient. The capture's balanced routing has
  equal counts, but real routing (Megatron-Bridge's benchmark recipes draw random logits,
  ``moe_router_force_load_balancing``) leaves some expert off a multiple of 16 in practically every
  microbatch, so the copy is priced; the at most 15 pad rows per expert are left out (shapes unchanged).
  Not run when the router pads the routing map (``moe_router_padding_for_quantization`` /
  ``moe_router_padding_for_fp8``, off in Megatron-core and in Megatron-Bridge's Qwen3 recipes) nor with the
  HybridEP dispatcher, which pads each expert's rows as it permutes (its counts come back aligned, so TE's padding
  returns its input; from core_r0.18 ``skip_routed_expert_padding`` skips it, moe_utils.py l.1360-1372 at
  d0b3b775): the layer leaves these ops out under ``framework.moe_dispatcher=hybridep`` (h90, ``layer._moe``).
* ``weighted_swiglu`` / ``_backward`` (MLM megatron/core/fusions/fused_bias_swiglu.py l.44-48, l.114-122,
  ``weighted_bias_swiglu_impl`` from experts.py l.966): SwiGLU times each row's router probability in one
  fused kernel; backward reads the gradient, the ``2f``-wide input and the probabilities, writes the
  input's and the probabilities' gradients.

Bytes: the capture runs in fp32 and the compute model halves activation bytes for 16-bit training, so a
rule states twice the real bytes of tensors whose real dtype is known (int32 maps, bool masks, fp32 router
tensors); 16-bit activations keep the capture's fp32 bytes. The ``N`` probabilities carried through the
all-to-all and the chunk sort (4 bytes a row against ``2h`` for its hidden state) are left out of
``moe_sort_chunks``. The CPU implementations compute the real result for the balanced routing the capture
assumes (``k`` destinations per token, equal chunks per rank and expert, equal rows per expert).
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.utils.flop_counter import register_flop_formula

from estimator.compute.te_kernels import grouped_op

INT32, BOOL, FP32 = 4, 1, 4  # real bytes per element of the routing metadata and the fp32 router tensors
ROW_ID_BLOCK = 1024  # make_row_id_map's block_size (TE triton/permutation.py l.53): one workspace int per block


def _nbytes(t: Tensor) -> int:
    return t.numel() * t.element_size()


def _real(nbytes: int) -> int:
    """Bytes stated for a tensor of known real size: doubled, as the compute model halves them."""
    return 2 * int(nbytes)


def _autograd(op, backward, setup):
    op.register_autograd(backward, setup_context=setup)


# ---- router: fused top-k with the score function -----------------------------------------------------
def _balanced_topk(logits: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """Top-k probabilities (softmax over the k logits) and the bool routing map, as [T, E]."""
    vals, idx = logits.topk(k, -1)
    probs = torch.zeros_like(logits).scatter(1, idx, vals.softmax(-1))
    return probs, torch.zeros_like(logits, dtype=torch.bool).scatter(1, idx, True)


@torch.library.custom_op("te::moe_topk_score", mutates_args=())
def moe_topk_score(logits: Tensor, k: int, logit_bytes: int) -> tuple[Tensor, Tensor, Tensor]:
    """(probs [T, E], routing map [T, E] bool, fp32 intermediate [T, E] saved for backward)."""
    probs, rmap = _balanced_topk(logits, k)
    return probs, rmap, probs.clone()


@moe_topk_score.register_fake
def _(logits, k, logit_bytes):
    return torch.empty_like(logits), torch.empty_like(logits, dtype=torch.bool), torch.empty_like(logits)


@torch.library.custom_op("te::moe_topk_score_backward", mutates_args=())
def moe_topk_score_backward(rmap: Tensor, inter: Tensor, grad: Tensor, logit_bytes: int) -> Tensor:
    """Softmax-over-the-selected backward: dlogit = p (g - sum(p g)) on the routed entries."""
    g = grad * rmap
    return inter * (g - (inter * g).sum(-1, keepdim=True)) * rmap


@moe_topk_score_backward.register_fake
def _(rmap, inter, grad, logit_bytes):
    return torch.empty_like(grad)


def _topk_setup(ctx, inputs, output):
    ctx.set_materialize_grads(False)  # the map and the intermediate get no gradient (and no zeros kernel)
    ctx.save_for_backward(output[1], output[2])
    ctx.logit_bytes = inputs[2]


def _topk_backward(ctx, g, _map, _inter):
    if g is None:  # no gradient reached the probabilities
        return None, None, None
    return torch.ops.te.moe_topk_score_backward(*ctx.saved_tensors, g, ctx.logit_bytes), None, None


_autograd(moe_topk_score, _topk_backward, _topk_setup)


# ---- router: the aux loss's scores and the fused aux loss ---------------------------------------------
@torch.library.custom_op("te::moe_aux_scores", mutates_args=())
def moe_aux_scores(logits: Tensor, k: int, logit_bytes: int) -> tuple[Tensor, Tensor, Tensor]:
    """(routing map [T, E] bool, fp32 scores softmax(logits) [T, E], fp32 intermediate [T, E])."""
    scores = logits.softmax(-1)
    return torch.zeros_like(logits, dtype=torch.bool).scatter(1, scores.topk(k, -1).indices, True), scores, scores.clone()


@moe_aux_scores.register_fake
def _(logits, k, logit_bytes):
    return torch.empty_like(logits, dtype=torch.bool), torch.empty_like(logits), torch.empty_like(logits)


@torch.library.custom_op("te::moe_aux_scores_backward", mutates_args=())
def moe_aux_scores_backward(inter: Tensor, grad: Tensor, logit_bytes: int) -> Tensor:
    return inter * (grad - (inter * grad).sum(-1, keepdim=True))


@moe_aux_scores_backward.register_fake
def _(inter, grad, logit_bytes):
    return torch.empty_like(grad)


def _aux_scores_setup(ctx, inputs, output):
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(output[2])
    ctx.logit_bytes = inputs[2]


def _aux_scores_backward(ctx, _map, g, _inter):
    if g is None:
        return None, None, None
    return torch.ops.te.moe_aux_scores_backward(ctx.saved_tensors[0], g, ctx.logit_bytes), None, None


_autograd(moe_aux_scores, _aux_scores_backward, _aux_scores_setup)


@torch.library.custom_op("te::moe_aux_loss", mutates_args=())
def moe_aux_loss(scores: Tensor, tokens_per_expert: Tensor, coeff: float) -> Tensor:
    """coeff * sum_e(sum_t scores[t, e] * tokens[e]) (the constant factors of switch_load_balancing_loss_func folded in coeff)."""
    return coeff * (scores.sum(0) * tokens_per_expert).sum()


@moe_aux_loss.register_fake
def _(scores, tokens_per_expert, coeff):
    return scores.new_empty(())


@torch.library.custom_op("te::moe_aux_loss_backward", mutates_args=())
def moe_aux_loss_backward(grad: Tensor, tokens_per_expert: Tensor, rows: int, coeff: float) -> Tensor:
    return (coeff * grad * tokens_per_expert).expand(rows, -1).contiguous()


@moe_aux_loss_backward.register_fake
def _(grad, tokens_per_expert, rows, coeff):
    return grad.new_empty((rows, tokens_per_expert.shape[0]))


def _aux_loss_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[1])
    ctx.rows, ctx.coeff = inputs[0].shape[0], inputs[2]


_autograd(moe_aux_loss,
          lambda ctx, g: (torch.ops.te.moe_aux_loss_backward(g, ctx.saved_tensors[0], ctx.rows, ctx.coeff), None, None),
          _aux_loss_setup)


# ---- router: fp32 logits (moe_router_dtype=fp32) ------------------------------------------------------
@torch.library.custom_op("te::router_gemm", mutates_args=())
def router_gemm(x: Tensor, w: Tensor) -> Tensor:
    """x [T, h] @ w[E, h]^T, 16-bit operands, fp32 output."""
    return x @ w.t()


@router_gemm.register_fake
def _(x, w):
    return x.new_empty((x.shape[0], w.shape[0]))


@torch.library.custom_op("te::router_gemm_fp32", mutates_args=())
def router_gemm_fp32(a: Tensor, b: Tensor) -> Tensor:
    """a @ b with fp32 operands and output (the router's backward GEMMs)."""
    return a @ b


@router_gemm_fp32.register_fake
def _(a, b):
    return a.new_empty((a.shape[0], b.shape[1]))


@torch.library.custom_op("te::cast", mutates_args=())
def cast(x: Tensor, src_bytes: int, dst_bytes: int) -> Tensor:
    """A dtype conversion kernel (reads src_bytes, writes dst_bytes per element); values kept on the CPU."""
    return x.clone()


@cast.register_fake
def _(x, src_bytes, dst_bytes):
    return torch.empty_like(x)


def _cast_setup(ctx, inputs, output):
    ctx.src, ctx.dst = inputs[1], inputs[2]


_autograd(cast, lambda ctx, g: (torch.ops.te.cast(g, ctx.dst, ctx.src), None, None), _cast_setup)  # the gradient cast back


def _mm_flops(a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
    return 2 * a_shape[0] * a_shape[1] * b_shape[1]


@register_flop_formula(torch.ops.te.router_gemm)
def _router_gemm_flops(x_shape, w_shape, *args, out_shape=None, **kwargs) -> int:
    return 2 * x_shape[0] * x_shape[1] * w_shape[0]


register_flop_formula(torch.ops.te.router_gemm_fp32)(_mm_flops)


# ---- permutation 1: token rows to their k expert slots ----------------------------------------------
@torch.library.custom_op("te::moe_row_id_map_pass1", mutates_args=())
def moe_row_id_map_pass1(rmap: Tensor) -> Tensor:
    """Per expert, the cumulative count of its tokens (block-wise), int32 [T, E]."""
    return rmap.int().cumsum(0) * rmap


@moe_row_id_map_pass1.register_fake
def _(rmap):
    return torch.empty_like(rmap, dtype=torch.int32)


@torch.library.custom_op("te::moe_row_id_map_pass2", mutates_args=())
def moe_row_id_map_pass2(ids: Tensor) -> Tensor:
    """Global destination row of each (token, expert), -1 where not routed."""
    offsets = torch.cat((ids.new_zeros(1), ids.max(0).values.cumsum(0)[:-1]))
    return torch.where(ids > 0, ids - 1 + offsets, -1).int()


@moe_row_id_map_pass2.register_fake
def _(ids):
    return torch.empty_like(ids)


@torch.library.custom_op("te::moe_row_id_map_pass3", mutates_args=())
def moe_row_id_map_pass3(ids: Tensor, k: int) -> Tensor:
    """Each token's k destination rows (the dense part of the [T, 2E + 1] map)."""
    return ids.sort(-1, descending=True).values[:, :k].flip(-1).contiguous()


@moe_row_id_map_pass3.register_fake
def _(ids, k):
    return ids.new_empty((ids.shape[0], k))


@torch.library.custom_op("te::moe_permute", mutates_args=())
def moe_permute(x: Tensor, probs: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """Rows [kT, h] (each token k times, balanced routing) and their probabilities [kT] from probs [T, E]."""
    return x.repeat_interleave(k, 0), probs.topk(k, -1).values.reshape(-1)


@moe_permute.register_fake
def _(x, probs, k):
    return x.new_empty((x.shape[0] * k, *x.shape[1:])), probs.new_empty((x.shape[0] * k,))


@torch.library.custom_op("te::moe_permute_backward", mutates_args=())
def moe_permute_backward(grad: Tensor, grad_probs: Tensor, probs: Tensor, k: int) -> tuple[Tensor, Tensor]:
    t = grad.shape[0] // k
    dprobs = torch.zeros_like(probs).scatter(1, probs.topk(k, -1).indices, grad_probs.view(t, k))
    return grad.view(t, k, *grad.shape[1:]).sum(1), dprobs


@moe_permute_backward.register_fake
def _(grad, grad_probs, probs, k):
    return grad.new_empty((grad.shape[0] // k, *grad.shape[1:])), torch.empty_like(probs)


def _permute_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[1])
    ctx.k = inputs[2]


_autograd(moe_permute,
          lambda ctx, g, gp: (*torch.ops.te.moe_permute_backward(g, gp, ctx.saved_tensors[0], ctx.k), None),
          _permute_setup)


# ---- permutation 2: received chunks regrouped by local expert ---------------------------------------
def _sorted(x: Tensor, ranks: int, experts: int) -> Tensor:
    return x.reshape(ranks, experts, -1, *x.shape[1:]).transpose(0, 1).reshape(x.shape)


@torch.library.custom_op("te::moe_chunk_sort_map", mutates_args=())
def moe_chunk_sort_map(x: Tensor, ranks: int, experts: int) -> Tensor:
    """The N int32 destination rows of the chunk sort (TE make_chunk_sort_map)."""
    return _sorted(torch.arange(x.shape[0], dtype=torch.int32), ranks, experts)


@moe_chunk_sort_map.register_fake
def _(x, ranks, experts):
    return x.new_empty((x.shape[0],), dtype=torch.int32)


@torch.library.custom_op("te::moe_sort_chunks", mutates_args=())
def moe_sort_chunks(x: Tensor, ranks: int, experts: int) -> Tensor:
    """Rows as ``[ranks, experts]`` equal chunks, returned as ``[experts, ranks]``."""
    return _sorted(x, ranks, experts)


@moe_sort_chunks.register_fake
def _(x, ranks, experts):
    return torch.empty_like(x)


def _sort_setup(ctx, inputs, output):
    ctx.ranks, ctx.experts = inputs[1], inputs[2]


moe_sort_chunks.register_autograd(  # the inverse regrouping
    lambda ctx, grad: (torch.ops.te.moe_sort_chunks(grad, ctx.experts, ctx.ranks), None, None),
    setup_context=_sort_setup)


# ---- host sync before the EP all-to-all ---------------------------------------------------------------
@torch.library.custom_op("te::moe_host_sync", mutates_args=())
def moe_host_sync(splits: Tensor) -> Tensor:
    """The split sizes copied to the host, then the host waits for the GPU (values: the copy)."""
    return splits.clone()


@moe_host_sync.register_fake
def _(splits):
    return torch.empty_like(splits)


# ---- unpermutation 1: the k expert outputs of each token summed back into its row -------------------
@torch.library.custom_op("te::moe_unpermute", mutates_args=())
def moe_unpermute(y: Tensor, k: int) -> Tensor:
    return y.view(y.shape[0] // k, k, *y.shape[1:]).sum(1)


@moe_unpermute.register_fake
def _(y, k):
    return y.new_empty((y.shape[0] // k, *y.shape[1:]))


@torch.library.custom_op("te::moe_unpermute_backward", mutates_args=())
def moe_unpermute_backward(grad: Tensor, k: int) -> Tensor:
    return grad.repeat_interleave(k, 0)


@moe_unpermute_backward.register_fake
def _(grad, k):
    return grad.new_empty((grad.shape[0] * k, *grad.shape[1:]))


def _unpermute_setup(ctx, inputs, output):
    ctx.k = inputs[1]


_autograd(moe_unpermute, lambda ctx, g: (torch.ops.te.moe_unpermute_backward(g, ctx.k), None), _unpermute_setup)


# ---- experts: grouped GEMMs and the probability-weighted SwiGLU ---------------------------------------
def _groups(x: Tensor, w: Tensor) -> list[Tensor]:
    return list(x.chunk(w.shape[0], 0))


@torch.library.custom_op("te::grouped_linear", mutates_args=())
def grouped_linear(x: Tensor, w: Tensor) -> Tensor:
    """x [N, in] in E_local equal row groups, group e times w[e]^T (w [E_local, out, in])."""
    return torch.cat([xe @ we.t() for xe, we in zip(_groups(x, w), w, strict=True)])


@grouped_linear.register_fake
def _(x, w):
    return x.new_empty((x.shape[0], w.shape[1]))


@torch.library.custom_op("te::grouped_linear_dgrad", mutates_args=())
def grouped_linear_dgrad(grad: Tensor, w: Tensor) -> Tensor:
    return torch.cat([ge @ we for ge, we in zip(_groups(grad, w), w, strict=True)])


@grouped_linear_dgrad.register_fake
def _(grad, w):
    return grad.new_empty((grad.shape[0], w.shape[2]))


@torch.library.custom_op("te::grouped_linear_wgrad", mutates_args=())
def grouped_linear_wgrad(grad: Tensor, x: Tensor, experts: int) -> Tensor:
    return torch.stack([ge.t() @ xe for ge, xe in zip(grad.chunk(experts, 0), x.chunk(experts, 0), strict=True)])


@grouped_linear_wgrad.register_fake
def _(grad, x, experts):
    return grad.new_empty((experts, grad.shape[1], x.shape[1]))


def _grouped_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _grouped_backward(ctx, grad):
    x, w = ctx.saved_tensors
    return torch.ops.te.grouped_linear_dgrad(grad, w), torch.ops.te.grouped_linear_wgrad(grad, x, w.shape[0])


_autograd(grouped_linear, _grouped_backward, _grouped_setup)


@register_flop_formula(torch.ops.te.grouped_linear)
def _grouped_flops(x_shape, w_shape, *args, out_shape=None, **kwargs) -> int:
    return 2 * x_shape[0] * x_shape[1] * w_shape[1]  # every row through one expert's [out, in] weight


@register_flop_formula(torch.ops.te.grouped_linear_dgrad)
def _grouped_dgrad_flops(grad_shape, w_shape, *args, out_shape=None, **kwargs) -> int:
    return 2 * grad_shape[0] * grad_shape[1] * w_shape[2]


@register_flop_formula(torch.ops.te.grouped_linear_wgrad)
def _grouped_wgrad_flops(grad_shape, x_shape, *args, out_shape=None, **kwargs) -> int:
    return 2 * grad_shape[0] * grad_shape[1] * x_shape[1]


@torch.library.custom_op("te::weighted_swiglu", mutates_args=())
def weighted_swiglu(y: Tensor, probs: Tensor) -> Tensor:
    a, b = y.chunk(2, -1)
    return torch.nn.functional.silu(a) * b * probs[:, None]


@weighted_swiglu.register_fake
def _(y, probs):
    return y.new_empty((*y.shape[:-1], y.shape[-1] // 2))


@torch.library.custom_op("te::weighted_swiglu_backward", mutates_args=())
def weighted_swiglu_backward(grad: Tensor, y: Tensor, probs: Tensor) -> tuple[Tensor, Tensor]:
    a, b = y.chunk(2, -1)
    sig = torch.sigmoid(a)
    g = grad * probs[:, None]
    dy = torch.cat((g * b * sig * (1 + a * (1 - sig)), g * a * sig), -1)
    return dy, (grad * torch.nn.functional.silu(a) * b).sum(-1)


@weighted_swiglu_backward.register_fake
def _(grad, y, probs):
    return torch.empty_like(y), torch.empty_like(probs)


def _weighted_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


_autograd(weighted_swiglu, lambda ctx, g: torch.ops.te.weighted_swiglu_backward(g, *ctx.saved_tensors), _weighted_setup)


# ---- FP8 padding of each expert's rows (Fp8Padding / Fp8Unpadding) ----------------------------------
moe_fp8_pad = grouped_op("moe_fp8_pad", "Each expert's rows padded to a multiple of 16 (the pad rows left out: "
                         "values and shape kept).")
moe_fp8_unpad = grouped_op("moe_fp8_unpad", "The pad rows dropped again (values and shape kept).")


def _pad_setup(ctx, inputs, output):
    ctx.experts = inputs[1]


_autograd(moe_fp8_pad, lambda ctx, g: (torch.ops.te.moe_fp8_unpad(g, ctx.experts), None), _pad_setup)
_autograd(moe_fp8_unpad, lambda ctx, g: (torch.ops.te.moe_fp8_pad(g, ctx.experts), None), _pad_setup)


# ---- bytes of the kernels whose reads and writes differ from "distinct inputs + outputs" -------------
def _row_id_pass1(args, kwargs, out):  # reads the bool map, writes int32 block cumsums + one int per block
    (rmap,) = args
    t, e = rmap.shape
    return _real(t * e * (BOOL + INT32) + e * -(-t // ROW_ID_BLOCK) * INT32)


def _row_id_pass3(args, kwargs, out):  # reads each token's E ints, writes its k rows, k experts and count
    t, e = args[0].shape
    return _real(t * e * INT32 + t * (2 * args[1] + 1) * INT32)


def _topk_score(args, kwargs, out):  # reads logits, writes probs (logit dtype), bool map, fp32 intermediate
    t, e = args[0].shape
    return _real(t * e * (2 * args[2] + BOOL + FP32))


def _topk_score_backward(args, kwargs, out):  # reads map, intermediate, grad; writes grad logits
    t, e = args[0].shape
    return _real(t * e * (BOOL + FP32 + 2 * args[3]))


def _aux_scores(args, kwargs, out):  # reads logits, writes bool map + fp32 scores + fp32 intermediate
    t, e = args[0].shape
    return _real(t * e * (args[2] + BOOL + 2 * FP32))


def _aux_scores_backward(args, kwargs, out):  # reads fp32 intermediate + fp32 grad scores, writes grad logits
    t, e = args[0].shape
    return _real(t * e * (2 * FP32 + args[2]))


def _fp32(*tensors) -> int:  # fp32 tensors of the capture at their real 4 bytes
    return _real(sum(_nbytes(t) for t in tensors))


BYTE_RULES = {
    "te::moe_row_id_map_pass1": _row_id_pass1,
    "te::moe_row_id_map_pass2": lambda args, kwargs, out: _real(2 * args[0].numel() * INT32),
    "te::moe_row_id_map_pass3": _row_id_pass3,
    "te::moe_chunk_sort_map": lambda args, kwargs, out: _real(args[0].shape[0] * INT32),
    # the permutation's k probabilities per token: read k of each token's E, written as kT (fp32 in the capture)
    "te::moe_permute": lambda args, kwargs, out: _nbytes(args[0]) + _nbytes(out[0]) + 2 * _nbytes(out[1]),
    "te::moe_permute_backward": lambda args, kwargs, out: _nbytes(args[0]) + _nbytes(out[0]) + 2 * _nbytes(args[1])
    + _nbytes(out[1]),
    "te::moe_host_sync": lambda args, kwargs, out: _real(2 * _nbytes(args[0])),  # int64 split sizes to the host
    "te::moe_topk_score": _topk_score,
    "te::moe_topk_score_backward": _topk_score_backward,
    "te::moe_aux_scores": _aux_scores,
    "te::moe_aux_scores_backward": _aux_scores_backward,
    "te::moe_aux_loss": lambda args, kwargs, out: _fp32(args[0]),  # the T x E fp32 scores (E counts negligible)
    "te::moe_aux_loss_backward": lambda args, kwargs, out: _fp32(out),  # writes the T x E fp32 gradient
    "te::router_gemm": lambda args, kwargs, out: _nbytes(args[0]) + _nbytes(args[1]) + _fp32(out),
    "te::router_gemm_fp32": lambda args, kwargs, out: _fp32(args[0], args[1], out),
    "te::cast": lambda args, kwargs, out: _real(args[0].numel() * (args[1] + args[2])),
}
