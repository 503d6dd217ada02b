"""``algorithm=auto`` at scale (issue #13): the pruning hooks of the NVLink leaf-spine and SiPAC
fabrics and the leaf-spine's closed forms for halving-doubling / recursive doubling. Pruned
``auto`` must pick exactly what pricing every candidate picks, every floor must stay below the
schedule's price, and every closed form must equal its schedule priced on the graph."""

from __future__ import annotations

import pytest

from estimator.errors import EstimatorError
from estimator.fabrics.registry import make_fabric
from tests.schedule_checks import check_floors_below_price

LEAFSPINE = {"name": "nvlink_leafspine", "spine_ports": 0, "memory_bandwidth_Bps": 1e11}
SMALL = [
    {**LEAFSPINE, "nodes": 16, "gpus_per_node": 4, "uplinks": 2, "latency_model": "alpha"},
    {**LEAFSPINE, "nodes": 24, "gpus_per_node": 8, "latency_model": "alpha", "alpha_s": 3e-6},
    {**LEAFSPINE, "nodes": 32, "gpus_per_node": 8, "latency_model": "nccl_hw", "chunks": 2},
    {**LEAFSPINE, "nodes": 8, "gpus_per_node": 2, "uplinks": 1, "latency_model": "nccl_hw", "nccl_protocol": "ll"},
    {**LEAFSPINE, "nodes": 16, "gpus_per_node": 8, "latency_model": "nccl"},  # library path for send/recv
    {"name": "sipac", "r": 4, "l": 1, "nodes": 16},
    {"name": "sipac", "r": 3, "l": 2, "nodes": 27, "multicast": False},
    {"name": "sipac", "r": 2, "l": 3, "nodes": 16, "alpha_s": 2e-6, "relay_latency_s": 0.5e-6},
]
COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "gather", "all_to_all")


def _exhaustive(params: dict):
    f = make_fabric(params)
    f.port_bandwidth = lambda: None  # no floor: every candidate is priced
    f.route_bounds = lambda src, dst: None
    return f


@pytest.mark.parametrize("params", SMALL, ids=lambda p: f"{p['name']}{p['nodes']}-{p.get('latency_model', '')}")
def test_pruned_auto_picks_what_exhaustive_auto_picks(params):
    pruned, full = make_fabric(params), _exhaustive(params)
    compared = 0
    for coll in COLLECTIVES:
        if not pruned.algorithms(coll):
            continue
        for nbytes in (1e2, 1e5, 1e8, 64 * 2**20):
            try:
                b = full.collective_cost(coll, nbytes, "auto")
            except EstimatorError:
                with pytest.raises(EstimatorError):
                    pruned.collective_cost(coll, nbytes, "auto")
                continue
            a = pruned.collective_cost(coll, nbytes, "auto")
            assert (a.algorithm, a.time_s, a.steps) == (b.algorithm, b.time_s, b.steps), (coll, nbytes)
            compared += 1
    assert compared >= 8


@pytest.mark.parametrize("params", SMALL, ids=lambda p: f"{p['name']}{p['nodes']}-{p.get('latency_model', '')}")
def test_floors_never_exceed_the_schedule_price(params):
    f = make_fabric(params)
    checked = check_floors_below_price(f, COLLECTIVES)
    assert checked > 10


@pytest.mark.parametrize("latency_model", ["alpha", "nccl_hw"])
@pytest.mark.parametrize("n,g,uplinks", [(8, 8, 4), (16, 8, 4), (64, 8, 4), (32, 4, 2), (64, 8, 8), (16, 1, 1),
                                         (4, 8, 4), (128, 16, 4)])
def test_leafspine_xor_exchange_closed_forms_equal_schedules(latency_model, n, g, uplinks):
    f = make_fabric({**LEAFSPINE, "nodes": n, "gpus_per_node": g, "uplinks": uplinks, "latency_model": latency_model})
    checked = 0
    for coll in ("all_reduce", "reduce_scatter", "all_gather"):
        for algo in ("halving_doubling", "recursive_doubling"):
            if algo not in f.algorithms(coll):
                continue
            fast = f.closed_form(coll, algo, n, 3e6)
            assert fast is not None, (coll, algo)
            slow = f.collective_cost(coll, 3e6, algo, explicit=True)
            assert fast[0] == pytest.approx(slow.time_s, rel=1e-12), (coll, algo)
            assert fast[1] == slow.steps
            checked += 1
    assert checked == 5  # all-reduce x 2, reduce-scatter x 1, all-gather x 2


def test_leafspine_xor_exchange_needs_powers_of_two():
    f = make_fabric({**LEAFSPINE, "nodes": 24, "gpus_per_node": 8, "latency_model": "alpha"})
    assert f.closed_form("all_reduce", "halving_doubling", 24, 3e6) is None
    assert f.closed_form("all_reduce", "halving_doubling", 16, 3e6) is not None


@pytest.mark.parametrize("params,nodes", [
    ({**LEAFSPINE, "latency_model": "alpha"}, 65536),
    ({**LEAFSPINE, "latency_model": "nccl_hw"}, 16384),
    ({"name": "sipac", "r": 16, "l": 3}, 65536),
])
def test_auto_at_scale_compiles_no_schedule(params, nodes):
    """At tens of thousands of GPUs ``auto`` prices a 64 MiB all-reduce from closed forms and lower
    bounds alone: no candidate's schedule is built on the graph."""
    f = make_fabric({**params, "nodes": nodes})
    f.compiled = lambda coll, algo, n: pytest.fail(f"compiled {algo}")
    f.build_topology = lambda algo: pytest.fail("built the graph")
    cost = f.collective_cost("all_reduce", 64 * 2**20, "auto")
    assert cost.algorithm == ("dimwise" if params["name"] == "sipac" else "halving_doubling")
    assert cost.time_s > 0


@pytest.mark.parametrize("radix,nodes,extra", [(4, 16, {}), (3, 27, {"alpha_s": 1e-6, "memory_bandwidth_Bps": 1e11}),
                                                (2, 8, {"alpha_s": 2e-6}), (4, 64, {"link_latency_s": 3e-6}),
                                                (5, 25, {"memory_bandwidth_Bps": 2e10})])
def test_bcube_all_pairs_floor_equals_the_generic_bound(radix, nodes, extra):
    """BCube counts ``direct``'s all-pairs floor instead of folding n(n-1) transfers: the same number."""
    from estimator.fabrics.library import LibraryFabric

    f = make_fabric({"name": "bcube", "radix": radix, "nodes": nodes, **extra})
    for coll in ("all_reduce", "reduce_scatter", "all_gather"):
        for nbytes in (1e2, 4e6, 1e9):
            fast = f.pattern_floor(coll, "direct", nodes, nbytes)
            generic = LibraryFabric.pattern_floor(f, coll, "direct", nodes, nbytes)
            assert fast == pytest.approx(generic, rel=1e-12), (coll, nbytes)
            assert fast <= f.collective_cost(coll, nbytes, "direct", explicit=True).time_s * (1 + 1e-12)
    # any other schedule still takes the generic path
    assert f.pattern_floor("all_reduce", "ring", nodes, 4e6) == LibraryFabric.pattern_floor(f, "all_reduce", "ring",
                                                                                            nodes, 4e6)


@pytest.mark.parametrize("size", [2, 4, 6, 8, 12, 16, 24, 40, 64, 96, 128])
def test_ring_halving_doubling_digit_loads_equal_the_arc_loads(size):
    """The k = 2 shortcut of ``digit_ring_loads`` (halving-doubling on a bidirectional ring) equals
    the largest arc loads of every transfer of the step."""
    import numpy as np

    from estimator.topology.arcs import arc_max_loads, digit_ring_loads, ring_arc

    for stride in (s for s in range(1, size // 2 + 1) if size % (2 * s) == 0):
        r = np.arange(size)
        digit = (r // stride) % 2
        dst = r + np.where(digit == 0, stride, -stride)
        start, hops, forward = ring_arc(r, dst, size, True)
        loads = arc_max_loads(np.zeros(size, dtype=np.int64), start, hops, forward, np.ones(size), 1, size)
        want = tuple((int(hops[digit == d].max()), int(loads[digit == d].max())) for d in (0, 1))
        assert digit_ring_loads(size, stride, 2, True) == want, stride


@pytest.mark.parametrize("params", [{"name": "ring", "nodes": 16, "alpha_s": 1e-6}, {"name": "ring", "nodes": 64},
                                    {"name": "torus2d", "nodes": 16}, {"name": "torus2d", "nodes": 32},
                                    {"name": "ocs", "nodes": 32, "topology": "ring"}])
def test_digit_exchanges_priced_from_shapes_equal_the_graph(params):
    """Halving-doubling / recursive doubling / radix-k priced from (stride, k) equal the schedule
    compiled on the graph."""
    f = make_fabric({**params, "memory_bandwidth_Bps": 1e11} if params["name"] != "ocs" else params)
    checked = 0
    for coll in ("all_reduce", "reduce_scatter", "all_gather"):
        for algo in ("halving_doubling", "recursive_doubling", "radix4"):
            if algo not in f.algorithms(coll):
                continue
            try:
                fast = f._analytic(coll, algo, f.nodes)
            except EstimatorError:
                continue
            if fast is None:
                continue
            slow = f.compiled(coll, algo, f.nodes)
            for m in (1e3, 3e6):
                assert fast.time(m) == pytest.approx(slow.time(m), rel=1e-12), (coll, algo)
            assert fast.steps == slow.steps
            checked += 1
    assert checked >= 2
