"""TopoOpt / FlexNet FlatBuffers task graphs: real fixtures, builder-made files, 200+ bad files."""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from dataclasses import replace

import pytest
from fixtures.importing import (
    TOPOOPT_FIXTURES,
    assert_cli_rejects,
    assert_rejected,
    need_shared,
    random_blobs,
    run_cli,
    truncations,
    with_prefix,
)

from estimator.workloads import io
from estimator.workloads.importers import import_file
from estimator.workloads.importers.topoopt_schema import Device, Task, TaskGraph, build_taskgraph

GPU, NOMINAL = 0, 14
FWD, BWD, NOMINAL_COMM, ALLREDUCE = 0, 1, 5, 6


def small_graph() -> TaskGraph:
    """Two nodes, one GPU each: fwd0 -> xfer -> fwd1; bwd1 -> xfer back -> bwd0; both -> all-reduce."""
    devices = [Device(GPU, 100, nodeid=0, deviceproperty=0), Device(GPU, 101, nodeid=1, deviceproperty=1),
               Device(NOMINAL, 900, nodeid=2**64 - 1, deviceproperty=1)]
    tasks = [
        Task(FWD, 1, 100, 2.0, 0, (2,)),
        Task(NOMINAL_COMM, 2, 900, 0.5, 4096, (3,)),
        Task(FWD, 3, 101, 2.0, 0, (4,)),
        Task(BWD, 4, 101, 4.0, 0, (5, 7)),
        Task(NOMINAL_COMM, 5, 900, 0.5, 4096, (6,)),
        Task(BWD, 6, 100, 4.0, 0, (7,)),
        Task(ALLREDUCE, 7, 0, 0.01, 1 << 20, (0, 1)),
    ]
    return TaskGraph(ngpupernode=1, nnode=2, netbw=12_500_000.0, ops=[(1, 3, "Conv2D_1")], tasks=tasks,
                     devices=devices)


def write(tmp_path, graph: TaskGraph, name: str = "g.fbuf"):
    path = tmp_path / name
    path.write_bytes(build_taskgraph(graph))
    return path


def test_vgg16_fixture_matches_readme():
    path = need_shared(TOPOOPT_FIXTURES / "100vgg_16.fbuf")
    w, fmt = import_file(path)
    assert fmt == "topoopt"
    meta = w.meta["topoopt"]
    assert len(w.nodes) == 768
    assert meta["task_counts"] == {"forward": 368, "backward": 368, "allreduce": 32}
    assert meta["device_records"] == 48 and len(meta["ops"]) == 23
    assert w.devices == 16 and meta["nnode"] == 16
    assert Counter(n.phase for n in w.nodes if n.kind == "compute") == {"forward": 368, "backward": 368}
    assert all(n.collective == "all_reduce" and n.group == tuple(range(16))
               for n in w.nodes if n.kind == "collective")
    assert len(w.topological_order()) == 768  # acyclic, every reference resolved
    assert meta["netbw_Bps"] == pytest.approx(12.5e9)  # 100 Gbps in bytes/ms * 1000
    assert w.capture_device == "topoopt"
    assert len(w.gradients) == 32
    assert w.gradient_bytes == sum(n.comm_bytes for n in w.nodes if n.kind == "collective")
    nodes = w.node_map()
    assert all(nodes[g.ready_node].phase == "backward" for g in w.gradients)


@pytest.mark.parametrize("name, tasks, p2p", [("100transformer_16", 2020, 0), ("100dlrm_16", 1278, 496),
                                              ("hipersys_taskgraph_12node", 564, 132)])
def test_other_fixtures(name, tasks, p2p):
    w, _ = import_file(need_shared(TOPOOPT_FIXTURES / f"{name}.fbuf"))
    assert len(w.nodes) == tasks
    kinds = Counter(n.kind for n in w.nodes)
    assert kinds["p2p"] == p2p
    for n in w.nodes:
        if n.kind == "p2p":
            assert n.src != n.dst and n.comm_bytes > 0


def test_builder_graph_maps_every_field(tmp_path):
    w, fmt = import_file(write(tmp_path, small_graph()))
    assert fmt == "topoopt" and w.devices == 2
    by_name = {n.name: n for n in w.nodes}
    f0, x0, f1 = by_name["forward_0"], by_name["nominal_comm_0"], by_name["forward_1"]
    assert f0.duration_s == pytest.approx(2e-3) and f0.device == 0 and f0.phase == "forward"
    assert (x0.kind, x0.src, x0.dst, x0.comm_bytes, x0.deps) == ("p2p", 0, 1, 4096.0, (f0.id,))
    assert f1.deps == (x0.id,) and f1.device == 1
    back = by_name["nominal_comm_1"]
    assert (back.src, back.dst) == (1, 0)
    ar = by_name["allreduce_0"]
    assert ar.kind == "collective" and ar.group == (0, 1) and ar.comm_bytes == float(1 << 20)
    assert set(ar.deps) == {by_name["backward_0"].id, by_name["backward_1"].id}
    assert ar.attrs["intra_node_s"] == pytest.approx(1e-5)
    assert w.meta["topoopt"]["ops"] == ["Conv2D_1"]
    (grad,) = w.gradients
    assert (grad.nbytes, grad.ready_node) == (1 << 20, by_name["backward_1"].id)  # backward on device 0


def test_cli_imports_and_summarises(tmp_path):
    src = write(tmp_path, small_graph(), "tiny.fbuf")
    proc = run_cli("import", str(src), f"traces_dir={tmp_path / 'traces'}", "output=json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["format"] == "topoopt" and summary["nodes"] == 7 and summary["p2p"] == 2
    assert summary["output"] == str(tmp_path / "traces" / "tiny.workload.json")
    assert io.load(summary["output"]).devices == 2


def _inconsistent(rng: random.Random) -> list[bytes]:
    """Schema-valid files that describe an impossible graph, each one of several kinds."""
    base = small_graph()
    out = []
    for k in range(60):
        tasks = list(base.tasks)
        i = rng.randrange(len(tasks) - 1)
        kind = k % 10
        if kind == 0:  # dangling successor
            tasks[i] = replace(tasks[i], nexttasks=(*tasks[i].nexttasks, 10_000 + k))
        elif kind == 1:  # cycle: the last backward points back to the first forward
            tasks[5] = replace(tasks[5], nexttasks=(7, 1))
        elif kind == 2:  # negative runtime
            tasks[i] = replace(tasks[i], runtime_ms=-rng.uniform(0.1, 5))
        elif kind == 3:  # not a number
            tasks[i] = replace(tasks[i], runtime_ms=rng.choice([math.nan, math.inf]))
        elif kind == 4:  # duplicate taskid
            tasks[i + 1] = replace(tasks[i + 1], taskid=tasks[i].taskid)
        elif kind == 5:  # all-reduce over a node without GPUs
            tasks[6] = replace(tasks[6], nexttasks=(0, 5 + k))
        elif kind == 6:  # compute task on a network device
            tasks[0] = replace(tasks[0], deviceid=900)
        elif kind == 7:  # transfer nobody feeds
            tasks[0] = replace(tasks[0], nexttasks=())
        elif kind == 8:  # unknown task type
            tasks[i] = replace(tasks[i], type=rng.randrange(7, 300))
        else:  # no compute devices at all
            out.append(build_taskgraph(replace(base, devices=[base.devices[2]])))
            continue
        out.append(build_taskgraph(replace(base, tasks=tasks)))
    return out


def test_bad_files_rejected_in_process(tmp_path):
    rng = random.Random(20261121)
    good = build_taskgraph(small_graph())
    real = (TOPOOPT_FIXTURES / "100vgg_16.fbuf").read_bytes() if TOPOOPT_FIXTURES.exists() else good
    blobs = (truncations(good, rng, 40) + truncations(real, rng, 40) + random_blobs(rng, 50)
             + with_prefix(real, rng, 15) + with_prefix(good, rng, 15) + _inconsistent(rng))
    assert len(blobs) >= 200
    messages = assert_rejected(tmp_path, blobs, "topoopt", ".fbuf")
    joined = "\n".join(messages)
    for problem in ("does not exist", "cycle", "non-negative", "duplicate taskid", "no compute device",
                    "not a compute device", "no computing predecessor", "unknown task type", "outside"):
        assert problem in joined, problem


def test_bad_files_rejected_by_cli(tmp_path):
    rng = random.Random(7)
    blobs = [build_taskgraph(small_graph())[:100], rng.randbytes(300), _inconsistent(rng)[1]]
    assert_cli_rejects(tmp_path, blobs, ".fbuf")
