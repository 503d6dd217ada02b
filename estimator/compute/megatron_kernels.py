"""Megatron-LM's fused CUDA kernels as PyTorch custom ops (namespace ``megatron``), so a captured
decoder layer (``estimator.parallel.layer``, ``model.fused_kernels=megatron``) records one op per
fused kernel and the capture prices the bytes that kernel moves.

Megatron-LM (NVIDIA/Megatron-LM@6985e58938d40ad91ac07b0fddcfad8132e1447e, Aug 2021, the commit of
the SC21 scripts the validation rows come from) turns three fusions on unless disabled
(megatron/arguments.py: ``--no-masked-softmax-fusion``, ``--no-bias-gelu-fusion``,
``--no-bias-dropout-fusion`` are ``store_false`` flags, so each fusion defaults to True):

* ``scaled_upper_triang_masked_softmax`` (megatron/model/fused_softmax.py ``FusedScaleMaskSoftmax``
  with ``AttnMaskType.causal``, the GPT model's mask; used when 16 < seq <= 2048 and seq % 4 == 0;
  megatron/fused_kernels/scaled_upper_triang_masked_softmax.h): scale, causal mask and softmax
  in one kernel. Forward row ``i`` reads only its ``i + 1`` unmasked scores and writes the whole
  row (zeros above the diagonal); backward reads the gradient and the probabilities of the same
  lower triangle and writes the whole row. Bytes: forward ``tri(x) + out``, backward
  ``tri(grad) + tri(probs) + out`` with ``tri`` = the (s + 1) / 2s share of a tensor.
* ``bias_gelu`` (megatron/model/fused_bias_gelu.py, TorchScript-fused ``bias + y`` and tanh-GeLU;
  the MLP's first GEMM runs without its bias, ``skip_bias_add=True``): one kernel reading ``y``
  and the bias, writing the output; backward ``bias_gelu_back`` reads the gradient, ``y`` and the
  bias and writes the input gradient, which autograd sums over the tokens for the bias gradient.
* ``bias_dropout_add`` (megatron/model/transformer.py ``bias_dropout_add_fused_train``,
  TorchScript-fused ``residual + dropout(x + bias)``; attention output and MLP output GEMMs run
  without their bias): one kernel reading ``x``, the bias and the residual and writing the output
  and a 1-byte keep-mask; backward: the residual's gradient is the output gradient itself (no
  kernel), ``x``'s is ``grad * mask / (1 - p)`` in one kernel (as ``native_dropout_backward``),
  and the bias gradient is its sum over the tokens.
* ``bias_add_residual`` — the same fused function with dropout probability 0 (Megatron-core's
  ``bias_dropout_add_fused_train``, megatron/core/fusions/fused_bias_dropout.py, as runs that set
  ``hidden_dropout: 0`` use it, e.g. MLPerf GPT-3): ``dropout(x, p=0)`` is the identity (no mask
  is drawn or saved), so one kernel reads ``x``, the bias and the residual and writes the output;
  backward passes the gradient to ``x`` and the residual unchanged (no kernel) and sums it over
  the tokens for the bias.

When the fused softmax's shape checks fail (``estimator.compute.megatron_softmax.fused_softmax_available``),
Megatron runs its torch fallback (``FusedScaleMaskSoftmax.forward_torch_softmax``), which the layer captures as
ordinary ops (``estimator.parallel.layer``, ``CoreAttention._torch_softmax``).

Everything else in Megatron's GPT layer is an ordinary PyTorch op: the QK^T product is
``torch.baddbmm(..., beta=0, alpha=1/norm_factor)`` (the scale is the GEMM's alpha, no extra
pass), attention dropout is ``torch.nn.Dropout`` (CUDA ``native_dropout``), LayerNorm is one
kernel each way. These ops are priced by the generic rule of ``estimator.workloads.capture``
except where ``BYTE_RULES`` names them. The CPU implementations compute the real result; on the
meta device only shapes exist. Every op counts 0 FLOPs, like every non-GEMM op (``flops.py``).
"""

from __future__ import annotations

import torch
from torch import Tensor


def _nbytes(t: Tensor) -> int:
    return t.numel() * t.element_size()


def _lower_triangle_bytes(t: Tensor) -> int:
    """Bytes of the lower triangle incl. the diagonal of the trailing [s, s] matrices of ``t``."""
    s = t.shape[-1]
    return round(_nbytes(t) * (s + 1) / (2 * s))


def _leading_sum(t: Tensor) -> Tensor:
    """``t`` summed over all but its last dimension (the gradient of a broadcast bias)."""
    return t.sum(tuple(range(t.dim() - 1)))


def _causal_mask(s: int, device) -> Tensor:
    return torch.ones(s, s, dtype=torch.bool, device=device).triu(1)


# ---- scaled upper-triangular (causal) masked softmax ---------------------------------------------
@torch.library.custom_op("megatron::scaled_upper_triang_masked_softmax", mutates_args=())
def scaled_upper_triang_masked_softmax(x: Tensor, scale: float) -> Tensor:
    return torch.softmax((x * scale).masked_fill(_causal_mask(x.shape[-1], x.device), float("-inf")), -1)


@scaled_upper_triang_masked_softmax.register_fake
def _(x, scale):
    return torch.empty_like(x)


@torch.library.custom_op("megatron::scaled_upper_triang_masked_softmax_backward", mutates_args=())
def scaled_upper_triang_masked_softmax_backward(grad: Tensor, probs: Tensor, scale: float) -> Tensor:
    return torch._softmax_backward_data(grad, probs, -1, probs.dtype) * scale


@scaled_upper_triang_masked_softmax_backward.register_fake
def _(grad, probs, scale):
    return torch.empty_like(grad)


def _softmax_setup(ctx, inputs, output):
    ctx.scale = inputs[1]
    ctx.save_for_backward(output)


def _softmax_backward(ctx, grad):
    (probs,) = ctx.saved_tensors
    return torch.ops.megatron.scaled_upper_triang_masked_softmax_backward(grad, probs, ctx.scale), None


scaled_upper_triang_masked_softmax.register_autograd(_softmax_backward, setup_context=_softmax_setup)


# ---- bias + GeLU ----------------------------------------------------------------------------------
def _gelu_tanh(x: Tensor) -> Tensor:
    return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))


@torch.library.custom_op("megatron::bias_gelu", mutates_args=())
def bias_gelu(y: Tensor, bias: Tensor) -> Tensor:
    return _gelu_tanh(y + bias)


@bias_gelu.register_fake
def _(y, bias):
    return torch.empty_like(y)


@torch.library.custom_op("megatron::bias_gelu_backward", mutates_args=())
def bias_gelu_backward(grad: Tensor, y: Tensor, bias: Tensor) -> Tensor:
    x = y + bias
    tanh_out = torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x))
    ff = 0.5 * x * ((1 - tanh_out * tanh_out) * (0.79788456 + 0.1070322243 * x * x)) + 0.5 * (1 + tanh_out)
    return ff * grad


@bias_gelu_backward.register_fake
def _(grad, y, bias):
    return torch.empty_like(grad)


def _gelu_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _gelu_backward(ctx, grad):
    y, bias = ctx.saved_tensors
    tmp = torch.ops.megatron.bias_gelu_backward(grad, y, bias)
    return tmp, _leading_sum(tmp)


bias_gelu.register_autograd(_gelu_backward, setup_context=_gelu_setup)


# ---- bias + dropout + residual add ----------------------------------------------------------------
@torch.library.custom_op("megatron::bias_dropout_add", mutates_args=())
def bias_dropout_add(x: Tensor, bias: Tensor, residual: Tensor, p: float) -> tuple[Tensor, Tensor]:
    out, mask = torch.native_dropout(x + bias, p, True)
    return residual + out, mask


@bias_dropout_add.register_fake
def _(x, bias, residual, p):
    return torch.empty_like(x), torch.empty_like(x, dtype=torch.bool)


def _bda_setup(ctx, inputs, output):
    ctx.scale = 1.0 / (1.0 - inputs[3])
    ctx.save_for_backward(output[1])
    ctx.mark_non_differentiable(output[1])
    ctx.set_materialize_grads(False)  # the mask gets no gradient: no zeros tensor for it


def _bda_backward(ctx, grad, _grad_mask):
    (mask,) = ctx.saved_tensors
    grad_x = torch.ops.aten.native_dropout_backward(grad, mask, ctx.scale)
    return grad_x, _leading_sum(grad_x), grad, None


bias_dropout_add.register_autograd(_bda_backward, setup_context=_bda_setup)


# ---- bias + residual add (dropout probability 0) ------------------------------------------------------
@torch.library.custom_op("megatron::bias_add_residual", mutates_args=())
def bias_add_residual(x: Tensor, bias: Tensor, residual: Tensor) -> Tensor:
    return residual + x + bias


@bias_add_residual.register_fake
def _(x, bias, residual):
    return torch.empty_like(x)


bias_add_residual.register_autograd(lambda ctx, grad: (grad, _leading_sum(grad), grad))


# ---- bytes per call (see the module docstring); ops not named here use capture's generic rule ----
BYTE_RULES = {
    "megatron::scaled_upper_triang_masked_softmax": lambda args, kwargs, out: _lower_triangle_bytes(args[0]) + _nbytes(out),
    "megatron::scaled_upper_triang_masked_softmax_backward": lambda args, kwargs, out: (
        _lower_triangle_bytes(args[0]) + _lower_triangle_bytes(args[1]) + _nbytes(out)
    ),
}
