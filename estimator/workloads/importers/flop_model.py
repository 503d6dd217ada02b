"""FLOPs and memory bytes of one layer from its type, attributes and tensor shapes.

Used for graphs that carry shapes but no measured times (FlexFlow computation graphs). The
conventions are the project's (see :mod:`estimator.workloads.graph`): a multiply-add counts 2
FLOPs; bytes are the tensors read plus written, at the tensors' element size.

Forward FLOPs per layer type (``out`` = number of output elements):

* ``linear``: ``2 * out * in_features`` (+ ``out`` with bias); weights ``in_features x
  out_channels`` (+ bias) are read unless the graph passes them as an input tensor.
* ``conv2d``: ``2 * out * (in_channels / groups) * kernel_h * kernel_w`` (+ ``out`` with bias).
* ``batch_matmul``: ``2 * out * K`` (``K`` = last dim of the first input).
* ``multi_head_attention`` (inputs q, k, v of ``[batch, seq, embed]``): Q/K/V/output projections
  ``2*B*(2*Sq + 2*Sk)*E^2`` plus scores and weighted sum ``4*B*Sq*Sk*E``.
* ``pool2d``: ``out * kernel_h * kernel_w``; ``reduce``: one per input element.
* element-wise: ``element_unary``/``element_binary``/``dropout``/``cast`` 1 per output element,
  ``softmax`` 5 (max, subtract, exp, sum, divide), ``layer_norm`` 5 and ``batch_norm`` 4
  (statistics, normalise, scale, shift).
* data movement and bookkeeping (``input``, ``weight``, ``noop``, ``reshape``, ``flat``,
  ``transpose``, ``reverse``, ``concat``, ``split``, ``gather``, ``embedding``, ``broadcast``,
  ``topk``): 0 FLOPs; ``input``/``weight``/``noop``/``reshape``/``flat`` also move no bytes.

Backward FLOPs: ``2x`` forward for layers with weights or a contraction (gradient w.r.t. the input
and w.r.t. the weights), ``1x`` otherwise (:func:`backward_factor`).
"""

from __future__ import annotations

from typing import Any

from estimator.workloads.importers._common import BadInput, product

ELEMENTWISE = {"element_unary": 1, "element_binary": 1, "dropout": 1, "cast": 1, "softmax": 5, "layer_norm": 5,
               "batch_norm": 4}
NO_WORK = {"input", "weight", "noop", "reshape", "flat"}
DATA_MOVEMENT = {"transpose", "reverse", "concat", "split", "gather", "embedding", "broadcast", "topk"}
CONTRACTIONS = {"linear", "conv2d", "batch_matmul", "multi_head_attention"}
KNOWN = set(ELEMENTWISE) | NO_WORK | DATA_MOVEMENT | CONTRACTIONS | {"pool2d", "reduce"}
OP_CLASS = {"linear": "gemm", "batch_matmul": "gemm", "conv2d": "conv", "multi_head_attention": "attention",
            "pool2d": "pool", "reduce": "reduction", "embedding": "gather"}


def _int_attr(attrs: dict[str, Any], key: str, where: str, default: int | None = None) -> int:
    value = attrs.get(key, default)
    if isinstance(value, dict) and "value" in value:
        value = value["value"]
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise BadInput(f"{where}: attribute {key!r} must be a positive integer, got {value!r}")
    return value


def forward_flops(op: str, attrs: dict[str, Any], inputs: list[tuple[int, ...]], outputs: list[tuple[int, ...]],
                  where: str) -> float:
    """Forward FLOPs of one layer over the given (global or per-shard) shapes."""
    if op not in KNOWN:
        raise BadInput(f"{where}: no FLOP model for layer type {op!r}")
    out = sum(product(s) for s in outputs)
    if op in ELEMENTWISE:
        return float(ELEMENTWISE[op] * out)
    if op in NO_WORK or op in DATA_MOVEMENT:
        return 0.0
    if op == "pool2d":
        return float(out * _int_attr(attrs, "kernel_h", where) * _int_attr(attrs, "kernel_w", where))
    if op == "reduce":
        return float(sum(product(s) for s in inputs))
    if not inputs or not inputs[0]:
        raise BadInput(f"{where}: {op} layer needs a shaped input")
    bias = out if attrs.get("use_bias") else 0
    if op == "linear":
        return float(2 * out * inputs[0][-1] + bias)
    if op == "conv2d":
        if len(inputs[0]) != 4:
            raise BadInput(f"{where}: conv2d input must be 4-D [N, C, H, W], got {list(inputs[0])}")
        groups = _int_attr(attrs, "groups", where, 1)
        kernel = _int_attr(attrs, "kernel_h", where) * _int_attr(attrs, "kernel_w", where)
        return float(2 * out * (inputs[0][1] // groups) * kernel + bias)
    if op == "batch_matmul":
        return float(2 * out * inputs[0][-1])
    q = inputs[0]
    k = inputs[1] if len(inputs) > 1 else q
    if len(q) != 3 or len(k) != 3:
        raise BadInput(f"{where}: multi_head_attention inputs must be [batch, seq, embed]")
    b, sq, e = q
    sk = k[1]
    e = _int_attr(attrs, "embed_dim", where, e)
    return float(2 * b * (2 * sq + 2 * sk) * e * e + 4 * b * sq * sk * e)


def weight_elements(op: str, attrs: dict[str, Any], inputs: list[tuple[int, ...]], where: str) -> int:
    """Parameters a layer holds itself (0 when the graph feeds weights in as tensors)."""
    if op == "linear" and len(inputs) == 1:
        n = _int_attr(attrs, "out_channels", where)
        return inputs[0][-1] * n + (n if attrs.get("use_bias") else 0)
    if op == "conv2d" and len(inputs) == 1:
        n = _int_attr(attrs, "out_channels", where)
        groups = _int_attr(attrs, "groups", where, 1)
        k = _int_attr(attrs, "kernel_h", where) * _int_attr(attrs, "kernel_w", where)
        return n * (inputs[0][1] // groups) * k + (n if attrs.get("use_bias") else 0)
    return 0


def memory_bytes(op: str, inputs: list[tuple[int, ...]], outputs: list[tuple[int, ...]], weights: int,
                 elem_bytes: int) -> float:
    if op in NO_WORK:
        return 0.0
    return float((sum(product(s) for s in inputs) + sum(product(s) for s in outputs) + weights) * elem_bytes)


def backward_factor(op: str) -> float:
    return 2.0 if op in CONTRACTIONS else 1.0
