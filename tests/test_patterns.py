"""Step patterns (estimator/collectives/patterns.py) hold exactly the transfers of the schedules."""

from __future__ import annotations

from collections import Counter

import pytest

from estimator.collectives.algorithms import algorithm
from estimator.collectives.params import AlgoParams
from estimator.collectives.patterns import patterns
from estimator.errors import EstimatorError

CASES = [("ring", c) for c in ("all_reduce", "reduce_scatter", "all_gather")] + [
    ("bidir_ring", "all_reduce"), ("bidir_ring", "all_gather"), ("halving_doubling", "all_reduce"),
    ("halving_doubling", "reduce_scatter"), ("recursive_doubling", "all_reduce"), ("recursive_doubling", "all_gather"),
    ("radix4", "all_reduce"), ("radix", "all_gather"), ("neighbor_exchange", "all_reduce"),
    ("neighbor_exchange", "all_gather"), ("binary_tree", "all_reduce"), ("binary_tree", "broadcast"),
    ("binary_tree", "reduce"), ("double_binary_tree", "all_reduce"), ("pipelined_dbt", "all_reduce"),
    ("pipelined_dbt4", "all_reduce"), ("torus2d", "all_reduce"), ("torus2d", "all_gather"),
    ("hierarchical", "all_reduce"), ("hierarchical_tree", "all_reduce"), ("ps", "all_reduce"),
    ("dimwise", "all_reduce"), ("dimwise", "reduce_scatter"), ("dimwise", "all_gather"),
    ("direct", "all_reduce"), ("direct", "reduce_scatter"), ("direct", "all_gather"), ("direct", "all_to_all"),
    ("direct", "broadcast"), ("direct", "reduce"), ("direct", "gather"), ("one_shot", "all_reduce"),
    ("pairwise", "all_to_all"), ("binomial_tree", "broadcast"), ("binomial_tree", "reduce"),
    ("binomial_tree", "gather"), ("scatter_allgather", "broadcast"), ("reducescatter_gather", "reduce"),
    ("pipelined_chain", "broadcast"), ("pipelined_chain4", "broadcast"), ("pipelined_tree", "broadcast"),
    ("pipelined_tree3", "broadcast"), ("spanning_tree", "broadcast"),
]


def _steps(sched_steps):
    """Multiset of steps, each a sorted tuple of (src, dst, size, reduced) rounded to 1e-12."""
    return Counter(tuple(sorted((t.src, t.dst, round(t.nbytes, 12), round(t.reduce_bytes, 12)) for t in st.transfers))
                   for st in sched_steps)


def _pattern_steps(pats):
    out = Counter()
    for p in pats:
        key = tuple(sorted((int(s), int(d), round(float(b), 12), round(float(r), 12))
                           for s, d, b, r in zip(p.src, p.dst, p.size, p.red, strict=True)))
        out[key] += p.count
    return out


@pytest.mark.parametrize("name,coll", CASES)
@pytest.mark.parametrize("n", [2, 3, 4, 8, 12, 16])
def test_patterns_equal_schedules(name, coll, n):
    p = AlgoParams(radix=2, local=4 if n % 4 == 0 else 1)
    try:
        sched = algorithm(name).schedule(coll, n, 1.0, p)
    except EstimatorError:
        with pytest.raises(EstimatorError):
            patterns(name, coll, n, p)
        return
    pats = patterns(name, coll, n, p)
    assert pats is not None
    assert sum(x.count for x in pats) == sched.num_steps
    assert _pattern_steps(pats) == _steps(sched.steps)


def test_no_pattern_for_unlisted_algorithms():
    assert patterns("direct", "p2p", 8, AlgoParams()) is None


@pytest.mark.parametrize("name,coll", CASES)
def test_declared_periods_are_symmetries(name, coll):
    """A pattern's ``period`` P: shifting every rank by P maps its transfers onto themselves."""
    for n in (4, 8, 12, 16):
        try:
            pats = patterns(name, coll, n, AlgoParams(radix=2, local=4))
        except EstimatorError:
            continue
        for p in pats:
            if not p.period:
                continue
            assert n % p.period == 0
            rows = sorted(zip(p.src.tolist(), p.dst.tolist(), p.size.tolist(), p.red.tolist(), strict=True))
            moved = sorted(zip(((p.src + p.period) % n).tolist(), ((p.dst + p.period) % n).tolist(), p.size.tolist(),
                               p.red.tolist(), strict=True))
            assert rows == moved, (name, coll, n, p.period)
