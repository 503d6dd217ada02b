"""The Python estimate API: stable hashes, fabric reuse across a sweep, auto stays cheap."""

import pytest

from estimator.config import compose, to_container
from estimator.errors import EstimatorError
from estimator.estimate import estimate
from estimator.fabrics import library
from estimator.fabrics.registry import _shared, make_fabric
from tests.helpers import chain_workload


@pytest.fixture
def trace(tmp_path):
    from estimator.workloads import io

    return io.save(chain_workload([1e-3], [1e-3] * 3, 1e-4, [4_000_000] * 3), tmp_path / "w.workload.json")


def test_same_config_same_hash_and_result(trace):
    cfg = to_container(compose(["fabric.nodes=16", f"workload={trace}", "device=cpu"]))
    a, b = estimate(cfg), estimate(dict(cfg))
    assert a.config_hash == b.config_hash and a.metrics == b.metrics
    other = estimate(to_container(compose(["fabric.nodes=32", f"workload={trace}", "device=cpu"])))
    assert other.config_hash != a.config_hash
    assert other.metrics["comm_time_s"] > a.metrics["comm_time_s"]  # ring all-reduce over more GPUs


def test_fabrics_are_reused_across_estimates_of_a_sweep(trace):
    _shared.cache_clear()
    for batch in (1, 2, 4):
        estimate(to_container(compose(["fabric.nodes=16", f"workload={trace}", f"batch_size={batch}"])))
    info = _shared.cache_info()
    assert info.misses == 1 and info.hits == 2


def test_auto_skips_all_pairs_schedules_without_a_closed_form_at_scale():
    big = make_fabric({"name": "torus2d", "nodes": 1024})
    assert (1024 * 1023) > library.AUTO_MAX_PAIRS
    assert big.closed_form("all_reduce", "direct", 1024, 1e6) is None
    assert big.collective_cost("all_reduce", 1e6, "auto").algorithm != "direct"
    small = make_fabric({"name": "torus2d", "nodes": 16})
    assert "direct" in small.algorithms("all_reduce")
    costs = {a: small.collective_cost("all_reduce", 1e6, a).time_s for a in small.algorithms("all_reduce")
             if a != "auto"}
    assert small.collective_cost("all_reduce", 1e6, "auto").time_s == pytest.approx(min(costs.values()))


def test_batch_size_must_be_positive(trace):
    with pytest.raises(EstimatorError, match="batch_size"):
        estimate(to_container(compose([f"workload={trace}", "batch_size=-2"])))
