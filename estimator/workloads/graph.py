"""The workload model: a DAG of compute, collective and point-to-point nodes.

Every capture and importer produces a :class:`Workload`; the timeline simulator consumes one.
Its canonical on-disk form is JSON (``traces/<name>.workload.json``, see :mod:`.io`) and
round-trips exactly: ``Workload.from_dict(w.to_dict()) == w``.

Conventions (SI units, named in field names):

* ``compute`` nodes run on one ``device``: ``flops`` (floating-point operations, a multiply-add
  counts 2), ``mem_bytes`` (bytes read + written), ``weight_bytes`` (the part of ``mem_bytes``
  that does not grow with the batch: parameters, their gradients, optimizer state, running
  statistics), ``duration_s`` (measured on ``Workload.capture_device``, or ``None``).
* ``collective`` nodes: ``collective`` (``all_reduce``, ``all_gather``, ...), ``comm_bytes`` (the
  per-participant buffer size, as NCCL counts it), ``group`` (participating devices; empty means
  all devices of the workload).
* ``p2p`` nodes move ``comm_bytes`` from device ``src`` to device ``dst``.
* ``deps`` are ids of nodes that must finish before this node starts (data and control).
* ``scales_with_batch``: the node's work is proportional to the batch (forward/backward ops of a
  captured model); the optimizer step and gradient communication are not.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields, replace
from functools import cache
from typing import Any

from estimator.errors import EstimatorError

NODE_KINDS = ("compute", "collective", "p2p")
PHASES = ("", "forward", "backward", "optimizer")
COLLECTIVES = (
    "all_reduce",
    "reduce_scatter",
    "all_gather",
    "broadcast",
    "reduce",
    "gather",
    "all_to_all",
)
# Version 2 added Node.weight_bytes. Version-1 files still load: their nodes get weight_bytes 0,
# i.e. all their memory traffic scales with the batch (recapture to price weight traffic right).
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)


@dataclass(frozen=True)
class Node:
    id: int
    name: str
    kind: str = "compute"
    deps: tuple[int, ...] = ()
    device: int = 0
    # compute
    op: str = ""
    op_class: str = ""
    phase: str = ""
    flops: float = 0.0
    mem_bytes: float = 0.0
    weight_bytes: float = 0.0
    duration_s: float | None = None
    input_shapes: tuple[tuple[int, ...], ...] = ()
    scales_with_batch: bool = False
    # communication
    collective: str = ""
    comm_bytes: float = 0.0
    group: tuple[int, ...] = ()
    src: int = -1
    dst: int = -1
    attrs: dict[str, Any] = field(default_factory=dict, compare=True, hash=False)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            default = f.default if f.default_factory is MISSING else f.default_factory()
            if f.name in ("id", "name", "kind") or value != default:
                if f.name == "input_shapes":
                    value = [list(s) for s in value]
                elif isinstance(value, tuple):
                    value = list(value)
                out[f.name] = value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Node:
        unknown = data.keys() - _node_fields()
        if unknown:
            raise EstimatorError(f"node {data.get('id', '?')}: unknown field(s) {sorted(unknown)}")
        kw = dict(data)
        for key in ("deps", "group"):
            if key in kw:
                kw[key] = tuple(int(x) for x in kw[key])
        if "input_shapes" in kw:
            kw["input_shapes"] = tuple(tuple(int(d) for d in s) for s in kw["input_shapes"])
        for key in ("flops", "mem_bytes", "weight_bytes", "comm_bytes"):
            if key in kw:
                kw[key] = float(kw[key])
        if kw.get("duration_s") is not None:
            kw["duration_s"] = float(kw["duration_s"])
        return cls(**kw)



@cache
def _node_fields() -> frozenset[str]:
    return frozenset(f.name for f in fields(Node))


@dataclass(frozen=True)
class Gradient:
    """A gradient tensor that becomes ready in backward after node ``ready_node``."""

    name: str
    nbytes: int
    ready_node: int
    order: int  # 0 = first to become ready in backward

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "nbytes": self.nbytes, "ready_node": self.ready_node, "order": self.order}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Gradient:
        return cls(str(data["name"]), int(data["nbytes"]), int(data["ready_node"]), int(data["order"]))


@dataclass(frozen=True)
class Workload:
    name: str
    nodes: tuple[Node, ...]
    source: str = ""
    devices: int = 1
    batch_size: int = 1
    capture_device: str = ""
    params: int = 0
    forward_flops: float = 0.0
    gradients: tuple[Gradient, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict, hash=False)

    # ---- derived views -------------------------------------------------------------------
    def node_map(self) -> dict[int, Node]:
        return {n.id: n for n in self.nodes}

    @property
    def gradient_bytes(self) -> int:
        return sum(g.nbytes for g in self.gradients)

    def compute_nodes(self) -> list[Node]:
        return [n for n in self.nodes if n.kind == "compute"]

    def comm_bytes(self) -> float:
        return sum(n.comm_bytes for n in self.nodes if n.kind != "compute")

    def topological_order(self) -> list[Node]:
        """Nodes in an order that respects ``deps`` (stable: ties keep file order)."""
        nodes = self.node_map()
        indeg = {n.id: len(n.deps) for n in self.nodes}
        users: dict[int, list[int]] = {n.id: [] for n in self.nodes}
        for n in self.nodes:
            for d in n.deps:
                users[d].append(n.id)
        import heapq

        position = {n.id: i for i, n in enumerate(self.nodes)}
        ready = [(position[i], i) for i, k in indeg.items() if k == 0]
        heapq.heapify(ready)
        out: list[Node] = []
        while ready:
            _, nid = heapq.heappop(ready)
            out.append(nodes[nid])
            for u in users[nid]:
                indeg[u] -= 1
                if indeg[u] == 0:
                    heapq.heappush(ready, (position[u], u))
        if len(out) != len(self.nodes):
            stuck = sorted(i for i, k in indeg.items() if k > 0)[:5]
            raise EstimatorError(f"workload {self.name!r}: dependency cycle through nodes {stuck}")
        return out

    def scaled_to_batch(self, batch_size: int) -> Workload:
        """The same workload at another batch size: batch-proportional nodes scale linearly.

        Assumption (documented in the README): per-op FLOPs, activation memory traffic
        (``mem_bytes - weight_bytes``) and measured time of forward/backward ops grow linearly with
        the batch; the traffic of parameters, gradients and optimizer state (``weight_bytes``) and
        weight-only work (optimizer step, gradient sizes, communication) does not.
        """
        if batch_size <= 0:
            raise EstimatorError(f"batch size must be positive, got {batch_size}")
        if batch_size == self.batch_size:
            return self
        f = batch_size / self.batch_size
        nodes = tuple(
            replace(
                n,
                flops=n.flops * f,
                mem_bytes=n.weight_bytes + (n.mem_bytes - n.weight_bytes) * f,
                duration_s=None if n.duration_s is None else n.duration_s * f,
            )
            if n.scales_with_batch
            else n
            for n in self.nodes
        )
        return replace(self, nodes=nodes, batch_size=batch_size, forward_flops=self.forward_flops * f)

    # ---- validation ------------------------------------------------------------------------
    def validate(self) -> Workload:
        """Check internal consistency; raise :class:`EstimatorError` naming the first problem."""
        ids: set[int] = set()
        for n in self.nodes:
            if n.id in ids:
                raise EstimatorError(f"duplicate node id {n.id}")
            ids.add(n.id)
        for n in self.nodes:
            where = f"node {n.id} ({n.name!r})"
            if n.kind not in NODE_KINDS:
                raise EstimatorError(f"{where}: unknown kind {n.kind!r} (expected one of {NODE_KINDS})")
            if n.phase not in PHASES:
                raise EstimatorError(f"{where}: unknown phase {n.phase!r}")
            for d in n.deps:
                if d not in ids:
                    raise EstimatorError(f"{where}: dependency on missing node {d}")
                if d == n.id:
                    raise EstimatorError(f"{where}: depends on itself")
            for key in ("flops", "mem_bytes", "weight_bytes", "comm_bytes"):
                v = getattr(n, key)
                if not (v >= 0 and v != float("inf")):
                    raise EstimatorError(f"{where}: {key} must be a non-negative number, got {v!r}")
            if n.weight_bytes > n.mem_bytes:
                raise EstimatorError(f"{where}: weight_bytes {n.weight_bytes!r} exceed mem_bytes {n.mem_bytes!r}")
            if n.duration_s is not None and not (0 <= n.duration_s != float("inf")):
                raise EstimatorError(f"{where}: duration_s must be non-negative, got {n.duration_s!r}")
            if n.kind == "collective" and n.collective not in COLLECTIVES:
                raise EstimatorError(f"{where}: unknown collective {n.collective!r}")
            if n.kind == "p2p" and (n.src < 0 or n.dst < 0):
                raise EstimatorError(f"{where}: p2p node needs src and dst devices")
            for dev in (n.device, *n.group, *((n.src, n.dst) if n.kind == "p2p" else ())):
                if not 0 <= dev < self.devices:
                    raise EstimatorError(f"{where}: device {dev} outside 0..{self.devices - 1}")
        for g in self.gradients:
            if g.ready_node not in ids:
                raise EstimatorError(f"gradient {g.name!r}: ready_node {g.ready_node} does not exist")
            if g.nbytes < 0:
                raise EstimatorError(f"gradient {g.name!r}: negative size {g.nbytes}")
        if self.devices < 1 or self.batch_size < 1:
            raise EstimatorError("devices and batch_size must be >= 1")
        self.topological_order()  # raises on a cycle
        return self

    # ---- canonical form ----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "format": "estimator.workload",
            "format_version": FORMAT_VERSION,
            "name": self.name,
            "source": self.source,
            "devices": self.devices,
            "batch_size": self.batch_size,
            "capture_device": self.capture_device,
            "params": self.params,
            "forward_flops": self.forward_flops,
            "meta": self.meta,
            "gradients": [g.to_dict() for g in self.gradients],
            "nodes": [n.to_dict() for n in self.nodes],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Workload:
        if not isinstance(data, dict) or data.get("format") != "estimator.workload":
            raise EstimatorError("not an estimator workload (missing format: estimator.workload)")
        if data.get("format_version") not in READABLE_VERSIONS:
            raise EstimatorError(f"unsupported workload format_version {data.get('format_version')!r}")
        try:
            return cls(
                name=str(data["name"]),
                source=str(data.get("source", "")),
                devices=int(data.get("devices", 1)),
                batch_size=int(data.get("batch_size", 1)),
                capture_device=str(data.get("capture_device", "")),
                params=int(data.get("params", 0)),
                forward_flops=float(data.get("forward_flops", 0.0)),
                meta=dict(data.get("meta", {})),
                gradients=tuple(Gradient.from_dict(g) for g in data.get("gradients", [])),
                nodes=tuple(Node.from_dict(n) for n in data["nodes"]),
            )
        except EstimatorError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise EstimatorError(f"malformed workload: {type(exc).__name__}: {exc}") from None
