"""What one job's iteration costs on the cluster's fabric, alone or with its communication slowed.

A job is priced like one data-parallel estimate (:mod:`estimator.timeline.dataparallel`): its
model's compute profile on the config's device, its gradient buckets under the config's
parallelism, every bucket's all-reduce priced by the fabric for the job's group of GPUs
(``group_cost`` where the fabric defines it, e.g. the OCS's own circuits, else
``collective_cost(group_size=...)``). Contention and placement enter as a *stretch* ``s >= 1`` of
each all-reduce's bandwidth part: a collective that costs ``t(M)`` alone costs
``t(0) + s (t(M) - t(0))`` (its latency part ``t(0)`` unchanged); the timeline then decides how
much of the longer communication backward hides.

Memoised per (workload, batch, group, replicas, stretch rounded *up* to 1e-3), so jobs of the same
model, size, placement shape and sharing set are priced once, and a stretch >= 1 never prices an
iteration below its alone time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from estimator.errors import EstimatorError
from estimator.estimate import bucket_policy, checked_precision, device_profile, load_workload, workload_state
from estimator.fabrics.base import CollectiveCost, Fabric
from estimator.files import resolve_input
from estimator.timeline.dataparallel import (
    Bucket,
    ComputeProfile,
    compute_profile,
    make_buckets,
    simulate_data_parallel,
)

STRETCH_STEP = 1e-3  # stretches are rounded up to this (relative) step before pricing


@dataclass(frozen=True)
class Spec:
    """A job's workload: the file it is read from (with its modification time), its batch and what
    its model reads (``model.input``: input pipeline and straggler cv; None for an imported trace)."""

    path: str
    mtime: float
    batch: int
    name: str
    model_input: str | None = None


@dataclass(frozen=True)
class Iteration:
    iter_s: float  # one iteration (optimizer step)
    comm_s: float  # time the communication stream is busy in it
    wire_s: float  # of which its data is on the wire: the collectives' bandwidth parts (stretched)

    @property
    def duty(self) -> float:
        """Share of the iteration the job's traffic is on the links (its communication duty cycle:
        the bandwidth parts only; latencies and per-message overheads load no link)."""
        return min(1.0, self.wire_s / self.iter_s) if self.iter_s > 0 else 0.0


def quantised(stretch: float) -> float:
    """``stretch`` rounded up to :data:`STRETCH_STEP` (>= 1)."""
    return max(1.0, math.ceil(stretch / STRETCH_STEP - 1e-9) * STRETCH_STEP)


class _Group:
    """The cluster fabric seen by one job: its group's all-reduces, bandwidth part x ``stretch``."""

    def __init__(self, price: Any, group: int, stretch: float):
        self.price, self.group, self.stretch = price, group, stretch

    @property
    def nodes(self) -> int:
        return self.group

    def collective_cost(self, collective: str, nbytes: float, algorithm: str = "default",
                        group_size: int | None = None) -> CollectiveCost:
        full = self.price(collective, float(nbytes), self.group)
        if self.stretch == 1.0:
            return full
        zero = self.price(collective, 0.0, self.group)
        return replace(full, time_s=zero.time_s + self.stretch * max(0.0, full.time_s - zero.time_s))


class JobPricer:
    """Iteration times of the jobs of one cluster config (``cfg``: the resolved config) on ``fabric``."""

    def __init__(self, cfg: dict[str, Any], fabric: Fabric):
        self.cfg = cfg
        self.fabric = fabric
        self.device = device_profile(cfg.get("device"))
        self.policy = bucket_policy(cfg.get("parallelism"))
        self.precision = checked_precision({"precision": cfg.get("precision")}, self.device)
        self.algorithm = str(cfg.get("algorithm") or "default")
        self._specs: dict[tuple[str, str, int | None], Spec] = {}
        self._profiles: dict[tuple[str, float, int], tuple[ComputeProfile, list[Bucket]]] = {}
        self._prices: dict[tuple[str, float, int], CollectiveCost] = {}
        self._iters: dict[tuple[Spec, int, int, float], Iteration] = {}
        self._groups: dict[int, int] = {}
        self.lookups = 0  # iteration prices asked for (all of them memoised: see len(self._iters))

    # ---- workloads ------------------------------------------------------------------------------
    def spec(self, model: str, workload: str, batch_size: int | None) -> Spec:
        key = (model, workload, batch_size)
        hit = self._specs.get(key)
        if hit is None:
            hit = self._specs[key] = self._spec(model, workload, batch_size)
        return hit

    def _spec(self, model: str, workload: str, batch_size: int | None) -> Spec:
        if workload:
            path = resolve_input(workload)
            file, mtime = workload_state(path)
            batch = batch_size or load_workload(Path(file)).batch_size
            name = load_workload(Path(file)).name
            model_input = None
        else:
            from estimator.config import compose, to_container

            model_cfg = to_container(compose([f"model={model}"]))["model"]
            traces = Path(str(self.cfg.get("traces_dir") or "traces"))
            file, mtime = workload_state(resolve_input(traces / f"{model}.workload.json"))
            batch = batch_size or int(model_cfg.get("batch_size") or load_workload(Path(file)).batch_size)
            name = model
            model_input = model_cfg.get("input")
        wl = load_workload(Path(file))
        if wl.devices != 1:
            raise EstimatorError(f"{file}: workload {wl.name!r} spans {wl.devices} devices; the cluster simulation "
                                 "runs data-parallel jobs of single-replica workloads")
        return Spec(file, mtime, int(batch), name, model_input)

    def _profile(self, spec: Spec) -> tuple[ComputeProfile, list[Bucket]]:
        key = (spec.path, spec.mtime, spec.batch)
        hit = self._profiles.get(key)
        if hit is None:
            wl = load_workload(Path(spec.path)).scaled_to_batch(spec.batch)
            profile = compute_profile(wl, self.device, self.policy.gradient_dtype_bytes, self.precision)
            hit = self._profiles[key] = (profile, make_buckets(profile, self.policy))
        return hit

    # ---- the fabric -----------------------------------------------------------------------------
    def group(self, gpus: int) -> int:
        """The smallest group >= ``gpus`` the fabric prices (SiPAC: a power of r; OPSquare: within a
        pod or whole pods); the job's other GPUs of that group are reserved but idle."""
        hit = self._groups.get(gpus)
        if hit is None:
            hit = self._groups[gpus] = self._group(gpus)
        return hit

    def _group(self, gpus: int) -> int:
        first_error = None
        for n in range(gpus, self.fabric.nodes + 1):
            try:
                self.fabric.check_size(n)
                return n
            except EstimatorError as exc:
                first_error = first_error or exc
        raise EstimatorError(f"fabric {self.fabric.name!r} has no group of {gpus} or more GPUs ({first_error})")

    def price(self, collective: str, nbytes: float, group: int) -> CollectiveCost:
        key = (collective, nbytes, group)
        hit = self._prices.get(key)
        if hit is None:
            if hasattr(self.fabric, "group_cost"):  # a fabric that places groups itself (OCS circuits, ...)
                hit = self.fabric.group_cost(collective, nbytes, group, 1, self.algorithm)
            else:
                hit = self.fabric.collective_cost(collective, nbytes, self.algorithm, group_size=group)
            self._prices[key] = hit
        return hit

    @property
    def timelines(self) -> int:
        """Distinct iteration timelines simulated so far (the memo's misses)."""
        return len(self._iters)

    # ---- iterations -----------------------------------------------------------------------------
    def iteration(self, spec: Spec, gpus: int, stretch: float = 1.0) -> Iteration:
        """One iteration of ``gpus`` replicas whose all-reduces' bandwidth part is ``stretch`` x longer."""
        group = self.group(gpus)
        s = quantised(stretch)
        key = (spec, gpus, group, s)
        self.lookups += 1
        hit = self._iters.get(key)
        if hit is None:
            profile, buckets = self._profile(spec)
            if gpus == 1:
                result = simulate_data_parallel(profile, _Group(self.price, 1, 1.0), self.policy, spec.batch,
                                                self.algorithm, nodes=1, buckets=buckets, model_input=spec.model_input)
                wire = 0.0
            else:
                result = simulate_data_parallel(profile, _Group(self.price, group, s), self.policy, spec.batch,
                                                self.algorithm, nodes=gpus, buckets=buckets, model_input=spec.model_input)
                zero = self.price("all_reduce", 0.0, group).time_s
                wire = s * sum(max(0.0, self.price("all_reduce", b.nbytes, group).time_s - zero) for b in buckets)
            hit = self._iters[key] = Iteration(result.iter_time_s, result.comm_time_s, wire)
        return hit
