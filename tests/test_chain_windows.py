"""Pipelined chains on BCube and SiPAC priced all at once (estimator/topology/windows.py): equal to
compiling the explicit schedule on the graph, and the window algebra equal to brute force."""

from __future__ import annotations

import numpy as np
import pytest

from estimator.collectives.pricing import compile_schedule
from estimator.fabrics.registry import make_fabric
from estimator.topology.windows import _max_cover, _segments

CHAINS = ("pipelined_chain", "pipelined_chain1", "pipelined_chain3", "pipelined_chain8", "pipelined_chain64",
          "pipelined_chain200")
FABRICS = [({"name": "bcube", "radix": 2, "nodes": 16}, 16), ({"name": "bcube", "radix": 3, "nodes": 27}, 27),
           ({"name": "bcube", "radix": 4, "nodes": 64}, 64), ({"name": "sipac", "r": 4, "l": 2, "nodes": 64}, 64),
           ({"name": "sipac", "r": 4, "l": 2, "nodes": 64}, 16), ({"name": "sipac", "r": 3, "l": 2, "nodes": 27}, 9),
           ({"name": "sipac", "r": 2, "l": 3, "nodes": 16}, 16)]


@pytest.mark.parametrize(("params", "n"), FABRICS)
def test_chain_on_relayed_fabrics_equals_the_graph(params, n):
    f = make_fabric(params)
    for algo in CHAINS:
        comp = f.analytic_compiled("broadcast", algo, n)
        slow = compile_schedule(f.schedule("broadcast", algo, n, 1.0), f.build_topology(algo), f.pricing(algo),
                                f.ranks(n))
        assert comp.steps == slow.steps, algo
        assert len(comp.weight) < comp.steps, algo  # the window path: identical steps merged into one row
        for m in (10.0, 3e6):
            assert comp.time(m) == pytest.approx(slow.time(m), rel=1e-12), (algo, m)
        assert f.collective_cost("broadcast", 3e6, algo, n, explicit=True).time_s == comp.time(3e6)


def _brute(t, link, w, hops, c, steps):
    """Per route length and step, the busiest link load any transfer of that step sees."""
    out = np.zeros((int(hops.max()) + 1, steps))
    for s in range(steps):
        inside = (t <= s) & (s <= t + c - 1)
        load = np.bincount(link[inside], weights=w[inside], minlength=link.max() + 1)
        for i in np.unique(t[inside]):
            mine = inside & (t == i) & (w > 0)
            if mine.any():
                out[hops[i], s] = max(out[hops[i], s], load[link[mine]].max())
    return out


@pytest.mark.parametrize("seed", range(6))
def test_window_loads_equal_brute_force(seed):
    """Random transfers sharing random links (several users per link, some zero weights): the
    pieces + max-cover give every step's busiest load per route length exactly."""
    rng = np.random.default_rng(seed)
    transfers, c = int(rng.integers(3, 30)), int(rng.integers(1, 12))
    steps = transfers + c - 1
    size = int(rng.integers(transfers, 4 * transfers))
    t = rng.integers(0, transfers, size)
    link = rng.integers(0, max(2, size // 3), size)
    t, link = np.unique(np.stack([t, link]), axis=1)  # a (transfer, link) pair at most once
    w = rng.choice([0.0, 0.25, 0.5, 1.0], len(t))
    hops = rng.integers(1, 4, transfers)
    i, lo, hi, load = _segments([(t, link, w)], c)
    got = _max_cover(hops[i], lo, hi, load, int(hops.max()) + 1, steps, c)
    assert np.allclose(got, _brute(t, link, w, hops, c, steps), rtol=1e-12, atol=0)


def test_shared_links_matter():
    """Two transfers sharing a link at half their bytes each: together (steps where both send) the
    link carries 1.0; apart, 0.5. Dropping the shared pieces would miss the 1.0."""
    t, link, w = np.array([0, 0, 1, 1]), np.array([7, 3, 7, 4]), np.array([0.5, 0.25, 0.5, 0.25])
    i, lo, hi, load = _segments([(t, link, w)], 2)
    got = _max_cover(np.ones_like(i), lo, hi, load, 2, 3, 2)[1]
    assert got.tolist() == [0.5, 1.0, 0.5]
