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
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from estimator.config import to_container
from estimator.estimate import estimate, validate, workload_path
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


def check(cfg: DictConfig | dict[str, Any]) -> None:
    """``--check``: the fabric, device, parallelism and precision, without capturing or estimating."""
    validate(to_container(cfg))


def run(cfg: DictConfig | dict[str, Any]) -> dict[str, Any]:
    resolved = to_container(cfg)
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
    return {
        "model": est.metrics["workload_name"],
        "fabric": fabric.get("name"),
        "device": (est.config["device"] or {}).get("name"),
        **est.metrics,
        **est.notes,
        **trust(resolved),
        "config_hash": est.config_hash,
        "collectives": est.collectives,
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
    return "\n".join(lines)
