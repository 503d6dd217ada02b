"""Data-parallel iteration timeline: backward overlapped with bucketed gradient all-reduces.

Model (one replica per accelerator, all replicas identical, so one device is simulated):

1. The compute stream runs forward, backward, optimizer ops back to back (the captured order).
2. Each gradient becomes ready when its ``ready_node`` (a backward op) finishes.
3. Gradients are grouped into all-reduce units:

   * ``ddp`` — PyTorch DistributedDataParallel: buckets filled in ready order up to
     ``bucket_cap_bytes`` (the first bucket up to ``first_bucket_cap_bytes``); a bucket is
     reduced once its last gradient is ready.
   * ``horovod`` — tensor fusion: a background cycle every ``cycle_time_s`` fuses the gradients
     ready by then into all-reduces of at most ``fusion_threshold_bytes``.
   * ``none`` — one all-reduce per gradient tensor.

4. A single communication stream runs the all-reduces in order; each starts when it is ready and
   the stream is free, and lasts what the fabric says (``Fabric.collective_cost``).
5. The optimizer step starts when backward and all all-reduces are done.

``iter_time = max(backward_end, comm_end) + optimizer``; exposed communication is what the
iteration takes beyond pure compute.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from estimator.compute.device import DeviceProfile, node_times
from estimator.errors import EstimatorError
from estimator.fabrics.base import Fabric
from estimator.workloads.graph import Workload

BUCKETINGS = ("ddp", "horovod", "none")


@dataclass(frozen=True)
class BucketPolicy:
    bucketing: str = "ddp"
    bucket_cap_bytes: float = 25 * 2**20
    first_bucket_cap_bytes: float = 2**20
    fusion_threshold_bytes: float = 64 * 2**20
    cycle_time_s: float = 1e-3
    gradient_dtype_bytes: int = 4

    def __post_init__(self) -> None:
        if self.bucketing not in BUCKETINGS:
            raise EstimatorError(f"parallelism.bucketing must be one of {BUCKETINGS}, got {self.bucketing!r}")
        for key in ("bucket_cap_bytes", "first_bucket_cap_bytes", "fusion_threshold_bytes", "cycle_time_s"):
            value = getattr(self, key)
            if not (isinstance(value, int | float) and value > 0 and math.isfinite(value)):
                raise EstimatorError(f"parallelism.{key} must be a positive number, got {value!r}")
        if self.gradient_dtype_bytes not in (2, 4, 8):
            raise EstimatorError(f"parallelism.gradient_dtype_bytes must be 2, 4 or 8, got {self.gradient_dtype_bytes!r}")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BucketPolicy:
        keys = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in keys})


@dataclass
class ComputeProfile:
    """Per-iteration compute of one replica, precomputed once per (workload, device)."""

    forward_s: float
    backward_s: float
    optimizer_s: float
    grad_ready_s: np.ndarray  # ready time of each gradient (in ready order), from iteration start
    grad_bytes: np.ndarray  # fp32 bytes of each gradient (in ready order)
    backward_end_s: float

    @property
    def compute_s(self) -> float:
        return self.forward_s + self.backward_s + self.optimizer_s


def compute_profile(
    workload: Workload, device: DeviceProfile, dtype_bytes: int = 4, precision: str = "amp"
) -> ComputeProfile:
    """Run the compute stream once: phase times and gradient ready times."""
    if workload.devices != 1:
        raise EstimatorError(
            f"workload {workload.name!r} spans {workload.devices} devices; data-parallel simulation "
            "needs a single-replica workload"
        )
    if not workload.gradients:
        raise EstimatorError(f"workload {workload.name!r} has no gradients to all-reduce")
    order = workload.topological_order()
    times = node_times(workload, device, precision)
    index = {n.id: i for i, n in enumerate(workload.nodes)}
    finish: dict[int, float] = {}
    clock = 0.0
    phase_time = {"forward": 0.0, "backward": 0.0, "optimizer": 0.0, "": 0.0}
    backward_end = 0.0
    for node in order:
        if node.kind != "compute":
            raise EstimatorError(
                f"workload {workload.name!r}: node {node.id} is {node.kind}; data-parallel replicas "
                "must be compute-only (communication is added by the simulator)"
            )
        dt = float(times[index[node.id]])
        clock += dt
        finish[node.id] = clock
        phase_time[node.phase] += dt
        if node.phase in ("forward", "backward", ""):
            backward_end = clock
    grads = sorted(workload.gradients, key=lambda g: g.order)
    ready = np.array([finish[g.ready_node] for g in grads])
    # gradients of an fp32 capture are 4 bytes/element; rescale when training communicates fp16/bf16
    nbytes = np.array([g.nbytes for g in grads], dtype=float) * (dtype_bytes / 4.0)
    return ComputeProfile(
        forward_s=phase_time["forward"] + phase_time[""],
        backward_s=phase_time["backward"],
        optimizer_s=phase_time["optimizer"],
        grad_ready_s=ready,
        grad_bytes=nbytes,
        backward_end_s=backward_end,
    )


@dataclass
class Bucket:
    ready_s: float
    nbytes: float
    tensors: int


def make_buckets(profile: ComputeProfile, policy: BucketPolicy) -> list[Bucket]:
    ready, sizes = profile.grad_ready_s, profile.grad_bytes
    if policy.bucketing == "none":
        return [Bucket(float(r), float(b), 1) for r, b in zip(ready, sizes, strict=True)]
    if policy.bucketing == "ddp":
        buckets: list[Bucket] = []
        cap = policy.first_bucket_cap_bytes
        cur_bytes, cur_n, cur_ready = 0.0, 0, 0.0
        for r, b in zip(ready, sizes, strict=True):
            cur_bytes += b
            cur_n += 1
            cur_ready = max(cur_ready, r)
            if cur_bytes >= cap:
                buckets.append(Bucket(cur_ready, cur_bytes, cur_n))
                cur_bytes, cur_n, cur_ready = 0.0, 0, 0.0
                cap = policy.bucket_cap_bytes
        if cur_n:
            buckets.append(Bucket(cur_ready, cur_bytes, cur_n))
        return buckets
    # horovod: a background cycle every cycle_time_s fuses what is ready into <= threshold chunks
    buckets = []
    cycle, threshold = policy.cycle_time_s, policy.fusion_threshold_bytes
    i, n = 0, len(ready)
    while i < n:
        tick = math.ceil(ready[i] / cycle - 1e-12) * cycle
        cur_bytes, cur_n = 0.0, 0
        while i < n and ready[i] <= tick + 1e-15:
            if cur_n and cur_bytes + sizes[i] > threshold:
                buckets.append(Bucket(tick, cur_bytes, cur_n))
                cur_bytes, cur_n = 0.0, 0
            cur_bytes += sizes[i]
            cur_n += 1
            i += 1
        if cur_n:
            buckets.append(Bucket(tick, cur_bytes, cur_n))
    return buckets


@dataclass
class IterationResult:
    nodes: int
    batch_size: int
    iter_time_s: float
    compute_time_s: float
    forward_s: float
    backward_s: float
    optimizer_s: float
    comm_time_s: float
    exposed_comm_time_s: float
    samples_per_s: float
    algorithm_used: str
    collectives: list[dict[str, Any]] = field(default_factory=list)

    def metrics(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "collectives"}


def simulate_data_parallel(
    profile: ComputeProfile,
    fabric: Fabric,
    policy: BucketPolicy,
    batch_size: int,
    algorithm: str = "default",
    nodes: int | None = None,
) -> IterationResult:
    """One data-parallel iteration on ``nodes`` replicas (default: all fabric nodes)."""
    n = fabric.nodes if nodes is None else nodes
    buckets = make_buckets(profile, policy)
    comm_free = 0.0
    comm_total = 0.0
    rows: list[dict[str, Any]] = []
    algo_used = ""
    for idx, b in enumerate(buckets):
        if n > 1:
            cost = fabric.collective_cost("all_reduce", b.nbytes, algorithm=algorithm, group_size=n)
            dt, algo_used, steps = cost.time_s, cost.algorithm, cost.steps
        else:
            dt, algo_used, steps = 0.0, "none", 0
        start = max(b.ready_s, comm_free)
        comm_free = start + dt
        comm_total += dt
        rows.append(
            {
                "idx": idx,
                "collective": "all_reduce",
                "algorithm": algo_used,
                "bytes": b.nbytes,
                "tensors": b.tensors,
                "ready_s": b.ready_s,
                "start_s": start,
                "end_s": comm_free,
                "time_s": dt,
                "steps": steps,
            }
        )
    sync_end = max(profile.backward_end_s, comm_free)
    iter_time = sync_end + profile.optimizer_s
    compute = profile.compute_s
    return IterationResult(
        nodes=n,
        batch_size=batch_size,
        iter_time_s=iter_time,
        compute_time_s=compute,
        forward_s=profile.forward_s,
        backward_s=profile.backward_s,
        optimizer_s=profile.optimizer_s,
        comm_time_s=comm_total,
        exposed_comm_time_s=max(0.0, iter_time - compute),
        samples_per_s=n * batch_size / iter_time,
        algorithm_used=algo_used,
        collectives=rows,
    )
