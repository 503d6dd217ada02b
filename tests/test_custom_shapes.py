"""``custom`` files of a standard shape price like their schedules compiled on the file's graph.

A ``builder:`` file is priced by its named twin's closed forms / analytic routing
(:mod:`estimator.fabrics.custom`); every algorithm of every collective is checked against what the
graph path gives (the schedule with the custom fabric's parameters compiled on the built graph),
for each shape, whole and partial groups, and shapes whose twin parameters differ.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from estimator.collectives.algorithms import algorithm as lookup
from estimator.collectives.params import AlgoParams
from estimator.collectives.pricing import PricingParams, compile_schedule
from estimator.errors import EstimatorError
from estimator.fabrics.registry import make_fabric
from estimator.topology.loader import load_spec, load_topology

REPO = Path(__file__).resolve().parents[1]
BW, LAT = 50.0e9, 1.0e-6
ALPHA, MEM = 0.3e-6, 80.0e9
SHAPES = [  # (builder block, nodes)
    ({"type": "ring", "n": 8, "bandwidth_Bps": BW, "latency_s": LAT}, 8),
    ({"type": "ring", "n": 7, "bandwidth_Bps": BW, "latency_s": LAT, "bidirectional": False}, 7),
    ({"type": "ring", "n": 12, "bandwidth_Bps": BW, "latency_s": LAT}, 8),
    ({"type": "torus2d", "rows": 4, "cols": 4, "bandwidth_Bps": BW, "latency_s": LAT}, 16),
    ({"type": "torus2d", "rows": 3, "cols": 4, "bandwidth_Bps": BW, "latency_s": 2 * LAT}, 12),
    ({"type": "torus2d", "rows": 4, "cols": 3, "bandwidth_Bps": BW, "latency_s": LAT}, 12),  # not most square
    ({"type": "torus2d", "rows": 2, "cols": 8, "bandwidth_Bps": BW, "latency_s": LAT}, 16),
    ({"type": "torus2d", "rows": 4, "cols": 4, "bandwidth_Bps": BW, "latency_s": LAT}, 8),
    ({"type": "fat_tree", "k": 4, "n": 16, "bandwidth_Bps": BW, "latency_s": LAT}, 16),
    ({"type": "fat_tree", "k": 4, "n": 12, "bandwidth_Bps": BW, "latency_s": LAT}, 10),
    ({"type": "bcube", "radix": 4, "levels": 2, "port_bw": BW, "latency_s": LAT}, 16),
    ({"type": "bcube", "radix": 2, "levels": 3, "port_bw": BW, "latency_s": LAT}, 8),
    ({"type": "bcube", "radix": 2, "levels": 4, "port_bw": BW, "latency_s": 2 * LAT}, 16),
    ({"type": "bcube", "radix": 3, "levels": 2, "port_bw": BW, "latency_s": LAT}, 7),
    ({"type": "star", "n": 8, "bandwidth_Bps": BW, "latency_s": LAT}, 8),
    ({"type": "star", "n": 9, "bandwidth_Bps": BW, "latency_s": LAT}, 6),
    ({"type": "rail_optimized", "n": 16, "per_node": 4, "nvlink_bw": 6 * BW, "nic_bw": BW, "latency_s": LAT}, 16),
    ({"type": "rail_optimized", "n": 16, "per_node": 4, "nvlink_bw": 6 * BW, "nic_bw": BW, "latency_s": LAT}, 8),
    ({"type": "rail_optimized", "n": 12, "per_node": 2, "nvlink_bw": BW / 2, "nic_bw": BW, "latency_s": LAT}, 12),
    ({"type": "rail_optimized", "n": 8, "per_node": 8, "nvlink_bw": 6 * BW, "nic_bw": BW, "latency_s": LAT}, 8),
    ({"type": "leaf_spine", "n": 16, "per_leaf": 4, "endpoint_bw": BW, "spines": 2, "uplink_bw": BW,
      "leaf_latency_s": LAT, "uplink_latency_s": LAT, "spine_latency_s": LAT}, 16),
    ({"type": "leaf_spine", "n": 14, "per_leaf": 4, "endpoint_bw": 2 * BW, "spines": 3, "uplink_bw": BW / 3,
      "leaf_latency_s": LAT, "uplink_latency_s": 2 * LAT, "spine_latency_s": 3 * LAT}, 11),
    ({"type": "leaf_spine", "n": 8, "per_leaf": 8, "endpoint_bw": BW, "spines": 2, "uplink_bw": BW,
      "leaf_latency_s": LAT, "uplink_latency_s": LAT, "spine_latency_s": LAT}, 8),
]
COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "gather", "all_to_all")
EXTRA = {"all_reduce": ("radix", "radix8")}


def _file(tmp_path, builder: dict) -> str:
    path = tmp_path / f"{builder['type']}.yaml"
    path.write_text(json.dumps({"name": builder["type"], "builder": builder}))  # JSON is YAML
    return str(path)


def _graph_price(topo, collective: str, algorithm: str, n: int, nbytes: float) -> float:
    """What the custom fabric gave before shapes were priced analytically: the schedule (default
    algorithm parameters) compiled on the file's graph."""
    sched = lookup(algorithm).schedule(collective, n, 1.0, AlgoParams())
    return compile_schedule(sched, topo, PricingParams(alpha_s=ALPHA, memory_bandwidth_Bps=MEM),
                            list(range(n))).time(nbytes)


@pytest.mark.parametrize("builder,nodes", SHAPES, ids=[f"{b['type']}-{n}" for b, n in SHAPES])
def test_shape_prices_equal_the_graph(tmp_path, builder, nodes):
    path = _file(tmp_path, builder)
    fabric = make_fabric({"name": "custom", "nodes": nodes, "topology": path, "alpha_s": ALPHA,
                          "memory_bandwidth_Bps": MEM})
    assert fabric._twin is not None  # every shape prices analytically
    topo = load_topology(path)
    checked = 0
    for coll in COLLECTIVES:
        for algo in (*fabric.algorithms(coll), *EXTRA.get(coll, ())):
            for n in sorted({nodes, nodes // 2}):
                try:
                    want = _graph_price(topo, coll, algo, n, 3.0e6)
                except EstimatorError:
                    with pytest.raises(EstimatorError):
                        fabric.collective_cost(coll, 3.0e6, algo, group_size=n)
                    continue
                got = fabric.collective_cost(coll, 3.0e6, algo, group_size=n).time_s
                assert got == pytest.approx(want, rel=1e-12), (coll, algo, n)
                checked += 1
    assert checked > 40
    # auto picks the cheapest of what the graph gives
    best = min(_graph_price(topo, "all_reduce", a, nodes, 3.0e6) for a in fabric.algorithms("all_reduce")
               if _valid("all_reduce", a, nodes))
    assert fabric.collective_cost("all_reduce", 3.0e6, "auto").time_s == pytest.approx(best, rel=1e-12)


def _valid(coll: str, algo: str, n: int) -> bool:
    try:
        lookup(algo).check(coll, n, AlgoParams())
    except EstimatorError:
        return False
    return True


def test_regular_shapes_build_no_graph(tmp_path):
    """A standard shape is priced without its graph; an algorithm without analytic routing builds it."""
    path = _file(tmp_path, {"type": "torus2d", "rows": 8, "cols": 8, "bandwidth_Bps": BW, "latency_s": LAT})
    fabric = make_fabric({"name": "custom", "nodes": 64, "topology": path})
    for algo in ("ring", "torus2d", "halving_doubling", "double_binary_tree"):
        fabric.collective_cost("all_reduce", 1e6, algo)
    fabric.collective_cost("all_reduce", 1e6, "auto")
    assert fabric._topos == {}
    fabric.collective_cost("all_to_all", 1e6, "pairwise")
    assert pickle.loads(pickle.dumps(fabric)).collective_cost("all_reduce", 1e6).time_s == \
        fabric.collective_cost("all_reduce", 1e6).time_s


@pytest.mark.parametrize("builder,nodes", SHAPES, ids=[f"{b['type']}-{n}" for b, n in SHAPES])
def test_all_reduce_builds_no_graph(tmp_path, builder, nodes):
    fabric = make_fabric({"name": "custom", "nodes": nodes, "topology": _file(tmp_path, builder)})
    for algo in ("default", "ring", "double_binary_tree", "auto"):
        fabric.collective_cost("all_reduce", 1e6, algo)
    assert fabric._topos == {}


@pytest.mark.parametrize("builder,match", [
    ({"type": "ring", "n": 8, "bandwidth_Bps": 0.0, "latency_s": LAT}, "positive bandwidth"),
    ({"type": "star", "n": 8, "bandwidth_Bps": BW, "latency_s": -1.0}, "non-negative latency"),
    ({"type": "fat_tree", "k": 3, "n": 8, "bandwidth_Bps": BW, "latency_s": LAT}, "even integer"),
    ({"type": "fat_tree", "k": 4, "n": 17, "bandwidth_Bps": BW, "latency_s": LAT}, "at most 16 hosts"),
    ({"type": "leaf_spine", "n": 8, "per_leaf": 0, "endpoint_bw": BW, "spines": 1, "uplink_bw": BW,
      "leaf_latency_s": 0.0, "uplink_latency_s": 0.0, "spine_latency_s": 0.0}, "per_leaf must be >= 1"),
])
def test_bad_shape_values_fail_on_load(tmp_path, builder, match):
    """What building would refuse is refused when the file is read (nothing is built then)."""
    path = _file(tmp_path, builder)
    with pytest.raises(EstimatorError, match=match):
        load_spec(path)
    with pytest.raises(EstimatorError, match=match):
        make_fabric({"name": "custom", "nodes": 2, "topology": path})


def test_spec_counts_endpoints_without_building(tmp_path):
    shapes = {"torus2d": ({"rows": 3, "cols": 5, "bandwidth_Bps": BW, "latency_s": LAT}, 15),
              "bcube": ({"radix": 3, "levels": 2, "port_bw": BW, "latency_s": LAT}, 9),
              "rail_optimized": ({"n": 12, "per_node": 4, "nvlink_bw": BW, "nic_bw": BW, "latency_s": LAT}, 12)}
    for kind, (args, count) in shapes.items():
        path = _file(tmp_path, {"type": kind, **args})
        spec = load_spec(path)
        assert spec.endpoints == count == spec.build().num_endpoints
    with pytest.raises(EstimatorError, match="has 15 endpoints"):
        make_fabric({"name": "custom", "nodes": 16, "topology": _file(tmp_path, {"type": "torus2d", **shapes["torus2d"][0]})})


def test_explicit_graph_compiles_once_per_file(tmp_path):
    """Configs of one explicit file that differ in alpha_s / memory bandwidth share its compiled
    schedules and price as compiling with their own parameters."""
    from estimator.fabrics import custom

    path = tmp_path / "leaves.yaml"
    path.write_text((REPO / "topologies" / "two_leaves.yaml").read_text())
    topo = load_topology(path)
    sched = lookup("double_binary_tree").schedule("all_reduce", 8, 1.0, AlgoParams())
    custom._GRAPH_COMPILED.clear()  # another test may have compiled this file's schedule already
    before = len(custom._GRAPH_COMPILED)
    for alpha, mem in ((0.0, 0.0), (2e-6, 50e9), (5e-6, 10e9)):
        fabric = make_fabric({"name": "custom", "nodes": 8, "topology": str(path), "alpha_s": alpha,
                              "memory_bandwidth_Bps": mem})
        got = fabric.collective_cost("all_reduce", 4e6, "double_binary_tree").time_s
        want = compile_schedule(sched, topo, PricingParams(alpha_s=alpha, memory_bandwidth_Bps=mem)).time(4e6)
        assert got == pytest.approx(want, rel=1e-12)
    assert len(custom._GRAPH_COMPILED) == before + 1


def test_same_structure_shares_route_searches(monkeypatch):
    """Topologies that differ only in link numbers share their hop distances (routes depend on the
    structure only); prices are those of a topology that searched on its own."""
    from estimator.topology import builders, graph

    sched = lookup("direct").schedule("all_to_all", 16, 1e6)
    params = PricingParams(alpha_s=ALPHA)
    first = builders.leaf_spine(16, 4, 100e9, 2, 50e9, 1e-6, 1e-6, 1e-6)
    second = builders.leaf_spine(16, 4, 25e9, 2, 10e9, 3e-6, 2e-6, 1e-6)
    other = builders.leaf_spine(16, 8, 25e9, 2, 10e9, 3e-6, 2e-6, 1e-6)
    for topo in (first, second, other):
        compile_schedule(sched, topo, params)
    assert second._dist is first._dist and other._dist is not first._dist and len(first._dist) >= 16
    shared = compile_schedule(sched, second, params).time(1e6)
    monkeypatch.setattr(graph, "_SHARED_DIST", {})
    alone = builders.leaf_spine(16, 4, 25e9, 2, 10e9, 3e-6, 2e-6, 1e-6)
    assert compile_schedule(sched, alone, params).time(1e6) == shared
    assert alone._dist is not first._dist
