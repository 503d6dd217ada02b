"""The language-model loss (cross-entropy over the vocabulary) as the framework's kernel runs it.

The LM head's GEMM is captured with the rest of the head (:mod:`~estimator.parallel.layer`); the
loss after it is priced here from the passes its kernel makes over the ``tokens x vocab / tp``
logits, because which kernel runs, and in which dtype, is a framework fact, not a shape fact
(``framework.loss_kernel``, cited in ``conf/framework/*.yaml``). Every stack computes the loss in
fp32; they differ in how many times the logits cross HBM:

* ``torch_fp32`` — ``F.cross_entropy`` on logits cast to fp32 (an explicit ``.float()``, or
  autocast, whose fp32 list holds ``cross_entropy`` / ``log_softmax`` / ``nll_loss``), eager:
  cast, ``log_softmax`` forward; ``nll_loss`` backward writes a zeroed fp32 gradient,
  ``log_softmax`` backward reads it and the saved output, the cast back writes the 16-bit gradient.
* ``megatron_fp32`` — Megatron's unfused ``vocab_parallel_cross_entropy`` on ``logits.float()``:
  cast, max, subtract, exp, sum, divide (the softmax kept for backward); backward scales the
  softmax in place by the incoming gradient; the cast back.
* ``fused`` — one kernel per pass reading the 16-bit logits and computing in fp32 registers
  (flash-attn's ``CrossEntropyLoss``, Transformer Engine's / Megatron's fused cross-entropy):
  forward reads the logits, backward reads them again and writes the 16-bit gradient.

A pass is ``(reads, writes)`` in element widths: ``"L"`` the logits' training width (2 bytes under
16-bit and FP8 training, whose LM head stays BF16; 4 under fp32), ``"F"`` fp32. The casts vanish when
the logits are already fp32. Bytes are logical (each operand read once, each result written once, as
the captured ops are priced); the per-token reductions and the vocabulary-parallel all-reduces of
``tokens`` values are not priced (``tokens x 4`` bytes against ``tokens x vocab / tp x`` the passes).
``metric_passes`` adds forward-only fp32 cross-entropies over the same logits (a training metric
computed on every batch, e.g. Composer's ``LanguageCrossEntropy``).
"""

from __future__ import annotations

from estimator.compute.device import DeviceProfile

_CAST_UP, _CAST_DOWN = (("L",), ("F",)), (("F",), ("L",))
_TORCH_FWD = (_CAST_UP, (("F",), ("F",)))  # cast, log_softmax
LOSS_KERNELS: dict[str, dict[str, tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]]] = {
    "torch_fp32": {
        "forward": _TORCH_FWD,
        # nll_loss backward (zeroed fp32 gradient), log_softmax backward (gradient + saved output), cast back
        "backward": (((), ("F",)), (("F", "F"), ("F",)), _CAST_DOWN),
    },
    "megatron_fp32": {
        # cast, max, subtract, exp (in place: read + write), sum, divide (in place)
        "forward": (_CAST_UP, (("F",), ()), (("F",), ("F",)), (("F",), ("F",)), (("F",), ()), (("F",), ("F",))),
        "backward": ((("F",), ("F",)), _CAST_DOWN),  # softmax x gradient in place, cast back
    },
    "fused": {
        "forward": ((("L",), ()),),
        "backward": ((("L",), ("L",)),),
    },
}
WIDTH = {"F": 4}


def logit_width(precision: str) -> int:
    """Bytes per logit in training: 4 under fp32, else 2 (FP8 training keeps the LM head BF16)."""
    return 4 if precision in ("fp32", "tf32") else 2


def pass_bytes(kernel: str, phase: str, width: int) -> float:
    """HBM bytes per logit element of ``kernel``'s ``phase`` at logit ``width`` (module docstring)."""
    size = {**WIDTH, "L": width}
    total = 0.0
    for reads, writes in LOSS_KERNELS[kernel][phase]:
        if width == 4 and (reads, writes) in (_CAST_UP, _CAST_DOWN):
            continue  # already fp32: no cast
        total += sum(size[w] for w in reads) + sum(size[w] for w in writes)
    return total


def loss_times(kernel: str, logits: float, device: DeviceProfile, precision: str,
               metric_passes: int = 0) -> tuple[float, float]:
    """(forward, backward) seconds of the loss over ``logits`` elements (tokens x vocabulary slice)."""
    width = logit_width(precision)
    rate = device.memory_rate("softmax", precision)
    fwd = pass_bytes(kernel, "forward", width) + metric_passes * pass_bytes("torch_fp32", "forward", width)
    return logits * fwd / rate, logits * pass_bytes(kernel, "backward", width) / rate
