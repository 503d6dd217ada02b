"""HybridEP's rail (RDMA) exchange at its own measured rates (h103, docs/research/h103-qwen3-breakdown.md):
``device.hybridep_rail_Bps`` ({nodes: [dispatch, combine]} bytes/s, H100's from DeepEP's hybrid-ep README table),
looked up by the ep group's node count (``moe_comm.hybridep_rail_rates``) and taken by ``moe_comm.dispatch_time`` as a
floor on the fabric's price of the rail exchange, the dispatch and the combine each at its own rate."""

from __future__ import annotations

import json

import pytest

import estimator
from estimator.compute.device import DeviceProfile
from estimator.errors import EstimatorError
from estimator.estimate import estimate
from estimator.fabrics.registry import shared_fabric
from estimator.parallel.moe_comm import dispatch_time, flex_strides, groups_reached, hybridep_rail_rates
from estimator.parallel.step import _Pricer

H100_RATES = ((2, 71.71e9, 62.95e9), (4, 57.69e9, 57.46e9), (8, 49.97e9, 49.77e9))
# the brief's command (docs/research/h103-qwen3-breakdown.md): Qwen3-30B-A3B, 16 H100, EP 16, HybridEP, no EP overlap
QWEN_16 = ["system=dgx_h100", "fabric.nodes=16", "model=qwen3_30b_a3b", "parallelism=hybrid", "precision=bf16",
           "parallelism.tp=1", "parallelism.pp=1", "parallelism.ep=16", "parallelism.micro_batch_size=1",
           "parallelism.global_batch=1024", "model.seq_len=4096", "framework=megatron", "parallelism.zero=1",
           "parallelism.dp_overlap=true", "parallelism.recompute=none", "parallelism.fp32_grads=false",
           "framework.optimizer_state=fp32", "framework.loss_kernel=te_fused", "framework.moe_a2a_overlap=false",
           "model.moe_router_fusion=true"]


def h100_dict():
    return dict(estimator.resolve_config(["system=dgx_h100"])["device"])


def test_h100_states_the_readme_table_and_json_round_trip_keeps_it():
    d = h100_dict()
    assert DeviceProfile.from_dict(d).hybridep_rail_Bps == H100_RATES
    # estimate.py caches the device through JSON, whose keys are text
    assert DeviceProfile.from_dict(json.loads(json.dumps(d))).hybridep_rail_Bps == H100_RATES
    for system in ("dgx_h800", "dgx_h200"):  # inherited (an assumption stated in conf/device/h100.yaml)
        dev = DeviceProfile.from_dict(dict(estimator.resolve_config([f"system={system}"])["device"]))
        assert dev.hybridep_rail_Bps == H100_RATES
    a100 = DeviceProfile.from_dict(dict(estimator.resolve_config(["system=dgx_a100"])["device"]))
    assert a100.hybridep_rail_Bps is None


@pytest.mark.parametrize("bad", [{1: [1e9, 1e9]}, {2: [1e9]}, {2: [0.0, 1e9]}, {2: "fast"}, {}, [1e9, 1e9],
                                 {"two": [1e9, 1e9]}, {True: [1e9, 1e9]}])
def test_bad_tables_are_refused(bad):
    with pytest.raises(EstimatorError, match="hybridep_rail_Bps"):
        DeviceProfile.from_dict({**h100_dict(), "hybridep_rail_Bps": bad})


@pytest.mark.parametrize("nodes, expect", [(1, None), (2, (71.71e9, 62.95e9)), (3, (71.71e9, 62.95e9)),
                                           (4, (57.69e9, 57.46e9)), (7, (57.69e9, 57.46e9)),
                                           (8, (49.97e9, 49.77e9)), (32, (49.97e9, 49.77e9))])
def test_lookup_takes_the_largest_measured_node_count_not_above(nodes, expect):
    assert hybridep_rail_rates(DeviceProfile.from_dict(h100_dict()).hybridep_rail_Bps, nodes) == expect


def test_lookup_without_a_table_or_below_it_is_none():
    dev = DeviceProfile.from_dict({**h100_dict(), "hybridep_rail_Bps": None})
    assert hybridep_rail_rates(dev.hybridep_rail_Bps, 2) is None
    table = DeviceProfile.from_dict({**h100_dict(), "hybridep_rail_Bps": {4: [1e9, 1e9]}}).hybridep_rail_Bps
    assert hybridep_rail_rates(table, 2) is None and hybridep_rail_rates(table, 4) == (1e9, 1e9)


def _dispatch(dispatcher, rates, ep=16, tokens=4096, hidden=2048, experts=128, k=8):
    fabric = shared_fabric(estimator.resolve_config(["system=dgx_h100", f"fabric.nodes={ep}"])["fabric"])
    pricer = _Pricer(fabric, {"ep": 1, **flex_strides(fabric, ep, 1)}, "default")
    # the rates as a device table measured at every node count (ep / 8 nodes here)
    table = None if rates is None else ((2, *rates),)
    t = dispatch_time(pricer, dispatcher, tokens, hidden, experts, k, ep, 1, rail_table=table)
    return t, {c["group"]: c for c in pricer.colls}


def test_measured_rates_set_the_rail_when_slower_than_the_fabric():
    rates = (71.71e9, 62.95e9)
    t, colls = _dispatch("hybridep", rates)
    rail_bytes = 4096 * 2048 * 2 * groups_reached(128, 2, 8)  # a token's rows to the nodes it reaches, its own included
    assert colls["ep_rail"]["bytes"] == pytest.approx(rail_bytes)
    measured = (rail_bytes / rates[0] + rail_bytes / rates[1]) / 2
    assert colls["ep_node"]["time_s"] < min(rail_bytes / r for r in rates)  # NVLink is not what binds here
    assert t == pytest.approx(measured, rel=1e-12)
    assert colls["ep_rail"]["pricing"] == "hybridep_measured" and colls["ep_rail"]["time_s"] == pytest.approx(measured)
    fabric_t, fabric_colls = _dispatch("hybridep", None)
    assert fabric_colls["ep_rail"]["pricing"] != "hybridep_measured"
    assert fabric_t < t  # the fabric's NCCL-rate price of the same bytes (47 of 50 GB/s per NIC) is faster


def test_fabric_price_stands_when_faster_rates_are_stated_and_other_dispatchers_ignore_them():
    base, _ = _dispatch("hybridep", None)
    assert _dispatch("hybridep", (1e15, 1e15))[0] == base
    assert _dispatch("deepep", (1e6, 1e6))[0] == _dispatch("deepep", None)[0] == base
    inside, colls = _dispatch("hybridep", (1e6, 1e6), ep=8)  # one node: no rail exchange to floor
    assert "ep_rail" not in colls and inside == _dispatch("hybridep", None, ep=8)[0]


def test_brief_command_prices_the_readme_rates_per_step():
    m = estimate(estimator.resolve_config([*QWEN_16, "framework.moe_dispatcher=hybridep"])).metrics
    rail_bytes = 4096 * 2048 * 2 * groups_reached(128, 2, 8)
    per_exchange = (rail_bytes / 71.71e9 + rail_bytes / 62.95e9) / 2
    exchanges = 48 * 64 * 4  # layers x microbatches x (dispatch, combine) x (forward, backward)
    assert m["ep_comm_time_s"] == pytest.approx(exchanges * per_exchange, rel=1e-9)
    assert m["ep_exposed_time_s"] == pytest.approx(m["ep_comm_time_s"])  # no EP overlap
    no_table = [*QWEN_16, "framework.moe_dispatcher=hybridep", "device.hybridep_rail_Bps=null"]
    m0 = estimate(estimator.resolve_config(no_table)).metrics
    deepep = estimate(estimator.resolve_config([*QWEN_16, "framework.moe_dispatcher=deepep"])).metrics
    assert m0["ep_comm_time_s"] == pytest.approx(deepep["ep_comm_time_s"])
    assert m0["ep_comm_time_s"] < m["ep_comm_time_s"]
    assert m["iter_time_s"] - m0["iter_time_s"] == pytest.approx(m["ep_comm_time_s"] - m0["ep_comm_time_s"], rel=1e-9)
