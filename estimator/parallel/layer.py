"""One tensor-parallel shard of a decoder layer, the embedding and the LM head, captured with the
PyTorch profiler.

What is captured and how:

* The modules below are what one tensor-parallel rank runs in Megatron-LM (Shoeybi et al. 2019,
  Sec. 3; Narayanan et al. 2021, Sec. 2.3): a column-parallel QKV projection holding
  ``heads / tp`` query heads (``max(1, kv_heads / tp)`` key/value heads, replicated when tp >
  kv_heads), core attention on those heads (eager: matmul, causal mask, softmax, dropout for GPT,
  matmul), a row-parallel output projection, and an MLP whose hidden dimension is ``ffn / tp``
  (GeLU for GPT, SwiGLU for Llama). Norms, residual adds and dropouts run on the full hidden
  size on every rank; with sequence parallelism (Korthikanti et al. 2022) they run on
  ``seq / tp`` tokens and the layer gathers / scatters the sequence around attention and MLP.
  The gather/scatter themselves are communication (priced by the fabric in ``step``), so the
  capture replaces them by an allocation (which costs nothing here).
* The iteration is captured on PyTorch's **meta device**: every aten op is dispatched and
  recorded by ``torch.profiler`` with its shapes, and the capture's cost mode
  (``estimator.workloads.capture``) prices every kernel call (FLOPs from PyTorch's formulas,
  the bytes its CUDA kernel moves: ``capture.kernel_bytes``; dropout dispatched as CUDA's fused
  ``native_dropout``), but no memory is allocated and nothing is computed — so a
  GPT-3-175B layer (1.8 B parameters) is captured at its real hidden size and sequence length in
  seconds. Measured durations are meaningless on meta and are not kept; a GPU's time comes from
  the compute model (``estimator.compute.device.node_times``).
* Mixture of experts (``spec.experts`` > 0): balanced routing (the load-balancing loss's aim; no
  token dropped, capacity factor 1), so whatever the expert-parallel degree every rank computes
  ``k`` expert MLPs' worth of its tokens. With ``te`` the MoE MLP is Megatron-core's MoE layer with
  its all-to-all token dispatcher (megatron/core/transformer/moe/token_dispatcher.py), one op per kernel
  (``estimator.compute.te_moe_kernels``, which cites each; table: docs/research/h54-moe-kernels.md): the
  second norm on the rank's own ``T`` tokens (no sequence gather); the bias-free router GEMM (h x E; with
  ``model.moe_router_dtype=fp32`` fp32 logits, casts and fp32 backward GEMMs); the routing — TE's fused
  top-k kernel with ``model.moe_router_fusion``, else moe_utils.py's top-k / softmax (or sigmoid, expert
  bias) / scatter ops — and, with ``model.moe_aux_loss_coeff`` > 0, the aux loss's scores, token counts and
  loss (fused or not, and its two-kernel backward start); the dispatcher's split-size reductions and its
  host sync (one launch floor); the permutation of each token to its ``k`` experts with its probabilities
  (``model.moe_permute_fusion``: TE's row-id map and permute kernels, else argsort + index_select; with
  ``hybridep="fused"``, HybridEP's fused permute (``framework.moe_permute_fusion_into_hybridep``), the row-id map
  only: the dispatch kernel writes the rows, an allocation here, and the combine kernel reads them back, so no
  permute or unpermute kernel runs in forward or backward),
  [dispatch all-to-all], the experts' TP all-gather of the ``kT`` routed rows over ``etp`` ranks (with
  sequence parallelism or tp 1), the regrouping by local expert when a rank holds more than one and the
  dispatcher is alltoall (``sorts``; fused chunk sort, else split + cat), the experts' fc1 / activation /
  fc2 at ``ffn / etp`` wide on those rows as TE GroupedLinear (one GEMM per local expert: each grouped op
  reads or writes all ``E / ep`` local experts' weights; under FP8 the rows and probabilities padded per expert
  before fc1 and fc2's output unpadded, TEGroupedMLP's Fp8Padding / Fp8Unpadding -- not with HybridEP (``hybridep``
  set), whose permute already pads each expert's rows to the FP8 alignment, so TE's padding finds them aligned and
  returns its input (sources at ``_moe``) --, and each grouped input and output
  gradient quantized per expert by the recipe, ``te_kernels.grouped_casts``) with the router probabilities applied
  inside the fused weighted SwiGLU, the regrouping back, the reduce-scatter, [combine all-to-all], and the sum of
  each token's ``k`` outputs (unpermute without probabilities; fused, or zeros + scatter-add). The
  all-to-alls, the experts' TP collectives and the dispatcher's metadata all-gather are communication
  (priced in ``step``) and are allocations here. A shared expert (``spec.shared_ffn``; Megatron-core's
  ``SharedExpertMLP``, run before the dispatch without ``--moe-shared-expert-overlap``) is the dense MLP's
  fc1 / activation / fc2 at ``shared_ffn / tp`` on the norm output, sequence-gathered and reduce-scattered like the
  dense MLP, its output added to the routed experts'. ``none`` / ``megatron`` (eager and Megatron-LM layers): the MLP runs on the
  gathered sequence, the router too, ``k`` copies of each token as an allocation, the combined
  output weighted by the router probabilities (one elementwise op).
* Fused kernels (``model.fused_kernels``, ``spec.fused``): ``none`` captures the eager PyTorch
  layer above; ``megatron`` captures what Megatron-LM runs by default (its fusions are on unless
  disabled, megatron/arguments.py @6985e58938d40ad91ac07b0fddcfad8132e1447e) with its fused CUDA
  kernels as single ops (``estimator.compute.megatron_kernels``, which cites each): QK^T as one
  batched GEMM on the [b*heads, s, d] views with the 1/sqrt(d) scale as its alpha (no copy of q
  and k, no scaling pass), ``scaled_upper_triang_masked_softmax`` in place of scale + mask +
  softmax (no mask tensor; used when Megatron's ``is_kernel_available`` passes: sequence, micro-batch x heads and,
  by code version, batch-per-block checks, ``megatron_softmax.fused_softmax_available`` with
  ``framework.fused_softmax``; else Megatron's torch fallback in fp32: cast, scale, in-place mask, softmax, cast back),
  attention dropout as ``nn.Dropout``, the QKV split on the last dimension of the
  [s, b, heads, 3d] projection (its gradient needs no permute copy), the output and second MLP
  GEMMs without bias followed by ``bias_dropout_add``, the first MLP GEMM without bias followed by
  ``bias_gelu``. Only the GPT family. Parameters are the same either way (the biases stay, they
  are added inside the fused kernels). ``te`` captures the layer as Megatron-core runs it with
  Transformer Engine (``get_gpt_layer_with_transformer_engine_spec``, the stack of NVIDIA's NeMo
  recipes for Llama, GPT-3 and Nemotron; kernels and sources in ``estimator.compute.te_kernels``):
  the fused norm (RMSNorm for Llama, LayerNorm for GPT and Nemotron), the QKV GEMM (GPT: its bias
  in the GEMM's epilogue; grouped-query attention native: ``heads / tp`` query and
  ``max(1, kv_heads / tp)`` KV heads, no repeated K/V), fused RoPE on q and k
  (``position_embedding: rope``) — with ``model.qk_norm`` first TE's RMSNorm over each head's ``head_dim`` on q
  (``heads / tp`` heads) and on k (the rank's KV heads), each a copy of the strided split view to a contiguous
  tensor (TE's RMSNorm op calls ``input_.contiguous()``: NVIDIA/TransformerEngine@v2.9
  transformer_engine/pytorch/ops/basic/rmsnorm.py l.182) and the fused norm kernel, backward one fused kernel
  each —, causal flash attention (no ``s x s`` tensor in HBM; attention
  dropout is drawn inside the kernel), the output GEMM, then the residual add — for GPT the output
  GEMM runs without its bias (``skip_bias_add``) and Megatron's fused ``bias_dropout_add`` adds
  bias, dropout and residual in one kernel (``bias_add_residual`` with ``model.dropout=0``) — the
  second fused norm, fc1 and the fused activation: SwiGLU on one ``2 ffn / tp``-wide fc1 GEMM
  (Llama; Megatron-core's gated linear unit), ``bias_gelu`` on fc1 without its bias (GPT), squared
  ReLU (Nemotron); fc2 and the residual add as after attention. With ``precision=fp8``
  (``fp8=True``) every Linear's input and output gradient pass through TE's cast-transpose kernel;
  the QKV and fc1 inputs are cast right after their norm, on the rank's own tokens before the
  sequence-parallel gather (TE's LayerNormLinear gathers FP8).
* ``sdpa`` captures the eager PyTorch layer that FSDP / Hugging Face / torchtitan (without compile) / llm-foundry
  users run, whose attention core is one fused call (``F.scaled_dot_product_attention``'s flash or cuDNN backend,
  or flash-attn): the ``none`` layer's norms, MLP and residuals as aten ops, and ``te``'s flash attention op
  (``te::flash_attention``, priced by ``framework.attention_kernel`` as for ``te``; GQA native as SDPA's
  ``enable_gqa`` / flash-attn: torchtitan@b5bcd76 torchtitan/models/common/attention.py l.380-418). Captured at the
  real dtypes of FSDP mixed precision (``param_dtype=bf16``, no autocast): bf16 weights and activations, fp32 where
  the code casts up, every kernel's bytes stated in the capture's fp32 units (``capture.real_dtypes``). Llama: the
  hand-written RMSNorm, eight kernels (``x.float()``, pow, mean, + eps, rsqrt, mul, cast back, times the weight:
  torchtitan@c22d1a8d176de2244b6631741441e0aac7987023 torchtitan/models/norms.py l.87-92; transformers'
  ``LlamaRMSNorm``); separate wq / wk / wv GEMMs (llama/model.py l.179); RoPE as torchtitan's
  ``apply_rotary_emb`` (l.76-102; at b5bcd76 torchtitan/models/common/rope.py l.254-264): per q and k an fp32
  copy, one complex multiply by the cached ``freqs_cis``, the cast back; the MLP ``w2(silu(w1 x) * w3 x)``
  (llama/model.py l.240; common/feed_forward.py l.53-54 at b5bcd76): three GEMMs, silu, mul; residual adds as
  their own kernels. GPT: ``nn.LayerNorm`` as one kernel in bf16 (llm-foundry's ``LPLayerNorm``,
  mosaicml/llm-foundry@8c8dd48f72168c5d51e2f7b151595892a8fba43d llmfoundry/models/layers/norm.py l.35-68, runs
  it in the 16-bit dtype even under autocast, where ``layer_norm`` would run in fp32: PyTorch amp docs, "CUDA
  ops that can autocast to float32"), the fused QKV and the other Linears with their bias in the GEMM, GeLU as
  one kernel, residual dropout (``p`` > 0) and add as separate kernels (no bias-dropout-add fusion:
  llmfoundry/models/layers/blocks.py l.200-226). Dense llama and gpt families only, no context parallelism (no
  ring attention in these stacks), 16-bit precisions only (the flash kernels take fp16 / bf16); tensor and
  sequence parallelism as ``none``. Not modelled: the recent ``nn.RMSNorm`` (torchtitan at b5bcd76,
  torchtitan/models/common/nn_modules.py l.134), which newer PyTorch may run as one fused kernel
  (``aten::_fused_rms_norm``); older torchtitan / HF ``repeat_kv`` (a K / V copy per query group before SDPA).
* Multi-head latent attention (``spec.mla``, ``te`` only; Megatron-core's ``MLASelfAttention``,
  NVIDIA/Megatron-LM@003b4ce2615f4e501ecbc39e01e0f76d237a35d9 megatron/core/transformer/multi_latent_attention.py):
  the input RMSNorm on the rank's own tokens (not fused with a Linear), the replicated query and key/value
  down-projections there (``parallel_mode='duplicated'``: on ``s / tp`` tokens with sequence parallelism, all
  ``s`` without), the latent RMSNorms, the sequence gather of the latents and of the rope key, the
  column-parallel up-projections (``heads / tp`` heads), rotary on the rope parts, the rope key broadcast to
  the heads and concatenated, flash attention with q/k head dim ``qk + rope`` and v head dim ``v``, then
  the output projection as for the other attention.
* Context parallelism (``cp`` > 1, ``te`` only: Megatron-core's ring attention runs through TE):
  each rank holds ``seq / cp`` tokens (Megatron's load-balanced split), so every op runs on those
  tokens, and the attention kernel covers the rank's queries against all keys (FLOPs / cp of the
  whole causal attention).
* Captured at one sequence per microbatch and scaled linearly to the microbatch size (every op
  of a layer is linear in the number of sequences at a fixed sequence length; the attention
  score ops stay quadratic in the sequence length because the capture uses the real one). A
  second cost capture at two sequences gives each op's ``weight_bytes`` as in
  ``estimator.workloads.capture`` (``w = 2 bytes(1) - bytes(2)``, clipped to ``[0, bytes(1)]``):
  the GEMMs read their weight once per microbatch, not once per sequence.
* Backward is ``out.backward(grad)`` with a given output gradient, so no loss op is attributed to
  a part; the LM head part ends at this rank's logits, and the cross-entropy over them is priced
  from the framework's loss kernel (:mod:`~estimator.parallel.loss`), not captured: its dtype and
  passes are the framework's, and the capture runs everything in fp32.
* ``fp8`` names the FP8 recipe (``framework.fp8_kernels``): ``"te"`` as above (TE's delayed scaling;
  ``"te_tensorwise"`` / ``"te_blockwise"``: its current / blockwise scaling, ``framework.fp8_recipe``, whose
  casts are ``estimator.compute.te_kernels.CASTS``), or ``"torchao"`` — torchao's
  ``Float8Linear`` (tensorwise dynamic scaling) on every Linear of the ``te`` layer, whose casts and
  amax reductions are ``estimator.compute.torchao_kernels`` (the input cast where TE's is, the output
  gradient's in backward, and the weight's amax + cast every forward and again in backward), or
  ``"torchao_fsdp_fp8"`` (the same with FSDP's float8 all-gather: the weight arrives in FP8 and is only
  copied column-major in backward); MoE layers refuse both.
* The capture is a pure function of ``(spec, tp, sp, cp, fp8, etp, ep, sorts, hybridep, fused_softmax)``
  (cacheable by those arguments). Only the TE MoE layer's MoE half (from its second norm on) depends on ``etp`` /
  ``ep`` / ``sorts`` / ``hybridep``: it is captured
  on its own (its input cut from a leaf, ``_Cut``) and spliced after the attention half's forward and before its
  backward, the order autograd runs them in the whole layer; the attention half, core attention, embedding, head
  and MTP are captured once per process for every ep a layout search tries (equal to the whole capture node for
  node: tests/test_moe_capture_split.py).
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache

from estimator.compute.megatron_softmax import causal_seq_ok
from estimator.errors import EstimatorError
from estimator.parallel.spec import FLASH, TransformerSpec
from estimator.workloads.capture_cache import disk_cached
from estimator.workloads.graph import Node, Workload

FP8_RECIPES = ("te", "torchao", "torchao_fsdp_fp8")  # whose casts surround an FP8 GEMM (framework.fp8_kernels)
TE_SCALINGS = ("delayed", "tensorwise", "blockwise", "mxfp8")  # TE's scaling recipe (framework.fp8_recipe)
TE_MODES = ("te", "te_tensorwise", "te_blockwise")  # TE's casts by recipe: delayed ("te"), current, blockwise
FP8_MODES = (*FP8_RECIPES, *TE_MODES[1:])  # the capture's ``fp8`` argument
HYBRIDEP_PERMUTES = (None, "standalone", "fused")  # the capture's ``hybridep``: not HybridEP, its permute kernel, fused


def _dtype(spec: TransformerSpec):
    """The capture's floating dtype: fp32 (16-bit in the compute model), or bf16 for the ``sdpa`` layer, captured at
    its real dtypes so its fp32 casts and fp32 norm / RoPE internals are kernels and bytes (module docstring)."""
    import torch
    return torch.bfloat16 if spec.fused == "sdpa" else torch.float32


def check_fp8_recipe(kernels: str, scaling: str) -> None:
    """``framework.fp8_recipe`` is one of :data:`TE_SCALINGS`, and only TE's kernels take one other than delayed."""
    if scaling not in TE_SCALINGS:
        raise EstimatorError(f"framework.fp8_recipe must be one of {', '.join(TE_SCALINGS)}, got {scaling!r}")
    if scaling != "delayed" and kernels != "te":
        raise EstimatorError(f"framework.fp8_recipe={scaling} is a Transformer Engine recipe; fp8_kernels={kernels} "
                             "scales by its own rule (use fp8_recipe=delayed)")


def fp8_mode(kernels: str, scaling: str = "delayed", device: str = "") -> str:
    """The capture's ``fp8`` for ``framework.fp8_kernels`` and ``framework.fp8_recipe`` (delayed keeps the
    kernels' own name, so its captures and cache entries are unchanged). MXFP8 is refused: it needs
    Blackwell's block-scaled tensor cores and no Blackwell device is modelled (conf/device)."""
    check_fp8_recipe(kernels, scaling)
    if scaling == "mxfp8":
        raise EstimatorError(f"framework.fp8_recipe=mxfp8 is Blackwell-only (TE MXFP8BlockScaling); device {device or '?'} "
                             "is not Blackwell: use delayed, tensorwise or blockwise")
    return kernels if scaling == "delayed" else f"te_{scaling}"


def fp8_recipe(fp8: bool | str | None) -> bool | str:
    """``fp8`` as False (no FP8) or one of :data:`FP8_MODES` (True = ``"te"``, the default)."""
    if fp8 is None or fp8 is False:
        return False
    if fp8 is True:
        return "te"
    if fp8 not in FP8_MODES:
        raise EstimatorError(f"fp8 kernels must be one of {', '.join(FP8_MODES)}, got {fp8!r}")
    return fp8


def _modules():
    """Module classes, defined lazily so importing this file does not import torch."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    import estimator.compute.megatron_kernels  # noqa: F401  (registers torch.ops.megatron.*)
    import estimator.compute.te_moe_kernels  # noqa: F401  (registers torch.ops.te.moe_*)
    from estimator.compute.te_kernels import CASTS, grouped_casts
    from estimator.compute.torchao_kernels import (
        TorchaoGatheredWeight,
        TorchaoGradOutput,
        TorchaoInput,
        TorchaoWeight,
    )

    class _Resize(torch.autograd.Function):
        """Stand-in for a sequence-parallel all-gather / reduce-scatter: a fresh tensor of the
        target shape (the communication is priced elsewhere; allocations cost nothing)."""

        @staticmethod
        def forward(ctx, x, seq):
            ctx.in_shape = x.shape
            return x.new_empty((seq, *x.shape[1:]))

        @staticmethod
        def backward(ctx, g):
            return g.new_empty(ctx.in_shape), None

    class _Cut(torch.autograd.Function):
        """The MoE half's input as the attention half's output, not a leaf: its gradient sums as inside the
        whole layer and goes no further (a leaf would add the gradient's accumulation into ``.grad``)."""

        @staticmethod
        def forward(ctx, x):
            return x.view_as(x)

        @staticmethod
        def backward(ctx, g):
            return None

    class _Grouped(nn.Module):
        """TE GroupedLinear's weights on a rank: ``experts`` matrices [out, in] (one GEMM each)."""

        def __init__(self, experts: int, out: int, inp: int, bias: bool):
            super().__init__()
            self.weight = nn.Parameter(torch.empty(experts, out, inp))
            self.bias = nn.Parameter(torch.empty(out)) if bias else None

    class _RouterFp32(torch.autograd.Function):
        """Megatron-core's RouterGatingLinearFunction with ``moe_router_dtype=fp32`` (moe_utils.py l.1357-1440):
        16-bit GEMM to fp32 logits; backward casts weight and input to fp32, two fp32 GEMMs, casts back."""

        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            return torch.ops.te.router_gemm(x, w)

        @staticmethod
        def backward(ctx, g):
            te = torch.ops.te
            x, w = ctx.saved_tensors
            dx = te.router_gemm_fp32(g, te.cast(w, 2, 4))
            dw = te.router_gemm_fp32(g.t(), te.cast(x, 2, 4))
            return te.cast(dx, 4, 2), te.cast(dw, 4, 2)

    class _AuxLossScaler(torch.autograd.Function):
        """Megatron-core's MoEAuxLossAutoScaler (moe_utils.py l.291-328): the aux loss rides on the probabilities;
        its backward starts the loss's gradient as ones_like(loss) * scale (two kernels)."""

        @staticmethod
        def forward(ctx, probs, aux):
            ctx.save_for_backward(aux)
            return probs.view_as(probs)

        @staticmethod
        def backward(ctx, g):
            (aux,) = ctx.saved_tensors
            return g, torch.ones_like(aux) * 1.0

    class _EagerRMSNorm(nn.Module):
        """The hand-written RMSNorm of the eager layers (``sdpa``; module docstring): the 16-bit input cast to fp32,
        pow, mean, + eps, rsqrt, mul, the cast back, times the weight (HF ``LlamaRMSNorm``, torchtitan 2024)."""

        def __init__(self, h: int):
            super().__init__()
            self.weight = nn.Parameter(torch.empty(h))

        def forward(self, x):
            y = x.float()
            return self.weight * (y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-5)).type_as(x)

    def norm(spec: TransformerSpec, h: int) -> nn.Module:
        if not spec.rmsnorm:
            return nn.LayerNorm(h)
        return _EagerRMSNorm(h) if spec.fused == "sdpa" else nn.RMSNorm(h)

    class CoreAttention(nn.Module):
        """softmax(mask(q k^T / sqrt(d))) v on this rank's heads; q, k, v: [b, heads, s, d]."""

        def __init__(self, spec: TransformerSpec, cp: int = 1, fused_softmax: bool = True):
            super().__init__()
            self.dropout = spec.dropout
            s = spec.seq_len
            self.fused = spec.fused == "megatron"
            self.flash = spec.fused in FLASH
            self.cp = cp
            # the fused kernel's sequence checks here; its micro-batch x heads checks are the caller's
            # (``fused_softmax``: megatron_softmax.fused_softmax_available, step.part_times)
            self.fused_softmax = self.fused and fused_softmax and causal_seq_ok(s)
            self.alibi = spec.position == "alibi"

        def forward(self, q, k, v):
            if self.flash:  # q: [s, b, heads, d], k/v: [s, b, kv heads, d]
                return torch.ops.te.flash_attention(q, k, v, self.cp)
            if self.fused:
                return self._megatron(q, k, v)
            s = q.shape[-2]
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
            mask = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
            probs = scores.masked_fill(mask, float("-inf")).softmax(-1)
            if self.dropout:
                probs = F.dropout(probs, self.dropout, True)
            return torch.matmul(probs, v)

        def _megatron(self, q, k, v):  # megatron/model/transformer.py ParallelAttention.forward
            b, nh, s, d = q.shape
            q3, k3, v3 = q.reshape(b * nh, s, d), k.reshape(b * nh, s, d), v.reshape(b * nh, s, d)  # views
            scores = torch.bmm(q3, k3.transpose(1, 2))  # baddbmm(beta=0, alpha=1/sqrt(d)): scale in the GEMM
            if self.alibi:  # ALiBi (bigscience-workshop/Megatron-DeepSpeed@541b967f megatron/model/transformer.py l.283-327):
                # baddbmm(alibi[:b*np, :, :sk], q, k^T, beta=1/layer_number or 1) with the [b*np, 1, sk] bias as input;
                # PyTorch copies the broadcast input into the [b*np, sq, sk] result and the GEMM reads it back (beta != 0;
                # pytorch/pytorch@002253ce92a1b7f8f3886e448f991afd3ccd309a aten/src/ATen/native/cuda/Blas.cpp
                # baddbmm_out_cuda expand_size, baddbmm_out_cuda_impl result.copy_(self), bgemm with beta): one more
                # write and read of the score matrix, captured as the bias added to it; no gradient (a constant)
                scores = scores + torch.zeros(b * nh, 1, s, dtype=scores.dtype, device=scores.device)
            if self.fused_softmax:
                probs = torch.ops.megatron.scaled_upper_triang_masked_softmax(scores, 1.0)
            else:
                probs = self._torch_softmax(scores, s)
            probs = F.dropout(probs, self.dropout, True)
            return torch.bmm(probs, v3).view(b, nh, s, d)

        @staticmethod
        def _torch_softmax(scores, s):
            """Megatron's fallback when the fused kernel's checks fail (``FusedScaleMaskSoftmax.forward_torch_softmax``,
            NVIDIA/Megatron-LM@b0b017ff00 megatron/model/fused_softmax.py l.171-186; the same at
            bigscience-workshop/Megatron-DeepSpeed@ae6277f5): with ``apply_query_key_layer_scaling`` (on unless
            ``--no-query-key-layer-scaling``) ParallelAttention sets ``attention_softmax_in_fp32`` and the softmax's
            ``scale`` to the layer number (megatron/model/transformer.py l.119-122, l.161), so the 16-bit scores are
            cast to fp32, scaled, masked in place (``attention_mask_func``: ``masked_fill_(mask, -10000.0)``), softmaxed
            and cast back: five kernels forward, five backward. An fp32 tensor is float64 here: the capture's units are
            twice the real 16-bit bytes (``capture.kernel_bytes``), so it counts its real 4 bytes per element."""
            x = scores.double() * 2.0  # input.float(); input * scale (the layer number: any value costs one pass)
            mask = torch.ones(s, s, dtype=torch.bool, device=scores.device).triu(1)
            return x.masked_fill_(mask, -10000.0).softmax(-1).float()  # mask_func; Softmax(dim=-1); .half()

    class LayerShard(nn.Module):
        def __init__(self, spec: TransformerSpec, tp: int, sp: bool, cp: int = 1, fp8: bool | str = False,
                     etp: int | None = None, ep: int = 1, sorts: bool = True, part: str = "layer",
                     hybridep: str | None = None, fused_softmax: bool = True):
            super().__init__()
            fp8 = fp8_recipe(fp8)
            if fp8 not in (False, *TE_MODES) and spec.experts:
                raise EstimatorError(f"framework.fp8_kernels={fp8}: {spec.name} is a MoE model; torchao's "
                                     "float8 MoE path is not modelled (use fp8_kernels=te or precision=bf16)")
            h, d, bias = spec.hidden, spec.head_dim, spec.biases
            self.spec, self.tp, self.sp, self.fp8 = spec, tp, sp, fp8
            # the (input, output gradient) cast pair around each FP8 GEMM: TE's by scaling recipe, or torchao's
            scaling = ("delayed" if fp8 == "te" else fp8.removeprefix("te_")) if fp8 in TE_MODES else None
            self.casts = CASTS[scaling] if scaling else (TorchaoInput, TorchaoGradOutput)
            self.part = part  # TE MoE layer: "layer" (whole), "attention" (up to its residual) or "moe" (the rest)
            self.etp = tp if etp is None else etp  # the experts' tensor-parallel degree (MoE)
            self.ep, self.local_experts = ep, spec.experts // ep if spec.experts else 0
            self.sorts = sorts  # the alltoall dispatcher regroups received rows by local expert (flex: no)
            if hybridep not in HYBRIDEP_PERMUTES:
                raise EstimatorError(f"hybridep must be one of {HYBRIDEP_PERMUTES}, got {hybridep!r}")
            self.hybridep = hybridep  # the flex dispatcher's HybridEP backend: its permute standalone or fused
            self.permute_in_dispatch = hybridep == "fused"  # HybridEP's dispatch / combine kernels (un)permute the rows
            # TE GroupedLinear's per-expert FP8 casts (te_kernels.grouped_casts): the recipe's, over the local experts
            self.grouped_casts = grouped_casts(scaling, self.local_experts) if scaling and self.local_experts else None
            self.seq = spec.seq_len // cp  # this rank's tokens (context parallelism)
            self.nh, self.nkv, self.d = spec.heads // tp, spec.kv_heads_per_rank(tp), d
            self.norm1, self.norm2 = norm(spec, h), norm(spec, h)
            if spec.mla:  # multi-head latent attention (module docstring): replicated down-projections, split up-projections
                q_lora, kv_lora, qk, rope, dv = spec.mla
                self.q_down = nn.Linear(h, q_lora, bias=False) if q_lora else None
                self.q_norm = nn.RMSNorm(q_lora) if q_lora else None
                self.q_up = nn.Linear(q_lora or h, self.nh * (qk + rope), bias=False)
                self.kv_down, self.kv_norm = nn.Linear(h, kv_lora + rope, bias=False), nn.RMSNorm(kv_lora)
                self.kv_up = nn.Linear(kv_lora, self.nh * (qk + dv), bias=False)
                self.proj = nn.Linear(self.nh * dv, h, bias=False)
            elif spec.fused == "sdpa" and spec.gated:  # torchtitan / HF Llama: wq, wk, wv (three GEMMs)
                self.wq, self.wk, self.wv = (nn.Linear(h, n * d, bias=False) for n in (self.nh, self.nkv, self.nkv))
                self.proj = nn.Linear(self.nh * d, h, bias=bias)
            else:
                self.qkv = nn.Linear(h, (self.nh + 2 * self.nkv) * d, bias=bias)
                self.proj = nn.Linear(self.nh * d, h, bias=bias)
            # model.qk_norm: Megatron-core's q_layernorm / k_layernorm (TE RMSNorm over head_dim)
            self.q_layernorm, self.k_layernorm = (nn.RMSNorm(d), nn.RMSNorm(d)) if spec.qk_norm else (None, None)
            f = spec.moe_ffn // (self.etp if spec.fused == "te" else tp) if spec.experts else spec.ffn // tp
            self.router = nn.Linear(h, spec.experts, bias=False) if spec.experts else None
            if spec.experts and spec.router.expert_bias:
                self.register_buffer("expert_bias", torch.zeros(spec.experts))
            if spec.experts and spec.fused == "te":  # TEGroupedMLP: the rank's local experts, one GEMM each
                n = self.local_experts
                self.fc1 = _Grouped(n, (2 if spec.gated else 1) * f, h, bias and not spec.gated)
                self.fc2 = _Grouped(n, h, f, bias and not spec.gated)
            elif not spec.gated:  # GPT (GeLU, biases), Nemotron (squared ReLU, no biases)
                self.fc1, self.fc2 = nn.Linear(h, f, bias=bias), nn.Linear(f, h, bias=bias)
            elif spec.fused == "te":  # Megatron-core: gate and up as one fc1 GEMM (gated linear unit)
                self.fc1, self.fc2 = nn.Linear(h, 2 * f, bias=False), nn.Linear(f, h, bias=False)
            else:
                self.gate, self.up, self.down = nn.Linear(h, f, bias=False), nn.Linear(h, f, bias=False), nn.Linear(f, h, bias=False)
            self.shared = None  # Megatron-core's SharedExpertMLP: the dense MLP's TE Linears at its own width
            if spec.experts and spec.shared_ffn:
                g = spec.shared_ffn // tp
                self.shared = nn.ModuleDict({"fc1": nn.Linear(h, (2 if spec.gated else 1) * g, bias=False),
                                             "fc2": nn.Linear(g, h, bias=False)})
            self.core = CoreAttention(spec, cp, fused_softmax)
            if spec.fused == "sdpa":  # the layer's real dtypes (module docstring); torchtitan's complex RoPE cache
                self.to(torch.bfloat16)
                if spec.position == "rope":
                    self.register_buffer("freqs_cis", torch.empty(self.seq, 1, 1, d // 2, dtype=torch.complex64))

        def _gather(self, x):
            return _Resize.apply(x, self.seq) if self.sp and self.tp > 1 else x

        def _scatter(self, x):
            return _Resize.apply(x, self.seq // self.tp) if self.sp and self.tp > 1 else x

        def _linear(self, linear, x, cast_input: bool = True, bias: bool = True):
            """A TE Linear (its bias, if any, in the GEMM's epilogue unless ``bias=False``: Megatron-core's
            skip_bias_add, the bias then added by the fused kernel that follows); with fp8 the operands
            are cast to FP8 each way."""
            if not self.fp8:
                return F.linear(x, linear.weight, linear.bias if bias else None)
            weight = linear.weight  # TE: cast once per step, cached (not priced)
            if self.fp8 not in TE_MODES:  # torchao: cast every microbatch, or (FSDP float8 all-gather) gathered in FP8
                weight = (TorchaoWeight if self.fp8 == "torchao" else TorchaoGatheredWeight).apply(weight)
            return self.casts[1].apply(F.linear(self._cast(x) if cast_input else x, weight, linear.bias if bias else None))

        def _cast(self, x):  # a GEMM input to FP8 by the recipe (TE's cast-transpose, torchao's amax + cast)
            if not self.fp8:
                return x
            return self.casts[0].apply(x)

        def _norm_gather(self, norm, x):  # TE's LayerNormLinear: the norm writes FP8, sequence-parallel gathers FP8
            if self.spec.rmsnorm:
                y = torch.ops.te.rmsnorm(x, norm.weight, 1e-5)
            else:
                y = torch.ops.te.layernorm(x, norm.weight, norm.bias, 1e-5)
            return self._gather(self._cast(y))

        def _residual(self, y, bias, x):  # Megatron-core's bias-dropout-add (fused), or the plain residual add
            if bias is None:
                return x + y
            if self.spec.dropout:
                return torch.ops.megatron.bias_dropout_add(y, bias, x, self.spec.dropout)[0]
            return torch.ops.megatron.bias_add_residual(y, bias, x)

        def _activation(self, y):  # the MLP's fused activation (bias-GeLU, squared ReLU, SwiGLU)
            if self.spec.gated:
                return torch.ops.te.swiglu(y)
            if self.spec.biases:
                return torch.ops.megatron.bias_gelu(y, self.fc1.bias)
            return torch.ops.te.squared_relu(y)

        def _mla(self, x):  # Megatron-core's MLASelfAttention up to the attention output (module docstring)
            te = torch.ops.te
            _, kv_lora, qk, rope, dv = self.spec.mla
            y = te.rmsnorm(x, self.norm1.weight, 1e-5)  # a separate norm; the down-projections run on the rank's tokens
            y = self._cast(y)
            if self.q_down is not None:
                c = te.rmsnorm(self._linear(self.q_down, y, cast_input=False), self.q_norm.weight, 1e-5)
                q = self._linear(self.q_up, self._gather(c))
            else:
                q = self._linear(self.q_up, self._gather(y), cast_input=False)
            kv_c, k_pe = self._linear(self.kv_down, y, cast_input=False).split((kv_lora, rope), -1)
            kv = self._linear(self.kv_up, self._gather(te.rmsnorm(kv_c, self.kv_norm.weight, 1e-5)))
            s, b, _ = kv.shape
            q_nope, q_pe = q.view(s, b, self.nh, qk + rope).split((qk, rope), -1)
            k_nope, v = kv.view(s, b, self.nh, qk + dv).split((qk, dv), -1)
            k_pe = te.rope(self._gather(k_pe).view(s, b, 1, rope)).expand(s, b, self.nh, rope)
            q, k = torch.cat((q_nope, te.rope(q_pe)), -1), torch.cat((k_nope, k_pe), -1)
            return self.core(q, k, v.contiguous()).view(s, b, self.nh * dv)

        def _te(self, x):  # the layer as Megatron-core + Transformer Engine run it (module docstring)
            if self.part == "moe":
                return self._residual(self._moe(x), self.fc2.bias, x)
            te = torch.ops.te
            if self.spec.mla:
                ctx = self._mla(x)
            else:
                y = self._norm_gather(self.norm1, x)
                s, b, _ = y.shape
                qkv = self._linear(self.qkv, y, cast_input=False).view(s, b, self.nh + 2 * self.nkv, self.d)
                q, k, v = qkv.split((self.nh, self.nkv, self.nkv), 2)
                if self.spec.qk_norm:  # TE's RMSNorm makes its (strided) input contiguous, then one fused kernel
                    q = te.rmsnorm(q.contiguous(), self.q_layernorm.weight, 1e-5)
                    k = te.rmsnorm(k.contiguous(), self.k_layernorm.weight, 1e-5)
                if self.spec.position == "rope":
                    q, k = te.rope(q), te.rope(k)
                ctx = self.core(q, k, v).view(s, b, self.nh * self.d)
            x = self._residual(self._scatter(self._linear(self.proj, ctx, bias=False)), self.proj.bias, x)
            if self.part == "attention":
                return x
            if self.router is not None:
                return self._residual(self._moe(x), self.fc2.bias, x)
            y = self._norm_gather(self.norm2, x)
            m = self._linear(self.fc2, self._activation(self._linear(self.fc1, y, cast_input=False, bias=False)), bias=False)
            return self._residual(self._scatter(m), self.fc2.bias, x)

        def _moe(self, x):  # Megatron-core's MoE layer on this rank's tokens (module docstring)
            te = torch.ops.te
            s, b, h = x.shape
            y = (te.rmsnorm(x, self.norm2.weight, 1e-5) if self.spec.rmsnorm
                 else te.layernorm(x, self.norm2.weight, self.norm2.bias, 1e-5))
            shared = None
            if self.shared is not None:  # every token, gathered over TP and reduce-scattered back like the dense MLP
                fc1, fc2 = self.shared["fc1"], self.shared["fc2"]
                g = self._gather(self._cast(y))
                shared = self._scatter(self._linear(fc2, self._activation(self._linear(fc1, g, cast_input=False))))
            y = y.view(s * b, h)
            r, n = self.spec.router, s * b * self.spec.top_k
            logits = _RouterFp32.apply(y, self.router.weight) if r.fp32 else self.router(y)
            probs, rmap = self._route(logits)
            tokens = self._preprocess(rmap)
            rows, pprobs, index = self._permute(y, probs, rmap)
            te.moe_host_sync(tokens)  # the dispatcher's D2H copy + synchronize, before the EP all-to-all
            # the experts' TP ranks hold distinct tokens (sequence parallel) and gather them, or (tp > 1
            # without it, etp = tp) the same tokens already
            gather = self.etp if self.sp or self.tp == 1 else 1
            if gather > 1:  # the experts' TP all-gather (communication)
                rows, pprobs = _Resize.apply(rows, n * gather), _Resize.apply(pprobs, n * gather)
            sort = self.local_experts > 1 and self.sorts
            if sort:  # [source ranks, experts] -> [experts, ranks]
                rows, pprobs = self._sort(rows, self.ep * gather, self.local_experts, pprobs)
            # TEGroupedMLP's Fp8Padding of each expert's rows and probabilities (te_moe_kernels), unless HybridEP padded
            # them as it permuted (its tokens_per_expert rounded up to get_align_size_for_quantization: Megatron-LM@
            # d7288711ba278d160d2a5a22c099915c9fe1395c token_dispatcher.py l.1040-1041, 1052, moe_utils.py l.1396-1409;
            # deepseek-ai/DeepEP@94a9f8f6b146c07d97ec58f67cd6d303296d6098 csrc/hybrid_ep/extension/permute.cu l.47-60,
            # l.193-212): TE's Fp8Padding / Fp8Unpadding then return their input (TransformerEngine@v2.14
            # module/fp8_padding.py l.124-126, fp8_unpadding.py l.123), and core_r0.18 skips them outright
            # (Megatron-LM@d0b3b775498a8ae6870075f1a5fc32bc260aa1b3 moe_utils.py l.1360-1373 skip_routed_expert_padding)
            pad = self.fp8 and self.hybridep is None
            if pad:
                rows, pprobs = te.moe_fp8_pad(rows, self.local_experts), te.moe_fp8_pad(pprobs, self.local_experts)
            h1 = self._grouped(self.fc1, rows)
            if self.spec.gated:
                act = te.weighted_swiglu(h1, pprobs)
            else:  # experts.py l.1015: the activation, then times the probabilities
                act = self._activation(h1) * pprobs[:, None]
            m = self._grouped(self.fc2, act)
            if pad:  # Fp8Unpadding of fc2's output
                m = te.moe_fp8_unpad(m, self.local_experts)
            if sort:
                m, _ = self._sort(m, self.local_experts, self.ep * gather)
            if gather > 1:
                m = _Resize.apply(m, n)  # the experts' TP reduce-scatter (communication)
            out = self._unpermute(m, index, s * b).view(s, b, h)  # after the combine all-to-all
            return out if shared is None else out + shared

        def _grouped(self, linear, x):  # TE GroupedLinear (one GEMM per local expert); FP8: its per-expert casts
            if not self.fp8:
                return torch.ops.te.grouped_linear(x, linear.weight)
            cast_in, cast_grad = self.grouped_casts
            return cast_grad.apply(torch.ops.te.grouped_linear(cast_in.apply(x), linear.weight))

        def _dtype_cast(self, t, src, dst):  # a dtype conversion kernel, where the real dtypes differ
            return torch.ops.te.cast(t, src, dst) if src != dst else t

        def _route(self, logits):  # TopKRouter.routing (router.py l.746-837): probs [T, E], routing map [T, E]
            te, r, k = torch.ops.te, self.spec.router, self.spec.top_k
            logit_bytes = 4 if r.fp32 else 2
            if r.fusion:  # TE fused_topk_with_score_function (moe_utils.py l.828-839)
                probs, rmap, _ = te.moe_topk_score(logits, k, logit_bytes)
            else:  # moe_utils.py l.900-955
                if r.score == "softmax" and r.pre_softmax:
                    scores, idx = torch.softmax(logits, -1, dtype=torch.float32).topk(k, 1)
                elif r.score == "softmax":
                    scores, idx = logits.topk(k, 1)
                    scores = torch.softmax(scores, -1, dtype=torch.float32)
                else:  # sigmoid
                    scores = torch.sigmoid(self._dtype_cast(logits, logit_bytes, 4))
                    if r.expert_bias:
                        idx = (scores + self.expert_bias).topk(k, 1).indices
                        scores = torch.gather(scores, 1, idx)
                    else:
                        scores, idx = scores.topk(k, 1)
                    if k > 1:
                        scores = scores / (scores.sum(-1, keepdim=True) + 1e-20)
                scores = self._dtype_cast(scores, 4, logit_bytes)  # probs.type_as(logits)
                probs = torch.zeros_like(logits).scatter(1, idx, scores)
                rmap = torch.zeros_like(logits).int().scatter(1, idx, 1).bool()
            if r.aux_loss_coeff:
                probs = _AuxLossScaler.apply(probs, self._aux_loss(logits, logit_bytes))
            if r.expert_bias:  # _apply_expert_bias (router.py l.732-744, one compiled kernel): tokens per expert
                rmap.sum(0)
            return probs, rmap

        def _aux_loss(self, logits, logit_bytes):  # router.py l.804-832, 410-448 (seq / global variants: same kernels)
            te, r, k = torch.ops.te, self.spec.router, self.spec.top_k
            if r.fusion:  # compute_routing_scores_for_aux_loss, switch_load_balancing_loss_func fused
                rmap, scores, _ = te.moe_aux_scores(logits, k, logit_bytes)
                return te.moe_aux_loss(scores, rmap.sum(0), r.aux_loss_coeff)
            if r.score == "softmax":  # moe_utils.py l.996-1009
                scores = torch.softmax(logits, -1, dtype=torch.float32)
            else:
                scores = torch.sigmoid(self._dtype_cast(logits, logit_bytes, 4))
                scores = scores / (scores.sum(-1, keepdim=True) + 1e-20)
            rmap = torch.zeros_like(logits).int().scatter(1, scores.topk(k, 1).indices, 1).bool()
            return torch.sum(scores.sum(0) * rmap.sum(0)) * r.aux_loss_coeff  # moe_utils.py l.146-149

        def _preprocess(self, rmap):  # MoEAlltoAllTokenDispatcher.preprocess (token_dispatcher.py l.542-601)
            tokens = rmap.sum(0)  # tokens per expert from this rank
            if self.ep == 1 and self.tp == 1:
                return tokens
            tokens.view(self.ep, self.local_experts).sum(1)  # input_splits
            every = tokens.new_empty((self.ep, self.tp, self.spec.experts))  # all-gather over TP x EP (communication)
            local = every.transpose(0, 1)[:, :, :self.local_experts].contiguous()
            per_rank = local.sum(2)
            per_rank.sum(1)  # output_splits_tp
            return local.sum((0, 1))  # tokens per local expert

        def _permute(self, y, probs, rmap):  # permutation 1 (moe_utils.py permute, l.344-494)
            te, k, t = torch.ops.te, self.spec.top_k, y.shape[0]
            if self.spec.router.permute_fusion or self.permute_in_dispatch:  # make_row_id_map's 3 passes, then
                te.moe_row_id_map_pass3(te.moe_row_id_map_pass2(te.moe_row_id_map_pass1(rmap)), k)  # TE's permute
                if self.permute_in_dispatch:  # HybridEP's fused dispatch writes the expert-ordered rows (executor.cu)
                    return _Resize.apply(y, t * k), _Resize.apply(probs.reshape(-1), t * k), None
                return (*te.moe_permute(y, probs, k), None)
            flat = rmap.T.contiguous().reshape(-1).argsort(descending=True, stable=True)[:t * k]
            index = flat % t
            pprobs = probs.T.contiguous().reshape(-1)[flat]
            return y.index_select(0, index), pprobs, index

        def _sort(self, x, ranks, experts, probs=None):  # permutation 2 (sort_chunks_by_idxs, moe_utils.py l.628-670)
            te = torch.ops.te
            if self.spec.router.permute_fusion:  # TE: a chunk-sort map, then one kernel for rows (and probabilities)
                te.moe_chunk_sort_map(x, ranks, experts)
                return te.moe_sort_chunks(x, ranks, experts), probs
            def cat(t):  # torch.split (views) + torch.cat: one copy kernel
                chunks = t.chunk(ranks * experts)
                return torch.cat([chunks[r * experts + e] for e in range(experts) for r in range(ranks)])
            return cat(x), None if probs is None else cat(probs)

        def _unpermute(self, m, index, t):  # unpermutation 1 without probabilities (token_dispatcher.py l.891-899)
            if self.permute_in_dispatch:  # HybridEP's fused combine reads the expert-ordered rows itself (executor.cu)
                return _Resize.apply(m, t)
            if self.spec.router.permute_fusion:
                return torch.ops.te.moe_unpermute(m, self.spec.top_k)
            # zeros + scatter_add_ of the rows (moe_utils.py l.604-626); index_add_ moves the same bytes without
            # the [kT, h] expanded index view the capture would count
            return torch.zeros((t, m.shape[1]), dtype=m.dtype, device=m.device).index_add_(0, index, m)

        def _dispatch(self, y):  # MoE: route, then k copies of each token to the experts (all-to-all stand-in)
            if self.router is None:
                return y, None
            weight = self.router(y).softmax(-1).topk(self.spec.top_k, -1).values.sum(-1, keepdim=True)
            return _Resize.apply(y, y.shape[0] * self.spec.top_k), weight

        def _combine(self, m, weight):  # MoE: back to this rank's tokens, weighted by the router
            return m if weight is None else _Resize.apply(m, m.shape[0] // self.spec.top_k) * weight

        def _rotary(self, x):  # Llama: rotate half the head dimensions by position-dependent angles
            s, d = x.shape[-2], x.shape[-1]
            angle = torch.arange(s, device=x.device)[:, None] * torch.arange(d // 2, device=x.device)[None, :]
            cos, sin = angle.cos().repeat(1, 2), angle.sin().repeat(1, 2)
            half = torch.cat((-x[..., d // 2:], x[..., : d // 2]), -1)
            return x * cos + half * sin

        def _eager_attention(self, q, k, v):  # none: [s, b, heads, d] -> [b, heads, s, d], s x s scores, and back
            q, k, v = (t.permute(1, 2, 0, 3) for t in (q, k, v))
            if self.spec.position == "rope":
                q, k = self._rotary(q), self._rotary(k)
            if self.nkv != self.nh:  # grouped-query attention: each KV head serves nh / nkv query heads
                k, v = k.repeat_interleave(self.nh // self.nkv, 1), v.repeat_interleave(self.nh // self.nkv, 1)
            return self.core(q, k, v).permute(2, 0, 1, 3)

        def _flash_attention(self, q, k, v):  # sdpa: eager RoPE, then the flash kernel on [s, b, heads, d] (GQA native)
            if self.spec.position == "rope":
                q, k = self._complex_rotary(q), self._complex_rotary(k)
            return self.core(q, k, v)

        def _complex_rotary(self, x):  # torchtitan's apply_rotary_emb: fp32 copy, complex multiply, cast back
            pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
            return torch.view_as_real(pairs * self.freqs_cis).flatten(-2).type_as(x)

        def forward(self, x):  # x: [s (or s/tp with SP), b, h]
            if self.spec.fused == "te":
                return self._te(x)
            if self.spec.fused == "megatron":
                return self._megatron(x)
            y = self._gather(self.norm1(x))
            s, b, _ = y.shape
            if self.spec.fused == "sdpa" and self.spec.gated:
                q, k, v = (w(y).view(s, b, -1, self.d) for w in (self.wq, self.wk, self.wv))
            else:
                q, k, v = self.qkv(y).view(s, b, -1, self.d).split((self.nh, self.nkv, self.nkv), 2)
            attend = self._flash_attention if self.spec.fused == "sdpa" else self._eager_attention
            ctx = attend(q, k, v).reshape(s, b, self.nh * self.d)
            a = self._scatter(self.proj(ctx))
            x = x + (F.dropout(a, self.spec.dropout, True) if self.spec.dropout else a)
            y = self._gather(self.norm2(x))
            y, weight = self._dispatch(y)
            if not self.spec.gated:
                m = self.fc2(F.gelu(self.fc1(y)))
            else:
                m = self.down(F.silu(self.gate(y)) * self.up(y))
            m = self._scatter(self._combine(m, weight))
            return x + (F.dropout(m, self.spec.dropout, True) if self.spec.dropout else m)

        def _megatron(self, x):  # GPT layer with Megatron-LM's default fused kernels (module docstring)
            bda = torch.ops.megatron.bias_dropout_add
            y = self._gather(self.norm1(x))
            s, b, _ = y.shape
            # [s, b, heads, 3d] split on the last dimension (megatron/model/transformer.py), q/k/v: [b, heads, s, d] views
            q, k, v = (t.permute(1, 2, 0, 3) for t in self.qkv(y).view(s, b, self.nh, 3 * self.d).split(self.d, -1))
            ctx = self.core(q, k, v).permute(2, 0, 1, 3).reshape(s, b, self.nh * self.d)
            a = self._scatter(F.linear(ctx, self.proj.weight))  # skip_bias_add=True
            x = bda(a, self.proj.bias, x, self.spec.dropout)[0]
            y = self._gather(self.norm2(x))
            y, weight = self._dispatch(y)
            m = F.linear(torch.ops.megatron.bias_gelu(F.linear(y, self.fc1.weight), self.fc1.bias), self.fc2.weight)
            m = self._scatter(self._combine(m, weight))
            return bda(m, self.fc2.bias, x, self.spec.dropout)[0]

    class EmbeddingShard(nn.Module):
        """Vocabulary-parallel token embedding (+ learned positions, + dropout)."""

        def __init__(self, spec: TransformerSpec, tp: int):
            super().__init__()
            self.tokens = nn.Embedding(spec.padded_vocab(tp) // tp, spec.hidden)
            self.positions = nn.Embedding(spec.seq_len, spec.hidden) if spec.position == "learned" else None
            self.dropout = spec.dropout

        def forward(self, ids):  # ids: [s, b]
            x = self.tokens(ids)
            if self.positions is not None:
                x = x + self.positions(torch.arange(ids.shape[0], device=ids.device))[:, None, :]
            return F.dropout(x, self.dropout, True) if self.dropout else x

    class HeadShard(nn.Module):
        """Final norm and vocabulary-parallel LM head up to this rank's logits; the cross-entropy after
        it is priced by the framework's loss kernel (:mod:`~estimator.parallel.loss`)."""

        def __init__(self, spec: TransformerSpec, tp: int):
            super().__init__()
            self.norm = norm(spec, spec.hidden)
            self.head = nn.Linear(spec.hidden, spec.padded_vocab(tp) // tp, bias=False)

        def forward(self, x):
            return self.head(self.norm(x))

    class MtpShard(nn.Module):
        """One multi-token prediction depth's own ops beside its decoder layer (``spec.mtp``; Megatron-core's
        MultiTokenPredictionLayer): RMSNorm of the shifted tokens' embedding and of the hidden state, their
        concatenation and the column-parallel ``2h -> h/tp`` projection; the decoder layer, the shared head
        and the loss are priced as the other parts."""

        def __init__(self, spec: TransformerSpec, tp: int):
            super().__init__()
            self.enorm, self.hnorm = norm(spec, spec.hidden), norm(spec, spec.hidden)
            self.eh_proj = nn.Linear(2 * spec.hidden, spec.hidden // tp, bias=False)

        def forward(self, e, x):  # e, x: [s, b, h]
            return self.eh_proj(torch.cat((self.enorm(e), self.hnorm(x)), -1))

    return torch, CoreAttention, LayerShard, EmbeddingShard, HeadShard, MtpShard, _Cut


def _priced(module, inputs: tuple) -> list:
    """Top-level ops of forward + backward of ``module(*inputs)`` with their FLOPs and bytes."""
    from torch.profiler import record_function

    from estimator.workloads.capture import _PHASE_MARK, _cost_mode, _priced_ops, _profiled

    module.zero_grad(set_to_none=True)  # every pass starts without gradients (no accumulation ops)
    out = module(*inputs)
    grad = out.new_empty(out.shape)

    def step() -> None:
        with record_function(_PHASE_MARK.format("forward")):
            y = module(*inputs)
        with record_function(_PHASE_MARK.format("backward")):
            y.backward(grad)
        with record_function(_PHASE_MARK.format("optimizer")):
            pass

    with _cost_mode():
        return _priced_ops(_profiled(step))


def _capture(name: str, module, make_inputs, fused: str) -> Workload:
    """Forward + backward of ``module(*make_inputs(b))`` on the meta device under the profiler, at
    one sequence (the workload) and at two (for ``weight_bytes``, see the module docstring)."""
    from estimator.compute.gemm_shape import token_attrs
    from estimator.workloads.capture import _weight_bytes, cuda_dispatch, real_dtypes
    from estimator.workloads.flops import op_class

    with cuda_dispatch(), real_dtypes(fused == "sdpa"):
        ops = _priced(module, make_inputs(1))
        unpaired = _weight_bytes(ops, _priced(module, make_inputs(2)))
    kept = [o for o in ops if "empty" not in o.op and o.phase in ("forward", "backward")]
    nodes = tuple(
        Node(id=i, name=o.op, deps=(i - 1,) if i else (), op=o.op, op_class=op_class(o.op, o.phase), phase=o.phase,
             flops=float(o.flops), mem_bytes=float(o.mem_bytes), weight_bytes=float(o.weight_bytes),
             input_shapes=o.input_shapes, scales_with_batch=True,
             attrs=token_attrs(o.op, o.input_shapes, o.doubled_shapes) if op_class(o.op, o.phase) == "matmul" else {})
        for i, o in enumerate(kept)
    )
    params = sum(p.numel() for p in module.parameters())
    forward = sum(n.flops for n in nodes if n.phase == "forward")
    return Workload(name=name, nodes=nodes, source="capture:torch.profiler(meta)", devices=1, batch_size=1,
                    capture_device="meta", params=params, forward_flops=forward,
                    meta={"capture": "meta device, one sequence per microbatch", "fused_kernels": fused,
                          "weight_bytes_estimate": "2*bytes(1 sequence) - bytes(2 sequences) per op",
                          "weight_bytes_unpaired_ops": unpaired}).validate()


def _splice(name: str, attention: Workload, moe: Workload, params: int) -> Workload:
    """The TE MoE layer from its two halves captured apart: the attention half's forward, the MoE half's
    forward and backward, the attention half's backward (autograd runs the later half's backward first:
    its ops come after the attention's in creation order, and the attention's backward waits for the
    gradient of its output, which the MoE half produces)."""
    by_phase = lambda w, ph: [n for n in w.nodes if n.phase == ph]  # noqa: E731
    order = (by_phase(attention, "forward") + by_phase(moe, "forward") + by_phase(moe, "backward")
             + by_phase(attention, "backward"))
    nodes = tuple(replace(n, id=i, name=n.op, deps=(i - 1,) if i else ()) for i, n in enumerate(order))
    unpaired = attention.meta["weight_bytes_unpaired_ops"] + moe.meta["weight_bytes_unpaired_ops"]
    return replace(moe, name=name, nodes=nodes, params=params,
                   forward_flops=sum(n.flops for n in nodes if n.phase == "forward"),
                   meta={**moe.meta, "weight_bytes_unpaired_ops": unpaired}).validate()


def _layer_input(spec: TransformerSpec, tp: int, sp: bool, cp: int, cut: bool = False):
    """The layer's input at ``b`` sequences: a leaf, or (``cut``, the MoE half) cut from one (``_Cut``)."""
    torch, *_, cut_fn = _modules()
    s = spec.seq_len // cp

    def make(b):
        x = torch.empty(s // tp if sp and tp > 1 else s, b, spec.hidden, dtype=_dtype(spec), requires_grad=True)
        return (cut_fn.apply(x) if cut else x,)
    return make


def _tag(spec: TransformerSpec, tp: int, sp: bool, cp: int, fp8: bool | str, etp: int | None, ep: int, sorts: bool,
         hybridep: str | None = None, fused_softmax: bool = True) -> str:
    moe = (f".etp{etp or tp}.ep{ep}{'' if sorts else '.nosort'}{f'.hybridep_{hybridep}' if hybridep else ''}"
           if spec.experts and spec.fused == "te" else "")
    return (f"{spec.name}.tp{tp}{'.sp' if sp else ''}{f'.cp{cp}' if cp > 1 else ''}{moe}"
            f"{f'.{spec.fused}' if spec.fused != 'none' else ''}{'.fp8' if fp8 else ''}"
            # delayed TE scaling: the tag (and cache entry) as before
            f"{f'.{fp8}' if fp8 not in (False, 'te') else ''}"
            f"{'.torch_softmax' if not fused_softmax and spec.fused == 'megatron' else ''}")


@lru_cache(maxsize=64)
def _attention_half(spec: TransformerSpec, tp: int, sp: bool, cp: int, fp8: bool | str) -> Workload:
    """The TE MoE layer up to its attention residual: the same for every etp / ep / sorts (captured once per process)."""
    torch, _, LayerShard, *_ = _modules()
    with torch.device("meta"):
        half = LayerShard(spec, tp, sp, cp, fp8, part="attention")
        return _capture(f"{_tag(spec, tp, sp, cp, fp8, None, 1, True)}.attention_half", half,
                        _layer_input(spec, tp, sp, cp), spec.fused)


@lru_cache(maxsize=64)
def _other_parts(spec: TransformerSpec, tp: int, sp: bool, cp: int, fp8: bool | str,
                 fused_softmax: bool = True) -> dict[str, Workload]:
    """``attention`` (core attention), ``embedding``, ``head`` (and ``mtp``): none depends on the experts' layout."""
    torch, CoreAttention, _, EmbeddingShard, HeadShard, MtpShard, _ = _modules()
    s = spec.seq_len // cp
    nh, nkv, d = spec.heads // tp, spec.kv_heads_per_rank(tp), spec.head_dim
    dtype = _dtype(spec)
    with torch.device("meta"):
        emb, head = EmbeddingShard(spec, tp).to(dtype), HeadShard(spec, tp).to(dtype)
        core = CoreAttention(spec, cp, fused_softmax)
        if spec.fused in FLASH:  # flash attention takes [s, b, heads, d] with kv_heads for k and v (MLA: v narrower)
            def core_inputs(b):
                dims = (spec.q_head_dim, spec.q_head_dim, spec.v_head_dim)
                return tuple(torch.empty(s, b, n, dn, dtype=dtype, requires_grad=True)
                             for n, dn in zip((nh, nkv, nkv), dims, strict=True))
        else:
            def core_inputs(b):
                return tuple(torch.empty(b, nh, s, d, requires_grad=True) for _ in range(3))
        parts = {
            "attention": _capture("attention", core, core_inputs, spec.fused),
            "embedding": _capture("embedding", emb, lambda b: (torch.zeros(s, b, dtype=torch.long),), spec.fused),
            "head": _capture("head", head, lambda b: (torch.empty(s, b, spec.hidden, dtype=dtype, requires_grad=True),),
                             spec.fused),
        }
        if spec.mtp:  # multi-token prediction's projection (MtpShard), once per depth on the last stage
            parts["mtp"] = _capture("mtp", MtpShard(spec, tp),
                                    lambda b: tuple(torch.empty(s, b, spec.hidden, requires_grad=True) for _ in range(2)),
                                    spec.fused)
        return parts


@lru_cache(maxsize=64)
@disk_cached  # kept between processes, keyed by every argument and this capture's sources
def capture_parts(spec: TransformerSpec, tp: int, sp: bool, cp: int = 1, fp8: bool | str = False,
                  etp: int | None = None, ep: int = 1, sorts: bool = True,
                  hybridep: str | None = None, fused_softmax: bool = True) -> dict[str, Workload]:
    """The per-rank ``layer``, ``attention`` (core attention only, for selective recompute),
    ``embedding`` and ``head`` workloads of ``spec`` at tensor-parallel degree ``tp`` and
    context-parallel degree ``cp`` (one sequence of ``seq / cp`` tokens; scale with
    ``Workload.scaled_to_batch``); ``fp8``: the layer's Linears as FP8 GEMMs with the casts of
    Transformer Engine (``"te"``, or True) or of torchao's ``Float8Linear`` (``"torchao"``,
    ``"torchao_fsdp_fp8"``);
    ``etp`` / ``ep``: the experts' tensor- and expert-parallel degrees (MoE; ``etp`` None = ``tp``); ``sorts``:
    the dispatcher regroups a rank's received rows by local expert (the alltoall dispatcher); ``hybridep``: the flex
    dispatcher's HybridEP backend, None (another dispatcher), ``"standalone"`` (its permute pads each expert's rows, so
    no FP8 padding copy runs) or ``"fused"`` (that, and its dispatch / combine kernels permute and unpermute the rows,
    so the layer runs neither); ``fused_softmax``: False when the layout fails the fused softmax's micro-batch x heads
    checks (``model.fused_kernels=megatron``; ``megatron_softmax.fused_softmax_available``, decided in
    ``step.part_times``), so Megatron's fp32 torch fallback runs (``CoreAttention._torch_softmax``); ignored otherwise.
    Only the TE MoE layer's MoE half depends on ``etp`` / ``ep`` / ``sorts``: the rest is captured once per
    process and shared (a search over ep recaptures only that half; the result equals
    :func:`capture_whole_layer` node for node, tests/test_moe_capture_split.py)."""
    fp8 = fp8_recipe(fp8)
    torch, _, LayerShard, *_ = _modules()
    fused_softmax = fused_softmax or spec.fused != "megatron"  # only the megatron layer reads it: one cache entry
    tag = _tag(spec, tp, sp, cp, fp8, etp, ep, sorts, hybridep, fused_softmax)
    parts = {name: replace(w, name=f"{tag}.{name}")
             for name, w in _other_parts(spec, tp, sp, cp, fp8, fused_softmax).items()}
    if not (spec.experts and spec.fused == "te"):
        whole = capture_whole_layer(spec, tp, sp, cp, fp8, etp, ep, sorts, fused_softmax=fused_softmax)
        return {"layer": whole, **parts}
    with torch.device("meta"):
        shard = LayerShard(spec, tp, sp, cp, fp8, etp, ep, sorts, part="moe", hybridep=hybridep)
        moe = _capture(f"{tag}.moe_half", shard, _layer_input(spec, tp, sp, cp, cut=True), spec.fused)
        params = sum(p.numel() for p in shard.parameters())
    return {"layer": _splice(f"{tag}.layer", _attention_half(spec, tp, sp, cp, fp8), moe, params), **parts}


def capture_whole_layer(spec: TransformerSpec, tp: int, sp: bool, cp: int = 1, fp8: bool | str = False,
                        etp: int | None = None, ep: int = 1, sorts: bool = True,
                        hybridep: str | None = None, fused_softmax: bool = True) -> Workload:
    """The per-rank ``layer`` workload captured in one piece (``capture_parts`` splits the TE MoE layer)."""
    fp8 = fp8_recipe(fp8)
    torch, _, LayerShard, *_ = _modules()
    with torch.device("meta"):
        return _capture(f"{_tag(spec, tp, sp, cp, fp8, etp, ep, sorts, hybridep, fused_softmax)}.layer",
                        LayerShard(spec, tp, sp, cp, fp8, etp, ep, sorts, hybridep=hybridep,
                                   fused_softmax=fused_softmax),
                        _layer_input(spec, tp, sp, cp), spec.fused)
