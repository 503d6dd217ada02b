"""Hand-written accessors for TopoOpt's ``taskgraph.fbs`` (namespace ``FlatBufTaskGraph``).

``flatc`` is not available, so the schema is transcribed here as field slot numbers (a field's
slot is its position in the ``table`` declaration). Reading goes through the bounds-checked
:mod:`.flatbuf` reader; :func:`build_taskgraph` writes a file with the ``flatbuffers`` runtime's
``Builder`` (used by the tests and by anyone who wants to hand a graph to TopoOpt's simulator).

Units as the TopoOpt writer uses them: task ``runtime`` in milliseconds, ``xfersize`` in bytes,
bandwidths in bytes per millisecond.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import flatbuffers

from estimator.workloads.importers.flatbuf import Table

TASK_TYPES = {0: "FORWARD", 1: "BACKWARD", 2: "COMM", 3: "UPDATE", 4: "BARRIER", 5: "NOMINAL_COMM",
              6: "ALLREDUCE"}
DEVICE_TYPES = {0: "COMP_GPU", 1: "COMP_CPU", 2: "MEM_SYSTEM", 3: "MEM_Z_COPY", 4: "MEM_GPU_FB",
                5: "COMM_MEMBUS", 6: "COMM_UPI_IN", 7: "COMM_UPI_OUT", 8: "COMM_NIC_IN", 9: "COMM_NIC_OUT",
                10: "COMM_PCI_TO_HOST", 11: "COMM_PCI_TO_DEV", 12: "COMM_NVLINK", 13: "COMM_NW",
                14: "COMM_NW_NOMINAL"}
COMPUTE_DEVICE_TYPES = (0, 1)

# slot numbers, in declaration order of taskgraph.fbs
GRAPH_SLOTS = ("ngpupernode", "nnode", "nswitch", "intergpubw", "drambw", "netbw", "conn", "ops", "tasks",
               "devices", "routes", "rings")
_G = {name: i for i, name in enumerate(GRAPH_SLOTS)}


@dataclass(frozen=True)
class Task:
    type: int
    taskid: int
    deviceid: int = 0
    runtime_ms: float = 0.0
    xfersize: int = 0
    nexttasks: tuple[int, ...] = ()


@dataclass(frozen=True)
class Device:
    type: int
    deviceid: int
    nodeid: int = 0
    deviceproperty: int = 0
    bandwidth: int = 0


@dataclass
class TaskGraph:
    ngpupernode: int = 1
    nnode: int = 1
    nswitch: int = 0
    intergpubw: float = 0.0
    drambw: float = 0.0
    netbw: float = 0.0
    ops: list[tuple[int, int, str]] = field(default_factory=list)  # (opid, type, name)
    tasks: list[Task] = field(default_factory=list)
    devices: list[Device] = field(default_factory=list)
    n_conn: int = 0
    n_routes: int = 0
    n_rings: int = 0


def read_taskgraph(buf: bytes) -> TaskGraph:
    """Decode a TaskGraph root table; raises ``FlatBufferError`` on a corrupt buffer."""
    root = Table.root(buf)
    g = TaskGraph(
        ngpupernode=root.scalar(_G["ngpupernode"], "uint"),
        nnode=root.scalar(_G["nnode"], "uint"),
        nswitch=root.scalar(_G["nswitch"], "uint"),
        intergpubw=root.scalar(_G["intergpubw"], "float"),
        drambw=root.scalar(_G["drambw"], "float"),
        netbw=root.scalar(_G["netbw"], "float"),
    )
    g.ops = [(t.scalar(0, "ulong"), t.scalar(1, "ulong"), t.string(2)) for t in root.tables(_G["ops"])]
    g.tasks = [
        Task(t.scalar(0, "short"), t.scalar(1, "ulong"), t.scalar(2, "ulong"), t.scalar(3, "float"),
             t.scalar(4, "ulong"), t.scalars(5, "ulong"))
        for t in root.tables(_G["tasks"])
    ]
    g.devices = [
        Device(t.scalar(0, "short"), t.scalar(1, "ulong"), t.scalar(2, "ulong"), t.scalar(3, "ulong"),
               t.scalar(4, "ulong"))
        for t in root.tables(_G["devices"])
    ]
    g.n_conn = len(root.tables(_G["conn"]))
    g.n_routes = len(root.tables(_G["routes"]))
    g.n_rings = len(root.tables(_G["rings"]))
    _touch_all(root)
    root.check_no_trailing()
    return g


def _touch_all(root: Table) -> None:
    """Visit the conn/routes/rings sub-tables (only counted above) so the buffer extent covers
    them (Route.paths -> Path.hopnode, Rings.ringpaths -> RingDescriptor.jumps)."""
    root.tables(_G["conn"])
    for route in root.tables(_G["routes"]):
        for path in route.tables(2):
            path.scalars(0, "uint")
    for rings in root.tables(_G["rings"]):
        for ring in rings.tables(1):
            ring.scalars(0, "int")


# ---- writing (flatbuffers runtime) ---------------------------------------------------------------
def _offset_vector(b: flatbuffers.Builder, offsets: list[int]) -> int:
    b.StartVector(4, len(offsets), 4)
    for off in reversed(offsets):
        b.PrependUOffsetTRelative(off)
    return b.EndVector()


def _ulong_vector(b: flatbuffers.Builder, values: tuple[int, ...]) -> int:
    b.StartVector(8, len(values), 8)
    for v in reversed(values):
        b.PrependUint64(v)
    return b.EndVector()


def build_taskgraph(g: TaskGraph) -> bytes:
    """Serialise ``g`` as a ``FlatBufTaskGraph.TaskGraph`` buffer (no links, routes or rings)."""
    b = flatbuffers.Builder(1024)
    names = [b.CreateString(name) for _, _, name in g.ops]
    ops = []
    for (opid, optype, _), name in zip(g.ops, names, strict=True):
        b.StartObject(3)
        b.PrependUint64Slot(0, opid, 0)
        b.PrependUint64Slot(1, optype, 0)
        b.PrependUOffsetTRelativeSlot(2, name, 0)
        ops.append(b.EndObject())
    nexts = [_ulong_vector(b, t.nexttasks) for t in g.tasks]
    tasks = []
    for t, nxt in zip(g.tasks, nexts, strict=True):
        b.StartObject(6)
        b.PrependInt16Slot(0, t.type, 0)
        b.PrependUint64Slot(1, t.taskid, 0)
        b.PrependUint64Slot(2, t.deviceid, 0)
        b.PrependFloat32Slot(3, t.runtime_ms, 0.0)
        b.PrependUint64Slot(4, t.xfersize, 0)
        b.PrependUOffsetTRelativeSlot(5, nxt, 0)
        tasks.append(b.EndObject())
    devices = []
    for d in g.devices:
        b.StartObject(5)
        b.PrependInt16Slot(0, d.type, 0)
        b.PrependUint64Slot(1, d.deviceid, 0)
        b.PrependUint64Slot(2, d.nodeid, 0)
        b.PrependUint64Slot(3, d.deviceproperty, 0)
        b.PrependUint64Slot(4, d.bandwidth, 0)
        devices.append(b.EndObject())
    ops_vec, tasks_vec, dev_vec = _offset_vector(b, ops), _offset_vector(b, tasks), _offset_vector(b, devices)
    b.StartObject(len(GRAPH_SLOTS))
    b.PrependUint32Slot(_G["ngpupernode"], g.ngpupernode, 0)
    b.PrependUint32Slot(_G["nnode"], g.nnode, 0)
    b.PrependUint32Slot(_G["nswitch"], g.nswitch, 0)
    b.PrependFloat32Slot(_G["intergpubw"], g.intergpubw, 0.0)
    b.PrependFloat32Slot(_G["drambw"], g.drambw, 0.0)
    b.PrependFloat32Slot(_G["netbw"], g.netbw, 0.0)
    b.PrependUOffsetTRelativeSlot(_G["ops"], ops_vec, 0)
    b.PrependUOffsetTRelativeSlot(_G["tasks"], tasks_vec, 0)
    b.PrependUOffsetTRelativeSlot(_G["devices"], dev_vec, 0)
    b.Finish(b.EndObject())
    return bytes(b.Output())
