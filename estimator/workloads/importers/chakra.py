"""Chakra execution traces (one ``<prefix>.<rank>.et`` file per rank): import and export.

**Import** reads every rank file beside the given one (``<prefix>.0.et`` ... ``<prefix>.<n-1>.et``,
contiguous) and merges the per-rank graphs:

* ``COMP_NODE`` (and ``MEM_LOAD/STORE``, ``METADATA``) -> a compute node on that rank;
  ``duration_micros`` (else a ``runtime`` attribute, microseconds) -> ``duration_s`` (``None``
  when both are 0 and ``num_ops`` gives the work),
  ``num_ops`` -> ``flops``, ``tensor_size`` -> ``mem_bytes``.
* ``COMM_COLL_NODE`` -> one collective per (``pg_name``, k-th collective of that group on each
  rank); ``comm_type`` -> kind, ``comm_size`` -> ``comm_bytes`` (must agree across ranks; an
  all-gather's is per rank in ASTRA-sim, x group size here: :func:`~estimator.workloads.astrasim.comm_size`); its
  group is the ranks that hold it.
* ``COMM_SEND_NODE`` on rank a with ``comm_dst`` b and ``COMM_RECV_NODE`` on b with ``comm_src`` a
  (same ``comm_tag``, k-th such pair) -> one ``p2p`` node; an unmatched send or recv is an error.
* ``data_deps`` and ``ctrl_deps`` -> ``deps`` (union over the ranks holding the node).

**Export** writes one file per rank from a workload: compute nodes on their device, collectives
on every member of their group (all devices when the group is empty), p2p as a send on ``src``
and a recv on ``dst``; ``data_deps`` keep the dependencies present on that rank (a compute node's
dependency on another rank's compute, with no communication between them, cannot be expressed
per rank: it is dropped from ``data_deps`` and counted). Standard attributes are the ones ASTRA-sim
reads, with the value types its feeder reads them as (``is_cpu_op`` bool, ``num_ops`` /
``comm_type`` / ``comm_size`` int64, ``tensor_size`` uint64, ``comm_src`` / ``comm_dst`` /
``comm_tag`` int32, ``pg_name`` string); exact estimator fields ride along as ``estimator.*`` attributes and a
``estimator.workload`` header in the global metadata, so an exported workload imports back
identically (node ids, order, deps, durations to the bit). Collectives over a strict subset of
devices get a ``pg_name``; ``comm_group.json`` maps those names to ranks.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from google.protobuf.message import DecodeError

from estimator import limits
from estimator.errors import EstimatorError
from estimator.files import excerpt, write_atomic
from estimator.workloads.astrasim import comm_bytes_of, comm_size
from estimator.workloads.graph import Gradient, Node, Workload
from estimator.workloads.importers._common import BadInput, check_scale, read_bytes, safe_name
from estimator.workloads.importers.chakra_schema import (
    COLLECTIVE_TYPES,
    NODE_TYPES,
    ChakraFormatError,
    GlobalMetadata,
    IOInfo,
    attr_value,
    decode_varint,
    make_attr,
    read_messages,
    write_messages,
)
from estimator.workloads.importers.chakra_schema import Node as EtNode

FORMAT = "chakra"
VERSION = "0.0.4"
RANK_FILE = re.compile(r"^(?P<prefix>.+)\.(?P<rank>\d+)\.et$")
TO_COLLECTIVE = {"ALL_REDUCE": "all_reduce", "REDUCE": "reduce", "ALL_GATHER": "all_gather", "GATHER": "gather",
                 "BROADCAST": "broadcast", "ALL_TO_ALL": "all_to_all", "REDUCE_SCATTER": "reduce_scatter",
                 "REDUCE_SCATTER_BLOCK": "reduce_scatter", "BARRIER": "all_reduce"}
FROM_COLLECTIVE = {"all_reduce": "ALL_REDUCE", "reduce": "REDUCE", "all_gather": "ALL_GATHER", "gather": "GATHER",
                   "broadcast": "BROADCAST", "all_to_all": "ALL_TO_ALL", "reduce_scatter": "REDUCE_SCATTER"}
_TYPE_NAME = {v: k for k, v in NODE_TYPES.items()}
_COLL_NAME = {v: k for k, v in COLLECTIVE_TYPES.items()}
_COMPUTE_TYPES = (1, 2, 3, 4)
EXT = "estimator."
EXT_TYPES: dict[str, type | tuple[type, ...]] = {
    "id": int, "device": int, "op": str, "op_class": str, "phase": str, "flops": (int, float),
    "mem_bytes": (int, float), "duration_s": (int, float), "scales_with_batch": bool, "comm_bytes": (int, float),
    "group": list, "deps": list, "attrs": str}


def sniff(head: bytes, path: Path) -> bool:
    """``.et`` names, or a head that frames and decodes as a GlobalMetadata with a version."""
    if path.suffix == ".et":
        return True
    if head.lstrip()[:1] in (b"{", b"["):
        return False  # JSON ('[' then newline also reads as a varint then a string tag)
    try:
        length, pos = decode_varint(head, 0)
        meta = GlobalMetadata()
        if not 0 < length <= len(head) - pos:
            return False
        meta.ParseFromString(head[pos : pos + length])
    except (ChakraFormatError, DecodeError):
        return False
    return bool(meta.version)


def rank_files(path: Path) -> list[Path]:
    """``path`` and its sibling rank files, ordered by rank (a lone file is rank 0)."""
    m = RANK_FILE.match(path.name)
    if not m:
        return [path]
    prefix = m["prefix"]
    ranks = {}
    for sibling in path.parent.iterdir():
        sm = RANK_FILE.match(sibling.name)
        if sm and sm["prefix"] == prefix:
            ranks[int(sm["rank"])] = sibling
    check_scale(len(ranks), 0, "rank files")
    present = sorted(ranks)
    # contiguous 0..n-1: the first gap is the missing file (never a range over the largest rank,
    # which a file name can make 10**14)
    missing = next((i for i, r in enumerate(present) if r != i), None)
    if missing is not None:
        raise BadInput(f"rank file {prefix}.{missing}.et is missing (found ranks {present[:8]})")
    return [ranks[r] for r in present]


# ---- import ---------------------------------------------------------------------------------
def _decode(path: Path, data: bytes, primary: Path) -> tuple[dict[str, Any], list[Any]]:
    try:
        meta, nodes = read_messages(data)
    except ChakraFormatError as exc:
        where = "" if path == primary else f"rank file {path.name}: "
        raise BadInput(f"{where}not a valid Chakra trace ({exc})") from None
    return {a.name: attr_value(a) for a in meta.attr}, nodes


class _Local:
    """One ET node of one rank, with its attributes decoded and checked."""

    def __init__(self, rank: int, node: Any, where: str):
        self.rank, self.node, self.where = rank, node, where
        self.attrs = {a.name: attr_value(a) for a in node.attr}
        if node.type in (5, 6, 7):
            self.comm_size = self._int("comm_size", required=True)
        self.deps = list(node.data_deps) + list(node.ctrl_deps)

    def _int(self, key: str, required: bool = False, default: int = 0) -> int:
        value = self.attrs.get(key)
        if value is None:
            if required:
                raise BadInput(f"{self.where}: missing attribute {key!r}")
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise BadInput(f"{self.where}: attribute {key!r} must be an integer, got {value!r}"[:200])
        if value < 0:
            raise BadInput(f"{self.where}: attribute {key!r} is negative ({value})")
        return value

    def ext(self, key: str, default: Any = None) -> Any:
        """An ``estimator.*`` attribute, type-checked (``default`` when absent)."""
        value = self.attrs.get(EXT + key)
        if value is None:
            return default
        kind = EXT_TYPES[key]
        if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):  # bool is an int
            raise BadInput(f"{self.where}: attribute {EXT + key!r} has the wrong type ({value!r})"[:200])
        if key == "attrs":
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                value = None
            if not isinstance(value, dict):
                raise BadInput(f"{self.where}: attribute 'estimator.attrs' is not a JSON object")
        return value


def _key(local: _Local, counters: dict[Any, int], global_ids: bool) -> tuple:
    """The identity of the workload node an ET node is (one of) the copies of."""
    node = local.node
    if global_ids:
        est = local.ext("id")
        if est is None:
            raise BadInput(f"{local.where}: attribute 'estimator.id' is missing")
        return ("g", est)
    if node.type == 7:
        base = ("coll", str(local.attrs.get("pg_name", "")))
    elif node.type == 5:
        base = ("p2p", local.rank, local._int("comm_dst", required=True), local._int("comm_tag"))
    elif node.type == 6:
        base = ("p2p", local._int("comm_src", required=True), local.rank, local._int("comm_tag"))
    else:
        return ("c", local.rank, node.id)
    slot = (base, local.rank, node.type)
    counters[slot] = counters.get(slot, 0) + 1
    return (*base, counters[slot] - 1)


def _collect(files: list[tuple[Path, bytes]], global_ids: bool, primary: Path
             ) -> tuple[dict[tuple, list[_Local]], dict]:
    instances: dict[tuple, list[_Local]] = {}
    local_key: dict[tuple[int, int], tuple] = {}
    counters: dict[Any, int] = {}
    for rank, (path, data) in enumerate(files):
        _, nodes = _decode(path, data, primary)
        seen: set[int] = set()
        mine: list[_Local] = []
        for k, node in enumerate(nodes):
            where = f"{path.name} node #{k} (id {node.id})"
            if node.id in seen:
                raise BadInput(f"{where}: duplicate node id")
            seen.add(node.id)
            if node.type not in (*_COMPUTE_TYPES, 5, 6, 7):
                raise BadInput(f"{where}: unsupported node type {_TYPE_NAME.get(node.type, node.type)}")
            local = _Local(rank, node, where)
            mine.append(local)
            key = _key(local, counters, global_ids)
            instances.setdefault(key, []).append(local)
            local_key[(rank, node.id)] = key
        for local in mine:
            for d in local.deps:
                if d not in seen:
                    raise BadInput(f"{local.where}: dependency on missing node {d}")
    return instances, local_key


def _convert(key: tuple, copies: list[_Local], gid: int, deps: list[int], global_ids: bool) -> Node:
    first = copies[0]
    et, where = first.node, first.where
    types = {c.node.type for c in copies}
    common: dict[str, Any] = {"id": gid, "name": et.name, "deps": tuple(deps),
                              "attrs": first.ext("attrs", {})}
    if types <= set(_COMPUTE_TYPES):
        if len(copies) > 1:
            raise BadInput(f"{where}: compute node id {key[-1]} appears on {len(copies)} ranks")
        flops = first.ext("flops", first._int("num_ops"))
        micros = et.duration_micros or first._int("runtime")  # older traces: a ``runtime`` attribute (us)
        duration = micros * 1e-6 if micros or not flops else None
        shapes: tuple = ()
        if et.HasField("inputs") and et.inputs.shapes:
            try:
                shapes = tuple(tuple(int(x) for x in s) for s in json.loads(et.inputs.shapes))
            except (ValueError, TypeError):
                shapes = ()
        return Node(kind="compute", device=first.rank, op=first.ext("op", et.name), op_class=first.ext("op_class", ""),
                    phase=first.ext("phase", ""), flops=float(flops),
                    mem_bytes=float(first.ext("mem_bytes", first._int("tensor_size"))),
                    duration_s=first.ext("duration_s") if global_ids else duration, input_shapes=shapes,
                    scales_with_batch=bool(first.ext("scales_with_batch", False)), **common)
    sizes = {c.comm_size for c in copies}
    if len(sizes) > 1:
        raise BadInput(f"{where}: the ranks disagree on its comm_size ({sorted(sizes)[:4]})")
    size = float(first.ext("comm_bytes", sizes.pop()))
    if types == {7}:
        ctype = first._int("comm_type", required=True)
        name = _COLL_NAME.get(ctype)
        if name not in TO_COLLECTIVE:
            raise BadInput(f"{where}: unsupported collective comm_type {name or ctype}")
        kinds = {c._int("comm_type", required=True) for c in copies}
        if len(kinds) > 1:
            raise BadInput(f"{where}: the ranks disagree on its comm_type")
        group = tuple(first.ext("group", sorted(c.rank for c in copies)))
        size = float(first.ext("comm_bytes", comm_bytes_of(TO_COLLECTIVE[name], first.comm_size, len(group))))
        return Node(kind="collective", collective=TO_COLLECTIVE[name], comm_bytes=size, group=group,
                    device=first.ext("device", min(c.rank for c in copies)), phase=first.ext("phase", ""), **common)
    sends = [c for c in copies if c.node.type == 5]
    recvs = [c for c in copies if c.node.type == 6]
    if len(sends) != 1 or len(recvs) != 1 or types != {5, 6}:
        side = "recv" if len(recvs) != 1 else "send"
        raise BadInput(f"{where}: point-to-point transfer has no matching {side}")
    src, dst = sends[0].rank, recvs[0].rank
    return Node(kind="p2p", comm_bytes=size, src=src, dst=dst, device=first.ext("device", src),
                phase=first.ext("phase", ""), **common)


def load(data: bytes, name: str, options: dict[str, Any]) -> Workload:
    path: Path = options["path"]
    files = []
    for p in rank_files(path):
        files.append((p, data if p == path else read_bytes(p)))
    header_attrs, _ = _decode(files[0][0], files[0][1][: _first_message_end(files[0][1])], path)
    header = header_attrs.get(EXT + "workload")
    global_ids = isinstance(header, str)
    instances, local_key = _collect(files, global_ids, path)
    if not instances:
        raise BadInput("trace has no nodes")
    keys = sorted(instances, key=lambda k: k[1]) if global_ids else list(instances)
    gid = {k: (k[1] if global_ids else i) for i, k in enumerate(keys)}
    nodes = []
    for k in keys:
        copies = instances[k]
        explicit = copies[0].ext("deps")
        if global_ids and explicit is not None:
            deps = list(explicit)
        else:
            deps = sorted({gid[local_key[(c.rank, d)]] for c in copies for d in c.deps})
        nodes.append(_convert(k, copies, gid[k], deps, global_ids))
    if global_ids:
        try:
            head = json.loads(header)
            workload = Workload(name=name, nodes=tuple(nodes), source=str(head.get("source", "")),
                                devices=int(head.get("devices", len(files))),
                                batch_size=int(head.get("batch_size", 1)),
                                capture_device=str(head.get("capture_device", "")), params=int(head.get("params", 0)),
                                forward_flops=float(head.get("forward_flops", 0.0)), meta=dict(head.get("meta", {})),
                                gradients=tuple(Gradient.from_dict(g) for g in head.get("gradients", [])))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise BadInput(f"estimator.workload header is malformed ({type(exc).__name__})") from None
    else:
        workload = Workload(name=name, nodes=tuple(nodes), source=f"chakra:{name}", devices=len(files),
                            capture_device="chakra", meta={"chakra": {"ranks": len(files)}})
    return workload.validate()


def _first_message_end(data: bytes) -> int:
    try:
        length, pos = decode_varint(data, 0)
    except ChakraFormatError:
        return len(data)
    return min(len(data), pos + length)


# ---- export ---------------------------------------------------------------------------------
def _placements(n: Node, devices: int, recv_offset: int) -> list[tuple[int, int, int]]:
    """(rank, ET node id, ET node type) of every copy of workload node ``n``."""
    if n.kind == "compute":
        return [(n.device, n.id, 4)]
    if n.kind == "collective":
        return [(r, n.id, 7) for r in (n.group or range(devices))]
    return [(n.src, n.id, 5), (n.dst, recv_offset + n.id, 6)]


def to_rank_graphs(w: Workload) -> tuple[list[list[Any]], dict[str, list[int]], int]:
    """Per-rank ET node lists, the comm groups named by ``pg_name``, and dropped cross-rank deps."""
    w.validate()
    recv_offset = max(n.id for n in w.nodes) + 1
    nodes = w.node_map()
    where: dict[int, dict[int, int]] = {}  # workload id -> {rank: ET id}
    for n in w.nodes:
        for rank, et_id, _ in _placements(n, w.devices, recv_offset):
            where.setdefault(n.id, {})[rank] = et_id
    groups: dict[str, list[int]] = {}
    ranks: list[list[Any]] = [[] for _ in range(w.devices)]
    dropped = 0
    for n in w.topological_order():
        for rank, et_id, et_type in _placements(n, w.devices, recv_offset):
            deps = [where[d][rank] for d in n.deps if rank in where[d]]
            dropped += sum(1 for d in n.deps if rank not in where[d]) if n.kind == "compute" else 0
            et = EtNode(id=et_id, name=n.name, type=et_type)
            et.data_deps.extend(deps)
            _standard_attrs(et, n, w.devices, groups)
            _exact_attrs(et, n, nodes)
            ranks[rank].append(et)
    return ranks, groups, dropped


def _standard_attrs(et: Any, n: Node, devices: int, groups: dict[str, list[int]]) -> None:
    if n.kind == "compute":
        if n.duration_s is not None:
            et.duration_micros = int(round(n.duration_s * 1e6))
        et.attr.extend([make_attr("is_cpu_op", False), make_attr("num_ops", int(round(n.flops))),
                        make_attr("tensor_size", int(round(n.mem_bytes)), "uint64")])
        if n.input_shapes:
            et.inputs.CopyFrom(IOInfo(shapes=json.dumps([list(s) for s in n.input_shapes])))
        return
    members = len(n.group) if n.group else devices
    et.attr.append(make_attr("comm_size", comm_size(n.collective if n.kind == "collective" else "", n.comm_bytes,
                                                    members)))
    if n.kind == "collective":
        et.attr.append(make_attr("comm_type", COLLECTIVE_TYPES[FROM_COLLECTIVE[n.collective]]))
        if n.group and len(n.group) < devices:
            pg = next((k for k, v in groups.items() if v == list(n.group)), str(len(groups) + 1))
            groups[pg] = list(n.group)
            et.attr.append(make_attr("pg_name", pg))
    else:
        et.attr.extend([make_attr("comm_src", n.src, "int32"), make_attr("comm_dst", n.dst, "int32"),
                        make_attr("comm_tag", n.id % (1 << 31), "int32")])


def _exact_attrs(et: Any, n: Node, nodes: dict[int, Node]) -> None:
    """``estimator.*`` attributes: the exact fields a round trip needs (ignored by ASTRA-sim)."""
    exact: dict[str, Any] = {"id": n.id, "deps": list(n.deps), "device": n.device, "phase": n.phase,
                             "attrs": json.dumps(n.attrs, sort_keys=True)}
    if n.kind == "compute":
        exact.update(op=n.op, op_class=n.op_class, flops=float(n.flops), mem_bytes=float(n.mem_bytes),
                     scales_with_batch=n.scales_with_batch)
        if n.duration_s is not None:
            exact["duration_s"] = float(n.duration_s)
    else:
        exact["comm_bytes"] = float(n.comm_bytes)
        if n.kind == "collective":
            exact["group"] = list(n.group)
    et.attr.extend(make_attr(EXT + k, v) for k, v in exact.items())


def _header(w: Workload) -> Any:
    head = {"source": w.source, "devices": w.devices, "batch_size": w.batch_size, "capture_device": w.capture_device,
            "params": w.params, "forward_flops": w.forward_flops, "meta": w.meta,
            "gradients": [g.to_dict() for g in w.gradients]}
    meta = GlobalMetadata(version=VERSION)
    meta.attr.append(make_attr(EXT + "workload", json.dumps(head, sort_keys=True)))
    return meta


def export_chakra(w: Workload, out_dir: Path, prefix: str) -> dict[str, Any]:
    """Write ``<out_dir>/<prefix>.<rank>.et`` for every device (+ ``comm_group.json``). ``prefix``
    must be a plain file-name stem: every file stays inside ``out_dir``."""
    if not prefix or prefix != safe_name(prefix) or prefix in (".", ".."):
        raise EstimatorError(f"export.prefix: {excerpt(prefix)} must be a plain name (letters, digits, ._-; "
                             "no folders), so every file stays in the output folder")
    limits.check_count(w.devices, "devices", f"workload {safe_name(w.name)!r} devices")
    ranks, groups, dropped = to_rank_graphs(w)
    blobs = [write_messages([_header(w), *nodes]) for nodes in ranks]  # everything in memory first
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        paths = []
        for rank, blob in enumerate(blobs):
            paths.append(out_dir / f"{prefix}.{rank}.et")
            write_atomic(paths[-1], blob)
        if groups:
            write_atomic(out_dir / "comm_group.json", json.dumps(groups, indent=1).encode())
    except OSError as exc:
        raise EstimatorError(f"{out_dir}: cannot write Chakra traces ({exc.strerror or exc})") from None
    return {"files": [str(p) for p in paths], "ranks": len(paths), "et_nodes": sum(len(r) for r in ranks),
            "comm_groups": len(groups), "cross_rank_deps_dropped": dropped}
