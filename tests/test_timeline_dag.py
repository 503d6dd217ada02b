"""General task-graph timeline: per-device streams, collectives and p2p priced by the fabric."""

import pytest

from estimator.compute.device import DeviceProfile
from estimator.errors import EstimatorError
from estimator.timeline.dag import simulate_dag
from estimator.workloads.graph import Node, Workload
from tests.helpers import linear_fabric

REPLAY = DeviceProfile(name="cpu", peak_flops=1e9, mem_bw_Bps=1e9, replay=True)


def comp(i, dev, dur, deps=()):
    return Node(i, f"c{i}", device=dev, duration_s=dur, deps=tuple(deps))


def test_pipeline_of_two_devices_with_transfer():
    # dev0: 1 ms -> send 1e6 B (1 ms at 1 ns/B) -> dev1: 2 ms
    nodes = (
        comp(0, 0, 1e-3),
        Node(1, "send", kind="p2p", deps=(0,), src=0, dst=1, comm_bytes=1e6),
        comp(2, 1, 2e-3, deps=(1,)),
    )
    r = simulate_dag(Workload("pipe", nodes, devices=2, batch_size=4).validate(), linear_fabric(nodes=2), REPLAY)
    assert r.iter_time_s == pytest.approx(4e-3)
    assert r.per_device_compute_s == pytest.approx([1e-3, 2e-3])
    assert r.compute_time_s == pytest.approx(2e-3)
    assert r.exposed_comm_time_s == pytest.approx(2e-3)


def test_independent_devices_run_in_parallel_and_streams_serialise():
    nodes = (comp(0, 0, 1e-3), comp(1, 1, 1e-3), comp(2, 0, 1e-3), comp(3, 1, 3e-3))
    r = simulate_dag(Workload("par", nodes, devices=2).validate(), linear_fabric(nodes=2), REPLAY)
    assert r.iter_time_s == pytest.approx(4e-3)  # device 1: 1 ms + 3 ms back to back


def test_collective_waits_for_all_members_and_blocks_their_comm_streams():
    nodes = (
        comp(0, 0, 1e-3),
        comp(1, 1, 5e-3),
        Node(2, "ar", kind="collective", deps=(0, 1), collective="all_reduce", comm_bytes=2e6, group=(0, 1)),
        comp(3, 0, 1e-3, deps=(2,)),
    )
    r = simulate_dag(Workload("ar", nodes, devices=2).validate(), linear_fabric(nodes=2), REPLAY)
    assert r.collectives[0]["start_s"] == pytest.approx(5e-3)
    assert r.iter_time_s == pytest.approx(5e-3 + 2e-3 + 1e-3)


def test_graph_larger_than_fabric_is_an_error():
    w = Workload("big", (comp(0, 3, 1e-3),), devices=4).validate()
    with pytest.raises(EstimatorError, match="fabric.nodes=4"):
        simulate_dag(w, linear_fabric(nodes=2), REPLAY)
