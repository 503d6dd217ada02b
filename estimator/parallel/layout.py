"""A parallel layout (``parallelism=hybrid``) and the memory it needs per GPU.

Layout keys (``conf/parallelism/hybrid.yaml``): ``tp`` tensor, ``pp`` pipeline, ``dp`` data
parallel degree (tp x pp x dp = GPUs = ``fabric.nodes``), ``ep`` expert parallel degree (MoE
models only; experts are split over ``ep`` of the dp ranks), ``micro_batch_size`` sequences per
microbatch, ``global_batch`` sequences per step (microbatches per pipeline = global_batch /
(dp x micro_batch_size)), ``zero`` 0-3, ``sequence_parallel``, ``recompute`` none | selective |
full, ``virtual_stages`` model chunks per pipeline rank (interleaved 1F1B, Narayanan et al. 2021
Sec. 2.2.2; Megatron-LM's ``--num-layers-per-virtual-pipeline-stage k`` is ``virtual_stages =
layers / (pp x k)``; its assertion: the microbatches divide by ``pp``).

Memory per GPU (bytes), the stage with the most:

* Model state, mixed-precision Adam (Rajbhandari et al. 2020, ZeRO, Sec. 3.1: 2 + 2 + 12 = 16
  bytes per parameter: fp16 weights, fp16 gradients, fp32 master weights + momentum + variance);
  ZeRO-1 shards the 12, ZeRO-2 also the gradients, ZeRO-3 also the weights over ``dp``.
* Activations per layer and microbatch (Korthikanti et al. 2022, "Reducing Activation
  Recomputation in Large Transformer Models", Sec. 4, Table 2), s = sequence, b = microbatch,
  h = hidden, a = heads, t = tp: no parallelism ``sbh(34 + 5as/h)``; tensor parallel
  ``sbh(10 + 24/t + 5as/(ht))``; + sequence parallel ``sbh(34 + 5as/h)/t``; selective
  recompute drops the ``5as/h`` term; full recompute keeps only the layer input ``2sbh`` (/t with
  sequence parallelism). Under 1F1B the first stage holds ``min(pp, microbatches)`` microbatches
  of its ``layers / pp`` layers (Korthikanti et al. Sec. 4.2.3); the interleaved schedule with
  ``v`` virtual stages holds ``1 + (pp - 1) / (pp v)`` times that (same section). The embedding /
  output-layer activations and temporary buffers are not counted (the paper's Eq. 5 shows they
  are small).
* MoE layers (:func:`moe_mlp_bytes`, derived from the layer's tensors the way Korthikanti et al.
  Sec. 4.1 derive the dense ``19sbh``: 16-bit tensors saved for the backward, masks 1 byte): the
  dense MLP's share of the formula (``3sbh + 16sbh/t``; ``19sbh/t`` with sequence parallelism)
  is replaced by what the MoE MLP saves: the router's input ``2sbh`` and fp32 router
  probabilities ``4sbE``, the dispatch buffer (every token copied to its k experts, ``2ksbh``),
  the expert MLP's intermediates on those ``ks b`` tokens (GeLU: fc1 output + GeLU output
  ``4ksbf``; SwiGLU: the 2f-wide fc1 output + the SwiGLU output ``6ksbf``), the experts' outputs
  before the weighted combine ``2ksbh`` and the dropout mask ``sbh``. Token-width tensors are split
  over the ``t`` tensor-parallel ranks (Megatron-core requires sequence parallelism for MoE with
  t > 1), ``f``-wide ones too; balanced routing (each rank processes ``k`` x its tokens, whatever
  ``ep``). Full recompute keeps only the layer input, as for dense layers.
* Expert parallelism: a layer's experts are split over ``ep`` ranks of a data-parallel group, so
  expert parameters have ``dp / ep`` data-parallel copies (ZeRO shards them over those).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from estimator.errors import EstimatorError
from estimator.parallel.spec import TransformerSpec

RECOMPUTE = ("none", "selective", "full")
ADAM_BYTES = 12  # fp32 master weights + Adam momentum + variance per parameter (ZeRO paper Sec. 3.1)
WEIGHT_BYTES = 2  # fp16/bf16 weights
GRAD_BYTES = 2  # fp16/bf16 gradients


def _int(par: Mapping[str, Any], key: str, default: int | None = None, low: int = 1) -> int:
    value = par.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise EstimatorError(f"parallelism.{key} must be an integer >= {low}, got {value!r}")
    return value


@dataclass(frozen=True)
class Layout:
    tp: int
    pp: int
    dp: int
    ep: int
    micro_batch_size: int
    microbatches: int
    zero: int
    sequence_parallel: bool
    recompute: str
    order: str = "tp-dp-pp"  # rank order, innermost first (Megatron-LM's default)
    virtual_stages: int = 1  # model chunks per pipeline rank (1 = non-interleaved 1F1B)

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def global_batch(self) -> int:
        return self.microbatches * self.micro_batch_size * self.dp

    def label(self) -> str:
        extra = (f" ep{self.ep}" if self.ep > 1 else "") + (f" zero{self.zero}" if self.zero else "")
        sp = (" sp" if self.sequence_parallel else "") + (f" v{self.virtual_stages}" if self.virtual_stages > 1 else "")
        return (f"tp{self.tp} pp{self.pp} dp{self.dp}{extra} mbs{self.micro_batch_size} m{self.microbatches}"
                f"{sp} rc={self.recompute} order={self.order}")

    @classmethod
    def from_cfg(cls, par: Mapping[str, Any], spec: TransformerSpec, gpus: int) -> Layout:
        tp, pp = _int(par, "tp", 1), _int(par, "pp", 1)
        dp = par.get("dp")
        dp = gpus // (tp * pp) if dp is None else _int(par, "dp")
        if tp * pp * dp != gpus:
            raise EstimatorError(f"parallelism: tp x pp x dp = {tp} x {pp} x {dp} = {tp * pp * dp} but the fabric has {gpus} GPUs (fabric.nodes)")
        mbs = _int(par, "micro_batch_size", 1)
        if par.get("microbatches") is not None:
            m = _int(par, "microbatches")
        else:
            gb = _int(par, "global_batch")
            if gb % (dp * mbs):
                raise EstimatorError(f"parallelism.global_batch {gb} is not a multiple of dp x micro_batch_size = {dp * mbs}")
            m = gb // (dp * mbs)
        recompute = str(par.get("recompute", "none"))
        if recompute not in RECOMPUTE:
            raise EstimatorError(f"parallelism.recompute must be one of {', '.join(RECOMPUTE)}, got {recompute!r}")
        zero = _int(par, "zero", 0, low=0)
        if zero > 3:
            raise EstimatorError(f"parallelism.zero must be 0, 1, 2 or 3, got {zero}")
        sp = par.get("sequence_parallel", False)
        if not isinstance(sp, bool):
            raise EstimatorError(f"parallelism.sequence_parallel must be true or false, got {sp!r}")
        order = str(par.get("order", "tp-dp-pp"))
        if sorted(order.split("-")) != ["dp", "pp", "tp"]:
            raise EstimatorError(f"parallelism.order must list tp, dp and pp innermost first (e.g. tp-dp-pp), got {order!r}")
        layout = cls(tp, pp, dp, _int(par, "ep", 1), mbs, m, zero, sp, recompute, order, _int(par, "virtual_stages", 1))
        layout.check(spec)
        return layout

    def check(self, spec: TransformerSpec) -> None:
        if spec.heads % self.tp:
            raise EstimatorError(f"parallelism.tp={self.tp}: model {spec.name} has {spec.heads} attention heads, not divisible by tp")
        if spec.ffn % self.tp:
            raise EstimatorError(f"parallelism.tp={self.tp}: model {spec.name} ffn_size {spec.ffn} is not divisible by tp")
        if spec.layers % self.pp:
            raise EstimatorError(f"parallelism.pp={self.pp}: model {spec.name} has {spec.layers} layers, not divisible by pp")
        if self.virtual_stages > 1:
            v = self.virtual_stages
            if self.pp < 2:
                raise EstimatorError(f"parallelism.virtual_stages={v} needs pipeline parallelism (pp >= 2), got pp={self.pp}")
            if spec.layers % (self.pp * v):
                raise EstimatorError(f"parallelism.virtual_stages={v}: model {spec.name} has {spec.layers} layers, "
                                     f"not divisible by pp x virtual_stages = {self.pp * v}")
            if self.microbatches % self.pp:
                raise EstimatorError(f"parallelism.virtual_stages={v}: the interleaved schedule needs the microbatches "
                                     f"({self.microbatches}) to be a multiple of pp={self.pp}")
        if self.sequence_parallel and spec.seq_len % self.tp:
            raise EstimatorError(f"parallelism.sequence_parallel: seq_len {spec.seq_len} is not divisible by tp={self.tp}")
        if self.ep > 1 and not spec.experts:
            raise EstimatorError(f"parallelism.ep={self.ep}: model {spec.name} is dense (no experts); use ep=1")
        if self.ep > 1 and self.dp % self.ep:
            raise EstimatorError(f"parallelism.ep={self.ep} must divide the data-parallel degree dp={self.dp} "
                                 f"(expert-parallel groups are made of data-parallel ranks)")
        if self.ep > 1 and spec.experts % self.ep:
            raise EstimatorError(f"parallelism.ep={self.ep}: model {spec.name} has {spec.experts} experts, not divisible by ep")


def stage_params(spec: TransformerSpec, layout: Layout) -> int:
    """Parameters one GPU of the largest pipeline stage holds (layers / pp layers / tp, plus the
    embedding on the first stage and the LM head on the last; a tied head is a second copy;
    experts further split over ``ep``)."""
    return sum(stage_param_split(spec, layout))


def stage_param_split(spec: TransformerSpec, layout: Layout) -> tuple[int, int]:
    """(parameters data-parallel over ``dp``, expert parameters data-parallel over ``dp / ep``) per GPU."""
    lps = spec.layers // layout.pp
    experts = lps * spec.expert_layer_params() // (layout.tp * layout.ep)
    layers = lps * (spec.layer_params() - spec.expert_layer_params())
    v = spec.padded_vocab(layout.tp)
    emb = v * spec.hidden + (spec.embedding_params() - spec.vocab * spec.hidden)
    head = v * spec.hidden + spec.head_params() - (0 if spec.tied else spec.vocab * spec.hidden)
    if layout.pp == 1:
        ends = emb + head - (v * spec.hidden if spec.tied else 0)
    else:
        ends = max(emb, head)
    return (layers + ends) // layout.tp, experts


def activation_bytes_per_layer(spec: TransformerSpec, layout: Layout) -> float:
    s, b, h, a, t = spec.seq_len, layout.micro_batch_size, spec.hidden, spec.heads, layout.tp
    if layout.recompute == "full":
        return 2 * s * b * h / (t if layout.sequence_parallel else 1)
    attn = 0.0 if layout.recompute == "selective" else 5 * a * s / h
    if layout.sequence_parallel:
        return s * b * h * (34 + attn) / t
    return s * b * h * (10 + 24 / t + attn / t)


def dense_mlp_bytes(spec: TransformerSpec, layout: Layout) -> float:
    """The MLP's share of Korthikanti et al.'s per-layer formula (Sec. 4.1: 19sbh with a 4h GeLU
    MLP: input 2sbh, fc1 and GeLU outputs 16sbh, dropout mask sbh; t splits the 16sbh, or all of
    it with sequence parallelism)."""
    s, b, h, t = spec.seq_len, layout.micro_batch_size, spec.hidden, layout.tp
    return s * b * h * 19 / t if layout.sequence_parallel else s * b * h * (3 + 16 / t)


def moe_mlp_bytes(spec: TransformerSpec, layout: Layout) -> float:
    """Bytes one GPU saves for the backward of one MoE MLP per microbatch (the module docstring)."""
    s, b, h, t, k = spec.seq_len, layout.micro_batch_size, spec.hidden, layout.tp, spec.top_k
    inner = 6 if spec.family == "llama" else 4  # SwiGLU: 2f-wide fc1 output + its output; GeLU: fc1 + GeLU outputs
    tokens = s * b / t
    return tokens * (3 * h + 4 * spec.experts) + k * tokens * (4 * h + inner * spec.ffn)


def memory(spec: TransformerSpec, layout: Layout) -> dict[str, float]:
    """Bytes per GPU: weights, gradients, optimizer state, activations, total."""
    dense, expert = stage_param_split(spec, layout)

    def sharded(per_param: int, stage: int) -> float:  # ZeRO shards over the ranks that hold a copy
        if layout.zero < stage:
            return (dense + expert) * per_param
        return dense * per_param / layout.dp + expert * per_param / (layout.dp // layout.ep)

    weights, grads, optim = sharded(WEIGHT_BYTES, 3), sharded(GRAD_BYTES, 2), sharded(ADAM_BYTES, 1)
    in_flight = min(layout.pp, layout.microbatches)
    if layout.virtual_stages > 1:
        in_flight *= 1 + (layout.pp - 1) / (layout.pp * layout.virtual_stages)
    per_layer = activation_bytes_per_layer(spec, layout)
    if spec.experts and layout.recompute != "full":
        per_layer += moe_mlp_bytes(spec, layout) - dense_mlp_bytes(spec, layout)
    acts = spec.layers // layout.pp * in_flight * per_layer
    return {"weights": weights, "gradients": grads, "optimizer": optim, "activations": acts,
            "total": weights + grads + optim + acts}


def device_memory(device_memory_bytes: float | None, override: float | None) -> float | None:
    """The capacity a layout must fit: ``parallelism.device_memory_bytes`` if set, else the device's
    ``memory_bytes`` (conf/device/*.yaml, from its datasheet); None = unchecked."""
    if override:
        return float(override)
    return device_memory_bytes
