"""One estimate: workload + device + parallelism + fabric -> iteration time and breakdown.

This is the Python API behind ``estimator estimate`` and every sweep point::

    from estimator.estimate import estimate
    from estimator.config import compose, to_container
    result = estimate(to_container(compose(["fabric=ideal", "fabric.nodes=64"])))
    result.metrics["iter_time_s"]

Loaded workloads, compute profiles and fabrics are memoised per process, so a sweep pays the
workload parsing and compute-stream walk once per (workload, device, batch).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from estimator import __version__
from estimator.compute.device import DeviceProfile, check_precision, replay_reason
from estimator.config import config_hash, flatten
from estimator.errors import EstimatorError
from estimator.fabrics.registry import shared_fabric
from estimator.files import resolve_input
from estimator.timeline.dag import simulate_dag
from estimator.timeline.dataparallel import (
    BucketPolicy,
    compute_profile,
    make_buckets,
    simulate_data_parallel,
)
from estimator.timeline.job_topology import wire_for_job
from estimator.workloads import cnn_fusion, io
from estimator.workloads.graph import Workload

# The parts of the resolved config that determine an estimate (and so its config hash).
ESTIMATE_KEYS = ("model", "fabric", "device", "parallelism", "precision", "batch_size", "algorithm", "workload")

# Store column types of an estimate's metrics (data-parallel and imported-graph estimates; a
# hybrid layout's metrics are stored by value) and of its per-collective rows. Sweeps write with
# these declared types instead of inferring them value by value.
METRIC_TYPES = {
    "workload_name": "VARCHAR", "nodes": "BIGINT", "iter_time_s": "DOUBLE", "compute_time_s": "DOUBLE",
    "forward_s": "DOUBLE", "backward_s": "DOUBLE", "optimizer_s": "DOUBLE", "comm_time_s": "DOUBLE",
    "exposed_comm_time_s": "DOUBLE", "samples_per_s": "DOUBLE", "algorithm_used": "VARCHAR", "grad_accum": "BIGINT",
    "global_batch": "BIGINT", "interference_s": "DOUBLE", "straggler_s": "DOUBLE", "host_overhead_s": "DOUBLE",
    "input_bound": "BOOLEAN", "num_collectives": "BIGINT", "fabric_choice": "VARCHAR", "batch_size_per_device": "BIGINT",
}
COLLECTIVE_TYPES = {
    "config_hash": "VARCHAR", "idx": "BIGINT", "collective": "VARCHAR", "algorithm": "VARCHAR", "bytes": "DOUBLE",
    "tensors": "BIGINT", "ready_s": "DOUBLE", "start_s": "DOUBLE", "end_s": "DOUBLE", "time_s": "DOUBLE", "steps": "BIGINT",
}


@dataclass
class Estimate:
    config: dict[str, Any]
    config_hash: str
    metrics: dict[str, Any]
    collectives: list[dict[str, Any]]
    # how compute was priced (not stored): {"compute_pricing": "device model"} or "replayed" with
    # where the durations were measured and why (:func:`compute_pricing`)
    notes: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        """The flat store row: identity, config columns (``fabric_nodes``...), metrics."""
        row: dict[str, Any] = {"config_hash": self.config_hash, "version": __version__}
        row.update({k.replace(".", "_"): v for k, v in flatten(self.config).items()})
        row.update(self.metrics)
        return row


def estimate_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """The estimate-relevant subset of a resolved config (what the hash covers); a hybrid layout's
    also holds its training framework's profile (``framework=``, only composed with parallelism=hybrid)."""
    sub = {k: cfg.get(k) for k in ESTIMATE_KEYS}
    if is_hybrid(sub) and cfg.get("framework") is not None:
        sub["framework"] = cfg["framework"]
    return sub


def workload_path(cfg: dict[str, Any]) -> Path:
    """Where the config's workload is read from: ``workload`` or ``<traces_dir>/<model>.workload.json``
    (relative paths also looked up from the repository root)."""
    if cfg.get("workload"):
        return resolve_input(cfg["workload"])
    model = (cfg.get("model") or {}).get("name")
    if not model:
        raise EstimatorError("no workload given: set model=<name> or workload=<path>")
    return resolve_input(Path(cfg.get("traces_dir") or "traces") / f"{model}{io.SUFFIX}")


@lru_cache(maxsize=64)
def _load(path: str, mtime: float) -> Workload:
    return io.load(path)


def load_workload(path: Path) -> Workload:
    return _load(*workload_state(path))


@lru_cache(maxsize=16)
def _scaled(path: str, mtime: float, batch: int) -> Workload:
    """An imported graph at a batch size (one object per batch, so its timeline structure is reused)."""
    return _load(path, mtime).scaled_to_batch(batch)


@lru_cache(maxsize=256)
def _profile(path: str, mtime: float, batch: int, device: DeviceProfile, dtype_bytes: int, precision: str,
             kernels: str = "none"):
    """Compute profile of a workload at a batch size, its kernels fused as ``kernels`` runs them
    (:mod:`estimator.workloads.cnn_fusion`)."""
    workload = cnn_fusion.apply(_load(path, mtime).scaled_to_batch(batch), kernels)
    return compute_profile(workload, device, dtype_bytes, precision)


@lru_cache(maxsize=1024)
def _buckets(path: str, mtime: float, batch: int, device: DeviceProfile, policy: BucketPolicy, precision: str,
             kernels: str = "none"):
    """Gradient buckets of a workload: they depend on the compute profile and the bucketing
    policy, not on the fabric, so a sweep over fabrics computes them once."""
    profile = _profile(path, mtime, batch, device, policy.gradient_dtype_bytes, precision, kernels)
    return tuple(make_buckets(profile, policy))


@lru_cache(maxsize=256)
def device_from_json(text: str) -> DeviceProfile:
    """The device of a config encoded as ``json.dumps(device or {}, sort_keys=True, default=str)``."""
    return DeviceProfile.from_dict(json.loads(text))


@lru_cache(maxsize=256)
def policy_from_json(text: str) -> BucketPolicy:
    """The bucket policy of a ``parallelism`` config encoded like :func:`device_from_json`'s."""
    return BucketPolicy.from_dict(json.loads(text))


_LAST: dict[str, tuple[Any, Any, Any]] = {}


def _memo(kind: str, value: dict[str, Any] | None, make: Any) -> Any:
    """``make(json)`` for ``value``; the last object of each kind is remembered (held, and
    compared with a copy of its contents), so sweep points sharing a device or policy dict encode
    it once."""
    last = _LAST.get(kind)
    if last is not None and last[1] is value and last[0] == value:
        return last[2]
    text = json.dumps(value or {}, sort_keys=True, default=str)
    result = make(text)
    _LAST[kind] = (json.loads(text), value, result)
    return result


def device_profile(device: dict[str, Any] | None) -> DeviceProfile:
    """``DeviceProfile.from_dict``, one instance per distinct config in this process."""
    return _memo("device", device, device_from_json)


def bucket_policy(par: dict[str, Any] | None) -> BucketPolicy:
    """``BucketPolicy.from_dict``, one instance per distinct config in this process."""
    return _memo("policy", par, policy_from_json)


def is_hybrid(cfg: dict[str, Any]) -> bool:
    """A tensor/pipeline/data layout (``parallelism=hybrid``), estimated by :mod:`estimator.parallel`."""
    return str((cfg.get("parallelism") or {}).get("strategy", "data")) == "hybrid"


def validate(cfg: dict[str, Any]) -> None:
    """Check the fabric, device, parallelism and precision of a config without estimating (so a
    bad override fails before anything is captured or written)."""
    sub = estimate_config(cfg)
    if is_hybrid(sub):  # large-model layouts: estimator/parallel
        from estimator.parallel.estimate import validate_hybrid

        return validate_hybrid(sub)
    model = cfg.get("model") or {}
    if model.get("arch") == "decoder" and not cfg.get("workload"):  # never captured whole
        raise EstimatorError(f"model {model.get('name')!r} is a decoder-only transformer: estimate it with "
                             "parallelism=hybrid (its tp/cp/pp/dp layout), not parallelism=data")
    if not cfg.get("workload"):
        cnn_fusion.check(model.get("fused_kernels"))  # a bad profile is an error before the model is captured
    shared_fabric(sub["fabric"] or {})
    device = DeviceProfile.from_dict(dict(sub["device"] or {}))
    BucketPolicy.from_dict(dict(sub["parallelism"] or {}))
    precision = str(sub["precision"] or "amp")
    check_precision(precision)
    if not device.replay:
        device.tensor_peak(precision)  # a precision the device lacks (tf32 on a V100) is an error


def estimate(cfg: dict[str, Any], workload_file: str | Path | None = None) -> Estimate:
    """Estimate one configuration (a resolved config mapping, e.g. from ``config.to_container``).

    ``workload_file`` overrides where the workload is read from without changing the config
    (and so its hash): sweeps pass absolute paths to Ray workers this way."""
    sub = estimate_config(cfg)
    if is_hybrid(sub):  # large-model layouts: estimator/parallel
        from estimator.parallel.estimate import estimate_hybrid

        metrics, colls = estimate_hybrid(sub)
        metrics = {"workload_name": (sub["model"] or {}).get("name"), "nodes": metrics["tp"] * metrics.get("cp", 1) * metrics["pp"] * metrics["dp"],
                   "batch_size_per_device": metrics["micro_batch_size"], **metrics}
        return Estimate(sub, config_hash(sub), metrics, colls, {"compute_pricing": "device model"})
    fabric, device, policy = shared_fabric(sub["fabric"] or {}), device_profile(sub["device"]), bucket_policy(sub["parallelism"])
    checked_precision(sub, device)  # before the workload path (as before estimate_with existed)
    path = Path(workload_file) if workload_file else workload_path(cfg)
    metrics, collectives = estimate_with(sub, fabric, device, policy, path)
    return Estimate(sub, config_hash(sub), metrics, collectives, compute_pricing(load_workload(path), device))


def compute_pricing(workload: Workload, device: DeviceProfile) -> dict[str, Any]:
    """How ``workload``'s compute ops were priced on ``device``: by the device model, or by
    replaying the durations measured where the trace was taken (and why)."""
    reason = replay_reason(workload, device)
    if reason is None:
        return {"compute_pricing": "device model"}
    return {"compute_pricing": "replayed", "durations_measured_on": workload.capture_device, "replay_reason": reason}


def workload_state(path: str | Path) -> tuple[str, float]:
    """(resolved path, modification time) of a workload file: what its memoised objects are keyed by."""
    path = resolve_input(path)
    try:
        return str(path), os.stat(path).st_mtime
    except FileNotFoundError:
        raise EstimatorError(f"{path}: workload not found (capture it: estimator capture model=<name>)") from None


def checked_precision(sub: dict[str, Any], device: DeviceProfile) -> str:
    """The config's precision, checked (a precision the device lacks is an error before any loading)."""
    precision = str(sub["precision"] or "amp")
    check_precision(precision)
    if not device.replay:
        device.tensor_peak(precision)
    return precision


def estimate_with(sub: dict[str, Any], fabric: Any, device: DeviceProfile, policy: BucketPolicy,
                  path: str | Path, state: tuple[str, float] | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Metrics and per-collective rows of a data-parallel or imported-graph estimate config ``sub``
    (:func:`estimate_config`) whose fabric, device and bucket policy are already built (a sweep
    batch builds them from its points' encoded subtrees); ``state`` is ``workload_state(path)``
    when the caller has it."""
    par = sub["parallelism"] or {}
    precision = checked_precision(sub, device)
    file, mtime = state or workload_state(path)
    workload = _load(file, mtime)
    default_batch = workload.batch_size if sub.get("workload") else (sub["model"] or {}).get("batch_size")
    batch = sub["batch_size"] or default_batch or workload.batch_size
    if not isinstance(batch, int) or batch < 1:
        raise EstimatorError(f"batch_size must be a positive integer, got {batch!r}")
    algorithm = str(sub["algorithm"] or "default")
    if workload.devices == 1:
        if par.get("strategy", "data") != "data":
            raise EstimatorError(f"parallelism.strategy {par.get('strategy')!r} is not supported for single-replica workloads")
        kernels = "none" if sub.get("workload") else cnn_fusion.check((sub["model"] or {}).get("fused_kernels"))
        profile = _profile(file, mtime, batch, device, policy.gradient_dtype_bytes, precision, kernels)
        buckets = list(_buckets(file, mtime, batch, device, policy, precision, kernels))
        # a fabric that picks its wiring per job (the OCS with topology=auto) is wired for this one, on
        # the network alone: the straggler wait is the same on every candidate topology, and an
        # input-bound floor would tie them
        fabric, plans = wire_for_job(fabric, profile, policy, batch, algorithm)
        # what the model reads (its input pipeline and straggler cv); an imported trace: unknown
        model_input = None if sub.get("workload") else (sub["model"] or {}).get("input")
        choice = plans[0].topology if plans else ""
        result = simulate_data_parallel(profile, fabric, policy, batch, algorithm, buckets=buckets,
                                        model_input=model_input)
    else:
        choice = ""
        result = simulate_dag(_scaled(file, mtime, batch), fabric, device, algorithm, precision)
    metrics = {
        "workload_name": workload.name,
        "nodes": fabric.nodes,
        **result.metrics(),
        "num_collectives": len(result.collectives),
        "fabric_choice": choice,  # what a job-level `auto` fabric chose (e.g. the OCS topology)
    }
    metrics.setdefault("global_batch", batch)  # an imported multi-device graph: its own batch
    metrics.pop("devices", None)
    metrics.pop("batch_size", None)
    metrics["batch_size_per_device"] = batch
    return metrics, result.collectives
