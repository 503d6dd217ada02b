"""FlexFlow-train graphs. Every file here is BUILT BY THESE TESTS from the published schema
(flexflow-train lib/pcg/include/pcg/file_format/v1 + op-attrs dtgen tomls), not produced by
FlexFlow itself. Plus 200+ bad files."""

from __future__ import annotations

import copy
import json
import random

from fixtures.importing import assert_cli_rejects, assert_rejected, random_blobs, truncations

from estimator.workloads.importers import import_file


def tensor(dims, dtype="FLOAT", grad="YES"):
    return {"shape": {"dims": {"ff_ordered": list(dims)}, "data_type": dtype}, "create_grad": grad}


def ptensor(shards, sum_degree=1, discard=1):
    return {"__type": "ParallelTensorAttrs",
            "shape": {"dims": {"shard_dims": {"ff_ordered": [{"size": s, "degree": d} for s, d in shards]},
                               "replica_dims": {"sum_degree": {"value": sum_degree},
                                                "discard_copy_degree": {"value": discard}}},
                      "data_type": "FLOAT"}, "create_grad": "YES"}


def layer(key, name, **attrs):
    return {"__type": "LayerAttrs", "op_attrs": {"type": key, "value": attrs}, "name": name}


def graph(layers, outputs, edges):
    n = len(layers)
    return {"raw_graph": {"node_labels": {str(i): lab for i, lab in enumerate(layers)},
                          "output_labels": {str(i): out for i, out in enumerate(outputs)},
                          "graph": {"nodes": list(range(n)),
                                    "edges": [{"srcNode": s, "srcIdx": si, "dstNode": d, "dstIdx": di}
                                              for s, si, d, di in edges]}}}


def mlp_cg():
    """V1ComputationGraph (kwarg slots): x[8,16] -> linear(W1[16,32]) -> relu -> linear(W2[32,4])."""
    layers = [layer("input", "x", shape=None), layer("weight", "W1"), layer("linear", "fc1", out_channels=32,
              use_bias=False, data_type="FLOAT"), layer("element_unary", "relu", op_type="RELU"),
              layer("weight", "W2"), layer("linear", "fc2", out_channels=4, use_bias=False, data_type="FLOAT")]
    outputs = [{"OUTPUT": tensor([8, 16], grad="NO")}, {"OUTPUT": tensor([16, 32])}, {"OUTPUT": tensor([8, 32])},
               {"OUTPUT": tensor([8, 32])}, {"OUTPUT": tensor([32, 4])}, {"OUTPUT": tensor([8, 4])}]
    edges = [(1, "OUTPUT", 2, "WEIGHT"), (0, "OUTPUT", 2, "INPUT"), (2, "OUTPUT", 3, "INPUT"),
             (4, "OUTPUT", 5, "WEIGHT"), (3, "OUTPUT", 5, "INPUT")]
    return graph(layers, outputs, edges)


def dp_pcg():
    """V1ParallelComputationGraph, data parallel on 2 devices: x sharded on batch, W replicated,
    linear on 2 shards, combine gathers the output."""
    layers = [layer("input", "x"), layer("weight", "W"), layer("replicate", "W_rep", replicate_degree=2),
              layer("linear", "fc", out_channels=32, use_bias=False), layer("combine", "gather", combine_dim=0,
                                                                           combine_degree=2)]
    outputs = [[ptensor([(8, 2), (16, 1)])], [ptensor([(16, 1), (32, 1)])], [ptensor([(16, 1), (32, 1)], discard=2)],
               [ptensor([(8, 2), (32, 1)])], [ptensor([(8, 1), (32, 1)])]]
    edges = [(1, 0, 2, 0), (0, 0, 3, 0), (2, 0, 3, 1), (3, 0, 4, 0)]
    return graph(layers, outputs, edges)


def write(tmp_path, doc, name="ff.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def test_computation_graph_costs(tmp_path):
    w, fmt = import_file(write(tmp_path, mlp_cg()))
    assert fmt == "flexflow" and w.devices == 1 and w.meta["flexflow"]["kind"] == "computation_graph"
    fwd = {n.name: n for n in w.nodes if n.phase == "forward"}
    assert fwd["fc1"].flops == 2 * 8 * 32 * 16 and fwd["relu"].flops == 8 * 32 and fwd["fc2"].flops == 2 * 8 * 4 * 32
    assert fwd["fc1"].mem_bytes == (8 * 16 + 16 * 32 + 8 * 32) * 4
    assert fwd["fc1"].input_shapes == ((8, 16), (16, 32))  # INPUT slot before WEIGHT
    assert w.forward_flops == 2 * 8 * 32 * 16 + 8 * 32 + 2 * 8 * 4 * 32
    bwd = {n.name: n for n in w.nodes if n.phase == "backward"}
    assert bwd["fc1.grad"].flops == 2 * fwd["fc1"].flops and bwd["relu.grad"].flops == fwd["relu"].flops
    assert bwd["fc1.grad"].deps == (bwd["relu.grad"].id,)
    assert sorted((g.name, g.nbytes) for g in w.gradients) == [("W1", 16 * 32 * 4), ("W2", 32 * 4 * 4)]
    assert [g.name for g in sorted(w.gradients, key=lambda g: g.order)] == ["W2", "W1"]
    assert w.params == 16 * 32 + 32 * 4 and w.batch_size == 8


def test_layer_held_weights_and_conv(tmp_path):
    doc = graph([layer("input", "x"), layer("linear", "fc", out_channels=5, use_bias=True)],
                [[tensor([4, 10])], [tensor([4, 5])]], [(0, 0, 1, 0)])
    w, _ = import_file(write(tmp_path, doc, "lin.json"))
    fc = next(n for n in w.nodes if n.name == "fc")
    assert fc.flops == 2 * 4 * 5 * 10 + 4 * 5 and w.params == 55 and w.gradient_bytes == 55 * 4
    conv = graph([layer("input", "img"), layer("conv2d", "c1", out_channels=8, kernel_h=3, kernel_w=3, stride_h=1,
                                               stride_w=1, padding_h=1, padding_w=1, groups=1, use_bias=False)],
                 [[tensor([2, 3, 32, 32])], [tensor([2, 8, 32, 32])]], [(0, 0, 1, 0)])
    w, _ = import_file(write(tmp_path, conv, "conv.json"))
    c1 = next(n for n in w.nodes if n.name == "c1")
    assert c1.flops == 2 * (2 * 8 * 32 * 32) * 3 * 9 and c1.op_class == "conv" and w.params == 8 * 3 * 9


def test_parallel_computation_graph(tmp_path):
    w, _ = import_file(write(tmp_path, dp_pcg()))
    assert w.devices == 2 and w.meta["flexflow"]["kind"] == "parallel_computation_graph"
    fc = [n for n in w.nodes if n.op == "linear" and n.phase == "forward"]
    assert len(fc) == 2 and {n.device for n in fc} == {0, 1} and all(n.flops == 2 * 8 * 32 * 16 / 2 for n in fc)
    colls = {(n.collective, n.phase): n for n in w.nodes if n.kind == "collective"}
    assert set(colls) == {("broadcast", "forward"), ("all_gather", "forward"), ("reduce_scatter", "backward"),
                          ("all_reduce", "backward")}
    assert colls[("all_gather", "forward")].comm_bytes == 8 * 32 * 4  # the gathered buffer
    assert colls[("reduce_scatter", "backward")].comm_bytes == 8 * 32 * 4
    assert colls[("all_reduce", "backward")].comm_bytes == 16 * 32 * 4  # the data-parallel gradient sync
    assert colls[("all_gather", "forward")].group == (0, 1)
    assert set(colls[("all_gather", "forward")].deps) == {n.id for n in fc}


def test_mapped_parallel_computation_graph(tmp_path):
    doc = {"pcg": dp_pcg(), "mapped_tasks": {
        "3": {"shard_bindings": [{"machine_space_coordinate": {"node_idx": 1, "device_idx": 0, "device_type": "GPU"}},
                                 {"machine_space_coordinate": {"node_idx": 1, "device_idx": 1, "device_type": "GPU"}}]}}}
    w, _ = import_file(write(tmp_path, doc, "mapped.json"))
    assert w.meta["flexflow"]["kind"] == "mapped_parallel_computation_graph" and w.devices == 4
    fc = [n for n in w.nodes if n.op == "linear" and n.phase == "forward"]
    assert sorted(n.device for n in fc) == [2, 3]
    gather = next(n for n in w.nodes if n.collective == "all_gather")
    assert gather.group == (0, 2, 3)  # unmapped combine output stays on device 0


def _inconsistent(rng: random.Random) -> list[bytes]:
    out = []
    for k in range(70):
        case = k % 14
        doc = mlp_cg() if case < 8 or case == 13 else dp_pcg()
        raw = doc["raw_graph"]
        edges = raw["graph"]["edges"]
        if case == 0:  # dangling edge
            edges.append({"srcNode": 2, "srcIdx": "OUTPUT", "dstNode": 50 + k, "dstIdx": "INPUT"})
        elif case == 1:  # cycle
            edges.append({"srcNode": 5, "srcIdx": "OUTPUT", "dstNode": 2, "dstIdx": "BIAS"})
        elif case == 2:  # negative size
            raw["output_labels"]["2"]["OUTPUT"]["shape"]["dims"]["ff_ordered"][0] = -rng.randrange(1, 64)
        elif case == 3:  # a node without a label
            del raw["node_labels"][str(rng.randrange(6))]
        elif case == 4:  # an edge from an output that does not exist
            edges[0]["srcIdx"] = "NOPE"
        elif case == 5:  # no cost model for this layer type
            raw["node_labels"]["3"]["op_attrs"]["type"] = "quantum_fourier"
        elif case == 6:  # unknown element type
            raw["output_labels"]["0"]["OUTPUT"]["shape"]["data_type"] = "COMPLEX256"
        elif case == 7:  # node listed twice
            raw["graph"]["nodes"].append(0)
        elif case == 8:  # degree that does not divide its dimension
            raw["output_labels"]["3"][0]["shape"]["dims"]["shard_dims"]["ff_ordered"][0]["degree"] = 3
        elif case == 9:  # zero degree
            raw["output_labels"]["0"][0]["shape"]["dims"]["shard_dims"]["ff_ordered"][0]["degree"] = 0
        elif case == 10:  # mapping with the wrong number of devices
            doc = {"pcg": doc, "mapped_tasks": {"3": [{"node_idx": 0, "device_idx": 0}]}}
        elif case == 11:  # conv2d on a 2-D input
            raw["node_labels"]["3"] = layer("conv2d", "bad", out_channels=4, kernel_h=3, kernel_w=3)
        elif case == 12:  # a degree that would mean 2**30 tasks
            dim = raw["output_labels"]["3"][0]["shape"]["dims"]["shard_dims"]["ff_ordered"][0]
            dim["size"], dim["degree"] = 2**31, 2**30
        else:  # edge endpoints must be ids
            edges[0]["srcNode"] = {"id": 1}
        out.append(json.dumps(doc).encode())
    return out


def test_bad_files_rejected_in_process(tmp_path):
    rng = random.Random(99)
    good = json.dumps(mlp_cg()).encode()
    pcg = json.dumps(dp_pcg()).encode()
    wrong_magic = [b"[" + good[1:], b"\x7fELF" + good[4:], json.dumps({"raw_graph": []}).encode(),
                   json.dumps({"something": "else"}).encode(), b"{}", json.dumps(copy.deepcopy(mlp_cg())["raw_graph"]).encode()]
    blobs = truncations(good, rng, 50) + truncations(pcg, rng, 30) + random_blobs(rng, 50) + wrong_magic * 3 \
        + _inconsistent(rng)
    assert len(blobs) >= 200
    joined = "\n".join(assert_rejected(tmp_path, blobs, "flexflow", ".json"))
    for problem in ("JSON error", "does not exist", "cycle", "finite number >= 1", "no entry in node_labels",
                    "has no output", "no FLOP model", "unknown dtype", "twice", "not divisible", "mapped device",
                    "must be 4-D", "no raw_graph", "exceeds the limit", "expected a number or string id"):
        assert problem in joined, problem


def test_bad_files_rejected_by_cli(tmp_path):
    good = json.dumps(mlp_cg()).encode()
    assert_cli_rejects(tmp_path, [good[:200], _inconsistent(random.Random(5))[1]], ".json",
                       "importer.format=flexflow")
