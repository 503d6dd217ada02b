"""h97: the SMs (CTAs) NCCL's all-to-all holds, moe_comm.nccl_a2a_ctas, against a step-by-step replay of NCCL's p2p
scheduling as its source writes it (NVIDIA/nccl v2.27.7-1 and v2.28.9-1, which map channels differently; file:line in
docs/research/h97-a2a-sms.md), and its use by the MoE all-to-all overlap."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

import estimator
from estimator.errors import EstimatorError
from estimator.estimate import estimate
from estimator.parallel.moe_comm import nccl_a2a_ctas

H100 = NS(sm_count=132, p2p_channels_nvlink=32, p2p_channels_network=16)
H100_NVLINKS = 18  # an NVSwitch peer gets 2 x NVLinks channels (src/graph/paths.cc l.812 at v2.27.7-1)


def _pow2_up(x: int) -> int:
    p = 1
    while p < x:
        p *= 2
    return p


def _reverse(x: int, bits: int) -> int:
    return int(format(x, f"0{bits}b")[::-1], 2) if bits else 0


def _replay(p2p_channels: int, ranks: int, nodes: int, peer_bytes: int, version: str) -> int:
    """Grid of the ncclDevKernel_SendRecv that one grouped all-to-all of ``peer_bytes`` per peer launches on rank 0:
    the number of channels in the plan's channelMask, from ncclTopoComputeP2pChannels, scheduleP2pTasksToPlan,
    addP2pToPlan and ncclP2pChannelBaseForRound / ncclP2pChannelForPart (one NIC per GPU, NCCL defaults)."""
    n_ranks, log2 = ranks * nodes, p2p_channels.bit_length() - 1
    if nodes == 1:  # ncclTopoGetNchannels, NVLink peers; p2pnChannelsPerPeer = pow2Up(min over peers)
        per_peer = _pow2_up(min(p2p_channels, 2 * H100_NVLINKS))
        step = 1 << 19  # NCCL_P2P_NVL_CHUNKSIZE
        min_part, max_part = step // 8, step * 32
    else:  # remote peers: 2 per NIC, halved while 2 nRanks > 4 p2pnChannels, at least the NICs needed (1)
        net = 2
        while net * n_ranks > 4 * p2p_channels and net > 1:
            net //= 2
        per_peer = _pow2_up(min(p2p_channels, 2 * H100_NVLINKS, max(1, net)))
        step = 1 << 17  # NCCL_P2P_NET_CHUNKSIZE
        min_part, max_part = step // 2, step
    n_min = per_peer
    while n_min * n_ranks > p2p_channels and n_min > 1:
        n_min //= 2
    parts = min(n_min, -(-peer_bytes // min_part))
    size = max(min_part, -(-peer_bytes // parts))
    while size > max_part and parts <= per_peer // 2:
        parts *= 2
        size = -(-peer_bytes // parts)
    mask = set()
    for rnd in range(n_ranks):  # one send and one receive per round, self included
        if nodes > 1:
            group, local = divmod(rnd, ranks)
            base = group * -(-ranks // 8) + local // 8  # NCCL_MAX_DEV_WORK_P2P_PER_BATCH = 8
        else:
            base = rnd
        for part in range(parts):
            if version == "2.27":
                mask.add((base + _reverse(part, log2)) & (p2p_channels - 1))
            else:  # 2.28: the round's base is bit-reversed, the parts consecutive
                mask.add((_reverse(base % p2p_channels, log2) + part) & (p2p_channels - 1))
    return len(mask)


@pytest.mark.parametrize("version", ["2.27", "2.28"])
@pytest.mark.parametrize("ranks, nodes", [(2, 1), (4, 1), (8, 1), (8, 2), (8, 4), (8, 8), (8, 16), (4, 4), (2, 8)])
def test_closed_form_matches_the_replay_of_nccls_scheduling(ranks, nodes, version):
    for peer_bytes in (1 << 20, 4 << 20, 16 << 20):  # MB-sized blocks, what an MoE all-to-all sends each peer
        p = H100.p2p_channels_nvlink if nodes == 1 else H100.p2p_channels_network
        assert nccl_a2a_ctas(H100, ranks, nodes) == _replay(p, ranks, nodes, peer_bytes, version)


def test_h100_counts():
    """32 inside a node (every p2p channel), 4 / 8 / 8 for ep 16 / 32 / 64 on 2 / 4 / 8 DGX H100 nodes: not the ring
    all-gather's 24 that parallelism.comm_interference defaults to."""
    device = NS(**{k: v for k, v in estimator.resolve_config(["system=dgx_h100"])["device"].items()
                   if k in ("sm_count", "p2p_channels_nvlink", "p2p_channels_network")})
    assert [nccl_a2a_ctas(device, 8, n) for n in (1, 2, 4, 8)] == [32, 4, 8, 8]
    h800 = estimator.resolve_config(["system=dgx_h100", "device=h800"])["device"]
    assert (h800["p2p_channels_nvlink"], h800["p2p_channels_network"]) == (16, 16)
    assert nccl_a2a_ctas(NS(p2p_channels_nvlink=None, p2p_channels_network=None), 8, 2) is None


QWEN_OVERLAP = ["parallelism=hybrid", "model=qwen3_30b_a3b", "system=dgx_h100", "parallelism.tp=1", "parallelism.pp=1",
                "parallelism.global_batch=64", "precision=bf16", "parallelism.recompute=none",
                "framework=megatron", "framework.moe_a2a_overlap=true",
                "parallelism.device_memory_bytes=200e9"]  # the check of fit is not what is tested


def _iter(*overrides):
    return estimate(estimator.resolve_config([*QWEN_OVERLAP, *overrides])).metrics["iter_time_s"]


@pytest.mark.parametrize("gpus, ep, key, ctas, fewer", [(16, 16, "p2p_channels_network", 4, (2, 2)),
                                                       (8, 8, "p2p_channels_nvlink", 32, (16, 16))])
def test_the_overlap_charges_nccls_ctas_unless_interference_is_stated(gpus, ep, key, ctas, fewer):
    """Unstated, each hidden second of all-to-all costs ctas / 132 of a second: linear in the CTAs (a device with
    fewer p2p channels gives the slope), and against the former charge, a stated comm_interference = 24 / 132 (which
    leaves the data-parallel charge where the default puts it), the step moves by (24 - ctas) / 132 of the same hidden
    time: cheaper for ep 16 over two nodes (4 CTAs), dearer for ep 8 inside one (32)."""
    layout = [f"fabric.nodes={gpus}", f"parallelism.ep={ep}"]
    default = _iter(*layout)
    channels, less = fewer  # the device's p2p channels, the CTAs they give
    slope = (default - _iter(*layout, f"device.{key}={channels}")) / (ctas - less)  # seconds per CTA
    assert slope > 0
    old = _iter(*layout, f"parallelism.comm_interference={24 / 132!r}")
    assert old - default == pytest.approx((24 - ctas) * slope, rel=1e-6)


@pytest.mark.parametrize("value", [24, 0, 132, True])
def test_bad_p2p_channel_count_is_an_error(value):
    with pytest.raises(EstimatorError, match="p2p_channels_nvlink"):
        _iter("fabric.nodes=8", "parallelism.ep=8", f"device.p2p_channels_nvlink={value}")
