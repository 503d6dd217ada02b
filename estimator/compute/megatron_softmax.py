"""Whether Megatron's fused causal softmax runs at a layout, by code version (torch-free: read by the framework and
step modules). The kernel and its fallback are captured by ``estimator.parallel.layer`` (``CoreAttention``); the fused
kernel's op is ``estimator.compute.megatron_kernels``."""

from __future__ import annotations

from estimator.errors import EstimatorError

SOFTMAX_RULES = ("megatron", "bigscience_2022")  # framework.fused_softmax: whose is_kernel_available decides


def check_softmax_rule(rule: object) -> None:
    """One-line error unless ``rule`` (``framework.fused_softmax``) is one of :data:`SOFTMAX_RULES`."""
    if rule not in SOFTMAX_RULES:
        raise EstimatorError(f"framework.fused_softmax must be one of {', '.join(SOFTMAX_RULES)}, got {rule!r}")


def causal_seq_ok(s: int) -> bool:
    """The sequence checks both rules make for causal self-attention (``sq == sk == s``): ``16 < s <= 2048`` and
    ``s % 4 == 0`` (:func:`fused_softmax_available`); what the layer's ``CoreAttention`` checks by itself."""
    return 16 < s <= 2048 and s % 4 == 0


def _log2_ceil(n: int) -> int:
    """The fused kernels' ``log2_ceil`` (megatron/fused_kernels/scaled_masked_softmax.h): smallest ``l``, 2^l >= n."""
    return max(0, int(n) - 1).bit_length()


def batch_per_block(key_seq_len: int) -> int:
    """``get_batch_per_block`` of megatron/fused_kernels/scaled_masked_softmax.h (NVIDIA/Megatron-LM@b0b017ff00; the
    same function at bigscience-workshop/Megatron-DeepSpeed@ae6277f5 l.316-329): rows of softmax one 128-thread block
    handles, from the next power of two of ``key_seq_len``: a warp of ``min(p2, 32)`` threads takes 2 rows when
    ``p2 <= 128``, else 1, and the block holds ``128 / warp`` warps (4 rows at sk = 2048)."""
    p2 = 1 << _log2_ceil(key_seq_len)
    warp = min(p2, 32)
    return (128 // warp) * (2 if p2 <= 128 else 1)


def fused_softmax_available(rule: str, b: int, np: int, sq: int, sk: int) -> bool:
    """Whether Megatron's ``FusedScaleMaskSoftmax.is_kernel_available`` picks the fused kernel for causal self-attention
    scores ``[b, np, sq, sk]`` (``b`` the micro-batch, ``np`` the heads on one tensor-parallel rank) in 16-bit training
    with the masked-softmax fusion on (the default) and a mask passed (the GPT model passes one). ``rule``:

    * ``megatron`` -- NVIDIA/Megatron-LM megatron/model/fused_softmax.py at b0b017ff00 (2021-08-18; the same conditions
      to 7a77abd9b6, 2022-01-12, which raised the bound to sk <= 4096): ``16 < sk <= 2048``, ``sq % 4 == 0``,
      ``b * np % 4 == 0`` and, for the causal mask, ``b * np % batch_per_block(sk) == 0``. At 6985e58938 (2021-08, the
      SC21 scripts' commit) the last check was absent; it is implied by ``b * np % 4`` whenever sk > 128
      (batch_per_block = 4).
    * ``bigscience_2022`` -- bigscience-workshop/Megatron-DeepSpeed between 9f5f5d4c (2021-10-21, "fused softmax layer
      bug fix sync") and 1cb76a64 (2022-03-06, "sync the whole Meg-LM fused_kernels sub-tree"), e.g. at ae6277f5
      (2022-02-21), the weeks of tr11-176B's prequel runs: ``16 < sq <= 2048``, ``sk % 4 == 0``, ``b * np % 4 == 0``,
      ``sk <= 2048`` and ``b * np % batch_per_block == 0`` where the static ``get_batch_per_block(b, np, sq, sk)`` is
      called as ``get_batch_per_block(sq, sk, b, np)`` and passes its arguments on as ``(sq, sk, b, np)`` to the CUDA
      ``get_batch_per_block(query_seq_len, key_seq_len, batches, attn_heads)``: the kernel's ``key_seq_len`` is the
      head count ``np``, so the block size comes from ``np`` (16 rows per block for 9-16 heads, 32 for 5-8, 64 for 3-4,
      128 for 2). 1cb76a64 restored the order (``def get_batch_per_block(sq, sk, b, np)``)."""
    check_softmax_rule(rule)
    batches = b * np
    if rule == "megatron":
        return 16 < sk <= 2048 and sq % 4 == 0 and batches % 4 == 0 and batches % batch_per_block(sk) == 0
    return 16 < sq <= 2048 and sk % 4 == 0 and batches % 4 == 0 and sk <= 2048 and batches % batch_per_block(np) == 0
