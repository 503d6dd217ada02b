"""The NCCL collective model, the system presets, the ASTRA-sim mapping and the validation rows."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

import estimator
from estimator.collectives import nccl
from estimator.collectives.busbw import bus_factor
from estimator.errors import EstimatorError
from estimator.fabrics.registry import make_fabric
from estimator.workloads.astrasim import link_parameters, network_config, ring_all_reduce_ns, system_config

ROOT = Path(__file__).resolve().parents[1]
ROWS = list(csv.DictReader((ROOT / "validation" / "nccl_tests.csv").open()))
MIB = 2**20

# Per-row |error| the model reaches (percent, rounded up + 1 point margin); a change that makes any
# row worse fails. Measured with `python benchmarks/nccl_bench.py` (prints the table).
PINNED_ERROR_PCT = {
    "a100x8-allreduce-1MiB": 9.5, "a100x8-allreduce-2MiB": 19.5, "a100x8-allreduce-4MiB": 3.0,
    "a100x8-allreduce-8MiB": 4.5, "a100x8-allreduce-16MiB": 10.5, "a100x8-allreduce-32MiB": 5.0,
    "a100x8-allreduce-64MiB": 1.0, "a100x8-allreduce-128MiB": 14.0, "a100x8-allreduce-256MiB": 2.5,
    "a100x8-allreduce-512MiB": 4.0, "a100x8-allreduce-1GiB": 3.5, "a100x8-allreduce-2GiB": 4.0,
    "a100x8-allreduce-4GiB": 4.5, "a100x8-allreduce-8GiB": 4.5,
    "h100x8-allreduce-1MiB": 1.0, "h100x8-allreduce-2MiB": 5.5, "h100x8-allreduce-4MiB": 2.0,
    "h100x8-allreduce-8MiB": 13.0, "h100x8-allreduce-16MiB": 10.0, "h100x8-allreduce-32MiB": 9.5,
    "h100x8-allreduce-64MiB": 7.5, "h100x8-allreduce-128MiB": 7.5, "h100x8-allreduce-256MiB": 7.5,
    "h100x8-allreduce-512MiB": 7.5, "h100x8-allreduce-1GiB": 2.5, "h100x8-allreduce-2GiB": 2.0,
    "h100x8-allreduce-4GiB": 1.5, "h100x8-allreduce-8GiB": 1.0, "h100x8-allreduce-ring-peak": 1.5,
    "a100x24-allreduce-peak": 13.5,
    # multi-node H100 rows (nccl-tests issue #309); re-pinned with the cross-node tree fill (nccl.py item 3)
    "h100x16-allreduce-1MiB": 2.5, "h100x16-allreduce-16MiB": 5.5, "h100x16-allreduce-64MiB": 3.5,
    "h100x16-allreduce-256MiB": 5.5, "h100x16-allreduce-1GiB": 4.5, "h100x16-allreduce-4GiB": 4.5,
    "h100x16-allreduce-16GiB": 4.5, "h100x32-allreduce-16MiB": 8.0, "h100x32-allreduce-64MiB": 10.5,
    "h100x32-allreduce-256MiB": 7.0, "h100x32-allreduce-1GiB": 5.0, "h100x32-allreduce-4GiB": 1.5,
    "h100x32-allreduce-16GiB": 2.0, "h100x64-allreduce-64MiB": 17.5, "h100x64-allreduce-256MiB": 5.0,
    "h100x64-allreduce-1GiB": 8.0, "h100x64-allreduce-8GiB": 15.0, "h100x32b-allreduce-64MiB": 3.5,
    "h100x32b-allreduce-1GiB": 8.5, "h100x32b-allreduce-8GiB": 14.5,
    # Azure ND H200 v5, NCCL 2.20.5 (1 MiB set the >= 2.19 NVLS latency; the rest same-source)
    "h200x8-allreduce-1MiB": 1.5, "h200x8-allreduce-2MiB": 5.5, "h200x8-allreduce-4MiB": 8.5,
    "h200x8-allreduce-8MiB": 18.5, "h200x8-allreduce-16MiB": 14.5, "h200x8-allreduce-32MiB": 12.0,
    "h200x8-allreduce-64MiB": 8.0, "h200x8-allreduce-128MiB": 6.0, "h200x8-allreduce-256MiB": 6.5,
    "h200x8-allreduce-512MiB": 6.5, "h200x8-allreduce-1GiB": 2.5, "h200x8-allreduce-2GiB": 2.0,
    "h200x8-allreduce-4GiB": 1.5, "h200x8-allreduce-8GiB": 1.5,
    # nccl#1218: 2 GiB all-gather on 32 RoCE nodes; NCCL's own tuner (bwInter x channels) is as high as
    # this model: not explained (validation/README.md, "Known misses")
    "h100x256-allgather-2GiB": 58.0,
    # nccl#2169: a 500 MiB all-to-all on 4 H100 of one node, NCCL 2.30.4 (independent; docs/research/h93-alltoall.md)
    "h100x4-alltoall-500MiB": 12.0,
    "jeanzay-a100x32-allreduce-4GB": 1.0,  # calibration: sets LINK_EFFICIENCY["opa"] (one OPA link, ring_uplinks=1)
}


def preset(system: str, gpus: int, *extra: str):
    cfg = estimator.resolve_config([f"system={system}", f"fabric.nodes={gpus}", *extra])
    return estimator.make_fabric(cfg["fabric"])


def predicted_busbw(row: dict) -> float:
    f = preset(row["system"], int(row["gpus"]), *row["overrides"].split())
    nbytes = float(row["bytes"])
    cost = f.collective_cost(row["collective"], nbytes, "auto")
    return nbytes / cost.time_s * bus_factor(row["collective"], cost.nodes) / 1e9


def error_pct(row: dict) -> float:
    measured = float(row["measured_busbw_GBps"])
    return 100 * (predicted_busbw(row) - measured) / measured


# ---- validation rows ---------------------------------------------------------------------------
def test_rows_follow_the_schema():
    assert ROWS and list(ROWS[0]) == ["id", "system", "gpus", "collective", "bytes", "measured_busbw_GBps", "role",
                                      "overrides", "hardware", "software", "source", "measured_what"]
    assert len({r["id"] for r in ROWS}) == len(ROWS)
    for r in ROWS:
        assert r["role"] in ("calibration", "same-source", "independent") and r["source"].startswith("https://")
        assert (ROOT / "conf" / "system" / f"{r['system']}.yaml").exists()
    calibration = [r for r in ROWS if r["role"] == "calibration"]
    assert 0 < len(calibration) < len(ROWS) / 4  # a minority, each naming the constant it set
    assert all("calibration: sets" in r["measured_what"] for r in calibration)


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_row_error_is_pinned(row):
    assert abs(error_pct(row)) <= PINNED_ERROR_PCT[row["id"]], f"{row['id']}: {error_pct(row):+.1f} %"


def test_issue_targets_on_8_gpu_a100_and_h100():
    """busbw within 15 % at every size >= 16 MiB and within 30 % at 1 MiB, every row included."""
    errors = {"calibration": [], "same-source": [], "independent": []}
    for r in ROWS:
        if int(r["gpus"]) != 8 or r["collective"] != "all_reduce":
            continue
        e = abs(error_pct(r))
        size = int(r["bytes"])
        if size >= 16 * MIB:
            assert e <= 15.0, r["id"]
        elif size == MIB:
            assert e <= 30.0, r["id"]
        errors[r["role"]].append(e)
    hold = errors["same-source"] + errors["independent"]  # not fitted on (8-GPU rows: mostly same curve)
    assert len(hold) >= 30 and sum(hold) / len(hold) < 7.5  # mean |error| of the rows not fitted on (6.0 %)


# ---- the model -----------------------------------------------------------------------------------
def test_tuner_constants_hand_checked():
    s = nccl.NcclSystem(ranks=8, nodes=1, arch="ampere", intra_Bps=240e9, channels=12)
    # NCCL 2.18.5: ring Simple = baseLat 8.4 + 14 steps x NVLink 3.4 us; ring LL128 = 14 + 14 x 1.9
    assert nccl.latency("all_reduce", "ring", "simple", s) == pytest.approx(56.0e-6)
    assert nccl.latency("all_reduce", "ring", "ll128", s) == pytest.approx(40.6e-6)
    # LL128 bus bw = min(0.92 x 240, 12 channels x 20 GB/s); algbw = bus x n / (2(n-1))
    assert nccl.bus_bandwidth("all_reduce", "ring", "ll128", s) == pytest.approx(220.8e9)
    assert nccl.alg_bandwidth("all_reduce", "ring", "ll", s) == pytest.approx(87.7e9 * 8 / 14)
    # tree over 4 nodes of 8: 2 x (7 x NVLink 4 us + log2(4) x NET 14 us), Simple base 0
    t = nccl.NcclSystem(ranks=32, nodes=4, arch="ampere", intra_Bps=240e9, inter_Bps=188e9, channels=12)
    assert nccl.latency("all_reduce", "tree", "simple", t) == pytest.approx(2 * (7 * 4.0 + 2 * 14.0) * 1e-6)
    # across nodes NCCL caps LL by CPU vendor, not GPU generation (tuning.cc llMaxBws rows)
    assert t.ll_max_Bps() == pytest.approx(20.4e9)
    assert nccl.NcclSystem(ranks=32, nodes=4, arch="ampere", cpu="amd").ll_max_Bps() == pytest.approx(19.0e9)
    # the tuner sees NVLS at 5/6 of the NVLink rate; the executed time uses the calibrated efficiency
    h = nccl.NcclSystem(ranks=8, nodes=1, nvls=True, intra_Bps=370.8e9, nvls_efficiency=0.739)
    assert nccl.alg_bandwidth("all_reduce", "nvls", "simple", h) == pytest.approx(370.8e9 * 5 / 6)
    assert nccl.alg_bandwidth("all_reduce", "nvls", "simple", h, executed=True) == pytest.approx(370.8e9 * 0.739)


def test_cross_node_tree_fill_follows_nccl_chunking():
    """Item 3 of nccl.py: a tree/NVLS-tree across nodes pays (depth - 1) stages of NCCL's chunk
    (NCCL 2.26.2 calcCollChunking) at bus bandwidth; one node and rings are left as they were."""
    one = nccl.NcclSystem(ranks=8, nodes=1, nvls=True, intra_Bps=370.8e9, inter_Bps=376e9, nvls_efficiency=0.739,
                          pipeline_bytes=2.94e6, nvls_latency_s=37.1e-6)
    two = nccl.NcclSystem(ranks=16, nodes=2, nvls=True, intra_Bps=370.8e9, inter_Bps=376e9, nvls_efficiency=0.739,
                          pipeline_bytes=2.94e6, nvls_latency_s=37.1e-6)
    m = 16 * MIB
    # NVLS-tree: 16 channels x 8 heads; 16 MiB < 4 x 128 x 128 KiB cuts the chunk to 64 KiB -> 8 MiB a stage
    assert nccl.cross_node_stage_bytes("nvls_tree", "simple", two, m) == 16 * 8 * 65536
    assert nccl.cross_node_stage_bytes("nvls_tree", "simple", two, 64 * MIB) == 16 * 8 * 131072
    four = nccl.NcclSystem(ranks=32, nodes=4, nvls=True)
    assert nccl.cross_node_stage_bytes("nvls_tree", "simple", four, 2**30) == 16 * 8 * 65536  # 64 KiB cap, >= 4 nodes
    assert nccl.cross_node_stage_bytes("nvls_tree", "simple", nccl.NcclSystem(ranks=16, nodes=2, nics=4), 2**30) \
        == 16 * 4 * 131072  # one head per NIC
    # tree LL128 at 1 MiB on 2 x 8: 576000 B halved while < (1 + 1 + 0.8) x 64 / 8 chunks, then x 16 / 8
    assert nccl.cross_node_stage_bytes("tree", "ll128", two, MIB) == 16 * 18000
    assert nccl.cross_node_stage_bytes("tree", "simple", two, MIB) == 16 * 2**19  # one 512 KiB Simple step
    # the 2-node NVLS-tree at 16 MiB: 2 + 2 log2(2) = 4 stages -> 3 x 8 MiB at min(NVLink, NICs) = 370.8 GB/s
    fill = nccl.exec_time("all_reduce", "nvls_tree", "simple", two, m) - nccl.tuner_time(
        "all_reduce", "nvls_tree", "simple", two, m, executed=True)
    assert fill == pytest.approx(3 * 8 * MIB / 370.8e9) and fill > 60e-6
    # ... which makes two nodes slower than one node by more than the tuner's ~10 us of extra latency
    t1 = nccl.exec_time("all_reduce", "nvls", "simple", one, m)
    t2 = nccl.exec_time("all_reduce", "nvls_tree", "simple", two, m)
    assert t2 - t1 > fill and t2 - t1 == pytest.approx(
        nccl.tuner_time("all_reduce", "nvls_tree", "simple", two, m, executed=True) - t1 + fill)
    # a small message fills only its own bytes
    tiny = nccl.exec_time("all_reduce", "nvls_tree", "simple", two, 4096) - nccl.tuner_time(
        "all_reduce", "nvls_tree", "simple", two, 4096, executed=True)
    assert tiny == pytest.approx(3 * 4096 / 370.8e9)
    # no cross-node fill on rings, none on one-node trees; the pick is the tuner's (fill-free) choice
    for algo, proto, s in (("ring", "simple", two), ("tree", "ll128", one)):
        assert nccl.exec_time("all_reduce", algo, proto, s, m) == nccl.tuner_time("all_reduce", algo, proto, s, m,
                                                                                  executed=True)
    assert nccl.choose("all_reduce", two, m) == ("nvls_tree", "simple")
    assert preset("dgx_h100", 16).collective_cost("all_reduce", m).algorithm == "nvls_tree"


def test_auto_is_nccls_choice_and_reports_the_protocol():
    a100 = preset("dgx_a100", 8)
    small, big = a100.collective_cost("all_reduce", 1024, "auto"), a100.collective_cost("all_reduce", 2**30, "auto")
    assert (small.algorithm, small.protocol) == ("ring", "ll") and (big.algorithm, big.protocol) == ("ring", "simple")
    h100 = preset("dgx_h100", 8)
    assert h100.collective_cost("all_reduce", 2**30).algorithm == "nvls"  # default = NCCL's pick
    assert preset("dgx_h100", 16).collective_cost("all_reduce", 2**30).algorithm in ("ring", "nvls_tree", "tree")
    # an all-pairs algorithm is never auto's pick for a NCCL collective (it was at 1 MiB on 8 GPUs)
    for f in (a100, h100, preset("dgx_a100", 32)):
        for m in (1e3, MIB, 64 * MIB, 2**30):
            assert f.collective_cost("all_reduce", m, "auto").algorithm in nccl.ALGORITHMS
    ideal = make_fabric({"name": "ideal", "nodes": 8})
    assert ideal.collective_cost("all_reduce", MIB, "auto").protocol == ""
    with pytest.raises(EstimatorError, match="NCCL runs no nvls"):
        a100.collective_cost("all_reduce", MIB, "nvls")


def test_ll128_across_nodes_follows_the_gpu_nic_path():
    """tuning.cc (v2.18.5-1 l.285 ... v2.28.9-1 l.482-487): LL128 between nodes only when the GPU -> NIC
    path is at most PXB, or PXN on Hopper; inside one node the path does not matter."""
    assert [nccl.ll128_across_nodes("hopper", p) for p in nccl.GPU_NIC_PATHS] == [True, True, True, False, False]
    assert [nccl.ll128_across_nodes("ampere", p) for p in nccl.GPU_NIC_PATHS] == [True, True, False, False, False]
    big = 2**31  # the 2 GiB all-gather of nccl#1218 on 32 H100 nodes
    dgx = preset("dgx_h100", 256).collective_cost("all_gather", big, "auto")
    assert (dgx.algorithm, dgx.protocol) == ("ring", "ll128")  # NCCL's tuner picks LL128 here too
    phb = preset("dgx_h100", 256, "fabric.gpu_nic_path=phb").collective_cost("all_gather", big, "auto")
    assert (phb.algorithm, phb.protocol) == ("ring", "simple") and phb.time_s != dgx.time_s
    # Ampere through a peer GPU's NIC (PXN): no LL128 across nodes; one node: LL128 still runs
    pxn = preset("dgx_a100", 32, "fabric.gpu_nic_path=pxn")
    assert pxn.collective_cost("all_reduce", 4 * MIB, "auto").protocol != "ll128"
    assert preset("dgx_a100", 32).collective_cost("all_reduce", 4 * MIB, "auto").protocol == "ll128"
    one = preset("dgx_a100", 8, "fabric.gpu_nic_path=sys").collective_cost("all_reduce", 4 * MIB, "auto")
    assert one.protocol == "ll128"
    with pytest.raises(EstimatorError, match="fabric.gpu_nic_path must be one of"):
        preset("dgx_h100", 16, "fabric.gpu_nic_path=nvlink")


def test_nccl_version_selects_the_executed_nvls_latency():
    """NCCL >= 2.19 runs a one-node NVLS all-reduce with a shorter latency than 2.18 (each fitted on one
    row: h100x8-allreduce-1MiB at 2.18.5, h200x8-allreduce-1MiB at 2.20.5); nothing else changes."""
    old = preset("dgx_h100", 8, "fabric.nccl_version=2.18.5").collective_cost("all_reduce", MIB, "auto")
    new = preset("dgx_h100", 8, "fabric.nccl_version=2.20.5").collective_cost("all_reduce", MIB, "auto")
    assert old.algorithm == new.algorithm == "nvls"
    assert old.time_s - new.time_s == pytest.approx(37.1e-6 - 29.8e-6, rel=1e-6)
    assert preset("dgx_h100", 8).config.nccl_version == "2.26.2"  # the preset assumes a current NCCL
    far = [preset("dgx_h100", 8, f"fabric.nccl_version={v}").collective_cost("all_reduce", 2**33, "auto").time_s
           for v in ("2.18.5", "2.28.9")]
    assert far[0] == pytest.approx(far[1], rel=1e-3)  # large sizes: the bandwidth, not the latency
    ring_a100 = [preset("dgx_a100", 8, f"fabric.nccl_version={v}").collective_cost("all_reduce", MIB, "auto").time_s
                 for v in ("2.18.5", "2.20.5")]
    assert ring_a100[0] == ring_a100[1]  # no NVLS on A100: the version changes nothing
    assert nccl.parse_version("2.20.5-1") == (2, 20) and nccl.parse_version("2.9.9") < nccl.NVLS_REWORK_VERSION
    for bad, needle in (("2.2", "major.minor.patch"), ("x.y.z", "must look like 2.18.5"), ("1.3.4", "NCCL 2")):
        with pytest.raises(EstimatorError, match=needle):
            preset("dgx_h100", 8, f"fabric.nccl_version={bad}").collective_cost("all_reduce", MIB, "auto")


def test_ib_sharp_is_an_option_off_by_default():
    plain, sharp = preset("dgx_a100", 32), preset("dgx_a100", 32, "fabric.collnet=true")
    assert "collnet" not in plain.algorithms("all_reduce") and "collnet" in sharp.algorithms("all_reduce")
    big = sharp.collective_cost("all_reduce", 2**30, "auto")
    assert big.algorithm == "collnet" and big.time_s < plain.collective_cost("all_reduce", 2**30).time_s
    # a node sends and receives M once through its NICs: never faster than M / (0.9 x 8 x 23.5 GB/s)
    assert big.time_s >= 2**30 / (0.9 * 8 * 25e9 * 0.94)


@pytest.mark.parametrize("system,gpus", [("dgx1_v100", 8), ("dgx_a100", 8), ("dgx_a100", 64), ("dgx_h100", 8),
                                         ("dgx_h100", 256)])
def test_never_below_the_bandwidth_floor(system, gpus):
    """No algorithm/protocol beats the floor of its collective, at any size, with or without SHARP:
    on a GPU's own spec-rate NVLink, factor x M / B (all-reduce 2(n-1)/n, or 1 when switches reduce
    in the network; reduce-scatter/all-gather (n-1)/n; broadcast/reduce 1), and across N nodes on a
    node's NICs, the same with N for n (the node's GPUs share what crosses its NICs)."""
    def factor(coll: str, k: int, in_network: bool) -> float:
        if coll == "all_reduce":
            return 1.0 if in_network else 2 * (k - 1) / k
        return (k - 1) / k if coll in ("reduce_scatter", "all_gather") else 1.0

    for extra in ((), ("fabric.collnet=true",)):
        f = preset(system, gpus, *extra)
        c = f.config
        nodes = max(1, gpus // c.gpus_per_node)
        for coll in ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce"):
            for algo in f.algorithms(coll):
                if algo not in nccl.ALGORITHMS:
                    continue
                in_network = algo in ("nvls", "nvls_tree", "collnet")
                for m in (1.0, 4e3, MIB, 64 * MIB, 2**30, 2**33):
                    try:
                        t = f.collective_cost(coll, m, algo).time_s
                    except EstimatorError:
                        continue  # not run on this system (e.g. NVLS on one node only)
                    floor = factor(coll, gpus, in_network) * m / c.nvlink_bandwidth_Bps
                    if nodes > 1:
                        node_nics = c.uplinks * c.uplink_bandwidth_Bps
                        floor = max(floor, factor(coll, nodes, in_network) * m / node_nics)
                    assert t >= floor * (1 - 1e-12), (system, gpus, coll, algo, m)


def test_chunking_runs_chunks_one_after_another():
    one = make_fabric({"name": "ideal", "nodes": 16})
    four = make_fabric({"name": "ideal", "nodes": 16, "chunks": 4})
    by_size = make_fabric({"name": "ideal", "nodes": 16, "chunk_bytes": 2**20})
    m = 4 * 2**20
    t1 = one.collective_cost("all_reduce", m / 4, "ring").time_s
    assert four.collective_cost("all_reduce", m, "ring").time_s == pytest.approx(4 * t1, rel=1e-12)
    assert by_size.collective_cost("all_reduce", m, "ring").time_s == pytest.approx(4 * t1, rel=1e-12)
    assert four.collective_cost("all_reduce", m, "ring").steps == 4 * 30
    h = preset("dgx_h100", 8, "fabric.chunks=2")
    assert h.collective_cost("all_reduce", 2**30).time_s == pytest.approx(
        2 * preset("dgx_h100", 8).collective_cost("all_reduce", 2**29).time_s, rel=1e-12)
    with pytest.raises(EstimatorError, match="fabric.chunks"):
        make_fabric({"name": "ideal", "chunks": 0})


def test_alpha_model_is_kept_unchanged():
    old = make_fabric({"name": "nvlink_leafspine", "nodes": 16, "latency_model": "alpha"})
    m = 16e6  # hand check as before the NCCL model (tests/test_fabric_electrical.py)
    intra = 14 * (0.7e-6 + 1e-6 + 2e6 / 450e9)
    inter = 2 * (0.7e-6 + 3e-6 + 1e6 / 50e9)
    assert old.collective_cost("all_reduce", m, "default").time_s == pytest.approx(intra + inter, rel=1e-12)


# ---- system presets --------------------------------------------------------------------------------
def test_presets_describe_the_boxes_and_scale_without_spine_ports():
    cfg = estimator.resolve_config(["system=dgx_a100", "fabric.nodes=64"])
    assert cfg["device"]["name"] == "a100" and cfg["fabric"]["name"] == "nvlink_leafspine"
    fab = cfg["fabric"]
    assert (fab["uplinks"], fab["uplink_bandwidth_Bps"], fab["nvlink_bandwidth_Bps"]) == (8, 25e9, 300e9)
    assert estimator.resolve_config(["system=dgx_h100"])["device"]["name"] == "h100"
    assert estimator.resolve_config(["system=dgx1_v100"])["fabric"]["uplinks"] == 4
    big = preset("dgx_h100", 1024)  # 128 nodes: no spine_ports to set
    assert big.collective_cost("all_reduce", 2**28, "auto").time_s > 0


def test_unknown_system_is_one_line_exit_2():
    proc = subprocess.run([sys.executable, "-m", "estimator.cli", "collective", "system=dgx_z9"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "dgx_z9" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_curve_prints_algorithm_and_protocol():
    proc = subprocess.run([sys.executable, "-m", "estimator.cli", "collective", "system=dgx_h100", "fabric.nodes=8",
                           "algorithm=auto", "sizes=[1048576,1073741824]", "output=json"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["curve"]
    assert [(r["algorithm"], r["protocol"]) for r in rows] == [("nvls", "simple"), ("nvls", "simple")]
    assert rows[1]["busbw_Bps"] == pytest.approx(478.87e9, rel=0.02)


# ---- ASTRA-sim's analytical backend ----------------------------------------------------------------
def _network_values(fabric: dict, npus: int) -> tuple[float, float]:
    text = network_config(fabric, npus)
    values = {line.split(":")[0]: float(line.split("[")[1].split("]")[0]) for line in text.splitlines()
              if line.startswith(("bandwidth", "latency"))}
    return values["bandwidth"], values["latency"]


@pytest.mark.parametrize("chunks", [1, 4])
@pytest.mark.parametrize("params", [
    {"name": "ideal", "nodes": 16, "bandwidth_Bps": 300e9, "alpha_s": 0.7e-6},
    {"name": "ring", "nodes": 16, "link_bandwidth_Bps": 12.5e9, "link_latency_s": 5e-6, "alpha_s": 0.0},
])
def test_exported_configs_give_astrasims_answer(params, chunks):
    """Ring all-reduce: the estimator (chunks=k) == ASTRA-sim's analytical formula on the exported
    network.yml / system.json values (2 hops per message on a Switch, 1 between ring neighbours)."""
    params = {**params, "chunks": chunks}
    fabric = make_fabric(params)
    bw_gbps, lat_ns = _network_values(params, 16)
    hops = 2 if link_parameters(params)[0] == "Switch" else 1
    assert system_config(params)["preferred-dataset-splits"] == chunks
    for m in (1e3, 64e3, 1e6, 64e6, 1e9):
        ours = fabric.collective_cost("all_reduce", m, "ring").time_s * 1e9
        theirs = ring_all_reduce_ns(16, m, bw_gbps, lat_ns, hops, chunks)
        assert ours == pytest.approx(theirs, rel=1e-6), (m, ours, theirs)


def test_export_writes_ring_and_refuses_chunk_bytes(tmp_path):
    from estimator.workloads.astrasim import write_configs

    def write(path, data):
        path.write_bytes(data)

    ring = {"name": "ring", "nodes": 8, "link_bandwidth_Bps": 12.5e9, "link_latency_s": 5e-6, "alpha_s": 0.0,
            "chunks": 4}
    paths = write_configs(ring, 8, tmp_path, write)
    assert len(paths) == 3 and "topology: [ Ring ]" in (tmp_path / "network.yml").read_text()
    assert json.loads((tmp_path / "system.json").read_text())["preferred-dataset-splits"] == 4
    with pytest.raises(EstimatorError, match="chunk_bytes"):
        network_config({**ring, "chunk_bytes": 1e6}, 8)


def test_omni_path_is_priced_at_jean_zays_measured_fraction_of_line_rate():
    """Jean Zay's all-reduce benchmark (calibration row): 4 GB over 4 nodes x 8 A100 ran at busbw 5.08 GB/s through
    one of the node's 4 OPA links (NCCL's log: 2 channels via one HFI), 0.41 of that link's line rate."""
    base = ("fabric.uplinks=4", "fabric.uplink_bandwidth_Bps=12.5e9", "fabric.nccl_version=2.10.3")
    row = {"system": "dgx_a100", "gpus": "32", "collective": "all_reduce", "bytes": "4000000000"}

    def busbw(*extra: str) -> float:
        return predicted_busbw({**row, "overrides": " ".join((*base, *extra))})

    one_link = busbw("fabric.uplink_technology=opa", "fabric.ring_uplinks=1")
    assert one_link == pytest.approx(5.08, rel=0.01)
    assert busbw("fabric.uplink_technology=opa") == pytest.approx(4 * one_link, rel=0.01)  # all four links
    assert 2 < busbw("fabric.uplink_technology=ib_hdr", "fabric.ring_uplinks=1") / one_link < 2.6
    assert nccl.LINK_EFFICIENCY["opa"] < nccl.LINK_EFFICIENCY["ib_hdr"]


@pytest.mark.parametrize("value", ["-1", "true", "1.5"])
def test_bad_ring_uplinks_is_a_one_line_error(value):
    out = subprocess.run([sys.executable, "-m", "estimator.cli", "collective", "system=dgx_a100", "fabric.nodes=16",
                          "collective=all_reduce", "bytes=1e6", f"fabric.ring_uplinks={value}"],
                         capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
    assert out.returncode == 2 and "fabric.ring_uplinks" in out.stderr and "Traceback" not in out.stderr
    assert out.stderr.strip().count("\n") == 0
