"""Import PyTorch Kineto / Chrome trace JSON as ``torch.profiler`` exports it (CPU or GPU).

What the trace is taken to mean (choices documented here and tested):

* **Window.** If ``ProfilerStep#N`` annotations exist, only the last step is imported (steady
  state); otherwise the whole trace.
* **GPU traces** (any ``cat: kernel`` event): every kernel / ``gpu_memcpy`` / ``gpu_memset`` is a
  compute node with its measured duration, on the stream it ran on. NCCL kernels
  (``nccl...Kernel...``) become collectives: the kind comes from the ``Collective name`` argument
  (the kernel's own args, else the ``record_param_comms`` CPU op that launched it, found through
  the ``correlation`` id of the ``cudaLaunchKernel`` runtime event), else from the kernel name;
  ``comm_bytes = In msg nelems x dtype size`` (all-gather: ``Out msg nelems``, else ``In x``
  group size: the project sizes an all-gather by its gathered buffer, as nccl-tests does). A
  collective without a message size is an error.
  NCCL ``SendRecv`` kernels stay compute nodes (``op_class = "kernel"``): a single-rank trace
  does not say who the peer is.
* **CPU traces**: top-level ``cpu_op`` events of each thread are compute nodes; a top-level op
  that is or wraps a ``record_param_comms`` op with a ``Collective name`` is a collective, and so
  is a top-level ``c10d::<collective>_`` op (Gloo), sized from its tensor argument's ``Input
  Dims`` (the gathered output for all-gather, the input for reduce-scatter; tensor lists carry
  no dtype, float32 is assumed for them).
* **Phase**: inside ``autograd::engine::evaluate_function`` -> backward; inside an
  ``Optimizer.step``/``Optimizer.zero_grad`` annotation -> optimizer; otherwise forward. For GPU
  kernels, the phase of the CPU op that launched them.
* **Dependencies**: observed order (see :func:`.chrome_trace.observed_order_deps`): chained per
  stream/thread, plus the latest span of every other stream that finished before a span started.
* **Ranks**: one trace is one rank. The workload replicates it over ``importer.ranks`` devices
  (default: ``distributedInfo.world_size``, else 1), assuming every rank runs the same program
  (SPMD, as data-parallel and ZeRO/FSDP training do); each collective is one node over its group
  (``Process Group Ranks`` when given, else all ranks) depending on every rank's predecessors.
* ``duration_s`` is the measured duration; ``capture_device`` is the first GPU's name from
  ``deviceProperties`` (lower-cased), or ``cpu``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from estimator.workloads.graph import Workload
from estimator.workloads.importers._common import (
    DTYPE_BYTES,
    BadInput,
    GraphBuilder,
    check_scale,
    dtype_bytes,
    mapping,
    number,
    parse_json,
    product,
    scalar_key,
)
from estimator.workloads.importers.chrome_trace import (
    US,
    Covered,
    Enclosers,
    Span,
    complete_spans,
    event_list,
    observed_order_deps,
    top_level,
)

FORMAT = "kineto"
WHAT = "Kineto/Chrome trace"
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
CPU_CATS = {"cpu_op", "operator"}
ANNOTATION_CATS = {"user_annotation", "gpu_user_annotation", "cpu_instant_event"}
COLLECTIVE_NAMES = {
    "allreduce": "all_reduce", "all_reduce": "all_reduce", "allreduce_coalesced": "all_reduce",
    "barrier": "all_reduce", "allgather": "all_gather", "all_gather": "all_gather",
    "_allgather_base": "all_gather", "allgather_into_tensor_coalesced": "all_gather",
    "all_gather_into_tensor": "all_gather", "reduce_scatter": "reduce_scatter",
    "_reduce_scatter_base": "reduce_scatter", "reduce_scatter_tensor": "reduce_scatter",
    "reduce_scatter_tensor_coalesced": "reduce_scatter", "broadcast": "broadcast", "reduce": "reduce",
    "gather": "gather", "all_to_all": "all_to_all", "alltoall": "all_to_all", "alltoall_base": "all_to_all",
    "all_to_allv": "all_to_all",
}
KERNEL_COLLECTIVES = (("allreduce", "all_reduce"), ("reducescatter", "reduce_scatter"),
                      ("allgather", "all_gather"), ("alltoall", "all_to_all"), ("broadcast", "broadcast"),
                      ("reduce", "reduce"))
_NCCL = re.compile(r"^nccl", re.IGNORECASE)


def sniff(head: bytes, path: Path) -> bool:
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    return text.startswith(b"{") and b'"traceEvents"' in head and b"NEGOTIATE_" not in head


def load(data: bytes, name: str, options: dict[str, Any]) -> Workload:
    doc, template, device, ranks = trace_template(data, options)
    check_scale(ranks, ranks * len(template), "ranks x traced nodes")
    return _replicate(template, ranks, name, device, doc)


def trace_template(data: bytes, options: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]], str, int]:
    """One rank's nodes in start-time order (``deps`` as template positions), its device name
    and the rank count; shared with :mod:`.kineto_ranks`."""
    doc = mapping(parse_json(data, WHAT), WHAT)
    spans = complete_spans(event_list(doc, WHAT))
    spans = _window(spans)
    phase_of = _Phases(spans)
    comms = [s for s in spans if s.cat in CPU_CATS and _collective_arg(s)]
    ranks = _ranks(doc, options)
    if any(s.cat == "kernel" for s in spans):
        template = _gpu_nodes(spans, comms, phase_of, ranks)
        device = _gpu_name(doc)
    else:
        template = _cpu_nodes(spans, comms, phase_of, ranks)
        device = "cpu"
    if not template:
        raise BadInput("trace has no CPU ops or GPU kernels to import")
    template = sorted(template, key=lambda t: (t["span"].ts, t["span"].index))
    deps = _deps_by_position(template)
    for i, t in enumerate(template):
        t["deps"] = deps[i]
    return doc, template, device, ranks


# ---- what each span is ------------------------------------------------------------------------
def _window(spans: list[Span]) -> list[Span]:
    steps = [s for s in spans if s.cat in ANNOTATION_CATS and s.name.startswith("ProfilerStep#")]
    if not steps:
        return spans
    last = max(steps, key=lambda s: s.ts)
    return [s for s in spans if last.ts <= s.ts <= last.end or s.cat in GPU_CATS and s.ts >= last.ts]


class _Phases:
    def __init__(self, spans: list[Span]):
        self.backward = Enclosers([s for s in spans if s.name.startswith("autograd::engine::evaluate_function")])
        self.optimizer = Enclosers([s for s in spans if s.cat in ANNOTATION_CATS
                                    and s.name.startswith(("Optimizer.step", "Optimizer.zero_grad"))])
        self.optimizer_any = Covered([s for s in spans if s.cat in ANNOTATION_CATS and s.name.startswith("Optimizer.")])

    def __call__(self, track: Any, t: float) -> str:
        if self.backward.find(track, t):
            return "backward"
        if self.optimizer.find(track, t) or t in self.optimizer_any:
            return "optimizer"
        return "forward"


def _collective_arg(s: Span) -> str:
    return str(s.args.get("Collective name", "")).strip().lower()


def _collective(s: Span, comm: Span | None, ranks: int) -> tuple[str, float, list[int] | None]:
    """(collective kind, bytes, group ranks or None) of an NCCL kernel or a CPU comm op."""
    args = s.args if "In msg nelems" in s.args else (comm.args if comm is not None else {})
    where = f"event #{s.index} ({s.name[:60]!r})"
    kind_name = _collective_arg(s) or (comm is not None and _collective_arg(comm)) or ""
    kind = COLLECTIVE_NAMES.get(kind_name)
    if kind is None and not kind_name:
        flat = s.name.lower().replace("_", "")
        kind = next((k for key, k in KERNEL_COLLECTIVES if key in flat), None)
    if kind is None:
        raise BadInput(f"{where}: unknown collective {kind_name or s.name[:60]!r}")
    if "In msg nelems" not in args:
        raise BadInput(f"{where}: collective has no message size ('In msg nelems' missing)")
    nelems = number(args["In msg nelems"], f"{where} In msg nelems", integer=True)
    group = args.get("Process Group Ranks")
    if isinstance(group, str):
        try:
            group = json.loads(group)
        except json.JSONDecodeError:
            raise BadInput(f"{where}: unreadable Process Group Ranks {group[:40]!r}") from None
    if group is not None:
        if not isinstance(group, list) or not group:
            raise BadInput(f"{where}: Process Group Ranks must be a non-empty list")
        group = [int(number(r, f"{where} Process Group Ranks", integer=True)) for r in group]
    if kind == "all_gather":  # the project sizes an all-gather by its gathered (output) buffer
        members = args.get("Group size", len(group) if group else ranks)
        members = number(members, f"{where} Group size", minimum=1, integer=True)
        nelems = number(args.get("Out msg nelems", nelems * members), f"{where} Out msg nelems", integer=True)
    size = nelems * dtype_bytes(str(args.get("dtype", "float")), where)
    return kind, float(size), group


def _elements(dims: Any, where: str) -> int:
    """Elements of a shape (list of ints) or of a tensor list (nested lists of shapes)."""
    if isinstance(dims, list) and all(isinstance(d, int) and not isinstance(d, bool) for d in dims):
        if any(d < 0 for d in dims):
            raise BadInput(f"{where}: negative dimension in {dims}")
        return product(dims)
    if isinstance(dims, list):
        return sum(_elements(d, where) for d in dims)
    raise BadInput(f"{where}: unreadable Input Dims")


def _c10d(s: Span) -> tuple[str, float] | None:
    """A ``c10d::<collective>_`` op (Gloo / CPU traces): (kind, bytes) from its tensor argument."""
    if not s.name.startswith("c10d::"):
        return None
    base = s.name[len("c10d::"):].rstrip("_")
    kind = COLLECTIVE_NAMES.get(base)
    if kind is None:
        return None
    where = f"event #{s.index} ({s.name!r})"
    dims, types = s.args.get("Input Dims"), s.args.get("Input type")
    if not isinstance(dims, list) or not dims:
        raise BadInput(f"{where}: collective has no message size (no Input Dims)")
    arg = 1 if kind == "reduce_scatter" and len(dims) > 1 else 0  # reduce-scatter: its input buffer
    elem = 4  # tensor lists carry no dtype in the trace: float32 assumed
    if isinstance(types, list) and len(types) > arg and str(types[arg]).lower() in DTYPE_BYTES:
        elem = DTYPE_BYTES[str(types[arg]).lower()]
    return kind, float(_elements(dims[arg], where) * elem)


def _node(s: Span, phase: str, stream: Any, **kw: Any) -> dict[str, Any]:
    return {"span": s, "stream": stream, "name": s.name[:200], "phase": phase, **kw}


def _gpu_nodes(spans: list[Span], comms: list[Span], phase_of: _Phases, ranks: int) -> list[dict[str, Any]]:
    launches = {scalar_key(s.args.get("correlation"), f"event #{s.index} correlation"): s for s in spans
                if s.cat in ("cuda_runtime", "cuda_driver") and s.args.get("correlation") is not None}
    cpu_ops = Enclosers([s for s in spans if s.cat in CPU_CATS])
    comm_at = Enclosers(comms)
    out = []
    for s in sorted((s for s in spans if s.cat in GPU_CATS), key=lambda s: (s.ts, s.index)):
        where = f"event #{s.index}"
        launch = launches.get(scalar_key(s.args.get("correlation"), f"{where} correlation"))
        phase = phase_of(launch.track, launch.ts) if launch else "forward"
        stream = (scalar_key(s.args.get("device", 0), f"{where} device"),
                  scalar_key(s.args.get("stream", 0), f"{where} stream"))
        if s.cat == "kernel" and _NCCL.match(s.name) and "sendrecv" not in s.name.lower():
            comm = comm_at.find(launch.track, launch.ts) if launch else None
            kind, size, group = _collective(s, comm, ranks)
            out.append(_node(s, phase, stream, kind="collective", collective=kind, comm_bytes=size,
                             group=group, duration=s.dur * US))
            continue
        op = cpu_ops.find(launch.track, launch.ts) if launch else None
        out.append(_node(s, phase, stream, kind="compute", op=s.name[:200],
                         op_class="memory" if s.cat != "kernel" else "kernel",
                         duration=s.dur * US, cpu_op=op.name if op else ""))
    return out


def _cpu_nodes(spans: list[Span], comms: list[Span], phase_of: _Phases, ranks: int) -> list[dict[str, Any]]:
    comm_at = Enclosers(comms)
    out = []
    for s in top_level([s for s in spans if s.cat in CPU_CATS]):
        phase = phase_of(s.track, s.ts)
        comm = comm_at.find(s.track, s.ts + s.dur / 2) if comms else None
        if comm is not None and s.ts <= comm.ts and comm.end <= s.end:
            kind, size, group = _collective(comm, comm, ranks)
            out.append(_node(s, phase, s.track, kind="collective", collective=kind, comm_bytes=size,
                             group=group, duration=s.dur * US))
            continue
        c10d = _c10d(s)
        if c10d is not None:
            out.append(_node(s, phase, s.track, kind="collective", collective=c10d[0], comm_bytes=c10d[1],
                             group=None, duration=s.dur * US))
            continue
        dims = s.args.get("Input Dims")
        shapes = tuple(tuple(d) for d in dims if isinstance(d, list) and all(isinstance(x, int) for x in d)) \
            if isinstance(dims, list) else ()
        flops = s.args.get("flops", 0)
        out.append(_node(s, phase, s.track, kind="compute", op=s.name[:200], op_class="cpu_op",
                         duration=s.dur * US, input_shapes=shapes,
                         flops=number(flops, f"event #{s.index} flops")))
    return out


# ---- ranks and the final graph ---------------------------------------------------------------
def _ranks(doc: dict[str, Any], options: dict[str, Any]) -> int:
    if options.get("ranks") is not None:
        return int(number(options["ranks"], "importer.ranks", minimum=1, integer=True))
    info = doc.get("distributedInfo")
    if isinstance(info, dict) and "world_size" in info:
        return int(number(info["world_size"], "distributedInfo.world_size", minimum=1, integer=True))
    return 1


def _gpu_name(doc: dict[str, Any]) -> str:
    props = doc.get("deviceProperties")
    if isinstance(props, list) and props and isinstance(props[0], dict) and props[0].get("name"):
        return str(props[0]["name"]).lower()
    return "gpu"


def _replicate(template: list[dict[str, Any]], ranks: int, name: str, device: str,
               doc: dict[str, Any]) -> Workload:
    builder = GraphBuilder()
    ids: dict[tuple[int, int], int] = {}
    for i, t in enumerate(template):
        if t["kind"] == "collective":
            group = tuple(range(ranks)) if t["group"] is None else tuple(t["group"])
            bad = [r for r in group if not 0 <= r < ranks]
            if bad:
                raise BadInput(f"event #{t['span'].index}: process group rank {bad[0]} outside 0..{ranks - 1} "
                               "(set importer.ranks)")
            node_deps = [ids[(d, r)] for d in t["deps"] for r in group]
            nid = builder.add(t["name"], deps=node_deps, **collective_fields(t, group))
            for r in range(ranks):
                ids[(i, r)] = nid
            continue
        for r in range(ranks):
            ids[(i, r)] = builder.add(t["name"], deps=[ids[(d, r)] for d in t["deps"]], **compute_fields(t, r))
    info = doc.get("distributedInfo") if isinstance(doc.get("distributedInfo"), dict) else {}
    meta = {"kineto": {"schemaVersion": doc.get("schemaVersion"), "traced_rank": info.get("rank", 0),
                       "world_size": info.get("world_size"), "replicated_ranks": ranks}}
    return builder.build(name=name, source=f"kineto:{name}", devices=ranks, capture_device=device, meta=meta)


def compute_fields(t: dict[str, Any], device: int) -> dict[str, Any]:
    """Node fields of a template compute entry placed on ``device``."""
    return {"kind": "compute", "device": device, "op": t["op"], "op_class": t["op_class"], "phase": t["phase"],
            "duration_s": t["duration"], "flops": t.get("flops", 0.0), "input_shapes": t.get("input_shapes", ()),
            "scales_with_batch": t["phase"] in ("forward", "backward"),
            "attrs": {"cpu_op": t["cpu_op"]} if t.get("cpu_op") else {}}


def collective_fields(t: dict[str, Any], group: tuple[int, ...]) -> dict[str, Any]:
    return {"kind": "collective", "collective": t["collective"], "comm_bytes": t["comm_bytes"], "group": group,
            "device": group[0], "phase": t["phase"], "attrs": {"measured_s": t["duration"]}}


def _deps_by_position(template: list[dict[str, Any]]) -> dict[int, list[int]]:
    spans = [t["span"] for t in template]
    order = sorted(range(len(spans)), key=lambda i: (spans[i].ts, spans[i].index))
    ordered = [spans[i] for i in order]
    streams = {id(spans[i]): template[i]["stream"] for i in order}
    local = observed_order_deps(ordered, lambda s: streams[id(s)])
    return {order[k]: [order[d] for d in ds] for k, ds in local.items()}
