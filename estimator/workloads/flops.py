"""FLOP counting with PyTorch's own formulas (``torch.utils.flop_counter``) and op classes.

Conventions: a multiply-add is 2 FLOPs. PyTorch's counter only has formulas for matrix products,
convolutions and attention kernels; every other op (elementwise, normalisation, pooling, softmax,
optimizer arithmetic) counts 0 FLOPs here and is priced by its memory traffic (``mem_bytes``).

``forward_flops(zoo_model, batch)`` counts one forward pass of the model's reference sub-module
(``core``) or of the whole trained module; on the ``meta`` device it allocates nothing.
"""

from __future__ import annotations

from typing import Any

# op class of an aten op (name without the "aten::" prefix and overload). Checked in order: an
# exact name first, then the first matching substring rule. Anything else is "other".
OP_CLASSES = ("conv", "matmul", "norm", "elementwise", "pool", "embedding", "softmax", "optimizer", "other")
_EXACT = {
    "linear": "matmul", "mm": "matmul", "addmm": "matmul", "bmm": "matmul", "baddbmm": "matmul",
    "matmul": "matmul", "addbmm": "matmul", "einsum": "matmul", "_scaled_mm": "matmul",
    "embedding": "embedding", "embedding_backward": "embedding", "embedding_dense_backward": "embedding",
    "softmax": "softmax", "_softmax": "softmax", "log_softmax": "softmax", "_log_softmax": "softmax",
    "_softmax_backward_data": "softmax", "_log_softmax_backward_data": "softmax",
    "flash_attention": "attention", "flash_attention_backward": "attention",  # te:: fused attention
    "grouped_linear": "matmul", "grouped_linear_dgrad": "matmul", "grouped_linear_wgrad": "matmul",  # te:: MoE experts
    "router_gemm": "matmul", "router_gemm_fp32": "matmul",  # te:: fp32 router logits
}  # fmt: skip
_SUBSTRING_RULES = (
    ("conv", "conv"),
    ("attention", "matmul"),
    ("norm", "norm"),  # batch_norm, layer_norm, native_*_norm(_backward), group_norm
    ("pool", "pool"),
    ("embedding", "embedding"),
    ("softmax", "softmax"),
)
_ELEMENTWISE = {
    "add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_", "addcmul_", "addcdiv_", "lerp_",
    "relu", "relu_", "threshold_backward", "hardtanh", "hardtanh_", "hardtanh_backward", "gelu",
    "gelu_backward", "tanh", "tanh_backward", "sigmoid", "sigmoid_backward", "dropout",
    "native_dropout", "native_dropout_backward", "neg", "exp", "sqrt", "rsub", "pow", "where",
    "masked_fill", "masked_fill_", "copy_", "clone", "fill_", "zero_", "zeros_like", "ones_like",
    "nll_loss", "nll_loss_forward", "nll_loss_backward", "cross_entropy_loss", "mean", "sum",
    "clamp", "clamp_", "maximum", "minimum", "abs", "sign", "_foreach_add_", "_foreach_mul_",
    "bias_gelu", "bias_gelu_backward", "bias_dropout_add",  # megatron:: fused kernels
    "rope", "rope_backward", "swiglu", "swiglu_backward", "fp8_cast_transpose",  # te:: fused kernels
    "moe_permute", "moe_permute_backward", "moe_sort_chunks", "moe_unpermute", "moe_unpermute_backward",  # te:: MoE
    "moe_row_id_map_pass1", "moe_row_id_map_pass2", "moe_row_id_map_pass3", "moe_chunk_sort_map", "weighted_swiglu",
    "weighted_swiglu_backward", "moe_topk_score", "moe_topk_score_backward", "moe_aux_scores", "moe_aux_scores_backward",
    "moe_aux_loss", "moe_aux_loss_backward", "cast",  # te:: MoE router / permutation metadata
    "moe_fp8_pad", "moe_fp8_unpad", "fp8_multi_cast_transpose", "fp8_grouped_cast_transpose", "fp8_grouped_amax",  # te:: MoE FP8
    "fp8_cast_dims", "fp8_cast_weight", "fp8_amax", "fp8_amax_final", "fp8_transpose_weight",  # torchao:: float8 casts
}  # fmt: skip


def op_class(op: str, phase: str = "") -> str:
    """The op class of an op name (``"aten::conv2d"``, ``"conv2d"``, ``"megatron::bias_gelu"``).

    Mapping: convolutions (forward and backward) -> conv; mm/addmm/bmm/linear/matmul/attention ->
    matmul, except the fused flash-attention kernels (``te::flash_attention``) -> attention; batch/layer/group norm -> norm; pooling -> pool; embedding lookups -> embedding;
    (log_)softmax -> softmax; pointwise arithmetic, activations, dropout, losses, copies ->
    elementwise; every op of the optimizer phase -> optimizer; anything else (views, reshapes,
    tensor creation, detach) -> other.
    """
    if phase == "optimizer":
        return "optimizer"
    name = op.split("::")[-1].split(".")[0]  # aten:: and megatron:: (fused Megatron-LM kernels)
    if name in _EXACT:
        return _EXACT[name]
    for needle, cls in _SUBSTRING_RULES:
        if needle in name:
            return cls
    if name in _ELEMENTWISE:
        return "elementwise"
    return "other"


def count_call_flops(fn, *args: Any, **kwargs: Any) -> int:
    """Total FLOPs of ``fn(*args, **kwargs)`` by ``torch.utils.flop_counter.FlopCounterMode``."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        fn(*args, **kwargs)
    return int(counter.get_total_flops())


def forward_flops(zoo_model, batch: int = 1, device: str = "meta", core: bool = False) -> int:
    """FLOPs of one forward pass at ``batch`` (loss included unless ``core``), no gradients."""
    import torch

    with torch.no_grad():
        if core:
            return count_call_flops(zoo_model.run_core, batch, device)
        args, target = zoo_model.make_inputs(batch, device)

        def step():
            return zoo_model.loss_fn(zoo_model.module(*args), target)

        return count_call_flops(step)
