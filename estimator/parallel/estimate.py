"""``parallelism=hybrid``: a decoder-only model on tp x cp x pp x dp GPUs, from a resolved config.

``estimator estimate model=gpt3_175b parallelism=hybrid system=dgx_a100 fabric.nodes=1024
parallelism.tp=8 parallelism.pp=16`` (dp follows from ``fabric.nodes``); ``framework=megatron|
deepspeed|fsdp`` picks the training framework's profile (:mod:`~estimator.parallel.framework`);
``parallelism.placement=auto`` searches the layouts (``search``). A layout whose largest pipeline
stage needs more memory than the device has is an error naming how much more.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, NamedTuple

from estimator.compute.device import PRECISIONS, DeviceProfile
from estimator.errors import EstimatorError
from estimator.fabrics.registry import shared_fabric
from estimator.parallel import moe_comm
from estimator.parallel.framework import Framework
from estimator.parallel.layout import Layout
from estimator.parallel.memory import device_memory, memory
from estimator.parallel.search import auto_fits, search
from estimator.parallel.spec import FLASH, TransformerSpec
from estimator.parallel.step import step_time

HYBRID_KEYS = {"strategy", "tp", "cp", "pp", "dp", "ep", "micro_batch_size", "microbatches", "global_batch", "zero",
               "sequence_parallel", "recompute", "order", "placement", "dp_overlap", "device_memory_bytes", "virtual_stages",
               "first_stage_layers", "last_stage_layers", "fp32_grads", "cp_comm", "microbatch_group", "etp",
               "comm_interference", "distribute_saved_activations", "recompute_modules", "schedule", "input"}  # input: the host's data-loading facts a system preset sets (data parallelism only)


def _bool_or_null(par: dict[str, Any], key: str) -> bool | None:
    value = par.get(key)
    if value is not None and not isinstance(value, bool):
        raise EstimatorError(f"parallelism.{key} must be true, false or null, got {value!r}")
    return value


class HybridSetup(NamedTuple):
    """What a parallelism=hybrid config resolves to, checked, before any layer is captured or priced."""

    spec: TransformerSpec
    fabric: Any
    device: DeviceProfile
    precision: str
    layout: Layout
    placement: tuple[str, dict[str, Any]]  # ("fixed" | "search", what the layout search varies and keeps)
    capacity: float | None  # device memory a layout must fit in (bytes), or None for no check
    overlap: bool | None  # parallelism.dp_overlap (None: the framework's)
    framework: Framework
    interference: float  # compute slow-down while overlapped DP / ZeRO traffic runs (parallelism.comm_interference)
    interference_stated: bool = False  # comm_interference was stated: it then prices the NCCL all-to-all's SMs too


def setup_hybrid(cfg: dict[str, Any]) -> HybridSetup:
    """Resolve and check a composed parallelism=hybrid config (one-line EstimatorError on bad input)."""
    par = dict(cfg.get("parallelism") or {})
    unknown = sorted(set(par) - HYBRID_KEYS)
    if unknown:
        raise EstimatorError(f"parallelism=hybrid: unknown key(s) {unknown}; known: {sorted(HYBRID_KEYS)}")
    spec = TransformerSpec.from_cfg(cfg.get("model") or {})
    fabric = shared_fabric(cfg.get("fabric") or {})
    device = DeviceProfile.from_dict(dict(cfg.get("device") or {}))
    framework = Framework.from_cfg(cfg.get("framework"))
    precision = str(cfg.get("precision") or "amp")
    device.tensor_peak(precision)
    if precision == "fp8" and spec.fused != "te":  # FP8 training runs through Transformer Engine's layers only
        raise EstimatorError(f"precision=fp8 needs the Transformer Engine layer: model {spec.name!r} uses "
                             f"model.fused_kernels={spec.fused}; add model.fused_kernels=te")
    if spec.fused == "sdpa" and PRECISIONS[precision][1] == 1.0:  # the SDPA flash backend / flash-attn: fp16 and bf16 only
        raise EstimatorError(f"model.fused_kernels=sdpa: flash attention runs in 16 bits only; precision={precision} "
                             "needs model.fused_kernels=none (or precision=bf16)")
    framework.fp8(precision, device.name)  # refuses fp8_recipe=mxfp8 (Blackwell-only) on the devices modelled
    if precision == "fp8" and framework.fp8_kernels != "te" and spec.experts:  # layer.py refuses it too
        raise EstimatorError(f"framework.fp8_kernels={framework.fp8_kernels}: {spec.name} is a MoE model and torchao's float8 MoE path "
                             "is not modelled; use framework.fp8_kernels=te or precision=bf16")
    fp32 = _bool_or_null(par, "fp32_grads")
    if fp32 is not None:  # the published run's own choice (e.g. Llama 3: FP32 gradient reduce-scatter)
        framework = replace(framework, fp32_grads_with_bf16=fp32)
    # unset: the framework's own default (conf/framework/*.yaml); a layout search tries selective and full after it
    rc_stated = par.get("recompute") is not None or par.get("recompute_modules") is not None
    if not rc_stated:
        par["recompute"] = framework.recompute
    if par.get("zero") is None:  # unset: the framework's own ZeRO stage (FSDP: full sharding)
        par["zero"] = framework.zero
    placement, searched, mbs_options = _placement(par)
    if placement == "auto":  # tp/pp/dp/microbatches are searched: start from a valid layout of the GPU count
        global_batch = par.get("global_batch")
        stated_pp = "pp" not in searched
        # placeholders the search replaces (candidates() checks each layout it builds): a searched pp of 2 where the
        # schedule needs pipeline stages (virtual_stages > 1, dualpipe) and 2 x pp x microbatch_group microbatches,
        # which the interleaved (a multiple of pp) and DualPipe (even, >= 2 pp) schedules take; a placeholder they
        # refuse would surface as an error about values nobody stated ("microbatches (1)", "pp=1")
        base_pp = _auto_base_pp(par, fabric.nodes) if not stated_pp else par.get("pp")
        group = par.get("microbatch_group")
        placeholder_m = 2 * (base_pp if isinstance(base_pp, int) and base_pp > 0 else 1) * (
            group if isinstance(group, int) and not isinstance(group, bool) and group > 0 else 1)
        layout = Layout.from_cfg({**par, "tp": par.get("tp") if "tp" not in searched else 1,
                                  "pp": base_pp, "dp": None, "microbatches": placeholder_m,
                                  "micro_batch_size": 1, "first_stage_layers": par.get("first_stage_layers") if stated_pp else None,
                                  "last_stage_layers": par.get("last_stage_layers") if stated_pp else None}, spec, fabric.nodes)
        if isinstance(global_batch, bool) or not isinstance(global_batch, int) or global_batch < 1:
            raise EstimatorError(f"parallelism.global_batch must be a positive integer for placement=auto, got {global_batch!r}")
        layout = replace(layout, microbatches=global_batch)  # search() reads the global batch from here
    else:
        layout = Layout.from_cfg(par, spec, fabric.nodes)
    if layout.virtual_stages > 1 and not framework.interleaved_schedule:
        raise EstimatorError(f"parallelism.virtual_stages={layout.virtual_stages}: framework {framework.name}'s pipeline "
                             "has no interleaved schedule; use virtual_stages=1")
    if placement == "fixed":
        moe_comm.check(framework, spec, layout, precision)
        framework.check_zero1_group(layout.dp * layout.cp, layout.zero)
    else:  # the search checks each layout it tries (search.py); what no layout changes is said at once
        moe_comm.check_model(framework, spec, precision)
    capacity = device_memory(device.usable_memory_bytes, par.get("device_memory_bytes"))
    overlap = _bool_or_null(par, "dp_overlap")
    interference = par.get("comm_interference")
    stated = interference is not None
    if interference is None:  # the device's share: SMs an NCCL collective holds over the SMs it has (else none)
        interference = device.collective_share
    if isinstance(interference, bool) or not isinstance(interference, int | float) or not 0 <= interference < 1:
        raise EstimatorError(f"parallelism.comm_interference must be a fraction in [0, 1), got {interference!r}")
    recomputes = None if rc_stated else tuple(dict.fromkeys((framework.recompute, "selective", "full")))
    search_in = {"searched": searched + (("recompute",) if recomputes else ()), "mbs_options": mbs_options,
                 "recomputes": recomputes,
                 "fixed": {k: _int_or_null(par, k) for k in ("tp", "pp", "dp", "ep", "etp") if k not in searched}}
    return HybridSetup(spec, fabric, device, precision, layout, (placement, search_in), capacity, overlap, framework,
                       float(interference), stated)


def _int_or_null(par: dict[str, Any], key: str) -> int | None:
    value = par.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise EstimatorError(f"parallelism.{key} must be a positive integer or null, got {value!r}")
    return value


def _placement(par: dict[str, Any]) -> tuple[str, tuple[str, ...], tuple[int, ...]]:
    """(placement, the searched keys, the micro-batch sizes to try). ``placement: null`` (the default) searches tp
    and pp, the micro-batch as given, when neither is stated, and otherwise takes the layout as given with an
    unstated tp or pp as 1 (Megatron-LM's defaults: --tensor- / --pipeline-model-parallel-size 1); ``auto`` searches
    the unstated ones of tp and pp and the micro-batch size (1, 2, 4); ``fixed`` takes an unstated tp or pp as 1."""
    placement = par.get("placement")
    unstated = tuple(k for k in ("tp", "pp") if par.get(k) is None)
    if placement is None:
        if len(unstated) < 2:
            return "fixed", (), ()
        return "auto", unstated, (_int_or_null(par, "micro_batch_size") or 1,)
    if placement not in ("fixed", "auto"):
        raise EstimatorError(f"parallelism.placement must be fixed, auto or null, got {placement!r}")
    if placement == "fixed":
        return "fixed", (), ()
    return "auto", unstated + ("micro_batch_size",), (1, 2, 4)


def _auto_base_pp(par: dict[str, Any], gpus: int) -> int:
    """The searched pp the base layout of a search is built with: 2 when the configured schedule needs pipeline
    stages (virtual_stages > 1, schedule=dualpipe) and 2 divides the GPUs over tp x cp, else 1."""
    v, schedule = par.get("virtual_stages"), par.get("schedule")
    needs = (isinstance(v, int) and not isinstance(v, bool) and v > 1) or schedule == "dualpipe"
    tp = par.get("tp") if isinstance(par.get("tp"), int) else 1
    cp = par.get("cp") if isinstance(par.get("cp"), int) else 1
    return 2 if needs and tp > 0 and cp > 0 and gpus % (2 * tp * cp) == 0 else 1


def validate_hybrid(cfg: dict[str, Any]) -> None:
    s = setup_hybrid(cfg)
    if s.placement[0] == "fixed":
        _check_fits(s.spec, s.layout, s.capacity, s.framework, s.precision, lambda: _auto_would_fit(cfg))


def _auto_would_fit(cfg: dict[str, Any]) -> str | None:
    """Whether ``parallelism.placement=auto`` on this config finds a layout that fits the device memory (memory and
    the layout checks only, no step priced): None when it does, else the stated degrees the search keeps
    ("tp=1, pp=1"; "" when it keeps none, or when the config is refused under placement=auto too)."""
    par = {**(cfg.get("parallelism") or {}), "placement": "auto"}
    try:
        s = setup_hybrid({**cfg, "parallelism": par})
    except EstimatorError:
        return ""
    search_in = s.placement[1]
    if auto_fits(s.spec, s.layout, s.layout.microbatches, s.fabric, s.precision, s.capacity, s.framework,
                 search_in["mbs_options"], search_in["fixed"], search_in["recomputes"]):
        return None
    return ", ".join(f"{k}={v}" for k, v in search_in["fixed"].items() if v is not None)


def _check_fits(spec: TransformerSpec, layout: Layout, capacity: float | None, framework: Framework, precision: str,
                auto_fit: Callable[[], str | None] | None = None) -> None:
    """Refuse a fixed layout that does not fit ``capacity``; ``auto_fit()`` (:func:`_auto_would_fit`; None: not
    asked) decides whether the message offers the layout search."""
    def need(candidate: Layout, fw: Framework = framework) -> dict[str, Any]:
        return memory(spec, candidate, fw.grad_bytes(precision), fw, precision == "fp8")

    mem = need(layout)
    if capacity and mem["total"] > capacity:
        bf16_grads = None  # fp32 gradient buffers where 16-bit ones are the common recipe setting
        if framework.grad_bytes(precision) == 4:
            bf16_grads = need(layout, replace(framework, fp32_grads_with_bf16=False))["total"]
        where = f" on pipeline stage {mem['stage']}" if layout.pp > 1 else ""
        raise EstimatorError(
            f"parallelism: layout {layout.label()} needs {mem['total'] / 1e9:.1f} GB per GPU{where} "
            f"(weights {mem['weights'] / 1e9:.1f}, gradients {mem['gradients'] / 1e9:.1f}, "
            f"optimizer {mem['optimizer'] / 1e9:.1f}, "
            f"activations {mem['activations'] / 1e9:.1f}) but the device has {capacity / 1e9:.1f} GB: "
            f"{(mem['total'] - capacity) / 1e9:.1f} GB too much"
            f"{_hint(spec, layout, need, capacity, auto_fit, bf16_grads)}")


def _hint(spec: TransformerSpec, layout: Layout, need, capacity: float,
          auto_fit: Callable[[], str | None] | None = None, bf16_grads: float | None = None) -> str:
    """What else the user can change when a layout does not fit: each single setting that alone makes it
    fit (16-bit gradient buffers where the framework's rule keeps fp32 ones, ``bf16_grads`` being the need with
    them: Megatron-LM's bf16 default, which NeMo / Megatron-Bridge performance recipes and MLPerf runs turn off;
    sequence parallelism where it was turned off, full recompute unless the schedule is DualPipe, which refuses
    it), the layout search when ``auto_fit()`` finds a layout (else which stated degrees keep it from one; offered
    unchecked when ``auto_fit`` is None), and the layer (it keeps s x s attention scores unless it is Transformer
    Engine's flash-attention layer)."""
    hint = " ("
    fixes = []
    if layout.tp > 1 and not layout.sequence_parallel:
        fixes.append(("parallelism.sequence_parallel=true", replace(layout, sequence_parallel=True)))
    if layout.recompute != "full" and layout.schedule != "dualpipe":  # DualPipe refuses full recompute (layout.py)
        fixes.append(("parallelism.recompute=full", replace(layout, recompute="full", recompute_modules=None)))
    if bf16_grads is not None and bf16_grads <= capacity:
        hint += f"it fits with parallelism.fp32_grads=false (bf16 gradients): {bf16_grads / 1e9:.1f} GB; "
    for setting, candidate in fixes:
        total = need(candidate)["total"]
        if total <= capacity:
            hint += f"it fits with {setting}: {total / 1e9:.1f} GB; "
    kept = auto_fit() if auto_fit is not None else None
    if kept is None:
        hint += "parallelism.placement=auto searches the tp/pp/dp layouts that fit"
    elif kept:  # the search keeps stated degrees: offering it would send the user to a second refusal
        hint += f"parallelism.placement=auto finds none either with the stated {kept}: unset tp / pp, or add GPUs or cp"
    else:
        hint += "parallelism.placement=auto finds none either: add GPUs or cp"
    if spec.fused not in FLASH and spec.family in ("gpt", "llama", "nemotron") and layout.recompute != "full":
        hint += (f"; model.fused_kernels={spec.fused} keeps the s x s attention scores, "
                 "model.fused_kernels=te is flash attention, as Megatron-core / NeMo run today (sdpa: in an eager layer)")
    return hint + ")"


def estimate_hybrid(cfg: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(metrics, collectives) of one hybrid-parallel training step."""
    s = setup_hybrid(cfg)
    spec, fabric, device, precision, layout, capacity, framework = (s.spec, s.fabric, s.device, s.precision, s.layout,
                                                                    s.capacity, s.framework)
    (placement, search_in), overlap, interference = s.placement, s.overlap, s.interference
    algorithm = str(cfg.get("algorithm") or "default")
    if placement == "auto":
        metrics, colls, n = search(spec, layout, layout.microbatches, fabric, device, precision, algorithm, capacity,
                                   overlap, framework, interference, search_in["mbs_options"], search_in["fixed"],
                                   search_in["recomputes"], s.interference_stated)
        metrics["layouts_evaluated"] = n
        metrics["searched"] = ", ".join(search_in["searched"])
    else:
        _check_fits(spec, layout, capacity, framework, precision, lambda: _auto_would_fit(cfg))
        metrics, colls = step_time(spec, layout, fabric, device, precision, algorithm, overlap, framework,
                                   interference, s.interference_stated)
    metrics["placement"] = placement
    metrics["device_memory_bytes"] = capacity or 0.0
    return metrics, colls


def op_breakdown(cfg: dict[str, Any], metrics: dict[str, Any]) -> dict[str, Any]:
    """``ops=true``: the per-op breakdown of the step ``metrics`` came from (:mod:`~estimator.parallel.ops`), its
    layout priced again with :func:`step_time` collecting the terms of its compute time (the parts are cached)."""
    from estimator.parallel.ops import breakdown

    s = setup_hybrid(cfg)
    if s.placement[0] == "auto":
        raise EstimatorError(f"ops=true lists the ops of a fixed layout: the search picked {metrics.get('layout')}; "
                             "state it (parallelism.tp, parallelism.pp, parallelism.micro_batch_size, ...) "
                             "and run again")
    terms: dict[str, Any] = {}
    step_time(s.spec, s.layout, s.fabric, s.device, s.precision, str(cfg.get("algorithm") or "default"), s.overlap,
              s.framework, s.interference, s.interference_stated, parts_out=terms)
    return breakdown(s, terms, metrics)
