"""Pairwise all-to-all (n - 1 shift steps) priced in closed form per step
(estimator/topology/shift_steps.py) equals the explicit schedule compiled on the graph, on every
analytic topology, at whole and non-whole sizes (partial pods and leaves, non-square tori, fewer
ranks than endpoints); the closed forms are what prices the steps (the SuperPOD: one row per fold
class over whole servers, else the arrays); and dropping a class of
transfers from them is caught."""

from __future__ import annotations

import numpy as np
import pytest

from estimator.collectives.params import AlgoParams
from estimator.collectives.patterns import patterns
from estimator.collectives.pricing import PricingParams, compile_schedule
from estimator.errors import EstimatorError
from estimator.fabrics.registry import make_fabric
from estimator.topology import analytic, bcube, rail, shift_steps, torus
from tests.schedule_checks import check_floors_below_price

FABRICS = [
    {"name": "ring", "nodes": 12},
    {"name": "ring", "nodes": 9, "bidirectional": False},
    {"name": "torus2d", "nodes": 16},
    {"name": "torus2d", "nodes": 12, "rows": 3, "cols": 4},
    {"name": "torus2d", "nodes": 30, "rows": 5, "cols": 6},
    {"name": "torus2d", "nodes": 8, "rows": 2, "cols": 4},
    {"name": "fattree", "nodes": 16, "k": 4},
    {"name": "fattree", "nodes": 36, "k": 6},  # 36 of 54 hosts: 4 pods of 9, the last partial
    {"name": "fattree", "nodes": 32, "k": 6},
    {"name": "superpod", "nodes": 32, "gpus_per_node": 4},
    {"name": "superpod", "nodes": 24, "gpus_per_node": 8, "memory_bandwidth_Bps": 1e11},
    {"name": "nvlink_leafspine", "nodes": 32, "gpus_per_node": 8, "latency_model": "alpha"},
    {"name": "nvlink_leafspine", "nodes": 24, "gpus_per_node": 4, "uplinks": 2, "latency_model": "alpha"},
    {"name": "nvlink_leafspine", "nodes": 24, "gpus_per_node": 8, "uplinks": 3},
    {"name": "bcube", "nodes": 16, "radix": 4},
    {"name": "bcube", "nodes": 27, "radix": 3},
    {"name": "bcube", "nodes": 32, "radix": 2},
    {"name": "ideal", "nodes": 12, "alpha_s": 1e-6},
    {"name": "ocs", "nodes": 16, "topology": "ring"},
    {"name": "ocs", "nodes": 16, "topology": "torus2d"},
    {"name": "ocs", "nodes": 18, "topology": "fattree"},
]


def _sizes(f) -> list[int]:
    out = []
    for n in sorted({f.nodes, f.nodes - 1, f.nodes - 3, f.nodes // 2 + 1, 5}):
        try:
            f.check_size(n)
            f.check_algorithm("all_to_all", "pairwise", n)
        except EstimatorError:
            continue
        out.append(n)
    return out


def _graph_time(f, n: int, nbytes: float) -> float:
    return compile_schedule(f.schedule("all_to_all", "pairwise", n, 1.0), f.build_topology("pairwise"),
                            f.pricing("pairwise"), f.ranks(n)).time(nbytes)


def _closed_form_only(f, n: int) -> bool:
    """True where every shift step has a closed form or a shared fold class (else: the arrays)."""
    c = f.config
    name = f.name if f.name != "ocs" else c.topology
    if name == "superpod":
        return n % c.gpus_per_node == 0
    return name != "bcube" or n == f.nodes


@pytest.mark.parametrize("params", FABRICS, ids=lambda p: f"{p['name']}{p['nodes']}{p.get('topology', '')}")
def test_pairwise_equals_the_graph(params, monkeypatch):
    f = make_fabric(params)
    original = analytic.step_row

    def arrays_only_where_expected(step, *args, **kwargs):
        assert step.shape is None or step.shape[0] != "shift" or not closed, step.shape
        return original(step, *args, **kwargs)

    for module in (analytic, rail):  # every caller of the per-step arrays
        monkeypatch.setattr(module, "step_row", arrays_only_where_expected)
    checked = 0
    for n in _sizes(f):
        closed = _closed_form_only(f, n) and params["name"] != "superpod"  # (superpod: one fold per class)
        comp = f.analytic_compiled("all_to_all", "pairwise", n)
        if comp is None:
            assert params["name"] == "bcube" and n != f.nodes  # BCube: analytic on the whole fabric only
            continue
        assert comp.steps == n - 1
        for m in (10.0, 3e6, 1e9):
            assert comp.time(m) == pytest.approx(_graph_time(f, n, m), rel=1e-12), (n, m)
        assert f.collective_cost("all_to_all", 3e6, "pairwise", n, explicit=True).time_s == comp.time(3e6)
        checked += 1
    assert checked >= (1 if params["name"] == "bcube" else 2)


@pytest.mark.parametrize("params", [{"name": "superpod", "nodes": 32, "gpus_per_node": 4},
                                    {"name": "torus2d", "nodes": 24, "rows": 4, "cols": 6}])
def test_shared_rows_equal_the_per_step_arrays(params, monkeypatch):
    """Rail shift steps sharing a fold class, and a whole torus's closed form, equal every step
    priced from its own arrays."""
    f = make_fabric(params)
    fast = f.analytic_compiled("all_to_all", "pairwise", f.nodes)
    monkeypatch.setattr(shift_steps, "shift_class", lambda *a: None)
    monkeypatch.setattr(shift_steps, "torus_row", lambda *a: None)
    slow = f.analytic_compiled("all_to_all", "pairwise", f.nodes)
    for m in (1e3, 1e6, 1e9):
        assert fast.time(m) == pytest.approx(slow.time(m), rel=1e-12)


@pytest.mark.parametrize("rows, cols", [(1, 5), (2, 3), (3, 4), (4, 7), (5, 2), (6, 6)])
def test_torus_rows_at_every_group_size_equal_the_arrays(rows, cols, monkeypatch):
    """Shifts over the first n of rows x cols endpoints (every n: partial last rows, run B starting
    mid-row, 1- and 2-long rings) in closed form equal each step's arcs priced from its arrays."""
    params = PricingParams(alpha_s=1e-6)
    for n in range(2, rows * cols + 1):
        pats = patterns("pairwise", "all_to_all", n, AlgoParams())
        fast = torus.torus_compiled(pats, rows, cols, 50e9, 1e-6, params, n)
        with monkeypatch.context() as m:
            m.setattr(shift_steps, "torus_row", lambda *a: None)
            slow = torus.torus_compiled(pats, rows, cols, 50e9, 1e-6, params, n)
        for i in range(n - 1):
            for nbytes in (1e3, 1e9):
                want = (slow.c0[i] + slow.c1[i] * nbytes).max()
                assert (fast.c0[i] + fast.c1[i] * nbytes).max() == pytest.approx(want, rel=1e-12), (n, i + 1)


@pytest.mark.parametrize("radix, levels", [(2, 5), (3, 4), (4, 4), (5, 3), (16, 2)])
def test_bcube_row_equals_relayed_loads(radix, levels, monkeypatch):
    """Every shift step's row on the whole BCube (busiest link = one transfer's bytes, longest route
    L - lowest nonzero digit) equals ECMP over correction orders from the arrays, step by step."""
    params = PricingParams(alpha_s=2e-6)
    n = radix**levels
    pats = patterns("pairwise", "all_to_all", n, AlgoParams(radix=radix))
    fast = bcube.bcube_compiled(pats, radix, levels, 50e9, 1e-6, params)
    monkeypatch.setattr(shift_steps, "bcube_row", lambda *a: None)
    slow = bcube.bcube_compiled(pats, radix, levels, 50e9, 1e-6, params)
    for i in range(n - 1):
        for m in (1e3, 1e9):
            want = (slow.c0[i] + slow.c1[i] * m).max()
            assert (fast.c0[i] + fast.c1[i] * m).max() == pytest.approx(want, rel=1e-12), (i + 1, m)


def test_block_leaving_counts_every_sender():
    for n in range(2, 30):
        for w in range(1, n + 1):
            for lo in range(0, n - w + 1):
                for by in range(1, n):
                    i = np.arange(lo, lo + w)
                    dst = (i + by) % n
                    assert shift_steps.block_leaving(w, by, n) == int(((dst < lo) | (dst >= lo + w)).sum())


@pytest.mark.parametrize("params, n", [({"name": "torus2d", "nodes": 30, "rows": 5, "cols": 6}, 30),
                                       ({"name": "torus2d", "nodes": 30, "rows": 5, "cols": 6}, 23),
                                       ({"name": "ring", "nodes": 12}, 9),
                                       ({"name": "fattree", "nodes": 36, "k": 6}, 31),
                                       ({"name": "nvlink_leafspine", "nodes": 24, "gpus_per_node": 8, "uplinks": 3,
                                         "latency_model": "alpha"}, 21)])
def test_dropping_a_class_is_caught(params, n, monkeypatch):
    """Mutation check: keep only the first class of each step (the torus's non-carry class or run A, the
    ring's unwrapped run, the fat tree's shortest routes, the leaf-spine's local transfers) and
    the price no longer equals the graph's."""
    f = make_fabric(params)
    keep = shift_steps._row
    monkeypatch.setattr(shift_steps, "_row", lambda pairs, reduction: keep(pairs[:1], reduction))
    comp = f.analytic_compiled("all_to_all", "pairwise", n)
    assert comp.time(1e9) < _graph_time(f, n, 1e9) * (1 - 1e-9)


@pytest.mark.parametrize("params", [{"name": "torus2d", "nodes": 16}, {"name": "fattree", "nodes": 36, "k": 6},
                                    {"name": "bcube", "nodes": 27, "radix": 3}, {"name": "ring", "nodes": 12},
                                    {"name": "nvlink_leafspine", "nodes": 32, "gpus_per_node": 8,
                                     "latency_model": "alpha"}])
def test_auto_floors_stay_below_the_price(params):
    assert check_floors_below_price(make_fabric(params), ["all_to_all"]) > 0
