"""Explicit schedules priced from step patterns (estimator/collectives/patterns.py) by analytic routing
equal the explicit schedule compiled on the graph, for every collective and algorithm a fabric offers."""

from __future__ import annotations

import numpy as np
import pytest

from estimator.collectives.algorithms import COLLECTIVES, algorithm
from estimator.collectives.pricing import compile_schedule
from estimator.errors import EstimatorError
from estimator.fabrics.registry import make_fabric
from tests.schedule_checks import check_analytic_equals_graph

FABRICS = [
    {"name": "ideal", "nodes": 12, "memory_bandwidth_Bps": 1e11},
    {"name": "ideal", "nodes": 16, "alpha_s": 1e-6},
    {"name": "nvlink_leafspine", "nodes": 32, "gpus_per_node": 8, "latency_model": "alpha"},
    {"name": "nvlink_leafspine", "nodes": 24, "gpus_per_node": 4, "uplinks": 2, "latency_model": "alpha"},
    {"name": "nvlink_leafspine", "nodes": 32, "gpus_per_node": 8},
    {"name": "nvlink_leafspine", "nodes": 32, "gpus_per_node": 8, "latency_model": "nccl_hw"},
    {"name": "ring", "nodes": 12, "memory_bandwidth_Bps": 1e11},
    {"name": "ring", "nodes": 9, "bidirectional": False},
    {"name": "torus2d", "nodes": 16},
    {"name": "torus2d", "nodes": 12, "rows": 3, "cols": 4},
    {"name": "torus2d", "nodes": 30, "rows": 5, "cols": 6},
    {"name": "nvlink_leafspine", "nodes": 24, "gpus_per_node": 8, "uplinks": 3, "latency_model": "alpha"},
    {"name": "fattree", "nodes": 16, "k": 4},
    {"name": "fattree", "nodes": 32, "k": 6, "memory_bandwidth_Bps": 1e11},
    {"name": "fattree", "nodes": 36, "k": 6},
    {"name": "superpod", "nodes": 32, "gpus_per_node": 4},
    {"name": "superpod", "nodes": 24, "gpus_per_node": 8, "memory_bandwidth_Bps": 1e11},
    {"name": "superpod", "nodes": 12, "gpus_per_node": 2},
    {"name": "bcube", "nodes": 16, "radix": 4},
    {"name": "bcube", "nodes": 27, "radix": 3, "memory_bandwidth_Bps": 1e11},
    {"name": "bcube", "nodes": 16, "radix": 2},
    {"name": "sipac", "nodes": 16, "r": 4, "l": 1},
    {"name": "sipac", "nodes": 27, "r": 3, "l": 2},
    {"name": "sipac", "nodes": 16, "r": 2, "l": 3},
    {"name": "ocs", "nodes": 16, "topology": "ring"},
    {"name": "ocs", "nodes": 16, "topology": "torus2d"},
]


@pytest.mark.parametrize("params", FABRICS, ids=lambda p: f"{p['name']}{p['nodes']}{p.get('topology', '')}")
def test_every_offered_algorithm_equals_its_compiled_schedule(params):
    f = make_fabric(params)
    done = check_analytic_equals_graph(f, [c for c in COLLECTIVES if c != "p2p"], (f.nodes, f.nodes - 1))
    checked = sum(coll in ("broadcast", "reduce", "gather", "all_to_all") for coll, _, _ in done)
    assert checked >= 4


def test_declared_translates_are_shifts():
    """A step marked ``translate = (family, offset)`` is its family's offset-0 step shifted by offset ranks."""
    from estimator.collectives.params import AlgoParams
    from estimator.collectives.patterns import patterns

    pats = patterns("pipelined_chain4", "broadcast", 11, AlgoParams())
    marked = [p for p in pats if p.translate]
    base = {p.translate[0]: p for p in marked if p.translate[1] == 0}
    assert len(marked) == 11 - 1 - 4 + 1 and len(base) == 1
    for p in marked:
        b = base[p.translate[0]]
        assert sorted(zip(p.src.tolist(), p.dst.tolist(), strict=True)) == sorted(
            zip((b.src + p.translate[1]).tolist(), (b.dst + p.translate[1]).tolist(), strict=True))
        assert p.size.tolist() == b.size.tolist()


@pytest.mark.parametrize("params", [{"name": "ring", "nodes": 40}, {"name": "bcube", "nodes": 27, "radix": 3},
                                    {"name": "nvlink_leafspine", "nodes": 32, "gpus_per_node": 8,
                                     "latency_model": "alpha"}, {"name": "torus2d", "nodes": 24, "rows": 4, "cols": 6},
                                    {"name": "fattree", "nodes": 36, "k": 6}])
def test_pipelined_chain_with_shared_windows_equals_the_graph(params):
    f = make_fabric(params)
    n = f.nodes
    for algo in ("pipelined_chain4", "pipelined_chain"):
        comp = f.analytic_compiled("broadcast", algo, n)
        sched = algorithm(algo).schedule("broadcast", n, 1.0, f.algo_params(n))  # (offered or not)
        slow = compile_schedule(sched, f.build_topology(algo), f.pricing(algo))
        assert comp.steps == slow.steps
        assert comp.time(3e6) == pytest.approx(slow.time(3e6), rel=1e-12)


@pytest.mark.parametrize("n, per_leaf, spines", [(64, 8, 4), (128, 16, 2), (64, 64, 4), (256, 4, 8)])
def test_leaf_spine_digit_rows_equal_the_arrays(n, per_leaf, spines, monkeypatch):
    """Digit steps over whole leaves priced from (stride, k) alone equal the per-rank arrays."""
    from estimator.collectives.params import AlgoParams
    from estimator.collectives.patterns import patterns
    from estimator.collectives.pricing import PricingParams
    from estimator.topology import leaf_spine

    params = PricingParams(alpha_s=0.7e-6, memory_bandwidth_Bps=1e12)
    args = (n, per_leaf, spines, 50e9, 25e9, (1e-6, 2e-6, 3e-6), params)
    shaped_rows = 0
    for name in ("halving_doubling", "recursive_doubling", "radix4", "radix8", "direct"):
        for coll in ("all_reduce", "reduce_scatter", "all_gather"):
            try:
                algorithm(name).check(coll, n, AlgoParams())
                pats = patterns(name, coll, n, AlgoParams())
            except EstimatorError:  # e.g. radix8 on 128 ranks
                continue
            if not pats:
                continue
            shaped_rows += sum(leaf_spine.leaf_spine_digit_row(p, n, per_leaf, spines, 50e9, 25e9,
                                                              np.array([0.0, 1e-6, 6e-6]), params) is not None
                               for p in pats)
            fast = leaf_spine.leaf_spine_compiled(pats, *args)
            with monkeypatch.context() as m:
                m.setattr(leaf_spine, "leaf_spine_digit_row", lambda *a: None)
                slow = leaf_spine.leaf_spine_compiled(pats, *args)
            for nbytes in (1e3, 1e6, 64 * 2**20):
                assert fast.time(nbytes) == pytest.approx(slow.time(nbytes), rel=1e-12, abs=0), (name, coll)
    assert shaped_rows > 0
