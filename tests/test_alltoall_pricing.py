"""How an NCCL all-to-all is priced on the DGX presets (docs/research/h93-alltoall.md): one step of all-pairs
transfers on the leaf-spine at the achievable link rates (NVLink and NIC x nccl.LINK_EFFICIENCY), one message
latency (alpha_s + the route's switch latencies) per call, no per-peer term. A change to this pricing should
change this test and the note together."""

from __future__ import annotations

import pytest

import estimator
from estimator.collectives import nccl
from estimator.collectives.busbw import bus_factor

MIB = 2**20


def preset(system: str, gpus: int):
    cfg = estimator.resolve_config([f"system={system}", f"fabric.nodes={gpus}"])
    return estimator.make_fabric(cfg["fabric"])


def closed_form(f, n: int, m: float) -> float:
    """Seconds of a direct all-to-all of ``m`` bytes per rank over the first ``n`` GPUs: each rank sends m/n to
    every other; a GPU's NVLink port carries m (n-1)/n, a node's uplinks carry g m (n-g)/n (g GPUs per node)."""
    c = f.config
    g = min(n, c.gpus_per_node)
    nv = c.nvlink_bandwidth_Bps * nccl.LINK_EFFICIENCY[c.nvlink_technology]
    up = c.uplink_bandwidth_Bps * nccl.LINK_EFFICIENCY[c.uplink_technology]
    t = m * (n - 1) / n / nv
    route = c.switch_latency_s  # GPU -> NVLink switch -> GPU
    if n > g:
        t = max(t, g * m * (n - g) / n / (c.uplinks * up))
        route = 3 * c.switch_latency_s  # GPU -> leaf -> spine -> leaf -> GPU
    return c.alpha_s + route + t


@pytest.mark.parametrize("system,gpus", [("dgx_h100", 4), ("dgx_h100", 8), ("dgx_h100", 16), ("dgx_h100", 64),
                                         ("dgx_a100", 8), ("dgx_a100", 32), ("dgx_h800", 64)])
@pytest.mark.parametrize("m", [MIB, 64 * MIB, 2**30])
def test_all_to_all_is_one_all_pairs_step_at_achievable_rates(system, gpus, m):
    f = preset(system, gpus)
    cost = f.collective_cost("all_to_all", m, "auto")
    assert cost.algorithm == "direct"
    assert cost.time_s == pytest.approx(closed_form(f, gpus, m), rel=1e-9)


def test_large_all_to_all_busbw_is_the_link_class_rate():
    """Large messages: inside a DGX H100 the busbw is the achievable NVLink rate (18 x 20.6 GB/s = 370.8 GB/s, what
    NVIDIA gives for non-all-reduce busbw, nccl-tests#212); across N nodes one NIC's achievable rate times
    (n-1)/(n-8) (NVIDIA's N/(N-1) x the per-GPU network bandwidth, nccl-tests#130, up to the (n-1)/n factor)."""
    m = 2**32
    h8 = preset("dgx_h100", 8)
    t = h8.collective_cost("all_to_all", m, "auto").time_s
    assert m / t * bus_factor("all_to_all", 8) / 1e9 == pytest.approx(450 * 20.6 / 25, rel=1e-3)
    for n in (16, 64):
        f = preset("dgx_h100", n)
        t = f.collective_cost("all_to_all", m, "auto").time_s
        nic = 50 * nccl.LINK_EFFICIENCY["ib_ndr"]
        assert m / t * bus_factor("all_to_all", n) / 1e9 == pytest.approx(nic * (n - 1) / (n - 8), rel=1e-3)
