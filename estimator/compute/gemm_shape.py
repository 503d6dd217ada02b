"""GEMM efficiency by shape: wave / tile quantization and the short-K loop (device key ``matmul_shape``).

A device that declares ``matmul_shape`` for a precision prices each ``matmul``-class op whose GEMM
dimensions can be read from its ``input_shapes`` at

    eff = compute_efficiency[precision, matmul] * e_inf * max over (tile, split) of W * K' / (K' + k0)

(docs/research/h35-gemm-evidence.md, section 4a). Assumptions:

* cuBLAS runs one of the CTA ``tiles`` (``tm x tn`` output tiles; default Hopper's 128x256, 256x128,
  128x128) with split-K ``s`` in ``splits`` (split-K only while ``K / s >= min_split_k``), and the
  configuration that maximises the product is taken (cuBLAS's heuristic is assumed to find it).
* ``W`` = wave x tile quantization: ``C = G ceil(M/tm) ceil(N/tn) s`` CTAs on ``sm_count`` SMs run in
  ``ceil(C / sm_count)`` full waves, and the padded tiles compute nothing useful: ``W = C / (sm_count
  ceil(C / sm_count)) * M N / (ceil(M/tm) tm ceil(N/tn) tn)``. One CTA per SM at a time.
* ``G`` GEMMs of one op share the waves: a batched GEMM (``bmm``: one kernel over the batch) and Transformer
  Engine's grouped expert GEMMs (``te::grouped_linear*``: TE ``general_grouped_gemm`` ->
  ``nvte_multi_tensor_gemm`` -> ``multi_stream_cublas_gemm``, one cuBLAS GEMM per local expert issued
  round-robin on 4 compute streams (TransformerEngine@d0067d0da6cb:transformer_engine/common/gemm/
  cublaslt_gemm.cu:970-1011 and common/util/multi_stream.cpp:52-54 ``num_compute_streams = 4``; v2.2 / v2.4:
  common/include/transformer_engine/gemm.h:120 ``num_streams = 4``; the CUTLASS grouped path is opt-in,
  ``NVTE_USE_CUTLASS_GROUPED_GEMM`` default false, cublaslt_gemm.cu:1065-1076). With two or more streams
  busy, an expert's last partial wave is filled by the next experts' CTAs, so only the last wave of the
  whole op is partial: the experts' CTAs are pooled.
* ``K' / (K' + k0)``: a fixed per-tile prologue/epilogue worth ``k0`` steps of the K loop.
* ``e_inf`` and ``k0`` are fitted per device and precision on kernel microbenchmarks (h35 4b); the device's
  ``compute_efficiency`` matmul value is then the scale ``c`` (what the microbenchmarks do not see),
  fitted on a training row.

GEMM dims per op (``(G, M, N, K)``: G GEMMs of output ``M x N``, reduction ``K``): ``linear(x[..., K],
w[N, K])`` (M = rows of x), ``mm`` / ``_scaled_mm`` / ``te::router_gemm_fp32`` ``(a[M, K], b[K, N])``,
``addmm(bias, a, b)``, ``bmm`` / ``baddbmm`` ``([G, M, K], [G, K, N])``, ``matmul`` (``[..., M, K] @ [K, N]``
as mm, ``[..., M, K] @ [..., K, N]`` as bmm),
``te::router_gemm(x[M, K], w[N, K])``, ``te::grouped_linear(x[R, K], w[G, N, K])`` (M = R / G rows per
expert), ``_dgrad(g[R, K], w[G, K, N])``, ``_wgrad(g[R, M], x[R, N], G)`` (K = R / G: the tokens are the
reduction; G, a scalar argument without a shape, is the workload's grouped forward ops' expert count). Other ops (``einsum``, unfused attention) are unread (below).

Batch scaling (``Workload.scaled_to_batch`` scales FLOPs, not shapes): the factor ``f = flops / (2 G M N
K)`` multiplies the dim that holds the tokens: ``attrs["gemm_tokens"]`` (set at capture by comparing the op's
dims at one and at two sequences, :func:`token_attrs`), else the op's usual one (M of linear / addmm /
router / grouped forward and dgrad and of ``matmul`` with a 2-D weight, K of grouped wgrad, G of bmm and of a
batched ``matmul``); an op whose token dim is unknown (a plain
``mm`` of a backward pass without the tag) counts as unread when ``f != 1``.

An unread matmul op (no readable dims: ``einsum``, unfused attention, a workload captured before the tag
existed) gets the factor ``unread`` instead of a shape's: the device yaml sets it to the flat fraction fitted on
the calibration row before the shape model over ``c``, so such an op is priced as it was before.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from estimator.errors import EstimatorError

DIMS = "GMNK"
TILES = ((128, 256), (256, 128), (128, 128))  # h35 4a: the usual Hopper / Ampere cuBLAS CTA tiles (an assumption)
SPLITS = (1, 2, 3, 4, 6, 8)  # h35 4a: split-K factors tried
MIN_SPLIT_K = 256  # h35 appendix ``shape_eff``: split-K only while K / s >= 256
# the dim holding the tokens when the capture did not tag it (None: not determined by the op)
_TOKEN_DIM = {"linear": "M", "addmm": "M", "router_gemm": "M", "grouped_linear": "M", "grouped_linear_dgrad": "M",
              "grouped_linear_wgrad": "K", "bmm": "G", "baddbmm": "G"}


@dataclass(frozen=True)
class ShapeModel:
    """One precision's constants (h35 4b): ``e_inf`` (full-wave, long-K fraction of peak) and ``k0``."""

    e_inf: float
    k0: float
    unread: float = 1.0  # the factor of a matmul op whose GEMM dims cannot be read (device yaml: the flat fit's share)
    tiles: tuple[tuple[int, int], ...] = TILES
    splits: tuple[int, ...] = SPLITS
    min_split_k: int = MIN_SPLIT_K


def _number(value, where: str, low: float, high: float | None = None, low_ok: bool = False) -> float:
    ok = not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)
    if not ok or value < low or (value == low and not low_ok) or (high is not None and value > high):
        bound = ("[" if low_ok else "(") + f"{low:g}, " + (f"{high:g}]" if high is not None else "inf)")
        raise EstimatorError(f"{where} must be a number in {bound}, got {value!r}")
    return float(value)


def _whole(value, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise EstimatorError(f"{where} must be a whole number > 0, got {value!r}")
    return value


def _tile(value, where: str) -> tuple[int, int]:
    if isinstance(value, str) or not isinstance(value, Sequence) or len(value) != 2:
        raise EstimatorError(f"{where} entries must be [tm, tn], got {value!r}")
    return _whole(value[0], where), _whole(value[1], where)


def parse(value, device: str, precisions) -> tuple[tuple[str, ShapeModel], ...] | None:
    """``device.matmul_shape`` as a hashable ``((precision, ShapeModel), ...)``; one-line errors.
    Accepted: ``{tiles: [[tm, tn], ...], splits: [..], min_split_k: n, <precision>: {e_inf: .., k0: ..}}``."""
    if value is None or isinstance(value, tuple):
        return value
    where = f"device.matmul_shape ({device})"
    if not isinstance(value, Mapping):
        raise EstimatorError(f"{where} must be a mapping, got {value!r}")
    common = ("tiles", "splits", "min_split_k")
    tiles = tuple(_tile(t, f"{where}.tiles") for t in value.get("tiles", TILES))
    splits = tuple(_whole(s, f"{where}.splits") for s in value.get("splits", SPLITS))
    if not tiles or 1 not in splits:
        raise EstimatorError(f"{where}: tiles must be non-empty and splits must include 1")
    min_split_k = _whole(value.get("min_split_k", MIN_SPLIT_K), f"{where}.min_split_k")
    out = []
    for prec, spec in value.items():
        if prec in common:
            continue
        if prec not in precisions:
            raise EstimatorError(f"{where}: unknown key {prec!r} (a precision: {', '.join(precisions)}; "
                                 f"or {', '.join(common)})")
        if not isinstance(spec, Mapping) or not {"e_inf", "k0"} <= set(spec) <= {"e_inf", "k0", "unread"}:
            raise EstimatorError(f"{where}.{prec} must be {{e_inf: .., k0: .., unread: ..}} (unread optional), got {spec!r}")
        out.append((prec, ShapeModel(_number(spec["e_inf"], f"{where}.{prec}.e_inf", 0, 1),
                                     _number(spec["k0"], f"{where}.{prec}.k0", 0, low_ok=True),
                                     _number(spec.get("unread", 1.0), f"{where}.{prec}.unread", 0, 1),
                                     tiles, splits, min_split_k)))
    return tuple(sorted(out))


@lru_cache(maxsize=65536)
def shape_factor(model: ShapeModel, sms: int, g: float, m: float, n: float, k: float) -> float:
    """``e_inf x max(W x K' / (K' + k0))`` of ``g`` GEMMs ``m x n x k`` sharing ``sms`` SMs (module doc)."""
    best = 0.0
    for tm, tn in model.tiles:
        rows, cols = math.ceil(m / tm), math.ceil(n / tn)
        tile_q = m * n / (rows * tm * cols * tn)
        for s in model.splits:
            if s > 1 and k / s < model.min_split_k:
                continue
            ctas = math.ceil(g * rows * cols * s)
            waves = ctas / (sms * math.ceil(ctas / sms))
            best = max(best, waves * tile_q * (k / s) / (k / s + model.k0))
    return model.e_inf * best


def _name(op: str) -> str:
    return op.split("::")[-1].split(".")[0]


def gemm_dims(op: str, shapes, groups: int | None = None) -> tuple[int, int, int, int] | None:
    """``(G, M, N, K)`` of a matmul-class op from its input shapes as captured, or None (module doc);
    ``groups``: the local experts of a ``grouped_linear_wgrad`` (its count is a scalar argument, no shape)."""
    name = _name(op)
    try:
        if name == "addmm":
            shapes = shapes[1:]
        a, b = shapes[0], shapes[1]
        if name == "linear" or name == "router_gemm":
            return 1, math.prod(a[:-1]), b[0], a[-1]
        if name in ("mm", "addmm", "_scaled_mm", "router_gemm_fp32") or (name == "matmul" and len(b) == 2 <= len(a)):
            return 1, math.prod(a[:-1]), b[1], a[-1]
        if name == "baddbmm":
            a, b = shapes[1], shapes[2]
        if name in ("bmm", "baddbmm") or (name == "matmul" and len(a) == len(b) >= 3):
            return math.prod(a[:-2]), a[-2], b[-1], a[-1]
        if name == "grouped_linear":
            return b[0], a[0] // b[0], b[1], a[1]
        if name == "grouped_linear_dgrad":
            return b[0], a[0] // b[0], b[2], a[1]
        if name == "grouped_linear_wgrad" and groups:
            return groups, a[1], b[1], a[0] // groups
    except (IndexError, TypeError, ZeroDivisionError):
        return None
    return None


def expert_groups(nodes) -> int | None:
    """The local experts of a workload's grouped GEMMs (``w[G, ..]`` of its ``te::grouped_linear`` ops), or
    None when it has none or several counts."""
    counts = {n.input_shapes[1][0] for n in nodes if _name(n.op) == "grouped_linear" and len(n.input_shapes) > 1
              and n.input_shapes[1]}
    return counts.pop() if len(counts) == 1 else None


def token_attrs(op: str, shapes, doubled_shapes) -> dict[str, str]:
    """``{"gemm_tokens": dim}`` for a matmul-class op captured at one sequence (``shapes``) and at two
    (``doubled_shapes``): the one GEMM dim that doubled; {} when none or several did."""
    one, two = gemm_dims(op, shapes), gemm_dims(op, doubled_shapes) if doubled_shapes else None
    if one is None or two is None:
        return {}
    grown = [d for d, x, y in zip(DIMS, one, two, strict=True) if y == 2 * x and x]
    return {"gemm_tokens": grown[0]} if len(grown) == 1 else {}


def node_dims(node, groups: int | None = None) -> tuple[float, float, float, float] | None:
    """The op's ``(G, M, N, K)`` at its (possibly batch-scaled) FLOPs, or None (module doc, batch scaling);
    ``groups``: :func:`expert_groups` of its workload."""
    dims = gemm_dims(node.op, node.input_shapes, groups)
    if dims is None or min(dims) <= 0 or node.flops <= 0:
        return None
    f = node.flops / (2 * math.prod(dims))
    if abs(f - 1) < 1e-9:
        return tuple(float(d) for d in dims)
    name = _name(node.op)
    usual = ("M" if len(node.input_shapes[1]) == 2 else "G") if name == "matmul" else _TOKEN_DIM.get(name)
    token = (node.attrs or {}).get("gemm_tokens") or usual
    if token is None or token not in DIMS:
        return None
    return tuple(float(d) * (f if dim == token else 1.0) for dim, d in zip(DIMS, dims, strict=True))
