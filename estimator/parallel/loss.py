"""The language-model loss (cross-entropy over the vocabulary) as the framework's kernel runs it.

The LM head's GEMM is captured with the rest of the head (:mod:`~estimator.parallel.layer`); the
loss after it is priced here from the passes its kernel makes over the ``tokens x vocab / tp``
logits of a rank, because which kernel runs, and in which dtype, is a fact of the framework and its
version, not of the shapes (``framework.loss_kernel``, cited in ``conf/framework/*.yaml`` and, per
validation run, in ``validation/llm_rows.md``, "LM loss kernels"). All of them compute in fp32; they
differ in how many times the logits cross HBM (bytes per logit element, forward + backward, 16-bit
training; the code each count is read from is named there):

* ``torch_fp32`` (14 + 22) — ``F.cross_entropy`` on logits cast to fp32 (``.float()``, or autocast,
  whose fp32 list holds ``cross_entropy``), eager: cast, ``log_softmax``; ``nll_loss`` backward's
  zeroed fp32 gradient, ``log_softmax`` backward, the cast back.
* ``torch_bf16`` (4 + 8) — the same on the 16-bit logits, no cast (no autocast around the loss).
* ``megatron_fp32`` (38 + 14) — Megatron's unfused ``vocab_parallel_cross_entropy`` on
  ``logits.float()``: cast, max, subtract, exp, sum, divide (the fp32 softmax kept for backward);
  backward scales it in place by the incoming gradient, then the cast back.
* ``megatron_fused`` (22 + 6) — Megatron-core's ``cross_entropy_loss_fusion`` with its ``native``
  implementation (``megatron/core/fusions/fused_cross_entropy.py``): three jit-fused kernels (cast +
  max writing the fp32 logits; subtract + exp + sum; divide), backward one kernel reading the fp32
  softmax and writing the 16-bit gradient (a structural count: the generated kernels are not read).
* ``te_fused`` (6 + 4) — Transformer Engine's ``parallel_cross_entropy`` (Triton, online softmax;
  Megatron-core ``cross_entropy_fusion_impl: te``): one read for the softmax statistics, one read +
  the gradient written in place in forward; backward scales it in place.
* ``xentropy`` (4 + 4) — flash-attn 0.x / 1.x's and Apex's ``xentropy`` CUDA kernel: two reads in
  forward, read + write in backward.
* ``triton_fused`` (2 + 4) — flash-attn 2.x's Triton cross-entropy: one read in forward, read + write
  in backward; also used for a ``torch.compile``'d loss (Inductor fuses the cast, softmax and
  reduction the same way; a structural count).

A pass is ``(reads, writes)`` in element widths: ``"L"`` the logits' training width (2 bytes under
16-bit and FP8 training, whose LM head stays BF16; 4 under fp32), ``"F"`` fp32; a cast-only pass
vanishes when the logits are already fp32 (the fused kernels are priced at 4-byte logits then). Bytes
are logical (each operand read once, each result written once, as the captured ops are priced). Not
priced: the per-token reductions and the vocabulary-parallel all-reduces of ``tokens`` values,
``tokens x 4`` bytes against ``tokens x vocab / tp x`` the passes. What a kernel keeps for its backward
(:data:`SAVED`) and what its backward allocates beside it (:func:`peak_bytes`) are the last stage's logit
memory (:mod:`~estimator.parallel.memory`). ``metric_passes`` adds
forward-only ``torch_fp32`` cross-entropies over the same logits (training metrics computed on every
microbatch, e.g. Composer's ``LanguageCrossEntropy`` and ``Perplexity``).
"""

from __future__ import annotations

from typing import NamedTuple

from estimator.compute.device import DeviceProfile
from estimator.parallel.layout import Layout
from estimator.parallel.spec import TransformerSpec


class Pass(NamedTuple):
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    cast: bool = False  # a dtype cast only: no pass when the logits are already fp32


_UP, _DOWN = Pass(("L",), ("F",), cast=True), Pass(("F",), ("L",), cast=True)
LOSS_KERNELS: dict[str, dict[str, tuple[Pass, ...]]] = {
    "torch_fp32": {
        "forward": (_UP, Pass(("F",), ("F",))),  # cast, log_softmax
        # nll_loss backward (zeroed fp32 gradient), log_softmax backward (gradient + saved output), cast back
        "backward": (Pass((), ("F",)), Pass(("F", "F"), ("F",)), _DOWN),
    },
    "torch_bf16": {
        "forward": (Pass(("L",), ("L",)),),  # log_softmax
        "backward": (Pass((), ("L",)), Pass(("L", "L"), ("L",))),
    },
    "megatron_fp32": {
        # cast, max, subtract, exp (in place: read + write), sum, divide (in place)
        "forward": (_UP, Pass(("F",), ()), Pass(("F",), ("F",)), Pass(("F",), ("F",)), Pass(("F",), ()), Pass(("F",), ("F",))),
        "backward": (Pass(("F",), ("F",)), _DOWN),  # softmax x gradient in place, cast back
    },
    "megatron_fused": {
        # cast + max (writes the fp32 logits), subtract + exp + sum, divide
        "forward": (Pass(("L",), ("F",)), Pass(("F",), ("F",)), Pass(("F",), ("F",))),
        "backward": (Pass(("F",), ("L",)),),  # softmax x gradient, one-hot subtracted, cast: one kernel
    },
    "te_fused": {
        "forward": (Pass(("L",), ()), Pass(("L",), ("L",))),  # online softmax; loss + gradient in place
        "backward": (Pass(("L",), ("L",)),),  # gradient x incoming gradient, in place
    },
    "xentropy": {
        "forward": (Pass(("L",), ()), Pass(("L",), ())),  # max + sum, sum of exponentials
        "backward": (Pass(("L",), ("L",)),),
    },
    "triton_fused": {
        "forward": (Pass(("L",), ()),),
        "backward": (Pass(("L",), ("L",)),),
    },
}
# What the kernel keeps per logit element from its forward to its backward (memory): the fp32 softmax or
# log-softmax (Megatron's kernels, torch's fp32 loss), or the 16-bit logits buffer (the fused kernels read the
# logits again in backward; Transformer Engine's writes the gradient into it in forward; torch's bf16 loss keeps
# its bf16 log-softmax). docs/research/h41-loss-kernels.md, "Memory side-effects".
SAVED = {"torch_fp32": "F", "torch_bf16": "L", "megatron_fp32": "F", "megatron_fused": "F", "te_fused": "L",
         "xentropy": "L", "triton_fused": "L"}
# What the kernel's backward allocates per logit element while its saved buffer still lives (the op sequences of LOSS_KERNELS): torch's loss allocates nll_loss
# backward's zeroed gradient, then log_softmax backward's output beside it and the saved log-softmax; Megatron's
# kernels scale the fp32 softmax in place and write the 16-bit gradient (the cast back) beside it; Transformer
# Engine's writes the gradient in place (nothing new); flash-attn's / Apex's xentropy and flash-attn 2's Triton loss
# write a new 16-bit gradient (their ``inplace_backward`` defaults to False: flash_attn/losses/cross_entropy.py).
BACKWARD_NEW = {"torch_fp32": "FF", "torch_bf16": "LL", "megatron_fp32": "L", "megatron_fused": "L", "te_fused": "",
                "xentropy": "L", "triton_fused": "L"}
WIDTH = {"F": 4}


def logit_width(precision: str) -> int:
    """Bytes per logit in training: 4 under fp32, else 2 (FP8 training keeps the LM head BF16)."""
    return 4 if precision in ("fp32", "tf32") else 2


def pass_bytes(kernel: str, phase: str, width: int) -> float:
    """HBM bytes per logit element of ``kernel``'s ``phase`` at logit ``width`` (module docstring)."""
    size = {**WIDTH, "L": width}
    return float(sum(sum(size[w] for w in p.reads) + sum(size[w] for w in p.writes)
                     for p in LOSS_KERNELS[kernel][phase] if not (p.cast and width == size["F"])))


def peak_bytes(kernel: str, width: int = 2) -> int:
    """Bytes per logit element live at ``kernel``'s backward peak at logit ``width``: what it keeps for its backward
    (:data:`SAVED`) plus the gradients its backward allocates beside it (:data:`BACKWARD_NEW`)."""
    size = {**WIDTH, "L": width}
    return sum(size[w] for w in SAVED[kernel] + BACKWARD_NEW[kernel])


def logit_elements(spec: TransformerSpec, layout: Layout) -> float:
    """Logits one rank of the last stage holds per microbatch: its ``seq / cp`` tokens x ``mbs`` x its
    vocabulary slice (``padded vocabulary / tp``)."""
    return spec.seq_len // layout.cp * layout.micro_batch_size * spec.padded_vocab(layout.tp) / layout.tp


def loss_times(kernel: str, logits: float, device: DeviceProfile, precision: str,
               metric_passes: int = 0) -> tuple[float, float]:
    """(forward, backward) seconds of the loss over ``logits`` elements (tokens x vocabulary slice)."""
    width = logit_width(precision)
    rate = device.memory_rate("softmax", precision)
    fwd = pass_bytes(kernel, "forward", width) + metric_passes * pass_bytes("torch_fp32", "forward", width)
    return logits * fwd / rate, logits * pass_bytes(kernel, "backward", width) / rate
