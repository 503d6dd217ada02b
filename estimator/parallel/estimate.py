"""``parallelism=hybrid``: a decoder-only model on tp x pp x dp GPUs, from a resolved config.

``estimator estimate model=gpt3_175b parallelism=hybrid system=dgx_a100 fabric.nodes=1024
parallelism.tp=8 parallelism.pp=16`` (dp follows from ``fabric.nodes``); ``parallelism.placement
=auto`` searches the layouts (``search``). A layout that needs more memory than the device has
is an error naming how much more.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from estimator.compute.device import DeviceProfile
from estimator.errors import EstimatorError
from estimator.fabrics.registry import shared_fabric
from estimator.parallel.layout import Layout, device_memory, memory
from estimator.parallel.search import search
from estimator.parallel.spec import TransformerSpec
from estimator.parallel.step import step_time

HYBRID_KEYS = {"strategy", "tp", "pp", "dp", "ep", "micro_batch_size", "microbatches", "global_batch", "zero",
               "sequence_parallel", "recompute", "order", "placement", "dp_overlap", "device_memory_bytes", "virtual_stages",
               "input"}  # input: the host's data-loading facts a system preset sets (data parallelism only)


def _setup(cfg: dict[str, Any]):
    par = dict(cfg.get("parallelism") or {})
    unknown = sorted(set(par) - HYBRID_KEYS)
    if unknown:
        raise EstimatorError(f"parallelism=hybrid: unknown key(s) {unknown}; known: {sorted(HYBRID_KEYS)}")
    spec = TransformerSpec.from_cfg(cfg.get("model") or {})
    fabric = shared_fabric(cfg.get("fabric") or {})
    device = DeviceProfile.from_dict(dict(cfg.get("device") or {}))
    precision = str(cfg.get("precision") or "amp")
    device.tensor_peak(precision)
    placement = str(par.get("placement", "fixed"))
    if placement not in ("fixed", "auto"):
        raise EstimatorError(f"parallelism.placement must be fixed or auto, got {placement!r}")
    if placement == "auto":  # tp/pp/dp/microbatches are searched: start from a valid layout of the GPU count
        global_batch = par.get("global_batch")
        layout = Layout.from_cfg({**par, "tp": 1, "pp": 1, "dp": None, "microbatches": 1}, spec, fabric.nodes)
        if isinstance(global_batch, bool) or not isinstance(global_batch, int) or global_batch < 1:
            raise EstimatorError(f"parallelism.global_batch must be a positive integer for placement=auto, got {global_batch!r}")
        layout = replace(layout, microbatches=global_batch)  # search() reads the global batch from here
    else:
        layout = Layout.from_cfg(par, spec, fabric.nodes)
    capacity = device_memory(device.memory_bytes, par.get("device_memory_bytes"))
    overlap = par.get("dp_overlap", True)
    if not isinstance(overlap, bool):
        raise EstimatorError(f"parallelism.dp_overlap must be true or false, got {overlap!r}")
    return spec, fabric, device, precision, layout, placement, capacity, overlap


def validate_hybrid(cfg: dict[str, Any]) -> None:
    spec, _f, _d, _p, layout, placement, capacity, _o = _setup(cfg)
    if placement == "fixed":
        _check_fits(spec, layout, capacity)


def _check_fits(spec: TransformerSpec, layout: Layout, capacity: float | None) -> None:
    mem = memory(spec, layout)
    if capacity and mem["total"] > capacity:
        raise EstimatorError(
            f"parallelism: layout {layout.label()} needs {mem['total'] / 1e9:.1f} GB per GPU "
            f"(weights {mem['weights'] / 1e9:.1f}, gradients {mem['gradients'] / 1e9:.1f}, optimizer {mem['optimizer'] / 1e9:.1f}, "
            f"activations {mem['activations'] / 1e9:.1f}) but the device has {capacity / 1e9:.1f} GB: "
            f"{(mem['total'] - capacity) / 1e9:.1f} GB too much")


def estimate_hybrid(cfg: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(metrics, collectives) of one hybrid-parallel training step."""
    spec, fabric, device, precision, layout, placement, capacity, overlap = _setup(cfg)
    algorithm = str(cfg.get("algorithm") or "default")
    if placement == "auto":
        metrics, colls, n = search(spec, layout, layout.microbatches, fabric, device, precision, algorithm, capacity, overlap)
        metrics["layouts_evaluated"] = n
    else:
        _check_fits(spec, layout, capacity)
        metrics, colls = step_time(spec, layout, fabric, device, precision, algorithm, overlap)
    metrics["placement"] = placement
    metrics["device_memory_bytes"] = capacity or 0.0
    return metrics, colls
