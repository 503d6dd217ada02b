"""Estimate one training iteration: ``estimator estimate model=resnet50 fabric=ideal fabric.nodes=8``.

Prints iteration time, compute time, exposed communication, throughput and the per-collective
table (``output=json``: one JSON object with a ``collectives`` list). ``write=true`` also stores
the row in the DuckDB store (``store=...``). ``-m`` sweeps, e.g. ``-m fabric=ideal,nvlink_leafspine
fabric.nodes=8,64``. A model whose trace is not in ``traces/`` yet is captured first.

Large models (a decoder-only ``model=llama3_8b`` etc.: ``parallelism=hybrid``, docs/large-models.md):
``parallelism.tp/pp/cp/ep/dp``, ``parallelism.placement=auto`` (search the layout), ``precision=bf16|fp8``,
``framework=megatron|fsdp|deepspeed|deepspeed_2021|internlm`` and its keys (``framework.tp_comm_overlap``,
``framework.fp8_recipe=delayed|tensorwise|blockwise``), ``parallelism.fp32_grads``, ``model.qk_norm``
(named by the Qwen3 presets; ``+model.qk_norm=true`` adds it to another). ``estimator --cfg estimate ...``
prints every key of the composed config.

Where the time goes (``ops=true``, hybrid layouts with a fixed layout): after the usual lines, one row per
captured op of the transformer layer (dense and MoE), the embedding, the LM head and the loss, per phase
(forward, backward, recompute): FLOPs, bytes, priced seconds, what bounds it (compute at which efficiency of
which peak, memory bandwidth, launch floor) and how many times per step it runs on the slowest pipeline stage,
then totals per op class, part and phase and what the step prices outside the ops (optimizer, ...), checked
to add up to ``compute_time_s`` (:mod:`estimator.parallel.ops`). ``output=json`` adds the lists ``ops`` and
``ops_outside`` and the dict ``ops_totals``. E.g. ``estimator estimate system=dgx_h100 fabric.nodes=64
model=llama3_70b parallelism=hybrid precision=bf16 parallelism.tp=8 parallelism.pp=4
parallelism.global_batch=128 ops=true``. A data-parallel workload (``model=resnet50``) has no layer
breakdown here: ``ops=true`` is refused (``estimator inspect model=resnet50`` breaks its ops down).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from estimator.config import to_container
from estimator.errors import EstimatorError
from estimator.estimate import estimate, estimate_config, is_hybrid, validate, workload_path
from estimator.validation.envelope import trust

if TYPE_CHECKING:
    from omegaconf import DictConfig

HELP = "estimate one iteration (time, compute, exposed communication, throughput)"
#: the CLI may pass the resolved config as a plain dict (from its composition cache, no OmegaConf)
PLAIN_CONFIG = True


def ensure_workload(cfg: DictConfig | dict[str, Any]) -> None:
    """Capture the model first when its canonical trace does not exist yet or is stale."""
    from estimator.workloads.capture import ensure_workload as ensure

    if isinstance(cfg, dict):  # the capture reads keys as attributes
        from omegaconf import OmegaConf

        cfg = OmegaConf.create(cfg)

    ensure(cfg, announce=lambda msg: print(f"note: {msg}", file=sys.stderr))


def stale_trace(path) -> bool:
    """A zoo capture priced under an older byte rule (re-captured before estimating)."""
    from estimator.estimate import load_workload
    from estimator.workloads.capture import is_stale

    return is_stale(load_workload(path))


def check_ops(resolved: dict[str, Any]) -> bool:
    """Whether ``ops=true`` asks for the per-op breakdown; refused (one line) where there is none to give."""
    ops = resolved.get("ops", False)
    if not isinstance(ops, bool):
        raise EstimatorError(f"ops must be true or false, got {ops!r}")
    if ops and not is_hybrid(resolved):
        model = (resolved.get("model") or {}).get("name")
        raise EstimatorError(f"ops=true lists the captured layer's ops of a parallelism=hybrid (large-model) estimate; "
                             f"model {model} runs parallelism="
                             f"{(resolved.get('parallelism') or {}).get('strategy', 'data')}: its op breakdown is "
                             f"`estimator inspect model={model}`")
    return ops


def check(cfg: DictConfig | dict[str, Any]) -> None:
    """``--check``: the fabric, device, parallelism and precision, without capturing or estimating."""
    resolved = to_container(cfg)
    check_ops(resolved)
    validate(resolved)


def run(cfg: DictConfig | dict[str, Any]) -> dict[str, Any]:
    resolved = to_container(cfg)
    ops = check_ops(resolved)
    validate(resolved)  # a bad fabric/device fails before any capture
    if (cfg.get("parallelism") or {}).get("strategy") != "hybrid":  # hybrid captures its own layer shards
        path = workload_path(resolved)
        if cfg.get("workload") or not path.exists() or stale_trace(path):  # estimate() reads an existing trace
            ensure_workload(cfg)
    est = estimate(resolved)
    if cfg.get("write"):
        from estimator.store.duckdb_store import write_estimates  # DuckDB only when writing

        write_estimates(cfg["store"], [est])
    fabric = est.config["fabric"] or {}
    breakdown = {}
    if ops:
        from estimator.parallel.estimate import op_breakdown

        breakdown = op_breakdown(estimate_config(resolved), est.metrics)
    return {
        "model": est.metrics["workload_name"],
        "fabric": fabric.get("name"),
        "device": (est.config["device"] or {}).get("name"),
        **est.metrics,
        **est.notes,
        **trust(resolved),
        "config_hash": est.config_hash,
        "collectives": est.collectives,
        **breakdown,
    }


def format_text(result: dict[str, Any]) -> str:
    keys = [
        ("model", ""), ("fabric", ""), ("device", ""), ("nodes", ""), ("algorithm_used", ""),
        ("batch_size_per_device", ""), ("grad_accum", ""), ("global_batch", ""),
        ("iter_time_s", "s"), ("compute_time_s", "s"),
        ("forward_s", "s"), ("backward_s", "s"), ("optimizer_s", "s"), ("comm_time_s", "s"),
        ("exposed_comm_time_s", "s"), ("samples_per_s", "samples/s"), ("num_collectives", ""),
        ("layout", ""), ("framework", ""), ("loss_kernel", ""), ("loss_time_s", "s"), ("stage_layers", ""), ("bubble_time_s", "s"), ("tp_comm_time_s", "s"),
        ("cp_exposed_time_s", "s"), ("dp_exposed_time_s", "s"), ("zero3_exposed_time_s", "s"),
        ("fp8_amax_time_s", "s"), ("tied_grad_time_s", "s"), ("p2p_gather_time_s", "s"), ("tokens_per_s", "tokens/s"),
        ("reconfig_time_s", "s"), ("circuit_reconfigs_per_step", ""), ("circuit_plan", ""),
        ("mfu", ""), ("tflops_per_gpu", "TFLOP/s"), ("memory_total_bytes", "B"), ("memory_peak_stage", ""),
        ("layouts_evaluated", ""), ("searched", ""), ("validation_class", ""), ("validation_record", ""), ("validation_nearest", ""),
    ]
    lines = []
    if result.get("compute_pricing") == "replayed":  # said before any number it explains
        lines.append(f"{'compute':<22} measured durations replayed (measured on {result['durations_measured_on']}): "
                     f"{result['replay_reason']}")
    for key, unit in keys:
        if key in result:
            v = result[key]
            lines.append(f"{key:<22} {v:.6g} {unit}".rstrip() if isinstance(v, float) else f"{key:<22} {v}")
    colls = result.get("collectives") or []
    if colls:
        lines.append("")
        lines.append(f"{'#':>3} {'collective':<11} {'algorithm':<16} {'MiB':>9} {'ready_ms':>9} {'start_ms':>9} {'time_ms':>9}")
        for c in colls[:40]:
            lines.append(
                f"{c['idx']:>3} {c['collective']:<11} {c['algorithm']:<16} {c['bytes'] / 2**20:>9.3f} "
                f"{c['ready_s'] * 1e3:>9.3f} {c['start_s'] * 1e3:>9.3f} {c['time_s'] * 1e3:>9.3f}"
            )
        if len(colls) > 40:
            lines.append(f"... {len(colls) - 40} more (output=json lists all)")
    if "ops" in result:
        from estimator.parallel.ops import format_ops

        lines.append(format_ops(result))
    return "\n".join(lines)
