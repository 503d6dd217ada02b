"""Import FlexFlow-train graphs: V1ComputationGraph, V1ParallelComputationGraph, mapped PCGs.

Layout read (flexflow-train ``lib/pcg/include/pcg/file_format/v1``, JSON as its dtgen structs
serialise; ``__type`` tags are ignored)::

    {"raw_graph": {"node_labels": {"<node>": LayerAttrs | ParallelLayerAttrs},
                   "output_labels": {"<node>": [TensorAttrs, ...] | {"<slot>": TensorAttrs}},
                   "graph": {"nodes": [<node>, ...],
                             "edges": [{"srcNode", "srcIdx", "dstNode", "dstIdx"}, ...]}}}
    mapped: {"pcg": <the above>, "mapped_tasks": {"<node>": <anything holding MachineSpaceCoordinate
             objects {"node_idx", "device_idx", "device_type"}, one per task, in task order>}}

* ``LayerAttrs`` = ``{"op_attrs": {"type": "<key>", "value": {...}} , "name": ...}`` (the variant
  key, e.g. ``linear``, ``conv2d``; attributes either under ``value`` or beside ``type``).
* ``TensorAttrs.shape`` = ``{"dims": [..] | {"ff_ordered": [..]}, "data_type": "FLOAT"}``;
  ``ParallelTensorAttrs.shape.dims`` = ``{"shard_dims": [{"size", "degree"}, ...],
  "replica_dims": {"sum_degree", "discard_copy_degree"}}`` (``size`` is the global size).

Costs come from :mod:`.flop_model` (no measured times in these files). Workload model (choices):

* A layer runs as ``prod(shard degrees) x sum_degree x discard_copy_degree`` tasks of its first
  output (1 in a plain computation graph); each task does ``global FLOPs / (prod(shard degrees)
  x sum_degree)``. Task ``i`` runs on device ``i`` unless a mapping gives its coordinate; mapped
  devices are numbered ``node_idx * gpus_per_node + device_idx``.
* Parallel operators become communication (coarse: one collective over every device that holds
  an input or output shard): ``combine`` -> all_gather sized by one output task's (gathered)
  buffer, ``reduction`` -> all_reduce of one input task's buffer, ``replicate`` -> broadcast of
  one input task's buffer; ``repartition`` is a local slice (zero-work compute per task). The
  backward dual collective has the same size.
* Dependencies: a task depends on the same-index task of a producer with the same task count,
  otherwise on every task of the producer.
* Training step: forward nodes in graph order, then backward nodes in reverse (``backward_factor``
  x forward FLOPs) with each parallel operator's dual collective (all_gather <-> reduce_scatter,
  all_reduce -> broadcast, broadcast -> all_reduce). Gradients: ``weight`` layers (or weights a
  ``linear``/``conv2d`` layer holds itself) with ``create_grad`` not ``NO``, ready at their
  backward node.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from estimator.workloads.graph import Gradient, Workload
from estimator.workloads.importers import flop_model
from estimator.workloads.importers._common import (
    BadInput,
    GraphBuilder,
    check_scale,
    dtype_bytes,
    mapping,
    number,
    parse_json,
    product,
    scalar_key,
    sequence,
)

FORMAT = "flexflow"
WHAT = "FlexFlow graph"
PARALLEL_OPS = {"combine": ("all_gather", "combine_degree"), "reduction": ("all_reduce", "reduction_degree"),
                "replicate": ("broadcast", "replicate_degree"), "repartition": ("", "repartition_degree")}
DUAL = {"all_gather": "reduce_scatter", "all_reduce": "broadcast", "broadcast": "all_reduce"}
SLOT_ORDER = ["INPUT", "LHS_INPUT", "RHS_INPUT", "QUERY", "KEY", "VALUE", "WEIGHT", "BIAS", "SCALE", "SHIFT"]


def sniff(head: bytes, path: Path) -> bool:
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    return text.startswith(b"{") and (b'"raw_graph"' in head or b'"mapped_tasks"' in head)


@dataclass
class Tensor:
    shape: tuple[int, ...]
    elem_bytes: int
    shard_degrees: tuple[int, ...] = ()
    sum_degree: int = 1
    discard_degree: int = 1
    create_grad: bool = True

    @property
    def split(self) -> int:
        return product(self.shard_degrees) * self.sum_degree

    @property
    def tasks(self) -> int:
        return self.split * self.discard_degree

    @property
    def nbytes(self) -> int:
        return product(self.shape) * self.elem_bytes


@dataclass
class Layer:
    id: int
    op: str
    attrs: dict[str, Any]
    name: str
    outputs: list[Tensor]
    inputs: list[Tensor] = field(default_factory=list)
    producers: list[int] = field(default_factory=list)
    devices: list[int] = field(default_factory=list)

    @property
    def tasks(self) -> int:
        t = self.outputs or self.inputs
        return t[0].tasks if t else 1


def _value(x: Any) -> Any:
    return x["value"] if isinstance(x, dict) and "value" in x else x


def _dims(x: Any, where: str) -> list[Any]:
    while isinstance(x, dict):
        keys = [k for k in ("ff_ordered", "contents", "dims", "shard_dims") if k in x]
        if not keys:
            raise BadInput(f"{where}: expected a list of dimensions")
        x = x[keys[0]]
    return sequence(x, where)


def _tensor(label: Any, where: str) -> Tensor:
    label = mapping(label, where)
    shape = mapping(label.get("shape"), f"{where} shape")
    elem = dtype_bytes(str(shape.get("data_type", "FLOAT")), where)
    grad = str(label.get("create_grad", "YES")).upper() != "NO"
    dims = shape.get("dims")
    if isinstance(dims, dict) and "shard_dims" in dims:
        shards = [mapping(d, f"{where} shard dim") for d in _dims(dims["shard_dims"], where)]
        sizes = tuple(int(number(_value(d.get("size")), f"{where} size", minimum=1, integer=True)) for d in shards)
        degrees = tuple(int(number(_value(d.get("degree")), f"{where} degree", minimum=1, integer=True))
                        for d in shards)
        reps = mapping(dims.get("replica_dims", {}), f"{where} replica_dims")
        s = int(number(_value(reps.get("sum_degree", 1)), f"{where} sum_degree", minimum=1, integer=True))
        dc = int(number(_value(reps.get("discard_copy_degree", 1)), f"{where} discard_copy_degree", minimum=1,
                        integer=True))
        for size, degree in zip(sizes, degrees, strict=True):
            if size % degree:
                raise BadInput(f"{where}: dimension of size {size} is not divisible by its degree {degree}")
        return Tensor(sizes, elem, degrees, s, dc, grad)
    sizes = tuple(int(number(_value(d), f"{where} dim", minimum=1, integer=True)) for d in _dims(dims, where))
    return Tensor(sizes, elem, create_grad=grad)


def _op(label: Any, where: str) -> tuple[str, dict[str, Any], str]:
    label = mapping(label, where)
    attrs = mapping(label.get("op_attrs"), f"{where} op_attrs")
    key = attrs.get("type")
    if not isinstance(key, str):
        raise BadInput(f"{where}: op_attrs has no variant 'type'")
    body = attrs.get("value", {k: v for k, v in attrs.items() if k != "type"})
    name = label.get("name")
    return key.lower(), mapping(body, f"{where} op_attrs value"), str(name) if name else ""


def _slot_key(slot: Any) -> tuple:
    if isinstance(slot, int) and not isinstance(slot, bool):
        return (0, slot, "")
    text = str(slot).upper()
    return (1, SLOT_ORDER.index(text) if text in SLOT_ORDER else len(SLOT_ORDER), text)


def _layers(raw: dict[str, Any]) -> list[Layer]:
    graph = mapping(raw.get("graph"), "raw_graph.graph")
    nodes = [int(number(n, "graph.nodes", integer=True)) for n in sequence(graph.get("nodes"), "graph.nodes")]
    if len(set(nodes)) != len(nodes):
        raise BadInput("graph.nodes lists a node twice")
    if not nodes:
        raise BadInput("graph has no nodes")
    labels = mapping(raw.get("node_labels"), "raw_graph.node_labels")
    outputs = mapping(raw.get("output_labels"), "raw_graph.output_labels")
    layers: dict[int, Layer] = {}
    out_slots: dict[int, dict[Any, Tensor]] = {}
    for n in nodes:
        where = f"node {n}"
        if str(n) not in labels:
            raise BadInput(f"{where}: no entry in node_labels")
        op, attrs, name = _op(labels[str(n)], where)
        outs = outputs.get(str(n), [])
        slots = dict(enumerate(outs)) if isinstance(outs, list) else mapping(outs, f"{where} outputs")
        out_slots[n] = {k: _tensor(v, f"{where} output {k}") for k, v in slots.items()}
        ordered = [out_slots[n][k] for k in sorted(out_slots[n], key=_slot_key)]
        layers[n] = Layer(n, op, attrs, name or f"{op}_{n}", ordered)
    incoming: dict[int, list[tuple[tuple, int, Tensor]]] = {n: [] for n in nodes}
    for i, e in enumerate(sequence(graph.get("edges", []), "graph.edges")):
        e = mapping(e, f"edge #{i}")
        src, dst = scalar_key(e.get("srcNode"), f"edge #{i} srcNode"), scalar_key(e.get("dstNode"), f"edge #{i} dstNode")
        if src not in layers or dst not in layers:
            missing = src if src not in layers else dst
            raise BadInput(f"edge #{i}: refers to node {missing!r}, which does not exist")
        src_idx = e.get("srcIdx")
        src_idx = src_idx if isinstance(src_idx, int) and not isinstance(src_idx, bool) else str(src_idx)
        tensor = out_slots[src].get(src_idx)
        if tensor is None:
            raise BadInput(f"edge #{i}: node {src} has no output {src_idx!r}")
        incoming[dst].append((_slot_key(e.get("dstIdx")), src, tensor))
    for n, ins in incoming.items():
        for _, src, tensor in sorted(ins, key=lambda x: x[0]):
            layers[n].producers.append(src)
            layers[n].inputs.append(tensor)
    return [layers[n] for n in nodes]


def _coordinates(x: Any) -> list[tuple[int, int]]:
    if isinstance(x, dict):
        if "node_idx" in x and "device_idx" in x:
            return [(int(number(_value(x["node_idx"]), "node_idx", integer=True)),
                     int(number(_value(x["device_idx"]), "device_idx", integer=True)))]
        return [c for v in x.values() for c in _coordinates(v)]
    if isinstance(x, list):
        return [c for v in x for c in _coordinates(v)]
    return []


def _place(layers: list[Layer], mapped: dict[str, Any] | None) -> int:
    check_scale(max(layer.tasks for layer in layers), 2 * sum(layer.tasks for layer in layers), "parallel degrees")
    coords = {k: _coordinates(v) for k, v in (mapped or {}).items()}
    per_node = 1 + max((d for cs in coords.values() for _, d in cs), default=0)
    for layer in layers:
        cs = coords.get(str(layer.id))
        if cs is None:
            layer.devices = list(range(layer.tasks))
        elif len(cs) != layer.tasks:
            raise BadInput(f"node {layer.id}: {layer.tasks} task(s) but {len(cs)} mapped device(s)")
        else:
            layer.devices = [n * per_node + d for n, d in cs]
    devices = 1 + max(d for layer in layers for d in layer.devices)
    check_scale(devices, 0, "mapped devices")
    return devices


def _topological(layers: list[Layer]) -> list[Layer]:
    by_id = {layer.id: layer for layer in layers}
    indeg = {layer.id: len(set(layer.producers)) for layer in layers}
    users: dict[int, list[int]] = {layer.id: [] for layer in layers}
    for layer in layers:
        for p in set(layer.producers):
            users[p].append(layer.id)
    ready = deque(layer.id for layer in layers if indeg[layer.id] == 0)
    order = []
    while ready:
        n = ready.popleft()
        order.append(by_id[n])
        for u in users[n]:
            indeg[u] -= 1
            if indeg[u] == 0:
                ready.append(u)
    if len(order) != len(layers):
        stuck = sorted(n for n, k in indeg.items() if k > 0)[:5]
        raise BadInput(f"graph has a cycle through nodes {stuck}")
    return order


class _Emitter:
    """Turns placed layers into forward + backward nodes."""

    def __init__(self, layers: list[Layer]):
        self.b = GraphBuilder()
        self.by_id = {layer.id: layer for layer in layers}
        self.fwd: dict[int, list[int]] = {}
        self.bwd: dict[int, list[int]] = {}
        self.layers = layers
        self.forward_flops = 0.0
        self.params = 0
        self.gradients: list[tuple[str, int, int]] = []

    @staticmethod
    def _deps(mine: int, nodes: list[int], index: int) -> list[int]:
        return [nodes[index]] if len(nodes) == mine else list(nodes)

    def _collective(self, layer: Layer, kind: str, phase: str, deps: list[int]) -> int:
        """Bytes as the project counts them: all-reduce / reduce-scatter / all-gather of the gathered
        (unsplit-by-this-op) buffer one task holds, broadcast of the replicated tensor."""
        devices = sorted(set(layer.devices) | {d for p in layer.producers for d in self.by_id[p].devices})
        src = layer.inputs[0] if layer.inputs else None
        if layer.op == "combine" and layer.outputs:
            nbytes = layer.outputs[0].nbytes / layer.outputs[0].split  # gathered shard
        elif src is not None:
            nbytes = src.nbytes / src.split if layer.op == "reduction" else float(src.nbytes) / max(1, src.split)
        else:
            nbytes = 0.0
        return self.b.add(f"{layer.name}.{phase}", kind="collective", collective=kind, comm_bytes=float(nbytes),
                          group=tuple(devices), device=devices[0], phase=phase, deps=deps,
                          attrs={"flexflow_op": layer.op})

    def forward(self, layer: Layer) -> None:
        where = f"node {layer.id} ({layer.name})"
        dep_lists = [self.fwd[p] for p in layer.producers]
        if layer.op in PARALLEL_OPS and PARALLEL_OPS[layer.op][0]:
            deps = [d for nodes in dep_lists for d in nodes]
            self.fwd[layer.id] = [self._collective(layer, PARALLEL_OPS[layer.op][0], "forward", deps)]
            return
        split = layer.outputs[0].split if layer.outputs else 1
        inputs, outputs = [t.shape for t in layer.inputs], [t.shape for t in layer.outputs]
        op = "noop" if layer.op == "repartition" else layer.op
        flops = flop_model.forward_flops(op, layer.attrs, inputs, outputs, where)
        elem = (layer.outputs or layer.inputs or [Tensor((), 4)])[0].elem_bytes
        weights = flop_model.weight_elements(op, layer.attrs, inputs, where)
        mem = flop_model.memory_bytes(op, inputs, outputs, weights, elem)
        self.forward_flops += flops
        self.params += weights + (product(layer.outputs[0].shape) if op == "weight" and layer.outputs else 0)
        nodes = []
        for j, dev in enumerate(layer.devices):
            deps = [d for ds in dep_lists for d in self._deps(layer.tasks, ds, j)]
            nodes.append(self.b.add(layer.name if layer.tasks == 1 else f"{layer.name}[{j}]", kind="compute",
                                    device=dev, op=layer.op, op_class=flop_model.OP_CLASS.get(op, op),
                                    phase="forward", flops=flops / split, mem_bytes=mem / split,
                                    input_shapes=tuple(inputs), scales_with_batch=op not in ("weight", "noop"),
                                    deps=deps))
        self.fwd[layer.id] = nodes
        grad_elems = weights or (product(layer.outputs[0].shape) if op == "weight" and layer.outputs
                                 and layer.outputs[0].create_grad else 0)
        if grad_elems:
            self.gradients.append((layer.name, grad_elems * elem, layer.id))

    def backward(self, layer: Layer, consumers: list[Layer]) -> None:
        dep_lists = [self.bwd[c.id] for c in consumers] or [self.fwd[layer.id]]
        if layer.op in PARALLEL_OPS and PARALLEL_OPS[layer.op][0]:
            deps = [d for nodes in dep_lists for d in nodes]
            kind = DUAL[PARALLEL_OPS[layer.op][0]]
            self.bwd[layer.id] = [self._collective(layer, kind, "backward", deps)]
            return
        nodes = []
        for j, fwd_id in enumerate(self.fwd[layer.id]):
            f = self.b.nodes[fwd_id]
            deps = [d for ds in dep_lists for d in self._deps(len(self.fwd[layer.id]), ds, j)]
            nodes.append(self.b.add(f"{f.name}.grad", kind="compute", device=f.device, op=f.op, op_class=f.op_class,
                                    phase="backward", flops=f.flops * flop_model.backward_factor(layer.op),
                                    mem_bytes=f.mem_bytes, scales_with_batch=f.scales_with_batch, deps=deps))
        self.bwd[layer.id] = nodes

    def run(self) -> None:
        order = _topological(self.layers)
        consumers: dict[int, list[Layer]] = {layer.id: [] for layer in order}
        for layer in order:
            self.forward(layer)
            for p in dict.fromkeys(layer.producers):
                consumers[p].append(layer)
        for layer in reversed(order):
            self.backward(layer, consumers[layer.id])


def load(data: bytes, name: str, options: dict[str, Any]) -> Workload:
    doc = mapping(parse_json(data, WHAT), WHAT)
    mapped = None
    kind = "computation_graph"
    if "pcg" in doc and "mapped_tasks" in doc:
        mapped = mapping(doc["mapped_tasks"], "mapped_tasks")
        doc, kind = mapping(doc["pcg"], "pcg"), "mapped_parallel_computation_graph"
    if "raw_graph" not in doc:
        raise BadInput(f"not a {WHAT}: no raw_graph")
    layers = _layers(mapping(doc["raw_graph"], "raw_graph"))
    if any(t.shard_degrees for layer in layers for t in layer.outputs) and kind == "computation_graph":
        kind = "parallel_computation_graph"
    devices = _place(layers, mapped)
    em = _Emitter(layers)
    em.run()
    gradients = tuple(Gradient(n, int(b), em.bwd[lid][-1], i)
                      for i, (n, b, lid) in enumerate(sorted(em.gradients, key=lambda g: em.bwd[g[2]][-1])))
    inputs = [layer for layer in layers if layer.op == "input" and layer.outputs]
    batch = inputs[0].outputs[0].shape[0] if inputs and inputs[0].outputs[0].shape else 1
    meta = {"flexflow": {"kind": kind, "layers": len(layers), "ops": sorted({layer.op for layer in layers}),
                         "max_degree": max(layer.tasks for layer in layers)}}
    return em.b.build(name=name, source=f"flexflow:{name}", devices=devices, batch_size=batch,
                      capture_device="", params=em.params, forward_flops=em.forward_flops,
                      gradients=gradients, meta=meta)
