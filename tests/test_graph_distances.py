"""The batched BFS (every endpoint's distances at once, for small graphs) gives exactly the
per-destination BFS's distances, and the routes and prices built on them are unchanged."""

from __future__ import annotations

import numpy as np
import pytest

from estimator.fabrics.ocs import binary_tree_topology
from estimator.fabrics.registry import make_fabric
from estimator.topology import builders, graph
from estimator.topology.graph import Topology


def _one_way_ring_with_a_dead_end() -> Topology:
    topo = Topology("dead_end", "shortest")
    eps = [topo.add_endpoint(f"n{i}") for i in range(5)]
    for i in range(4):  # one direction only: n4 reaches nobody, nobody reaches back to n0
        topo.add_link(eps[i], eps[i + 1], 1e9, 1e-6)
    return topo


TOPOLOGIES = {
    "btree64": lambda: binary_tree_topology(64, 1e10, 5e-6),
    "torus4x6": lambda: builders.torus2d(4, 6, 1e10, 1e-6),
    "fattree4": lambda: builders.fat_tree(4, 16, 1e10, 1e-6),
    "bcube3x2": lambda: builders.bcube(3, 2, 1e10, 1e-6),
    "one_way": _one_way_ring_with_a_dead_end,
}


def _per_destination(topo: Topology, monkeypatch) -> dict[int, np.ndarray]:
    monkeypatch.setattr(graph, "ALL_TARGETS_AT_ONCE", 0)
    out = {ep: topo._distances_to(ep).copy() for ep in topo.endpoints}
    monkeypatch.undo()
    return out


@pytest.mark.parametrize("name", sorted(TOPOLOGIES))
def test_batched_distances_equal_per_destination_bfs(name, monkeypatch):
    graph._SHARED_DIST.clear()
    expected = _per_destination(TOPOLOGIES[name](), monkeypatch)
    graph._SHARED_DIST.clear()
    batched = TOPOLOGIES[name]()._distances_to_every_endpoint()
    assert batched.keys() == expected.keys()
    for ep, dist in expected.items():
        assert np.array_equal(batched[ep], dist), ep
    if name == "one_way":
        assert (batched[TOPOLOGIES[name]().endpoints[0]] == -1).sum() == 4  # unreachable stays -1


def test_ocs_btree_prices_are_bit_identical_to_per_destination_routing(monkeypatch):
    params = {"name": "ocs", "topology": "btree", "nodes": 64}
    graph._SHARED_DIST.clear()
    batched = {a: make_fabric(params).collective_cost("all_reduce", 2**26, a).time_s
               for a in ("ring", "binary_tree", "halving_doubling", "auto")}
    graph._SHARED_DIST.clear()
    monkeypatch.setattr(graph, "ALL_TARGETS_AT_ONCE", 0)
    single = {a: make_fabric(params).collective_cost("all_reduce", 2**26, a).time_s for a in batched}
    assert batched == single
