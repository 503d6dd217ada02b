"""torchao's float8 training recipe (``torchao.float8``, ``Float8Linear``, tensorwise dynamic scaling),
as PyTorch custom ops (namespace ``torchao``), so a captured decoder layer with
``framework.fp8_kernels=torchao`` records one op per kernel the GPU runs around each FP8 GEMM
(``torch._scaled_mm``). The other recipe, Transformer Engine's, is ``te_kernels.fp8_cast_transpose``.

What the GPU runs (the torch.compile'd kernel set torchao's own roofline model states, which every
row it covers ran under: torchtitan's float8 converter warns that it is meant for torch.compile,
pytorch/torchtitan@9dec370ad26b torchtitan/float8.py:14). Sources:
pytorch/ao@6243040807b9 torchao/testing/float8/roofline_utils.py:92-120 (tensorwise) and the code
it models, torchao/float8/float8_linear.py (``matmul_with_hp_or_float8_args``: forward casts the
input and the weight, l.82-110; backward casts the output gradient, the weight again and the
input's / gradient's other layouts, l.138-240); the amax is ``torch.max(torch.abs(x))``,
torchao/float8/float8_utils.py (``tensor_to_amax``, pytorch/ao@eab345c2268a l.92-100).

* an activation (a Linear's input in forward, its output gradient in backward): the amax's first
  reduction stage is fused into the kernel that produced the tensor (roofline ``fuse_with_prev``:
  no extra bytes); the second stage reduces the partial maxima (``fp8_amax_final``: a launch, a
  few bytes); one cast kernel reads the 16-bit tensor and writes it in FP8 twice, row- and
  column-major, for the two GEMMs that consume it (``fp8_cast_dims``: 2 + 1 + 1 = 4 bytes per
  element, the same traffic as TE's fused cast-transpose);
* a weight, every microbatch: an amax reduction reading it (``fp8_amax``: 2 bytes per element), its
  second stage, and a cast to FP8 in forward and another in backward (``fp8_cast_weight``, 2 + 1 =
  3 bytes per element each; the roofline's kernels 3 and 4). TE instead casts a weight once per
  step and caches it across microbatches.
* ``torchao_fsdp_fp8`` — the same with FSDP's float8 all-gather and precomputed scales
  (``enable_fsdp_float8_all_gather`` + ``precompute_float8_dynamic_scale_for_fsdp``): FSDP casts each
  rank's weight shard before the all-gather (pytorch/ao@eab345c2268a torchao/float8/fsdp_utils.py
  l.226-228) with a scale computed once per step for all weights (l.30-83), so the layer sees an FP8
  weight (float8_linear.py l.335-336: no cast, no amax); its forward GEMM reads the transposed view
  as is, and the backward's input-gradient GEMM needs it column-major: one copy of the FP8 weight
  (float8_ops.py l.252-253, ``b_data.t().contiguous().t()``; ``fp8_transpose_weight``, 1 + 1 bytes
  per element).

Priced outside the layer capture: the float8 all-gather's one byte per weight element, its shard cast and
copies (:mod:`estimator.parallel.zero3`, ``FP8_GATHER_BYTES``), the per-step scale precompute and, under
tensor parallelism, torchao's float8 TP styles (float8 all-gathers, amax all-reduces of the sharded
tensors; :mod:`estimator.parallel.fp8_amax`). Not modelled: the eager (uncompiled) kernel count. Byte
rules state fp32 capture units (the compute model halves activation bytes for 16-bit training, as in
``te_kernels``); the ops count 0 FLOPs and are priced by their bytes. The CPU implementations return the value
unchanged (FP8 is not emulated).
"""

from __future__ import annotations

import torch
from torch import Tensor

from estimator.compute.te_kernels import fp8_casts

AMAX_BYTES = 4  # the fp32 amax the second reduction stage writes (real bytes)


def _nbytes(t: Tensor) -> int:
    return t.numel() * t.element_size()


def _same(name: str):
    """A custom op ``torchao::<name>`` returning a copy of its input (shape and dtype kept)."""
    def impl(x: Tensor) -> Tensor:
        return x.clone()

    op = torch.library.custom_op(f"torchao::{name}", impl, mutates_args=())
    op.register_fake(lambda x: torch.empty_like(x))
    return op


@torch.library.custom_op("torchao::fp8_amax_final", mutates_args=())
def fp8_amax_final(x: Tensor) -> Tensor:
    """The amax's second stage over the first stage's partial maxima of ``x`` (bytes: BYTE_RULES)."""
    return x.abs().amax().reshape(1)


@fp8_amax_final.register_fake
def _(x):
    return x.new_empty((1,))


fp8_cast_dims = _same("fp8_cast_dims")  # read 16-bit x, write FP8 x row-major and column-major
fp8_cast_weight = _same("fp8_cast_weight")  # read the 16-bit weight, write one FP8 copy
fp8_amax = _same("fp8_amax")  # the weight's amax first stage: reads it whole (output: BYTE_RULES)
fp8_transpose_weight = _same("fp8_transpose_weight")  # the gathered FP8 weight copied column-major


def _cast_activation(x: Tensor) -> Tensor:
    torch.ops.torchao.fp8_amax_final(x)
    return torch.ops.torchao.fp8_cast_dims(x)


# the GEMM input (forward) and output gradient (backward): amax second stage + cast to FP8 in both layouts
TorchaoInput, TorchaoGradOutput = fp8_casts(_cast_activation)


class TorchaoWeight(torch.autograd.Function):
    """Forward: the weight's amax (both stages) and its FP8 cast; backward: the cast again (the
    high-precision weight is what forward saved), the weight gradient passing through."""

    @staticmethod
    def forward(ctx, w):
        ctx.save_for_backward(w)
        torch.ops.torchao.fp8_amax_final(torch.ops.torchao.fp8_amax(w))
        return torch.ops.torchao.fp8_cast_weight(w)

    @staticmethod
    def backward(ctx, grad):
        torch.ops.torchao.fp8_cast_weight(ctx.saved_tensors[0])
        return grad


class TorchaoGatheredWeight(torch.autograd.Function):
    """FSDP's float8 all-gather delivered the weight in FP8: forward nothing (a view); backward its
    column-major copy for the input-gradient GEMM."""

    @staticmethod
    def forward(ctx, w):
        ctx.save_for_backward(w)
        return w.view_as(w)

    @staticmethod
    def backward(ctx, grad):
        torch.ops.torchao.fp8_transpose_weight(ctx.saved_tensors[0])
        return grad


# ---- bytes per call (fp32 capture units; see the module docstring) --------------------------------
BYTE_RULES = {
    "torchao::fp8_cast_dims": lambda args, kwargs, out: 2 * _nbytes(args[0]),  # 4 B real per element
    "torchao::fp8_cast_weight": lambda args, kwargs, out: 3 * _nbytes(args[0]) // 2,  # 3 B real per element
    "torchao::fp8_amax": lambda args, kwargs, out: _nbytes(args[0]),  # 2 B real per element, read once
    "torchao::fp8_amax_final": lambda args, kwargs, out: 2 * AMAX_BYTES,  # one fp32 scalar (a launch)
    "torchao::fp8_transpose_weight": lambda args, kwargs, out: _nbytes(args[0]),  # 1 B read + 1 B written per element
}
