"""OPSquare analytical fabric (seed 004): sizes, hop latencies, collective phases."""

import pytest

from estimator.errors import EstimatorError
from estimator.fabrics.registry import make_fabric

SIZE_256 = {"nodes": 256, "pods": 16, "pod_nodes": 16, "groups": 4}
SIZE_1024 = {"nodes": 1024, "pods": 32, "pod_nodes": 32, "groups": 8}


@pytest.mark.parametrize("size", [SIZE_256, SIZE_1024, {"nodes": 24, "pods": 3, "pod_nodes": 8, "groups": 2}])
def test_valid_sizes(size):
    fab = make_fabric({"name": "opsquare", **size})
    assert fab.collective_cost("all_reduce", 1e6).time_s > 0


@pytest.mark.parametrize(
    "size",
    [{"nodes": 255}, {"nodes": 256, "groups": 3}, {"nodes": 1024, "pods": 32, "pod_nodes": 16}, {"pods": 0}],
)
def test_inconsistent_sizes_are_one_line_errors(size):
    with pytest.raises(EstimatorError) as exc:
        make_fabric({"name": "opsquare", **size})
    assert "\n" not in str(exc.value)


def test_hop_latency_and_paper_latency_bounds():
    fab = make_fabric({"name": "opsquare", **SIZE_256})
    assert fab.hop_s == pytest.approx(120e-9)  # 80 + 10 + 30 ns
    intra = fab.p2p_time(0, 5, 1500)  # same pod
    same_pos = fab.p2p_time(0, 16, 1500)  # m-th node of the next pod: one inter-pod hop
    inter = fab.p2p_time(0, 17, 1500)  # other pod, other position: two hops
    print(f"unloaded 1500-B latency: intra-pod {intra * 1e9:.0f} ns (paper, loaded: <= 500 ns), "
          f"inter-pod {inter * 1e9:.0f} ns (paper: <= 6 us)")
    assert intra == pytest.approx(same_pos) and inter - intra == pytest.approx(120e-9)
    assert intra <= 0.5e-6 and inter <= 6e-6


def test_hierarchical_allreduce_phases():
    fab = make_fabric({"name": "opsquare", **SIZE_256})
    c = fab.collective_cost("all_reduce", 0.0)
    assert c.steps == 4 and c.time_s == pytest.approx(4 * 120e-9)
    # bandwidth part: intra RS + AG over P transceivers (F = 4 peers on the busiest one) and the
    # inter-pod all-reduce of the 1/16 shard on one transceiver
    m, bw = 1e8, 3.6e12 / 8
    expect = 2 * (4 * m / 16) / bw + 2 * (15 / 16) * (m / 16) / bw + 4 * 120e-9
    assert fab.collective_cost("all_reduce", m).time_s == pytest.approx(expect)
    ring = fab.collective_cost("all_reduce", m, "hierarchical_ring")
    assert ring.steps == 2 * 15 + 2 * 15 and ring.time_s > expect
    rs, ag = fab.collective_cost("reduce_scatter", m), fab.collective_cost("all_gather", m)
    assert rs.time_s + ag.time_s == pytest.approx(fab.collective_cost("all_reduce", m).time_s)


def test_groups_inside_a_pod_and_whole_pods():
    fab = make_fabric({"name": "opsquare", **SIZE_256})
    assert fab.collective_cost("all_reduce", 1e6, group_size=8).steps == 2
    assert fab.collective_cost("all_reduce", 1e6, group_size=64).steps == 4
    with pytest.raises(EstimatorError, match="whole pods"):
        fab.collective_cost("all_reduce", 1e6, group_size=40)


def test_all_to_all_bound_by_inter_pod_transceiver():
    fab = make_fabric({"name": "opsquare", **SIZE_1024})
    m = 1e8
    t = fab.collective_cost("all_to_all", m).time_s
    assert t == pytest.approx(2 * 120e-9 + (31 / 32) * m * 8 / 3.6e12)


@pytest.mark.parametrize("size", [SIZE_256, {"nodes": 24, "pods": 3, "pod_nodes": 8, "groups": 2}])
def test_hierarchical_ring_closed_form_equals_library_schedule_on_opsquare_topology(size):
    fab = make_fabric({"name": "opsquare", **size})
    for m in (0.0, 1e6, 1e8):
        closed = fab.collective_cost("all_reduce", m, "hierarchical_ring").time_s
        explicit = fab.collective_cost("all_reduce", m, "hierarchical_ring", explicit=True).time_s
        assert explicit == pytest.approx(closed, rel=1e-9)
    assert fab.collective_cost("all_reduce", 1e6, "hierarchical_ring", group_size=8, explicit=True).time_s == \
        pytest.approx(fab.collective_cost("all_reduce", 1e6, "hierarchical_ring", group_size=8).time_s)
    with pytest.raises(EstimatorError, match="no explicit schedule"):
        fab.collective_cost("all_reduce", 1e6, "hierarchical", explicit=True)
