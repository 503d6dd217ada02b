"""`estimator compare`: every fabric, same workload and per-GPU bandwidth (one table)."""

import pytest

from estimator.cli import run
from estimator.commands.compare import _power_shape, fabric_params
from estimator.errors import EstimatorError
from estimator.workloads import io
from tests.helpers import chain_workload


@pytest.fixture
def workload(tmp_path):
    w = chain_workload([2e-3, 2e-3], [3e-3, 3e-3], 1e-3, [4 * 2**20, 16 * 2**20])
    return str(io.save(w, tmp_path / "chain.workload.json"))


def test_bandwidth_mapping_gives_equal_per_gpu_bandwidth():
    b = 300e9
    assert fabric_params("torus2d", 64, b)["link_bandwidth_Bps"] == pytest.approx(b / 4)
    ocs = fabric_params("ocs", 64, b)
    assert ocs["port_bps"] * ocs["ports"] / 8 == pytest.approx(b) and ocs["topology"] == "auto"
    sip = fabric_params("sipac", 64, b)
    assert (sip["r"], sip["l"]) == (4, 2) and sip["per_cu_bandwidth_bps"] == pytest.approx(8 * b)
    tr = fabric_params("terarack", 64, b)
    assert tr["wavelength_bps"] * tr["wavelengths"] == pytest.approx(8 * b)
    ops = fabric_params("opsquare", 64, b)
    assert ops["pods"] * ops["pod_nodes"] == 64 and ops["groups"] == 2
    assert ops["transceiver_bps"] * (ops["groups"] + 1) / 8 == pytest.approx(b)  # P intra-pod + 1 inter-pod transceivers
    assert _power_shape(512) == (8, 3)
    with pytest.raises(EstimatorError):
        _power_shape(96)


def test_compare_table_all_fabrics(workload, capsys):
    assert run(["compare", f"workload={workload}", "device=cpu", "algorithm=auto", "compare.nodes=16",
                "output=json"]) == 0
    import json

    rows = json.loads(capsys.readouterr().out)
    by = {r["fabric"]: r for r in rows}
    times = [r["iter_time_s"] for r in rows if "iter_time_s" in r]
    assert times == sorted(times) and len(set(times)) > 1  # fastest first
    assert all("iter_time_s" in r for r in rows[: len(times)])  # fabrics that cannot run it come last
    for name in ("ideal", "lumorph", "sipac", "terarack", "opsquare", "ocs"):
        assert "iter_time_s" in by[name], by[name]
    # the ideal switch has the most bandwidth any fabric can give at this per-GPU bandwidth
    assert by["ideal"]["speedup_vs_ideal"] == pytest.approx(1.0)
    # the OCS is wired once for the job (one reconfiguration at start), to a shape it can wire
    assert by["ocs"]["algorithm"].split("@")[1] in ("ring", "torus2d", "btree")
    assert by["ocs"]["reconfig_s"] == pytest.approx(25e-3)
    # every fabric runs the same compute: iteration times differ only by exposed communication
    compute = {round(r["iter_time_s"] - r["exposed_comm_time_s"], 9) for r in rows if "iter_time_s" in r}
    assert len(compute) == 1
    run(["compare", f"workload={workload}", "device=cpu", "compare.nodes=96", "compare.fabrics=[sipac,lumorph]"])
    text = capsys.readouterr().out
    assert "sipac" in text and "n/a" in text and "lumorph" in text
    assert text.index("lumorph") < text.index("sipac")  # the row that ran before the one that cannot


def test_compare_bad_options():
    with pytest.raises(EstimatorError, match="compare.nodes"):
        run(["compare", "compare.nodes=1"])
    with pytest.raises(EstimatorError, match="unknown parameter"):
        run(["compare", "compare.bogus=1"])


def test_ideal_is_the_fastest_row_at_64_gpus(capsys):
    """OPSquare ranked 0.2 % above ideal on ResNet-50 at 64 GPUs while each of its P + 1 transceivers got the whole
    per-GPU bandwidth; at the same per-GPU bandwidth the non-blocking switch is the fastest (docs/fabrics.md)."""
    import json

    assert run(["compare", "model=resnet50", "algorithm=auto", "compare.nodes=64",
                "compare.fabrics=[opsquare,ideal,sipac,lumorph]", "output=json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    by = {r["fabric"]: r["speedup_vs_ideal"] for r in rows}
    assert by["opsquare"] < 1 and all(v <= 1 + 1e-12 for v in by.values())
