"""Offer lists and ``algorithm=auto`` (issue #13): every algorithm a fabric offers for a collective
runs it (or raises a documented size / no-schedule error), and ``auto`` on a collective whose only
candidates are all-pairs (all-to-all) picks one or says why not, in one line."""

from __future__ import annotations

import re

import pytest

from estimator.collectives.algorithms import algorithm as lookup
from estimator.collectives.algorithms import names
from estimator.errors import EstimatorError
from estimator.fabrics.library import LibraryFabric
from estimator.fabrics.registry import available, make_fabric

LIBRARY = set(names())  # (a fabric's own names, e.g. SiPAC's multicast or NCCL's ring broadcast, are its own)
COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "gather", "all_to_all", "p2p")
# the errors an offered algorithm may raise: the group size does not fit it ...
SIZE_ERRORS = re.compile(r"needs a group size|needs an even group size|power of|cannot run .* on \d+ nodes")
# ... or (explicit=True) the fabric prices it by a closed form / NCCL's model only
NO_SCHEDULE = re.compile(r"no explicit schedule|closed forms? only|priced by NCCL's model|explicit schedule too large")
CONFIGS = [{"name": f} for f in available()] + [
    {"name": "nvlink_leafspine", "latency_model": "alpha"},
    {"name": "nvlink_leafspine", "latency_model": "nccl_hw"},
    {"name": "nvlink_leafspine", "nodes": 8, "gpus_per_node": 8},  # NCCL inside one server
    {"name": "ocs", "topology": "ring", "nodes": 16},
    {"name": "ocs", "topology": "btree", "nodes": 16},
]


@pytest.mark.parametrize("params", CONFIGS, ids=lambda p: "-".join(str(v) for v in p.values()))
def test_every_offered_algorithm_runs_its_collective(params):
    f = make_fabric(params)
    priced = 0
    for coll in COLLECTIVES:
        for algo in f.algorithms(coll):
            if isinstance(f, LibraryFabric) and algo in LIBRARY and params.get("latency_model", "nccl") != "nccl":
                assert lookup(algo).supports(coll), (coll, algo)  # an OFFERS entry the library cannot run
            for explicit in (False, True):
                try:
                    cost = f.collective_cost(coll, 1e6, algo, explicit=explicit)
                except EstimatorError as exc:
                    allowed = SIZE_ERRORS.search(str(exc)) or (explicit and NO_SCHEDULE.search(str(exc)))
                    assert allowed, (coll, algo, explicit, str(exc))
                    assert "\n" not in str(exc)
                    continue
                assert cost.time_s > 0 and cost.algorithm == algo, (coll, algo, explicit)
                priced += 1
    assert priced >= 4


def test_nccl_ring_broadcast_says_it_has_no_schedule():
    """NCCL's ring broadcast / reduce (latency_model=nccl) is NCCL's model; the library's ``ring``
    is an all-reduce family, so explicit=True names the library broadcasts instead."""
    f = make_fabric({"name": "nvlink_leafspine"})
    assert f.algorithms("broadcast")[0] == "ring" and f.collective_cost("broadcast", 1e6, "ring").time_s > 0
    with pytest.raises(EstimatorError, match=r"priced by NCCL's model.*binomial_tree, binary_tree"):
        f.collective_cost("broadcast", 1e6, "ring", explicit=True)
    assert f.collective_cost("all_gather", 1e6, "ring", explicit=True).time_s > 0  # the library's ring all-gather


def _by_name(f, coll: str, nbytes: float):
    """Exhaustive auto: every offered algorithm priced by name, the fastest (ties: first offered)."""
    costs = []
    for i, a in enumerate(f.algorithms(coll)):
        try:
            costs.append((f.collective_cost(coll, nbytes, a).time_s, i, a))
        except EstimatorError:
            continue
    return min(costs)


@pytest.mark.parametrize("params", [{"name": "bcube", "radix": 8, "nodes": 512},
                                    {"name": "bcube", "radix": 18, "nodes": 324, "alpha_s": 1e-6},
                                    {"name": "fattree", "nodes": 1024},
                                    {"name": "torus2d", "nodes": 1024}])
def test_auto_all_to_all_beyond_256_ranks_picks_the_fastest(params):
    """Beyond AUTO_MAX_PAIRS transfers ``auto`` used to skip both all-pairs candidates and raise
    "no valid algorithm ... ()". BCube prices ``direct`` from its shape (so it is a candidate at any
    size); elsewhere, with nothing else to try, auto prices them as naming them does."""
    f = make_fabric(params)
    for nbytes in (1e3, 64 * 2**20):
        got = f.collective_cost("all_to_all", nbytes, "auto")
        t, _, name = _by_name(make_fabric(params), "all_to_all", nbytes)
        assert (got.algorithm, got.time_s) == (name, t), nbytes


def test_auto_all_to_all_on_a_large_bcube_builds_no_graph(monkeypatch):
    """... nor pairwise's 65,535 step patterns (BCube prices only all-pairs steps without arrays)."""
    from estimator.fabrics import library

    real = library.patterns
    monkeypatch.setattr(library, "patterns", lambda name, *a: pytest.fail(name) if name == "pairwise" else real(name, *a))
    f = make_fabric({"name": "bcube", "radix": 16, "nodes": 65536})
    f.compiled = lambda coll, algo, n: pytest.fail(f"compiled {algo}")
    f.build_topology = lambda algo: pytest.fail("built the graph")
    cost = f.collective_cost("all_to_all", 64 * 2**20, "auto")
    assert cost.algorithm == "direct" and cost.steps == 1
    # every link of the BCube carries (r-1) r^(levels-1) transfers of M/n: 15 x 16^3 x 1 KiB at 64 GB/s
    port = f.config.port_bandwidth_Bps
    assert cost.time_s == pytest.approx(4 * f.config.link_latency_s + 15 * 16**3 * (64 * 2**20 / 65536) / port)


def test_auto_without_a_candidate_gives_one_line_reasons():
    f = make_fabric({"name": "fattree", "nodes": 2048})
    with pytest.raises(EstimatorError) as exc:
        f.collective_cost("all_to_all", 1e6, "auto")
    msg = str(exc.value)
    assert "\n" not in msg and "()" not in msg
    assert "algorithm=direct" in msg and "algorithm=pairwise" in msg
