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
   the stream is free (``overlap: false``: not before backward ends, as with NVIDIA's BERT
   ``--allreduce_post_accumulation``), and lasts what the fabric says (``Fabric.collective_cost``).
5. **Interference**: while a collective overlaps backward, backward runs ``comm_interference``
   slower (NCCL's kernels hold one CTA per channel on the SMs and share HBM bandwidth), so
   backward ends ``comm_interference x overlapped time`` later.
6. The optimizer step starts when backward and all all-reduces are done.
7. **Gradient accumulation** (``grad_accum = k``): ``k - 1`` micro-batches of forward+backward
   without communication (DDP ``no_sync``), then the last one as above; one optimizer step.
8. **Host overhead**: ``host_overhead_s`` per iteration (optimizer step) that the GPU waits for.
9. **Stragglers**: a synchronous step waits for the slowest replica. Replica iteration times
   vary with coefficient of variation ``cv`` per micro-batch (``cv / sqrt(k)`` per
   iteration of k independent micro-batches); the step waits ``compute x cv_iter x z(n)`` for
   the slowest of n replicas, with ``z(n)`` the expected maximum of n standard normals
   (Blom's approximation ``Phi^-1((n - 0.375) / (n + 0.25))``; ``z(1) = 0``). ``cv`` is a
   property of the model's input pipeline (:meth:`BucketPolicy.jitter_cv`): ``jitter_cv_by_input``
   maps ``model.input`` (``imagenet_jpeg``, ``tokenized``; ``other`` for an imported trace or a
   model that names no input) to its cv; ``sync_jitter_cv``, when set, overrides it for every model.
10. **Input pipeline** (:meth:`BucketPolicy.input_cap_per_node`): a node (``gpus_per_node`` GPUs)
    decodes and augments at most ``cap`` samples per second, so ``iter_time >= samples per
    iteration / (nodes x cap)``. For a model whose training data are JPEG images
    (``model.input: imagenet_jpeg``), ``input.decode`` says where they are decoded:

    * ``cpu`` -- PyTorch DataLoader worker processes on the host (one single-threaded worker per
      core): ``cap = min(workers_per_gpu x gpus_per_node, cpu_cores) x cpu_decode_per_core_per_s``
      (``workers_per_gpu`` null = a worker on every core). Cores and the per-core rate are the
      host's, from the system preset (conf/system/*.yaml: spec-sheet core count, per-core rate
      with its calibration measurement);
    * ``gpu`` -- DALI decoding on the GPU (nvJPEG, the A100/H100 hardware JPEG decoder):
      ``cap = gpus_per_node x gpu_decode_per_gpu_per_s`` (null = not a bound);
    * ``none`` -- pre-decoded or synthetic data: no cap.

    Data that are not JPEG images (tokens) have no cap. ``input_samples_per_s_per_node`` (null by
    default) replaces all of this with a rate you measured for your own loader. Assumed: the
    per-core rate is the all-cores-busy rate (a lightly loaded CPU runs faster cores, which a
    1-GPU run sees: not modelled) and does not depend on the batch or the model behind it.

``iter_time = max(input bound, (k-1) x (fwd + bwd) + max(backward_end + interference, comm_end) +
optimizer + host_overhead + straggler wait)``; exposed communication is
``max(backward_end + interference, comm_end) - backward_end`` (what communication adds).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np

from estimator.compute.device import DeviceProfile, node_times
from estimator.errors import EstimatorError
from estimator.fabrics.base import Fabric
from estimator.workloads.graph import Workload

BUCKETINGS = ("ddp", "horovod", "none")
INPUT_DECODES = ("cpu", "gpu", "none")
INPUT_KEYS = ("decode", "workers_per_gpu", "cpu_cores", "cpu_decode_per_core_per_s", "gpu_decode_per_gpu_per_s")


@dataclass(frozen=True)
class BucketPolicy:
    bucketing: str = "ddp"
    bucket_cap_bytes: float = 25 * 2**20
    first_bucket_cap_bytes: float = 2**20
    fusion_threshold_bytes: float = 64 * 2**20
    cycle_time_s: float = 1e-3
    gradient_dtype_bytes: int = 4
    # The defaults below are the plain mechanics (hand-checkable); the CLI and the Python API take
    # the sourced/calibrated defaults from conf/parallelism/data.yaml.
    grad_accum: int = 1
    overlap: bool = True
    comm_interference: float = 0.0
    host_overhead_s: float = 0.0
    sync_jitter_cv: float | None = None  # None = jitter_cv_by_input's value for the model's input
    # straggler cv per model.input kind, as sorted (kind, cv) pairs (hashable: a frozen dataclass);
    # empty = no straggler wait unless sync_jitter_cv is set
    jitter_cv_by_input: tuple[tuple[str, float], ...] = ()
    input_samples_per_s_per_node: float | None = None
    gpus_per_node: int = 8
    # parallelism.input (item 10): where JPEGs are decoded and at what rate; the host fields come
    # from the system preset (conf/system/*.yaml)
    input_decode: str = "cpu"
    input_workers_per_gpu: int | None = None
    input_cpu_cores: int | None = None
    input_cpu_decode_per_core_per_s: float | None = None
    input_gpu_decode_per_gpu_per_s: float | None = None

    def __post_init__(self) -> None:
        table = self.jitter_cv_by_input
        if table is None:
            table = ()
        if isinstance(table, dict):
            table = tuple(sorted(table.items(), key=lambda kv: str(kv[0])))
        if not isinstance(table, tuple):
            raise EstimatorError(f"parallelism.jitter_cv_by_input must be a mapping (input kind -> cv), got {table!r}")
        object.__setattr__(self, "jitter_cv_by_input", table)
        for kind, cv in table:
            _check_nonneg(f"jitter_cv_by_input.{kind}", cv)
        if self.sync_jitter_cv is not None:
            _check_nonneg("sync_jitter_cv", self.sync_jitter_cv)
        if self.bucketing not in BUCKETINGS:
            raise EstimatorError(f"parallelism.bucketing must be one of {BUCKETINGS}, got {self.bucketing!r}")
        for key in ("bucket_cap_bytes", "first_bucket_cap_bytes", "fusion_threshold_bytes", "cycle_time_s"):
            value = getattr(self, key)
            if not (isinstance(value, int | float) and value > 0 and math.isfinite(value)):
                raise EstimatorError(f"parallelism.{key} must be a positive number, got {value!r}")
        for key in ("grad_accum", "gpus_per_node"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise EstimatorError(f"parallelism.{key} must be a positive integer, got {value!r}")
        if not isinstance(self.overlap, bool):
            raise EstimatorError(f"parallelism.overlap must be true or false, got {self.overlap!r}")
        for key in ("comm_interference", "host_overhead_s"):
            _check_nonneg(key, getattr(self, key))
        limit = self.input_samples_per_s_per_node
        if limit is not None and (isinstance(limit, bool) or not (isinstance(limit, int | float) and 0 < limit < math.inf)):
            raise EstimatorError(f"parallelism.input_samples_per_s_per_node must be a positive number or null, got {limit!r}")
        if self.gradient_dtype_bytes not in (2, 4, 8):
            raise EstimatorError(f"parallelism.gradient_dtype_bytes must be 2, 4 or 8, got {self.gradient_dtype_bytes!r}")
        if self.input_decode not in INPUT_DECODES:
            raise EstimatorError(f"parallelism.input.decode must be one of {', '.join(INPUT_DECODES)}, "
                                 f"got {self.input_decode!r}")
        for key in ("workers_per_gpu", "cpu_cores"):
            value = getattr(self, f"input_{key}")
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise EstimatorError(f"parallelism.input.{key} must be a positive integer or null, got {value!r}")
        for key in ("cpu_decode_per_core_per_s", "gpu_decode_per_gpu_per_s"):
            value = getattr(self, f"input_{key}")
            if value is not None and (isinstance(value, bool) or not (isinstance(value, int | float)
                                                                       and 0 < value < math.inf)):
                raise EstimatorError(f"parallelism.input.{key} must be a positive number or null, got {value!r}")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BucketPolicy:
        keys = set(cls.__dataclass_fields__)
        fields = {k: v for k, v in data.items() if k in keys}
        inp = data.get("input") or {}
        if not isinstance(inp, dict):
            raise EstimatorError(f"parallelism.input must be a mapping (decode, workers_per_gpu, cpu_cores, ...), "
                                 f"got {inp!r}")
        unknown = sorted(set(inp) - set(INPUT_KEYS))
        if unknown:
            raise EstimatorError(f"parallelism.input: unknown key(s) {unknown}; known: {', '.join(INPUT_KEYS)}")
        fields.update({f"input_{k}": v for k, v in inp.items()})
        return cls(**fields)

    def input_cap_per_node(self, jpeg: bool) -> float | None:
        """Samples/s one node's input pipeline delivers at most (module docstring, item 10); None =
        no cap. ``jpeg``: the model trains on JPEG images."""
        if self.input_samples_per_s_per_node is not None:
            return float(self.input_samples_per_s_per_node)
        if not jpeg or self.input_decode == "none":
            return None
        if self.input_decode == "gpu":
            rate = self.input_gpu_decode_per_gpu_per_s
            return None if rate is None else self.gpus_per_node * float(rate)
        cores, rate = self.input_cpu_cores, self.input_cpu_decode_per_core_per_s
        if cores is None or rate is None:
            return None  # no host described (no system preset): the CPU is not a bound
        workers = cores if self.input_workers_per_gpu is None else self.input_workers_per_gpu * self.gpus_per_node
        return min(workers, cores) * float(rate)

    def jitter_cv(self, model_input: str | None) -> float:
        """Straggler cv of one replica's micro-batch (module docstring, item 9) for a model reading
        ``model_input`` (None: an imported trace or a model naming no input): ``sync_jitter_cv`` if
        set, else the table's entry for the input, else its ``other`` entry, else 0."""
        if self.sync_jitter_cv is not None:
            return float(self.sync_jitter_cv)
        table = dict(self.jitter_cv_by_input)
        return float(table.get(model_input or "other", table.get("other", 0.0)))


def _check_nonneg(key: str, value: Any) -> None:
    """A dimensionless non-negative setting (a cv, an interference share, seconds of host work)."""
    if isinstance(value, bool) or not (isinstance(value, int | float) and 0 <= value < 10):
        raise EstimatorError(f"parallelism.{key} must be a number >= 0, got {value!r}")


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


@dataclass(frozen=True)
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
    grad_accum: int = 1
    global_batch: int = 0
    interference_s: float = 0.0
    straggler_s: float = 0.0
    host_overhead_s: float = 0.0
    input_bound: bool = False
    collectives: list[dict[str, Any]] = field(default_factory=list)

    def metrics(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "collectives"}


def expected_max_normal(n: int) -> float:
    """Expected maximum of ``n`` standard normal samples (Blom 1958 approximation; 0 for n = 1)."""
    return 0.0 if n <= 1 else NormalDist().inv_cdf((n - 0.375) / (n + 0.25))


def _overlap(intervals: list[tuple[float, float]], end: float) -> float:
    """Total length of the (disjoint, ordered) ``intervals`` that lies before ``end``."""
    return sum(max(0.0, min(b, end) - a) for a, b in intervals)


def simulate_data_parallel(
    profile: ComputeProfile,
    fabric: Fabric,
    policy: BucketPolicy,
    batch_size: int,
    algorithm: str = "default",
    nodes: int | None = None,
    buckets: list[Bucket] | None = None,
    model_input: str | None = None,
) -> IterationResult:
    """One data-parallel iteration (one optimizer step) on ``nodes`` replicas (default: all fabric
    nodes); ``batch_size`` is the per-replica micro-batch. ``buckets`` are
    ``make_buckets(profile, policy)`` when the caller has them already (they do not depend on the
    fabric, so a sweep computes them once per workload and policy). ``model_input``: what the model
    reads (``model.input``; None for an imported trace): JPEG images (``imagenet_jpeg``) are
    decoded by the input pipeline (item 10), and the kind sets the straggler cv (item 9)."""
    n = fabric.nodes if nodes is None else nodes
    k = policy.grad_accum
    if buckets is None:
        buckets = make_buckets(profile, policy)
    comm_free = 0.0
    comm_total = 0.0
    rows: list[dict[str, Any]] = []
    busy: list[tuple[float, float]] = []
    algo_used = ""
    for idx, b in enumerate(buckets):
        if n > 1:
            cost = fabric.collective_cost("all_reduce", b.nbytes, algorithm=algorithm, group_size=n)
            dt, algo_used, steps = cost.time_s, cost.algorithm, cost.steps
        else:
            dt, algo_used, steps = 0.0, "none", 0
        ready = b.ready_s if policy.overlap else max(b.ready_s, profile.backward_end_s)
        start = max(ready, comm_free)
        comm_free = start + dt
        comm_total += dt
        if dt > 0:
            busy.append((start, comm_free))
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
    interference = policy.comm_interference * _overlap(busy, profile.backward_end_s)
    sync_end = max(profile.backward_end_s + interference, comm_free)
    micro = profile.forward_s + profile.backward_s
    compute = k * micro + profile.optimizer_s
    straggler = compute * policy.jitter_cv(model_input) / math.sqrt(k) * expected_max_normal(n)
    iter_time = (k - 1) * micro + sync_end + profile.optimizer_s + policy.host_overhead_s + straggler
    samples = n * batch_size * k
    input_bound = False
    cap = policy.input_cap_per_node(model_input == "imagenet_jpeg")
    if cap is not None:
        floor = samples / (math.ceil(n / policy.gpus_per_node) * cap)
        input_bound = floor > iter_time
        iter_time = max(iter_time, floor)
    return IterationResult(
        nodes=n,
        batch_size=batch_size,
        iter_time_s=iter_time,
        compute_time_s=compute,
        forward_s=profile.forward_s,
        backward_s=profile.backward_s,
        optimizer_s=profile.optimizer_s,
        comm_time_s=comm_total,
        exposed_comm_time_s=max(0.0, sync_end - profile.backward_end_s),
        samples_per_s=samples / iter_time,
        algorithm_used=algo_used,
        grad_accum=k,
        global_batch=samples,
        interference_s=interference,
        straggler_s=straggler,
        host_overhead_s=policy.host_overhead_s,
        input_bound=input_bound,
        collectives=rows,
    )
