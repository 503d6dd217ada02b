"""Chakra ET export/import round trips, foreign-style Chakra files built from the published schema
(labelled: built here with protobuf from et_def.proto's field numbers, not produced by Chakra's
tools), ASTRA-sim configs, and 200+ bad files."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from fixtures.importing import TOPOOPT_FIXTURES, assert_rejected, random_blobs, run_cli, with_prefix
from test_import_topoopt import small_graph

from estimator.errors import EstimatorError
from estimator.workloads import io
from estimator.workloads.astrasim import GIB, network_config
from estimator.workloads.graph import Gradient, Node, Workload
from estimator.workloads.importers import import_file
from estimator.workloads.importers.chakra import export_chakra
from estimator.workloads.importers.chakra_schema import (
    GlobalMetadata,
    decode_varint,
    make_attr,
    read_messages,
    write_messages,
)
from estimator.workloads.importers.chakra_schema import Node as EtNode
from estimator.workloads.importers.topoopt_schema import build_taskgraph

COMP, SEND, RECV, COLL = 4, 5, 6, 7


def handmade() -> Workload:
    """Every field an export must carry: subset groups, None durations, attrs, shapes, gradients."""
    nodes = (
        Node(0, "embed", device=0, op="aten::embedding", op_class="gather", phase="forward", flops=0.0,
             mem_bytes=1e6, duration_s=1.26e-5, input_shapes=((4, 128), (30522, 768)), scales_with_batch=True),
        Node(1, "mlp", device=1, op="aten::addmm", phase="forward", flops=2.5e9, mem_bytes=3.5e6,
             duration_s=None, attrs={"note": "roofline"}),
        Node(2, "x01", kind="p2p", deps=(0,), device=0, src=0, dst=1, comm_bytes=65536.0),
        Node(3, "after", deps=(1, 2), device=1, op="aten::relu", duration_s=3e-7, phase="backward"),
        Node(4, "ar_pair", kind="collective", deps=(3,), device=1, collective="all_reduce", comm_bytes=1.5e6,
             group=(1, 2)),
        Node(5, "ag_all", kind="collective", deps=(0, 4), collective="all_gather", comm_bytes=4096.0),
        Node(6, "opt", deps=(5,), device=2, op="sgd", phase="optimizer", duration_s=0.0),
    )
    return Workload(name="handmade", nodes=nodes, source="test", devices=3, batch_size=4, capture_device="cpu",
                    params=1234, forward_flops=5e9, meta={"k": [1, 2]},
                    gradients=(Gradient("w", 4096, 3, 0),)).validate()


def roundtrip(w: Workload, tmp_path: Path) -> Workload:
    result = export_chakra(w, tmp_path / "et", w.name)
    assert result["ranks"] == w.devices and len(result["files"]) == w.devices
    back, fmt = import_file(result["files"][-1], name=w.name)
    assert fmt == "chakra"
    return back


def test_handmade_roundtrip_identical(tmp_path):
    w = handmade()
    back = roundtrip(w, tmp_path)
    assert back == w
    assert io.dumps(back) == io.dumps(w)
    groups = json.loads((tmp_path / "et" / "comm_group.json").read_text())
    assert groups == {"1": [1, 2]}


def test_topoopt_builder_graph_roundtrip(tmp_path):
    src = tmp_path / "g.fbuf"
    src.write_bytes(build_taskgraph(small_graph()))
    w, _ = import_file(src)
    assert roundtrip(w, tmp_path) == w


def test_topoopt_fixture_roundtrip(tmp_path):
    path = TOPOOPT_FIXTURES / "100dlrm_16.fbuf"
    if not path.exists():
        pytest.skip("../shared absent")
    w, _ = import_file(path)
    assert roundtrip(w, tmp_path) == w


def _strip_extensions(path: Path) -> None:
    """Drop every estimator.* attribute: what a plain Chakra consumer (ASTRA-sim) sees."""
    meta, nodes = read_messages(path.read_bytes())
    for msg in (meta, *nodes):
        keep = [a for a in msg.attr if not a.name.startswith("estimator.")]
        del msg.attr[:]
        msg.attr.extend(keep)
    path.write_bytes(write_messages([meta, *nodes]))


def test_standard_fields_alone_preserve_the_graph(tmp_path):
    w = handmade()
    files = export_chakra(w, tmp_path / "et", "plain")["files"]
    for f in files:
        _strip_extensions(Path(f))
    back, _ = import_file(files[0])
    assert back.devices == 3 and len(back.nodes) == len(w.nodes)
    by_name = {n.name: n for n in back.nodes}
    assert by_name["embed"].duration_s == pytest.approx(1.3e-5)  # whole microseconds on the wire
    assert by_name["mlp"].duration_s is None and by_name["mlp"].flops == 2.5e9
    assert by_name["embed"].input_shapes == ((4, 128), (30522, 768))
    p2p = by_name["x01"]
    assert (p2p.kind, p2p.src, p2p.dst, p2p.comm_bytes) == ("p2p", 0, 1, 65536.0)
    assert by_name["ar_pair"].group == (1, 2) and by_name["ag_all"].group == (0, 1, 2)
    # an all-gather's Chakra comm_size is per rank (ASTRA-sim): 4096 B over 3 ranks -> 1365 B each -> 4095 B
    assert by_name["ar_pair"].collective == "all_reduce" and by_name["ag_all"].comm_bytes == 3 * 1365.0
    ids = {n.id: n.name for n in back.nodes}
    assert sorted(ids[d] for d in by_name["after"].deps) == ["mlp", "x01"]
    assert sorted(ids[d] for d in by_name["ag_all"].deps) == ["ar_pair", "embed"]


def et_node(nid, name, ntype, deps=(), duration=0, **attrs):
    n = EtNode(id=nid, name=name, type=ntype, duration_micros=duration)
    n.data_deps.extend(deps)
    n.attr.extend(make_attr(k, v) for k, v in attrs.items())
    return n


def foreign_ranks() -> list[list]:
    """BUILT FROM THE PUBLISHED SCHEMA (not by Chakra's converters): 2 ranks, comp -> send/recv ->
    comp -> all-reduce of 4 MiB, with rank-local ids that differ between the files."""
    r0 = [et_node(10, "fwd0", COMP, duration=120, num_ops=1000),
          et_node(11, "send", SEND, (10,), comm_size=8192, comm_dst=1, comm_tag=7),
          et_node(12, "allreduce", COLL, (11,), comm_type=0, comm_size=4 << 20)]
    r1 = [et_node(1, "recv", RECV, comm_size=8192, comm_src=0, comm_tag=7),
          et_node(2, "fwd1", COMP, (1,), runtime=80),  # older traces carry runtime as an attribute
          et_node(3, "allreduce", COLL, (2,), comm_type=0, comm_size=4 << 20)]
    return [r0, r1]


def write_ranks(tmp_path: Path, ranks: list[list], prefix: str = "foreign") -> Path:
    for r, nodes in enumerate(ranks):
        (tmp_path / f"{prefix}.{r}.et").write_bytes(write_messages([GlobalMetadata(version="0.0.4"), *nodes]))
    return tmp_path / f"{prefix}.0.et"


def test_foreign_chakra_files(tmp_path):
    w, fmt = import_file(write_ranks(tmp_path, foreign_ranks()))
    assert fmt == "chakra" and w.name == "foreign" and w.devices == 2
    by_name = {n.name: n for n in w.nodes}
    assert [n.kind for n in w.nodes] == ["compute", "p2p", "collective", "compute"]
    assert by_name["fwd0"].duration_s == pytest.approx(120e-6) and by_name["fwd0"].flops == 1000
    send = by_name["send"]
    assert (send.src, send.dst, send.comm_bytes, send.deps) == (0, 1, 8192.0, (by_name["fwd0"].id,))
    assert by_name["fwd1"].deps == (send.id,) and by_name["fwd1"].device == 1
    assert by_name["fwd1"].duration_s == pytest.approx(80e-6)
    ar = by_name["allreduce"]
    assert ar.group == (0, 1) and ar.comm_bytes == float(4 << 20)
    assert set(ar.deps) == {send.id, by_name["fwd1"].id}


def test_multi_rank_inconsistencies(tmp_path):
    ranks = foreign_ranks()
    ranks[1][2] = et_node(3, "allreduce", COLL, (2,), comm_type=0, comm_size=123)
    with pytest.raises(EstimatorError, match="disagree on its comm_size"):
        import_file(write_ranks(tmp_path, ranks, "mismatch"))
    (tmp_path / "gap.0.et").write_bytes((tmp_path / "mismatch.0.et").read_bytes())
    (tmp_path / "gap.2.et").write_bytes((tmp_path / "mismatch.0.et").read_bytes())
    with pytest.raises(EstimatorError, match=r"gap\.1\.et is missing"):
        import_file(tmp_path / "gap.0.et")


def test_astrasim_network_config():
    text = network_config({"name": "ideal", "nodes": 8, "bandwidth_Bps": 300e9, "alpha_s": 0.7e-6}, 16)
    assert "topology: [ Switch ]" in text and "npus_count: [ 16 ]" in text
    # a Switch charges its latency twice per message (NPU -> switch -> NPU): alpha_s / 2
    assert f"bandwidth: [ {300e9 / GIB:.6f} ]" in text and "latency: [ 350.000 ]" in text
    ring = network_config({"name": "ring", "nodes": 4, "link_bandwidth_Bps": 2**30 * 25, "link_latency_s": 5e-6,
                           "alpha_s": 1e-6}, 4)
    assert "topology: [ Ring ]" in ring and "bandwidth: [ 25.000000 ]" in ring and "latency: [ 6000.000 ]" in ring
    with pytest.raises(EstimatorError, match="no ASTRA-sim equivalent"):
        network_config({"name": "lumorph"}, 4)
    with pytest.raises(EstimatorError, match="fabric.alpha_s"):
        network_config({"name": "ideal", "bandwidth_Bps": 1e9}, 4)


def test_astrasim_nvlink_node_is_a_switch_only_with_the_alpha_model():
    node = {"name": "nvlink_leafspine", "nodes": 8, "gpus_per_node": 8, "nvlink_bandwidth_Bps": 450e9,
            "switch_latency_s": 1e-6, "alpha_s": 0.7e-6, "latency_model": "alpha"}
    text = network_config(node, 8)
    # alpha + one switch crossing per message, charged on ASTRA-sim's 2 Switch hops: 1.7 us / 2
    assert "topology: [ Switch ]" in text and "latency: [ 850.000 ]" in text
    assert f"bandwidth: [ {450e9 / GIB:.6f} ]" in text
    with pytest.raises(EstimatorError, match="latency_model=nccl"):
        network_config({**node, "latency_model": "nccl"}, 8)
    with pytest.raises(EstimatorError, match="16 devices span several NVLink nodes"):
        network_config(node, 16)


def test_astrasim_system_config_reductions_and_endpoint_delay():
    """local-mem-bw charges a reduction what memory_bandwidth_Bps does (ASTRA-sim: 3 accesses of
    size / local_mem_bw; GB = 1e9 B there); free reductions truncate to 0 ns for a 1 TiB message;
    endpoint-delay is never 0 (ASTRA-sim aborts on a zero-delay event)."""
    from estimator.workloads.astrasim import system_config

    base = {"name": "ring", "link_bandwidth_Bps": 12.5e9, "link_latency_s": 5e-6, "chunks": 2}
    charged = system_config({**base, "memory_bandwidth_Bps": 15.975e9})
    assert charged["local-mem-bw"] == pytest.approx(3 * 15.975)
    size = 1e6  # ASTRA-sim's delay (ns) for reducing it equals the estimator's size / rate
    assert 3 * size / (charged["local-mem-bw"] * 1e9) * 1e9 == pytest.approx(size / 15.975e9 * 1e9)
    free = system_config({**base, "memory_bandwidth_Bps": 0.0})
    assert int(2**40 / (free["local-mem-bw"] * 1e9) * 1e9) == 0  # each of PacketBundle.cc's 3 terms
    assert system_config(base)["local-mem-bw"] == free["local-mem-bw"]  # absent = free
    assert charged["endpoint-delay"] >= 1 and charged["preferred-dataset-splits"] == 2
    with pytest.raises(EstimatorError, match="fabric.memory_bandwidth_Bps"):
        system_config({**base, "memory_bandwidth_Bps": -1.0})


def test_export_cli(tmp_path):
    wpath = io.save(handmade(), tmp_path / "traces" / "handmade.workload.json")
    proc = run_cli("export", "handmade", f"traces_dir={tmp_path / 'traces'}", f"export.out={tmp_path / 'out'}",
                   "fabric=ideal", "output=json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["ranks"] == 3 and len(result["astrasim"]) == 3
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == ["comm_group.json", "handmade.0.et", "handmade.1.et", "handmade.2.et", "network.yml",
                     "remote_memory.json", "system.json"]
    assert json.loads((tmp_path / "out" / "system.json").read_text())["all-reduce-implementation"] == ["ring"]
    bad = run_cli("export", str(wpath), f"export.out={tmp_path / 'out2'}", "fabric=lumorph", cwd=tmp_path)
    assert bad.returncode == 2 and "no ASTRA-sim equivalent" in bad.stderr and "Traceback" not in bad.stderr
    assert not (tmp_path / "out2").exists()


# ---- bad input ----------------------------------------------------------------------------------
def _boundaries(data: bytes) -> set[int]:
    pos, out = 0, {0}
    while pos < len(data):
        length, body = decode_varint(data, pos)
        pos = body + length
        out.add(pos)
    return out


def _single_rank(nodes: list) -> bytes:
    return write_messages([GlobalMetadata(version="0.0.4"), *nodes])


def _inconsistent(rng: random.Random) -> list[bytes]:
    out = []
    for k in range(60):
        case = k % 10
        size = rng.randrange(1, 1 << 20)
        if case == 0:  # dangling dependency
            nodes = [et_node(1, "a", COMP, duration=5), et_node(2, "b", COMP, (1, 99 + k), duration=5)]
        elif case == 1:  # cycle
            nodes = [et_node(1, "a", COMP, (2,), duration=5), et_node(2, "b", COMP, (1,), duration=5)]
        elif case == 2:  # negative size
            nodes = [et_node(1, "c", COLL, comm_type=0, comm_size=-size)]
        elif case == 3:  # collective the estimator has no model for (SCATTER)
            nodes = [et_node(1, "c", COLL, comm_type=4, comm_size=size)]
        elif case == 4:  # send nobody receives
            nodes = [et_node(1, "s", SEND, comm_size=size, comm_dst=0, comm_tag=k)]
        elif case == 5:  # duplicate id
            nodes = [et_node(1, "a", COMP, duration=5), et_node(1, "b", COMP, duration=5)]
        elif case == 6:  # invalid node type
            nodes = [et_node(1, "x", rng.choice([0, 8, 11, 42]))]
        elif case == 7:  # collective without a size
            nodes = [et_node(1, "c", COLL, comm_type=0)]
        elif case == 8:  # size of the wrong type
            nodes = [et_node(1, "c", COLL, comm_type=0, comm_size="big")]
        else:  # negative work
            nodes = [et_node(1, "a", COMP, num_ops=-size)]
        out.append(_single_rank(nodes))
    return out


def test_bad_files_rejected_in_process(tmp_path):
    rng = random.Random(31337)
    good = Path(export_chakra(handmade(), tmp_path / "et", "h")["files"][1]).read_bytes()
    cuts = sorted(set(range(1, len(good) - 1)) - _boundaries(good))  # a cut between messages is a valid trace
    truncated = [good[:c] for c in rng.sample(cuts, 80)]
    wrong_magic = [bytes([b]) + good[1:] for b in rng.sample(range(0x80, 0x100), 20)]  # broken length prefix
    blobs = truncated + random_blobs(rng, 50) + wrong_magic + with_prefix(good, rng, 10, 2) + _inconsistent(rng)
    assert len(blobs) >= 200
    joined = "\n".join(assert_rejected(tmp_path, blobs, "chakra", ".et"))
    for problem in ("past the end", "does not decode", "missing node", "cycle", "is negative",
                    "unsupported collective", "no matching recv", "duplicate node id", "unsupported node type",
                    "missing attribute", "must be an integer"):
        assert problem in joined, problem


def test_bad_files_rejected_by_cli(tmp_path):
    from fixtures.importing import assert_cli_rejects

    assert_cli_rejects(tmp_path, [b"\x05\x0a\x03abc\xff\xff", _inconsistent(random.Random(0))[1]], ".et")


def test_standard_attributes_use_the_feeder_types(tmp_path):
    """ASTRA-sim's Chakra feeder reads each standard attribute as one protobuf type."""
    expected = {"is_cpu_op": "bool_val", "num_ops": "int64_val", "tensor_size": "uint64_val",
                "comm_type": "int64_val", "comm_size": "int64_val", "comm_src": "int32_val", "comm_dst": "int32_val",
                "comm_tag": "int32_val", "pg_name": "string_val"}
    seen = set()
    for f in export_chakra(handmade(), tmp_path / "et", "h")["files"]:
        meta, nodes = read_messages(Path(f).read_bytes())
        assert meta.version == "0.0.4"
        for node in nodes:
            for a in node.attr:
                if a.name in expected:
                    assert a.WhichOneof("value") == expected[a.name], a.name
                    seen.add(a.name)
    assert seen == set(expected)


def _random_workload(rng: random.Random, n: int, devices: int) -> Workload:
    nodes = []
    for i in range(n):
        deps = tuple(sorted(rng.sample(range(i), min(i, rng.randrange(0, 3)))))
        kind = rng.choice(["compute", "compute", "collective", "p2p"])
        if kind == "compute":
            nodes.append(Node(i, f"op{i}", deps=deps, device=rng.randrange(devices), op=rng.choice(["mm", "relu"]),
                              phase=rng.choice(["forward", "backward", ""]), flops=float(rng.randrange(0, 10**9)),
                              duration_s=rng.choice([None, rng.random() * 1e-3]), attrs={"k": i}))
        elif kind == "collective":
            size = rng.randrange(1, devices + 1)
            group = tuple(sorted(rng.sample(range(devices), size))) if rng.random() < 0.7 else ()
            nodes.append(Node(i, f"coll{i}", kind="collective", deps=deps, collective=rng.choice(
                ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all"]),
                comm_bytes=float(rng.randrange(0, 1 << 30)), group=group, device=group[0] if group else 0))
        else:
            src, dst = rng.sample(range(devices), 2)
            nodes.append(Node(i, f"p2p{i}", kind="p2p", deps=deps, src=src, dst=dst, device=src,
                              comm_bytes=float(rng.randrange(1, 1 << 24))))
    return Workload(name="random", nodes=tuple(nodes), devices=devices).validate()


def test_random_workloads_roundtrip(tmp_path):
    rng = random.Random(2026)
    for k in range(25):
        w = _random_workload(rng, rng.randrange(1, 40), rng.randrange(2, 6))
        result = export_chakra(w, tmp_path / f"r{k}", "random")
        back, _ = import_file(result["files"][0], name="random")
        assert back == w, k
