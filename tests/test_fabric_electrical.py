"""Electrical fabrics: validation, closed forms vs schedules, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from estimator.errors import EstimatorError
from estimator.fabrics.nvlink_leafspine import NvlinkLeafSpineFabric
from estimator.fabrics.registry import make_fabric


def leafspine(**kw) -> NvlinkLeafSpineFabric:
    return NvlinkLeafSpineFabric.from_dict({"name": "nvlink_leafspine", **kw})


@pytest.mark.parametrize("params", [
    {"name": "ideal", "nodes": 0},
    {"name": "ideal", "bandwidth_Bps": -1.0},
    {"name": "ideal", "alpha_s": -1e-6},
    {"name": "nvlink_leafspine", "nodes": 12},
    {"name": "nvlink_leafspine", "nodes": 512, "spine_ports": 32},  # the paper's 32-port spine holds 256 GPUs
    {"name": "nvlink_leafspine", "latency_model": "fast"},
])
def test_bad_parameters_raise_one_line(params):
    with pytest.raises(EstimatorError) as err:
        make_fabric(params)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("extra", [{"latency_model": "alpha"},
                                   {"latency_model": "nccl_hw", "nccl_protocol": "ll128", "memory_bandwidth_Bps": 1e12},
                                   {"latency_model": "nccl_hw", "nccl_protocol": "ll"}, {"latency_model": "nccl"}])
def test_leafspine_closed_forms_equal_schedules(extra):
    f = leafspine(nodes=64, **extra)
    # under the NCCL model `ring` is NCCL's ring (estimator/collectives/nccl.py, no schedule); the
    # library's hierarchical algorithms keep closed forms == schedules on the achievable link rates
    names = ("hierarchical", "hierarchical_tree") if extra["latency_model"] == "nccl" else ("ring", "hierarchical",
                                                                                            "hierarchical_tree")
    for name in names:
        for n in range(1, 65) if name == "ring" else [*range(1, 9), *range(16, 65, 8)]:
            for m in (1e3, 1e8):
                fast = f.collective_cost("all_reduce", m, name, n)
                slow = f.collective_cost("all_reduce", m, name, n, explicit=True)
                assert fast.steps == slow.steps
                assert fast.time_s == pytest.approx(slow.time_s, rel=1e-9, abs=0), (name, n, m)


def test_leafspine_hand_checked_hierarchical_ring():
    # 16 GPUs = 2 nodes, 16 MB: intra RS/AG 7+7 steps of 2 MB at 450 GB/s (alpha + 1 us);
    # inter all-reduce 2 steps of 1 MB per GPU, 8 GPUs share 4 x 100 GB/s uplinks (alpha + 3 us)
    m = 16e6
    intra = 14 * (0.7e-6 + 1e-6 + 2e6 / 450e9)
    inter = 2 * (0.7e-6 + 3e-6 + 1e6 / 50e9)
    cost = leafspine(nodes=16, latency_model="alpha").collective_cost("all_reduce", m, "hierarchical")
    assert cost.time_s == pytest.approx(intra + inter, rel=1e-12)
    assert cost.steps == 16


def test_hierarchical_beats_flat_ring_across_nodes():
    f = leafspine(nodes=256, latency_model="alpha")
    for m in (1e4, 1e8):
        assert f.collective_cost("all_reduce", m, "hierarchical").time_s < f.collective_cost("all_reduce", m, "ring").time_s


def test_nccl_latency_model_adds_base_latency():
    f = leafspine(nodes=8, latency_model="nccl_hw", nccl_protocol="simple")
    # one node, ring: 14 steps x NVLink ring/simple 3.4 us + base 8.4 us (NCCL tuning.cc), tiny message
    assert f.collective_cost("all_reduce", 8.0, "ring").time_s == pytest.approx(14 * 3.4e-6 + 8.4e-6, rel=1e-6)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "estimator.cli", "collective", *args],
                          capture_output=True, text=True, timeout=120)


def test_cli_json_and_errors():
    out = _cli("fabric=ideal", "fabric.nodes=64", "collective=all_reduce", "algorithm=ring", "bytes=67108864",
               "output=json")
    assert out.returncode == 0, out.stderr
    row = json.loads(out.stdout)
    assert row["algorithm"] == "ring" and row["steps"] == 126
    assert row["time_s"] == pytest.approx(126 * 0.7e-6 + 2 * 63 / 64 * 67108864 / 300e9, rel=1e-12)
    bad = _cli("fabric=ideal", "fabric.nodes=6", "algorithm=recursive_doubling")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "power of 2" in bad.stderr


def test_default_is_the_first_offered_algorithm_that_fits():
    f = leafspine(nodes=64, latency_model="alpha")
    assert f.collective_cost("all_reduce", 1e6, group_size=16).algorithm == "hierarchical"
    assert f.collective_cost("all_reduce", 1e6, group_size=12).algorithm == "ring"  # 1.5 nodes
    with pytest.raises(EstimatorError, match="whole nodes"):
        f.collective_cost("all_reduce", 1e6, "hierarchical", 12)


def test_nccl_algorithm_has_no_explicit_schedule_and_says_so():
    f = make_fabric({"name": "nvlink_leafspine", "nodes": 64})
    with pytest.raises(EstimatorError, match="NCCL's 'tree'.*not a schedule"):
        f.collective_cost("all_reduce", 2**26, "tree", explicit=True)
    assert f.collective_cost("all_reduce", 2**26, "ring", explicit=True).time_s > 0  # the library's ring
