"""Checks shared by the schedule-pricing tests: analytic routing against compiling the schedule on
the graph, and ``auto``'s lower bounds against the explicit price."""

from __future__ import annotations

import pytest

from estimator.collectives.pricing import compile_schedule
from estimator.errors import EstimatorError


def check_analytic_equals_graph(f, collectives, sizes) -> list[tuple[str, str, int]]:
    """For every offered algorithm of ``collectives`` on groups of ``sizes``, assert the analytic
    price equals the explicit schedule compiled on the graph (1e-12) and is what ``explicit=True``
    prices; returns the (collective, algorithm, n) checked (those with analytic routing)."""
    checked = []
    for n in sizes:
        for coll in collectives:
            for algo in f.algorithms(coll):
                try:
                    f.check_size(n)
                    f.check_algorithm(coll, algo, n)
                except EstimatorError:
                    continue
                comp = f.analytic_compiled(coll, algo, n)
                if comp is None:
                    continue
                slow = compile_schedule(f.schedule(coll, algo, n, 1.0), f.build_topology(algo), f.pricing(algo),
                                        f.ranks(n))  # the explicit schedule on the graph topology
                assert comp.steps == slow.steps, (coll, algo, n)
                for m in (10.0, 3e6):
                    assert comp.time(m) == pytest.approx(slow.time(m), rel=1e-12), (coll, algo, n)
                assert f.collective_cost(coll, 3e6, algo, n, explicit=True).time_s == comp.time(3e6)
                checked.append((coll, algo, n))
    return checked


def check_floors_below_price(f, collectives) -> int:
    """Assert ``auto``'s floors (switch formula, step patterns) never exceed the explicit price on
    the whole fabric; returns how many (collective, algorithm, size) cases had a floor and a price."""
    checked = 0
    for coll in collectives:
        for algo in f.algorithms(coll):
            for nbytes in (1e3, 4e6):
                floors = [x for x in (f.auto_floor(coll, algo, f.nodes, nbytes),
                                      f.pattern_floor(coll, algo, f.nodes, nbytes)) if x is not None]
                if not floors:
                    continue
                try:
                    price = f.collective_cost(coll, nbytes, algo, explicit=True).time_s
                except EstimatorError:
                    continue
                for floor in floors:
                    assert floor <= price * (1 + 1e-12), (coll, algo, nbytes, floor, price)
                checked += 1
    return checked
