"""The cross-fabric figures draw the ideal switch as a lower bound: with its fastest algorithm.

Why not its default: seed 000's flat ring pays 2(N-1) alphas, which at 1,024 GPUs is slower than the
leaf-spine's NCCL tree. These tests pin both facts on the fabric models and check the SQL picks the
bound and flags where another fabric beats it.
"""

from __future__ import annotations

import duckdb
import pytest

import estimator
from estimator.reports.sections import cross_fabric as cf


def _fabric(*overrides: str):
    return estimator.make_fabric(estimator.resolve_config(list(overrides))["fabric"])


@pytest.mark.parametrize("nbytes", [1e3, 1e6, 2.6e7, 1e8, 1e9])
def test_ideal_switch_with_fastest_algorithm_bounds_the_leafspine_at_1024(nbytes):
    ideal = _fabric("fabric=ideal", "fabric.nodes=1024", "fabric.bandwidth_Bps=450e9")
    leaf = _fabric("fabric=nvlink_leafspine", "fabric.nodes=1024", "fabric.spine_ports=128")
    bound = ideal.collective_cost("all_reduce", nbytes, "auto").time_s
    assert bound <= leaf.collective_cost("all_reduce", nbytes, "default").time_s
    assert bound <= leaf.collective_cost("all_reduce", nbytes, "auto").time_s


def test_ideal_default_ring_is_slower_than_the_leafspine_at_1024_because_of_its_latency():
    ideal = _fabric("fabric=ideal", "fabric.nodes=1024", "fabric.bandwidth_Bps=450e9")
    leaf = _fabric("fabric=nvlink_leafspine", "fabric.nodes=1024", "fabric.spine_ports=128")
    ring = ideal.collective_cost("all_reduce", 1e6, "default")
    assert ring.algorithm == "ring"
    alpha = float(estimator.resolve_config(["fabric=ideal"])["fabric"]["alpha_s"])
    assert ring.time_s >= 2 * (1024 - 1) * alpha  # the explanation printed beside the figure
    assert ring.time_s > leaf.collective_cost("all_reduce", 1e6, "default").time_s


def _store(rows):
    con = duckdb.connect()
    con.execute("""CREATE TABLE estimates (fabric_name VARCHAR, model_name VARCHAR, nodes BIGINT, algorithm VARCHAR,
        algorithm_used VARCHAR, iter_time_s DOUBLE, compute_time_s DOUBLE, exposed_comm_time_s DOUBLE,
        samples_per_s DOUBLE, device_name VARCHAR, parallelism_bucketing VARCHAR, precision VARCHAR,
        fabric_bandwidth_Bps DOUBLE, fabric_nvlink_bandwidth_Bps DOUBLE, fabric_wavelength_bps DOUBLE)""")
    for fabric, alg, used, t in rows:
        bw = {"ideal": (450e9, None, None), "nvlink_leafspine": (None, 450e9, None), "terarack": (None, None, 3.6e12)}
        con.execute("INSERT INTO estimates VALUES (?, 'resnet50', 1024, ?, ?, ?, 0.01, ?, 1.0, 'a100', 'ddp', 'amp', ?, ?, ?)",
                    [fabric, alg, used, t, t - 0.01, *bw[fabric]])
    return con


def test_figures_draw_the_ideal_bound_and_the_table_flags_fabrics_below_it():
    con = _store([("ideal", "default", "ring", 0.0183), ("ideal", "auto", "direct", 0.0169),
                  ("nvlink_leafspine", "default", "tree", 0.0170), ("terarack", "default", "wrht", 0.0168)])
    drawn = con.sql(cf.speedup_sql("resnet50")).pl()
    ideal = drawn.filter(drawn["fabric_name"] == cf.IDEAL_LABEL)
    assert ideal.height == 1 and ideal["algorithm"][0] == "auto"
    assert "ideal" not in drawn["fabric_name"].to_list()  # the default-ring row is not drawn
    assert ideal["speedup_vs_leafspine"][0] > 1
    bound = con.sql(cf.BOUND_SQL).pl().row(0, named=True)
    assert bound["fastest_other"] == "terarack/wrht" and bound["bound_holds"] is False
    exposed = con.sql(cf.EXPOSED_SQL).pl()
    assert sorted(exposed["fabric_name"]) == sorted([cf.IDEAL_LABEL, "nvlink_leafspine", "terarack"])
