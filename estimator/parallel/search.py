"""``parallelism.placement=auto``: every layout that fits memory, fastest first.

Searched: tp in the divisors of ``gpus_per_node`` (or 1..8 on fabrics without nodes) that divide
the heads; pp dividing the GPU count, up to the layer count (a pp that does not divide the layers
splits them unevenly, as :mod:`~estimator.parallel.layout` does); dp = GPUs / (tp x cp x pp) with the configured
context-parallel degree cp; micro-batch sizes
``search_micro_batch_sizes``; rank orders tp-dp-pp and tp-pp-dp; for MoE models the
expert-parallel degree ep (powers of two dividing cp x dp and the expert count; a stated ep / etp is kept) and, for
Megatron-core's MoE layer (``model.fused_kernels=te``) with tp > 1 and sequence parallelism, whole
experts (``etp`` 1) with ep folded over the TP ranks too (dividing tp x cp x dp); with tp > 1 also
sequence parallelism on (Megatron-LM's --sequence-parallel: the same communication volume as TP's
all-reduces, layer-norm and dropout activations split tp ways) when it is configured off; with
``parallelism.recompute`` unstated, the activation recompute: the framework's default, then ``selective``,
then ``full`` (``recomputes``). The global batch, ZeRO stage and cp stay as configured, and a stated recompute
too. A layout is skipped when the global batch does not split into whole microbatches or it does not fit the
device memory.

Assumed: on one tp / pp / dp / micro-batch layout a later recompute mode in that list is never faster (it only
adds forward work to the backward: :func:`~estimator.parallel.step.recompute_cost`), so each layout takes the first
mode that fits and is refused by no check, and the other modes' step times are not computed
(tests/test_search_recompute.py checks the order on sample layouts).
"""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any

from tqdm import tqdm

from estimator.compute.device import DeviceProfile
from estimator.errors import EstimatorError
from estimator.fabrics.base import Fabric
from estimator.parallel import moe_comm
from estimator.parallel.framework import Framework
from estimator.parallel.layout import Layout
from estimator.parallel.memory import memory
from estimator.parallel.spec import TransformerSpec
from estimator.parallel.step import step_time

ORDERS = ("tp-cp-dp-pp", "tp-pp-cp-dp")


def _eps(spec: TransformerSpec, ranks: int) -> list[int]:
    """Expert-parallel degrees (powers of two) dividing ``ranks`` and the expert count; [1] for a dense model."""
    return [e for e in (1, 2, 4, 8, 16, 32, 64) if ranks % e == 0 and spec.experts % e == 0] if spec.experts else [1]


def candidates(spec: TransformerSpec, base: Layout, gpus: int, max_tp: int, global_batch: int, mbs_options,
               keep: dict[str, int] | None = None) -> list[Layout]:
    """Every layout to try; ``keep`` holds stated degrees ({"tp": 8, "dp": 4, "ep": 8}), tried as given (a stated pp need
    not divide the layers: the base layout's first / last stage layers apply; a stated ep or etp is checked by
    :meth:`Layout.check` like any layout)."""
    out, keep = [], keep or {}
    tps = [keep["tp"]] if "tp" in keep else [
        t for t in (1, 2, 4, 8, 16) if t <= max_tp and spec.heads % t == 0 and spec.ffn % t == 0 and gpus % t == 0]
    for tp, sp in ((t, s) for t in tps for s in {base.sequence_parallel, t > 1}):
        if sp and spec.seq_len % tp:
            continue
        # pp need not divide the layers: the uneven split of estimator/parallel/layout.py (Llama 3 405B: 126 on 16)
        pps = [keep["pp"]] if "pp" in keep else list(range(1, spec.layers + 1))
        for pp in (p for p in pps if (gpus // (tp * base.cp)) % p == 0):
            dp = gpus // (tp * base.cp * pp)
            if not dp or dp != keep.get("dp", dp):  # dp 0: tp x cp x pp above the GPU count
                continue
            experts = [(None, e) for e in _eps(spec, dp * base.cp)]  # experts split like the dense MLP (etp = tp)
            if spec.experts and spec.fused == "te" and tp > 1 and sp:  # whole experts, EP folded over the TP ranks
                experts += [(1, e) for e in _eps(spec, tp * base.cp * dp) if e > 1]
            if "ep" in keep or "etp" in keep:  # a stated ep / etp: only the expert layouts that have it
                match = [(e_tp, e) for e_tp, e in experts
                         if e == keep.get("ep", e) and (e_tp or tp) == keep.get("etp", e_tp or tp)]
                experts = match or ([(keep.get("etp"), keep["ep"])] if "ep" in keep else [])
            for mbs, (etp, ep) in ((mb, x) for mb in mbs_options for x in experts):
                if global_batch % (dp * mbs):
                    continue
                for order in ORDERS if pp > 1 and dp > 1 else ORDERS[:1]:
                    layout = replace(base, tp=tp, pp=pp, dp=dp, ep=ep, etp=etp, micro_batch_size=mbs, sequence_parallel=sp,
                                     microbatches=global_batch // (dp * mbs), order=order)
                    try:
                        layout.check(spec)  # e.g. a configured virtual_stages this pp does not allow
                    except EstimatorError:
                        continue
                    out.append(layout)
    return out


def _first_fit(spec: TransformerSpec, shape: Layout, modes: tuple[str, ...], capacity: float | None, framework: Framework,
               precision: str, refusals: list[EstimatorError], allowed: set[str] | None = None) -> Layout | None:
    """``shape`` with the first of the recompute ``modes`` that Megatron-core's checks allow and that fits memory
    (None: none does); each refusal is appended to ``refusals``, each mode the checks allow added to ``allowed``."""
    for mode in modes:
        layout = shape if mode == shape.recompute else replace(shape, recompute=mode, recompute_modules=None)
        try:
            if layout is not shape:  # a recompute mode the shape's schedule refuses (DualPipe: no full recompute)
                layout.check(spec)
            moe_comm.check(framework, spec, layout, precision)  # a layout Megatron-core refuses with these settings
            framework.check_zero1_group(layout.dp * layout.cp, layout.zero)  # or InternLM's ZeRO-1 groups refuse
        except EstimatorError as refused:
            refusals.append(refused)
            continue
        if allowed is not None:
            allowed.add(mode)
        if not capacity or memory(spec, layout, framework.grad_bytes(precision), framework, precision == "fp8")["total"] <= capacity:
            return layout
    return None


def _max_tp(fabric: Fabric) -> int:
    """The largest tp the search tries: one node's GPUs (8 when the fabric states none)."""
    return getattr(fabric.config, "gpus_per_node", 8) or 8


def auto_fits(spec: TransformerSpec, base: Layout, global_batch: int, fabric: Fabric, precision: str,
              capacity: float | None, framework: Framework, mbs_options=(1, 2, 4),
              fixed: dict[str, int | None] | None = None, recomputes: tuple[str, ...] | None = None) -> bool:
    """Whether :func:`search` with these arguments would find a layout (memory and checks only, no step priced)."""
    modes = recomputes or (base.recompute,)
    return any(_first_fit(spec, shape, modes, capacity, framework, precision, [])
               for shape in candidates(spec, base, base.gpus, _max_tp(fabric), global_batch, mbs_options, _kept(fixed)))


def _kept(fixed: dict[str, int | None] | None) -> dict[str, int]:
    """The stated degrees of ``fixed`` ({"tp": 8, "pp": None} -> {"tp": 8}), which the search keeps."""
    return {k: v for k, v in (fixed or {}).items() if v is not None}


def search(spec: TransformerSpec, base: Layout, global_batch: int, fabric: Fabric, device: DeviceProfile, precision: str, algorithm: str,
           capacity: float | None, dp_overlap: bool | None, framework: Framework, interference: float = 0.0,
           mbs_options=(1, 2, 4), fixed: dict[str, int | None] | None = None,
           recomputes: tuple[str, ...] | None = None,
           interference_stated: bool = False) -> tuple[dict[str, Any], list[dict[str, Any]], int]:
    """(metrics, collectives, layouts evaluated) of the fastest layout that fits; ``fixed`` ({"tp": 8, ...}) keeps
    the stated degrees (None = searched); ``recomputes`` the recompute modes to try on each layout, least work first
    (None = ``base``'s recompute alone)."""
    gpus = base.gpus
    max_tp = _max_tp(fabric)
    keep = _kept(fixed)
    best = None
    evaluated = 0
    refusals: list[EstimatorError] = []
    allowed: set[str] = set()  # the recompute modes some layout's checks allow (DualPipe: not full)
    modes = recomputes or (base.recompute,)
    todo = candidates(spec, base, gpus, max_tp, global_batch, mbs_options, keep)
    # a bar on a terminal only (tqdm's disable=None): the search of a large MoE model takes a minute
    for shape in tqdm(todo, desc="layouts", unit="layout", file=sys.stderr, disable=None, leave=False, mininterval=0.5):
        layout = _first_fit(spec, shape, modes, capacity, framework, precision, refusals, allowed)
        if layout is None:
            continue
        metrics, colls = step_time(spec, layout, fabric, device, precision, algorithm, dp_overlap, framework,
                                   interference, interference_stated)
        evaluated += 1
        if best is None or metrics["iter_time_s"] < best[0]["iter_time_s"]:
            best = (metrics, colls)
    if best is None and todo and len(refusals) == len(todo) * len(modes):  # every layout refused: say why, not "nothing fits"
        raise refusals[0]
    if best is None:
        stated = "".join(f", {k}={v}" for k, v in keep.items())
        tried = "/".join(m for m in modes if m in allowed) or "/".join(modes)  # the modes the checks let it try
        raise EstimatorError(f"parallelism.placement=auto: no layout of {spec.name} on {gpus} GPUs{stated} fits "
                             f"{(capacity or 0) / 1e9:.1f} GB per GPU with global_batch {global_batch}, micro-batch "
                             f"{'/'.join(map(str, mbs_options))} and recompute {tried}")
    return best[0], best[1], evaluated
