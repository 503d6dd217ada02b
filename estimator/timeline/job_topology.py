"""Job-level topology choice on a reconfigurable fabric (the OCS with ``topology=auto``).

The OCS paper (seed 001) reconfigures the optical layer once per job to the topology that suits
the job's all-reduce algorithm and model. This is job-level logic, so it lives above the fabrics:
a fabric only says whether it wires per job (``wires_per_job``), which shapes it can wire
(``candidate_topologies``), what a rewiring costs (``reconfiguration_s``) and gives itself wired
as one of them (``with_topology``). :func:`plan_topology` simulates one data-parallel
iteration (the lead's :func:`estimator.timeline.dataparallel.simulate_data_parallel`) on every
candidate topology, charges one MEMS reconfiguration at job start when the topology differs from
the one currently wired (``current``; ``None`` = always charged), and ranks the topologies by job
time = reconfiguration + iterations x iteration time.

:func:`trace_profile` builds the paper's trace model of a model: per-iteration compute time and
the gradient volume communicated after it (seed 001 Sec. III: Horovod timeline of single-GPU
runs), split into tensors of ``tensor_bytes`` all ready when backward ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from estimator.errors import EstimatorError
from estimator.fabrics.base import Fabric
from estimator.timeline.dataparallel import BucketPolicy, ComputeProfile, simulate_data_parallel


class Rewirable(Protocol):
    """What a fabric that wires itself per job offers (:class:`estimator.fabrics.ocs.OcsFabric`)."""

    wires_per_job: bool

    def candidate_topologies(self, references: bool = False) -> tuple[str, ...]: ...

    def with_topology(self, topology: str) -> Fabric: ...

    def reconfiguration_s(self, current: str | None, target: str) -> float: ...


def trace_profile(grad_bytes: float, compute_s: float, tensor_bytes: float = 2**20) -> ComputeProfile:
    """One iteration: ``compute_s`` of compute (2/3 of it backward), then ``grad_bytes`` of
    gradients in ``tensor_bytes`` tensors, all ready at the end of backward."""
    if not grad_bytes > 0 or not compute_s > 0 or not tensor_bytes > 0:
        raise EstimatorError("trace_profile: gradient bytes, compute time and tensor size must be positive")
    count = int(np.ceil(grad_bytes / tensor_bytes))
    sizes = np.full(count, float(tensor_bytes))
    sizes[-1] = grad_bytes - tensor_bytes * (count - 1)
    fwd, bwd = compute_s / 3, 2 * compute_s / 3
    return ComputeProfile(fwd, bwd, 0.0, np.full(count, fwd + bwd), sizes, fwd + bwd)


@dataclass(frozen=True)
class TopologyPlan:
    topology: str
    iter_time_s: float
    reconfig_s: float
    job_time_s: float
    samples_per_s: float
    algorithm: str


def plan_topology(
    fabric: Rewirable,
    profile: ComputeProfile,
    policy: BucketPolicy,
    batch_size: int,
    algorithm: str = "default",
    iterations: int = 1000,
    current: str | None = None,
    references: bool = False,
) -> list[TopologyPlan]:
    """Every candidate topology's plan, fastest job first (``references``: also the electrical
    one_switch / fattree references)."""
    if iterations < 1:
        raise EstimatorError(f"iterations must be >= 1, got {iterations}")
    plans = []
    for topo in fabric.candidate_topologies(references):
        fab = fabric.with_topology(topo)
        try:
            res = simulate_data_parallel(profile, fab, policy, batch_size, algorithm=algorithm)
        except EstimatorError:
            continue  # the algorithm cannot run here (e.g. RD on a non-power-of-two group)
        reconf = fabric.reconfiguration_s(current, topo)
        plans.append(
            TopologyPlan(topo, res.iter_time_s, reconf, reconf + iterations * res.iter_time_s, res.samples_per_s,
                         res.algorithm_used)
        )
    if not plans:
        raise EstimatorError(f"fabric 'ocs': algorithm {algorithm!r} runs on no candidate topology")
    return sorted(plans, key=lambda p: (p.job_time_s, p.topology))


def wire_for_job(fabric: Fabric, profile: ComputeProfile, policy: BucketPolicy, batch_size: int,
                 algorithm: str = "default", iterations: int = 1000, current: str | None = None
                 ) -> tuple[Fabric, list[TopologyPlan]]:
    """``(fabric wired as the best topology for the whole job, its plans)`` for a fabric that
    wires per job (one reconfiguration at job start counted, see :func:`plan_topology`); any other
    fabric, or one with a fixed topology, as it is, with no plans."""
    if not getattr(fabric, "wires_per_job", False):
        return fabric, []
    plans = plan_topology(fabric, profile, policy, batch_size, algorithm, iterations, current)  # type: ignore[arg-type]
    return fabric.with_topology(plans[0].topology), plans  # type: ignore[attr-defined]


def plans_table(plans: list[TopologyPlan]) -> list[dict[str, Any]]:
    return [p.__dict__.copy() for p in plans]
