"""The fused kernels of a decoder layer (Llama, GPT, Nemotron) under Megatron-core with Transformer
Engine, as PyTorch custom ops (namespace ``te``), so a captured decoder layer
(``estimator.parallel.layer``, ``model.fused_kernels=te``) records one op per kernel the GPU runs.

Which kernels (each is one CUDA kernel per direction in the stack NVIDIA's NeMo/Megatron-core
recipes run; sources per op):

* ``rmsnorm`` — Transformer Engine's fused RMSNorm (``transformer_engine.pytorch.RMSNorm`` /
  the norm inside ``LayerNormLinear``): forward reads x and the weight, writes y; backward reads
  the gradient, x and the weight, writes dx and dweight. (The eager ``nn.RMSNorm`` is ~6 kernels.)
* ``layernorm`` — TE's fused LayerNorm (the norm inside ``LayerNormLinear`` with
  ``normalization: LayerNorm``; GPT and Nemotron-4, whose ``layernorm1p`` is the same kernel with
  ``zero_centered_gamma``): forward reads x, the weight and the bias, writes y (and the per-token
  mean and 1/std, 8 bytes per token, left out); backward reads the gradient, x and the weight,
  writes dx, dweight and dbias.
* ``rope`` — TE's fused rotary embedding (``fused_apply_rotary_pos_emb``, used by Megatron-core
  when ``apply_rope_fusion`` is on, as in NeMo's Llama recipes): one kernel reading q (or k) and
  writing the rotated tensor; backward rotates the gradient back (no saved activation).
* ``swiglu`` — Megatron-core's fused SwiGLU (megatron/core/fusions/fused_bias_swiglu.py,
  ``bias_swiglu_impl``): forward reads the ``2f``-wide fc1 output, writes ``silu(a) * b``
  (``f`` wide); backward reads the gradient and the fc1 output, writes the ``2f``-wide gradient.
* ``squared_relu`` — Nemotron-4's MLP activation ``relu(x)^2`` as NeMo compiles it
  (NVIDIA/NeMo@bf5488021ed8 nemo/collections/nlp/modules/common/megatron/utils.py: ``@jit_fuser
  def squared_relu`` with ``jit_fuser = torch.compile``; Megatron-LM's
  megatron/training/activations.py is ``@jit_fuser`` too): one generated kernel each way —
  forward reads the fc1 output and writes ``relu(x)^2``, backward reads the gradient and the fc1
  output and writes ``2 relu(x) grad``. (GPT's bias-GeLU is Megatron's ``bias_gelu``,
  ``estimator.compute.megatron_kernels``, unchanged in Megatron-core.)
* ``flash_attention`` — causal dot-product attention as one fused kernel each way (TE's
  ``DotProductAttention``; on Hopper TE prefers cuDNN's fused flash attention over Tri Dao's when
  both apply: NVIDIA NeMo docs, memory_optimizations "Flash Attention", PR NVIDIA/NeMo#9188). No
  ``s x s`` score or probability tensor ever reaches HBM. FLOPs as flash attention does them
  (Dao 2023, FlashAttention-2, Sec. 3): forward QK^T and PV, ``4 b h_q s_q s_kv d``, halved by the
  causal mask; backward five GEMMs of the same size (recomputing QK^T, then dV, dP, dQ, dK) =
  2.5 x the forward. Grouped-query attention is native (k, v carry ``h_kv`` heads; no copies).
  Context parallelism (``cp`` > 1, ring attention as TE's ``AttnFuncWithCPAndKVP2P``): the rank's
  ``s_q = s / cp`` queries meet all ``s`` keys over ``cp`` ring steps, one flash kernel per step
  on one KV chunk, so FLOPs are those of ``s_q x (cp s_q)`` (causal half, balanced by Megatron's
  2cp-chunk split) and bytes ``cp`` x one step's; the KV exchange itself is communication
  (priced in ``estimator.parallel.step``). Bytes: forward q, k, v, out and the fp32 log-sum-exp;
  backward adds the output gradient, dq, dk, dv.
* ``fp8_cast_transpose`` — with ``precision=fp8`` every FP8 GEMM needs its operands in FP8: TE's
  fused cast-transpose (transformer_engine/common/transpose/cast_transpose.cu) reads the 16-bit
  tensor once and writes it as FP8 and as a transposed FP8 copy (the one the other GEMM of the
  backward consumes): 2 + 1 + 1 = 4 bytes per element. The layer applies it to the input of every
  Linear in forward and to its output gradient in backward. Weights are cast once per step and
  cached across microbatches (TE's ``is_first_microbatch``); that per-step cost and the amax
  history / scaling-factor bookkeeping (per tensor, a few floats) are not modelled. This is TE's
  *delayed* scaling (``recipe.DelayedScaling``, ``framework.fp8_recipe=delayed``): the scale comes
  from the amax history and the cast kernel records the new amax as it goes.
* ``fp8_amax`` — TE's *current* (per-tensor) scaling (``recipe.Float8CurrentScaling``, TE >= v2.2;
  Megatron-LM ``--fp8-recipe tensorwise``; ``framework.fp8_recipe=tensorwise``): before the cast,
  ``nvte_compute_amax`` reads the 16-bit tensor once more (2 bytes per element) for this tensor's
  own scale (NVIDIA/TransformerEngine@v2.4 transformer_engine/pytorch/csrc/extensions/cast.cpp
  l.52-87: amax, then ``nvte_compute_scale_from_amax``, then ``nvte_quantize_v2``, the same
  cast-transpose as above; the fused norm + FP8 output kernel is for delayed scaling only,
  normalization.cpp l.97-109, so the norm writes 16 bits and is then quantized, as the capture
  already has it). Not modelled: the scale kernel's launch (a few floats) and, with sequence
  parallelism, the amax all-reduce (MAX, one float) over the TP group of a column-parallel input and
  a row-parallel output gradient (module/linear.py l.1453-1477, layernorm_linear.py l.1644-1668).
* ``fp8_block_quantize`` — TE's blockwise scaling (``recipe.Float8BlockScaling``, TE >= v2.3, Hopper;
  Megatron-LM ``--fp8-recipe blockwise``; ``framework.fp8_recipe=blockwise``): activations and
  gradients in 1x128 blocks (``x_block_scaling_dim = grad_block_scaling_dim = 1``, recipe/__init__.py
  l.277-313 at v2.4), one kernel (transformer_engine/common/transpose/
  quantize_transpose_vector_blockwise.cu l.145-147 ``block_scaled_1d_cast_transpose_kernel``) reading
  the 16-bit tensor once and writing the row-wise FP8 copy, the column-wise one (quantized from the
  16-bit values, not transposed FP8) and one fp32 scale per 128 elements for each: 2 + 1 + 1 +
  2 x 4 / 128 bytes per element. The GEMM then runs cuBLAS's block-scaled FP8 kernel
  (cublaslt_gemm.cu l.378-402, ``CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F`` / ``BLK128x128_32F``,
  CUDA >= 12.9); no benchmark found isolates its speed against the per-tensor kernel on Hopper (TE's
  GEMM profiling guide, docs/examples/gemm_profiling/gemm_profiling.rst at d0067d0d l.233-285,
  times it only together with its quantization and leaves it out of the pre-quantized runs), so the
  GEMM is priced as the per-tensor FP8 GEMM. Weights (128x128 blocks) are cast once per step and
  cached, as under delayed scaling (not modelled).
* MXFP8 (``recipe.MXFP8BlockScaling``) needs Blackwell's block-scaled tensor cores: refused.

MoE (``GroupedLinear``, ``te_moe_kernels``; :func:`grouped_casts`): each grouped input / output gradient
is quantized per local expert by ``tex.split_quantize`` (TE v2.9 ``module/grouped_linear.py`` l.127 forward,
l.316-326 backward; v2.16 l.177), whose ``multi_tensor_quantize_impl`` (v2.9
``pytorch/csrc/extensions/cast.cpp`` l.103-152; v2.16 l.394-441) has one fused kernel only for delayed
scaling and otherwise quantizes expert by expert:

* delayed: ``nvte_multi_cast_transpose`` over all the experts' slices, one kernel per 64 tensors
  (``common/transpose/multi_cast_transpose.cu`` l.26 ``kMaxTensorsPerKernel = 64``): ``fp8_multi_cast_transpose``.
* current scaling: per expert ``Float8CurrentScalingQuantizer::quantize_impl`` (v2.9
  ``pytorch/csrc/quantizer.cpp`` l.497-536, unchanged at v2.16): ``nvte_compute_amax_with_config`` — a
  ``zero_amax_kernel<<<1, 1>>>`` then the amax kernel (``common/recipe/current_scaling.cu`` l.72-107) —, the
  ``compute_scale_from_amax_kernel<<<1, 1>>>`` (l.258), then ``nvte_quantize_v2`` (the cast-transpose):
  ``fp8_grouped_amax`` (3 kernels per expert) and ``fp8_grouped_cast_transpose`` (1 per expert).
* blockwise: per expert one ``Float8BlockQuantizer`` quantize (bulk allocation only, v2.9 cast.cpp
  l.556-590; the quantization itself unfused): ``fp8_grouped_block_quantize`` (1 kernel per expert).

Each grouped op states the bytes of the whole grouped tensor (the sum over the experts' slices); the
kernels it launches per expert are priced by the device's launch floor
(``estimator.compute.device.GROUPED_LAUNCHES``: no op finishes before its launches have been issued).

Bytes per call are the generic rule of ``estimator.workloads.capture`` (distinct tensor inputs +
outputs) except where ``BYTE_RULES`` says otherwise; the capture runs in fp32 on the meta device
and the compute model halves activation bytes for 16-bit training, so a rule states fp32 bytes.
FLOPs: only ``flash_attention`` has a formula (``torch.utils.flop_counter``); the rest count 0
and are priced by their bytes. The CPU implementations compute the real result.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.utils.flop_counter import register_flop_formula

LSE_BYTES = 4  # fp32 log-sum-exp per query row and head (the softmax statistics flash attention saves)
AMAX_BYTES = 4  # current scaling's fp32 amax per tensor (real bytes)
BLOCK, BLOCK_SCALE_BYTES = 128, 4  # blockwise FP8: one fp32 scale per 1x128 block (TE Float8BlockScaling, docstring)


def _nbytes(t: Tensor) -> int:  # capture units: a 16-bit tensor (the sdpa layer's real-dtype capture) as its fp32 copy
    return t.numel() * (4 if t.dtype in (torch.bfloat16, torch.float16) else t.element_size())


def _vjp(fn, grad: Tensor, *inputs: Tensor) -> tuple[Tensor, ...]:
    """The CPU result of a backward op: the gradient of ``fn(*inputs)`` against ``grad`` (``torch.func``
    works inside a custom op's implementation, where autograd is below the dispatch)."""
    return torch.func.vjp(fn, *inputs)[1](grad)


# ---- RMSNorm --------------------------------------------------------------------------------------
@torch.library.custom_op("te::rmsnorm", mutates_args=())
def rmsnorm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


@rmsnorm.register_fake
def _(x, weight, eps):
    return torch.empty_like(x)


@torch.library.custom_op("te::rmsnorm_backward", mutates_args=())
def rmsnorm_backward(grad: Tensor, x: Tensor, weight: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    return _vjp(lambda xr, wr: xr * torch.rsqrt(xr.pow(2).mean(-1, keepdim=True) + eps) * wr, grad, x, weight)


@rmsnorm_backward.register_fake
def _(grad, x, weight, eps):
    return torch.empty_like(x), torch.empty_like(weight)


def _rmsnorm_setup(ctx, inputs, output):
    ctx.eps = inputs[2]
    ctx.save_for_backward(inputs[0], inputs[1])


def _rmsnorm_backward(ctx, grad):
    x, weight = ctx.saved_tensors
    dx, dw = torch.ops.te.rmsnorm_backward(grad, x, weight, ctx.eps)
    return dx, dw, None


rmsnorm.register_autograd(_rmsnorm_backward, setup_context=_rmsnorm_setup)


# ---- LayerNorm (weight and bias) -------------------------------------------------------------------
@torch.library.custom_op("te::layernorm", mutates_args=())
def layernorm(x: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps)


@layernorm.register_fake
def _(x, weight, bias, eps):
    return torch.empty_like(x)


@torch.library.custom_op("te::layernorm_backward", mutates_args=())
def layernorm_backward(grad: Tensor, x: Tensor, weight: Tensor, bias: Tensor, eps: float
                       ) -> tuple[Tensor, Tensor, Tensor]:
    return _vjp(lambda xr, wr, br: torch.nn.functional.layer_norm(xr, (x.shape[-1],), wr, br, eps), grad, x, weight, bias)


@layernorm_backward.register_fake
def _(grad, x, weight, bias, eps):
    return torch.empty_like(x), torch.empty_like(weight), torch.empty_like(bias)


def _layernorm_setup(ctx, inputs, output):
    ctx.eps = inputs[3]
    ctx.save_for_backward(inputs[0], inputs[1], inputs[2])


def _layernorm_backward(ctx, grad):
    x, weight, bias = ctx.saved_tensors
    dx, dw, db = torch.ops.te.layernorm_backward(grad, x, weight, bias, ctx.eps)
    return dx, dw, db, None


layernorm.register_autograd(_layernorm_backward, setup_context=_layernorm_setup)


# ---- rotary position embedding (rotate-half form, positions 0..s-1 of the local sequence) --------
def _rotate(t: Tensor, sign: float) -> Tensor:
    s, d = t.shape[0], t.shape[-1]
    angle = torch.arange(s, device=t.device, dtype=t.dtype)[:, None] / (10000.0 ** (torch.arange(0, d, 2, device=t.device) / d))
    cos = angle.cos().repeat(1, 2).view(s, *([1] * (t.dim() - 2)), d)
    sin = angle.sin().repeat(1, 2).view(s, *([1] * (t.dim() - 2)), d)
    half = torch.cat((-t[..., d // 2:], t[..., : d // 2]), -1)
    return t * cos + sign * half * sin


@torch.library.custom_op("te::rope", mutates_args=())
def rope(t: Tensor) -> Tensor:
    return _rotate(t, 1.0)


@rope.register_fake
def _(t):
    return torch.empty_like(t, memory_format=torch.contiguous_format)


@torch.library.custom_op("te::rope_backward", mutates_args=())
def rope_backward(grad: Tensor) -> Tensor:
    return _rotate(grad, -1.0)


@rope_backward.register_fake
def _(grad):
    return torch.empty_like(grad, memory_format=torch.contiguous_format)


rope.register_autograd(lambda ctx, grad: torch.ops.te.rope_backward(grad))


# ---- SwiGLU ----------------------------------------------------------------------------------------
@torch.library.custom_op("te::swiglu", mutates_args=())
def swiglu(y: Tensor) -> Tensor:
    a, b = y.chunk(2, -1)
    return torch.nn.functional.silu(a) * b


@swiglu.register_fake
def _(y):
    return y.new_empty((*y.shape[:-1], y.shape[-1] // 2))


@torch.library.custom_op("te::swiglu_backward", mutates_args=())
def swiglu_backward(grad: Tensor, y: Tensor) -> Tensor:
    a, b = y.chunk(2, -1)
    sig = torch.sigmoid(a)
    return torch.cat((grad * b * sig * (1 + a * (1 - sig)), grad * a * sig), -1)


def _like_input(grad, y):  # an activation's backward returns the gradient of its input
    return torch.empty_like(y)


def _register_activation(op, backward) -> None:
    """``op``'s backward is ``backward(grad, input)``; the input is saved, the output is not."""
    def setup(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    backward.register_fake(_like_input)
    op.register_autograd(lambda ctx, grad: backward(grad, ctx.saved_tensors[0]), setup_context=setup)


_register_activation(swiglu, swiglu_backward)


# ---- squared ReLU (Nemotron-4) -----------------------------------------------------------------------
@torch.library.custom_op("te::squared_relu", mutates_args=())
def squared_relu(y: Tensor) -> Tensor:
    return torch.relu(y) ** 2


@squared_relu.register_fake
def _(y):
    return torch.empty_like(y)


@torch.library.custom_op("te::squared_relu_backward", mutates_args=())
def squared_relu_backward(grad: Tensor, y: Tensor) -> Tensor:
    return 2 * torch.relu(y) * grad


_register_activation(squared_relu, squared_relu_backward)


# ---- causal flash attention (GQA-native; cp ring steps) -------------------------------------------
def _expand(kv: Tensor, heads: int) -> Tensor:
    return kv.repeat_interleave(heads // kv.shape[2], 2)


@torch.library.custom_op("te::flash_attention", mutates_args=())
def flash_attention(q: Tensor, k: Tensor, v: Tensor, cp: int) -> Tensor:
    """q: [s, b, h_q, d]; k, v: [s, b, h_kv, d] (this rank's tokens). The CPU result is causal
    attention over the local tokens (with cp > 1 the other ranks' keys live elsewhere)."""
    return _causal_attention(q, k, v)


def _causal_attention(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    qh, kh, vh = (t.permute(1, 2, 0, 3) for t in (q, _expand(k, q.shape[2]), _expand(v, q.shape[2])))
    out = torch.nn.functional.scaled_dot_product_attention(qh, kh, vh, is_causal=True)
    return out.permute(2, 0, 1, 3).contiguous()


@flash_attention.register_fake
def _(q, k, v, cp):  # the output has v's head width (multi-head latent attention: narrower than q's)
    return q.new_empty((*q.shape[:-1], v.shape[-1]))


@torch.library.custom_op("te::flash_attention_backward", mutates_args=())
def flash_attention_backward(grad: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, cp: int
                             ) -> tuple[Tensor, Tensor, Tensor]:
    return _vjp(_causal_attention, grad, q, k, v)


@flash_attention_backward.register_fake
def _(grad, q, k, v, out, cp):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _flash_setup(ctx, inputs, output):
    ctx.cp = inputs[3]
    ctx.save_for_backward(inputs[0], inputs[1], inputs[2], output)


def _flash_backward(ctx, grad):
    q, k, v, out = ctx.saved_tensors
    dq, dk, dv = torch.ops.te.flash_attention_backward(grad, q, k, v, out, ctx.cp)
    return dq, dk, dv, None


flash_attention.register_autograd(_flash_backward, setup_context=_flash_setup)


def flash_forward_flops(q_shape, cp: int, dv: int | None = None) -> int:
    """Causal forward FLOPs of one rank: QK^T (q's head width) and PV (v's, ``dv``; default q's) over
    ``s_q x (cp s_q)`` positions, halved."""
    s, b, heads, d = q_shape
    return b * heads * s * (s * cp) * (d + (d if dv is None else dv))


@register_flop_formula(torch.ops.te.flash_attention)
def _flash_flops(q_shape, k_shape, v_shape, cp, *args, out_shape=None, **kwargs) -> int:
    return flash_forward_flops(q_shape, cp, v_shape[-1])


@register_flop_formula(torch.ops.te.flash_attention_backward)
def _flash_backward_flops(grad_shape, q_shape, k_shape, v_shape, out_shape_in, cp, *args, out_shape=None, **kwargs) -> int:
    return 5 * flash_forward_flops(q_shape, cp, v_shape[-1]) // 2  # five GEMMs to the forward's two (FlashAttention-2 Sec. 3)


def _lse_bytes(q: Tensor) -> int:
    s, b, heads, _ = q.shape
    return s * b * heads * LSE_BYTES


# ---- FP8 cast + transpose --------------------------------------------------------------------------
@torch.library.custom_op("te::fp8_cast_transpose", mutates_args=())
def fp8_cast_transpose(x: Tensor) -> Tensor:
    """The FP8 copy of ``x`` a GEMM consumes (values kept in x's dtype on the CPU; bytes: BYTE_RULES)."""
    return x.clone()


@fp8_cast_transpose.register_fake
def _(x):
    return torch.empty_like(x)


def fp8_casts(cast) -> tuple[type, type]:
    """The two autograd functions that put an FP8 recipe's activation ``cast`` around a GEMM: the input's
    (forward: ``cast(x)``; backward: the gradient passes through, no kernel) and the output gradient's
    (forward: nothing, a view; backward: ``cast(grad)``). Transformer Engine's below, torchao's in
    :mod:`estimator.compute.torchao_kernels`."""

    class Input(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return cast(x)

        @staticmethod
        def backward(ctx, grad):
            return grad

    class GradOutput(torch.autograd.Function):
        @staticmethod
        def forward(ctx, y):
            return y.view_as(y)

        @staticmethod
        def backward(ctx, grad):
            return cast(grad)

    return Input, GradOutput


@torch.library.custom_op("te::fp8_amax", mutates_args=())
def fp8_amax(x: Tensor) -> Tensor:
    """Current scaling's amax of ``x`` (one fp32 value; bytes: BYTE_RULES)."""
    return x.abs().amax().reshape(1)


@fp8_amax.register_fake
def _(x):
    return x.new_empty((1,))


@torch.library.custom_op("te::fp8_block_quantize", mutates_args=())
def fp8_block_quantize(x: Tensor) -> Tensor:
    """Blockwise (1x128) FP8 copies of ``x``, row- and column-wise, with their scales (values kept; bytes: BYTE_RULES)."""
    return x.clone()


@fp8_block_quantize.register_fake
def _(x):
    return torch.empty_like(x)


def _current_scaling_cast(x: Tensor) -> Tensor:
    torch.ops.te.fp8_amax(x)
    return torch.ops.te.fp8_cast_transpose(x)


# the GEMM input (forward) and output gradient (backward) per TE scaling recipe (framework.fp8_recipe; module docstring)
CASTS = {
    "delayed": fp8_casts(lambda x: torch.ops.te.fp8_cast_transpose(x)),
    "tensorwise": fp8_casts(_current_scaling_cast),
    "blockwise": fp8_casts(lambda x: torch.ops.te.fp8_block_quantize(x)),
}


# ---- the grouped (per-expert) FP8 quantization of TE GroupedLinear (module docstring, "MoE") -------------
def grouped_op(name: str, doc: str):
    """A cast of a grouped tensor (``groups`` experts' row slices) with the bytes of the whole tensor."""

    @torch.library.custom_op(f"te::{name}", mutates_args=())
    def op(x: Tensor, groups: int) -> Tensor:
        return x.clone()

    op.__doc__ = doc

    @op.register_fake
    def _(x, groups):
        return torch.empty_like(x)

    return op


fp8_multi_cast_transpose = grouped_op("fp8_multi_cast_transpose", "Delayed scaling: every expert's slice cast-"
                                       "transposed by one multi-tensor kernel (per 64 tensors).")
fp8_grouped_cast_transpose = grouped_op("fp8_grouped_cast_transpose", "Current scaling: one cast-transpose per expert.")
fp8_grouped_block_quantize = grouped_op("fp8_grouped_block_quantize", "Blockwise: one 1x128 quantize per expert.")


@torch.library.custom_op("te::fp8_grouped_amax", mutates_args=())
def fp8_grouped_amax(x: Tensor, groups: int) -> Tensor:
    """Current scaling: per expert zero the amax, the amax, the scale from the amax (one fp32 each)."""
    return torch.stack([c.abs().amax() for c in x.chunk(groups)])


@fp8_grouped_amax.register_fake
def _(x, groups):
    return x.new_empty((groups,))


def grouped_casts(scaling: str, groups: int) -> tuple[type, type]:
    """The (input, output gradient) casts of a TE GroupedLinear of ``groups`` local experts under ``scaling``
    (``delayed`` / ``tensorwise`` / ``blockwise``; module docstring, "MoE")."""
    te = torch.ops.te
    if scaling == "delayed":
        return fp8_casts(lambda x: te.fp8_multi_cast_transpose(x, groups))
    if scaling == "tensorwise":
        def cast(x):
            te.fp8_grouped_amax(x, groups)
            return te.fp8_grouped_cast_transpose(x, groups)
        return fp8_casts(cast)
    if scaling == "blockwise":
        return fp8_casts(lambda x: te.fp8_grouped_block_quantize(x, groups))
    raise ValueError(f"no grouped FP8 casts for scaling {scaling!r}")


# ---- bytes per call (fp32 capture units; see the module docstring) --------------------------------
BYTE_RULES = {
    "te::flash_attention": lambda args, kwargs, out: (
        args[3] * (_nbytes(args[0]) + _nbytes(args[1]) + _nbytes(args[2]) + _nbytes(out)) + _lse_bytes(args[0])
    ),
    "te::flash_attention_backward": lambda args, kwargs, out: (
        args[5] * (sum(_nbytes(t) for t in args[:5]) + sum(_nbytes(t) for t in out)) + _lse_bytes(args[1])
    ),
    # read 2 B, write 1 B FP8 + 1 B transposed FP8 per element = 4 B; the capture's fp32 element is
    # halved for 16-bit training, so 2 x the fp32 tensor here
    "te::fp8_cast_transpose": lambda args, kwargs, out: 2 * _nbytes(args[0]),
    # current scaling's extra pass: reads the 16-bit tensor (2 B per element = the fp32 tensor halved) and
    # writes one fp32 amax (4 B real, 8 in capture units)
    "te::fp8_amax": lambda args, kwargs, out: _nbytes(args[0]) + 2 * AMAX_BYTES,
    # 1x128 blockwise: the cast-transpose's 4 B per element plus one fp32 scale per block for each copy
    "te::fp8_block_quantize": lambda args, kwargs, out: 2 * _nbytes(args[0]) + 2 * 2 * args[0].numel() * BLOCK_SCALE_BYTES // BLOCK,
}
# the grouped casts move the bytes of their dense counterparts over the whole grouped tensor (one amax per expert)
BYTE_RULES |= {
    "te::fp8_multi_cast_transpose": BYTE_RULES["te::fp8_cast_transpose"],
    "te::fp8_grouped_cast_transpose": BYTE_RULES["te::fp8_cast_transpose"],
    "te::fp8_grouped_block_quantize": BYTE_RULES["te::fp8_block_quantize"],
    "te::fp8_grouped_amax": lambda args, kwargs, out: _nbytes(args[0]) + 2 * AMAX_BYTES * args[1],
}
