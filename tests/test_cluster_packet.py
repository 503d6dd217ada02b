"""The multi-job packet-level driver and the model-vs-packet check; the cluster sweep kinds and report rule."""

from __future__ import annotations

import pytest

from estimator.cluster import packet_check as pc
from estimator.errors import EstimatorError
from estimator.packetsim.multijob import JobSpec, Net, simulate_jobs

MB = 2**20
NET = Net(hosts=8, per_leaf=4, spines=1, host_bps=100e9, uplink_bps=100e9, switch_latency_s=1e-6, packet_bytes=4096)


def test_one_job_alone_matches_the_ring_schedule():
    """A 4-GPU ring over two leaves, alone: the packet level's iteration ~ compute + the ring
    schedule priced on the same leaf-spine by the topology layer (store-and-forward adds a little)."""
    job = JobSpec((0, 1, 4, 5), 50e-6, 0.5 * MB)
    t = simulate_jobs(NET, [job], 6)[0].mean_iter_s(2)
    lat, bw = pc._comm(pc.topology(NET), job)
    assert t == pytest.approx(job.compute_s + lat + bw, rel=0.03)


def test_two_jobs_on_one_uplink_share_it():
    """No compute: two rings across the same two leaves keep the uplinks busy all the time, each
    getting half; apart (each inside a leaf) they do not touch."""
    cross = [JobSpec((0, 1, 4, 5), 0.0, 0.5 * MB), JobSpec((2, 3, 6, 7), 0.0, 0.5 * MB)]
    alone = simulate_jobs(NET, cross[:1], 6)[0].mean_iter_s(2)
    shared = [j.mean_iter_s(2) for j in simulate_jobs(NET, cross, 6)]
    lat, bw = pc._comm(pc.topology(NET), cross[0])
    for s in shared:
        assert s == pytest.approx(2 * bw, rel=0.05)  # the uplink's work: both jobs' bytes
        assert s > 1.5 * alone  # latency gaps are filled by the other job: less than 2x the alone time
    apart = [JobSpec((0, 1, 2, 3), 0.0, 0.5 * MB), JobSpec((4, 5, 6, 7), 0.0, 0.5 * MB)]
    assert [j.mean_iter_s(2) for j in simulate_jobs(NET, apart, 6)] == pytest.approx(
        [simulate_jobs(NET, apart[:1], 6)[0].mean_iter_s(2)] * 2, rel=1e-9)


def test_time_shifted_jobs_do_not_meet():
    jobs = [JobSpec((0, 1, 4, 5), 0.3e-3, 0.5 * MB), JobSpec((2, 3, 6, 7), 0.3e-3, 0.5 * MB)]
    alone = simulate_jobs(NET, jobs[:1], 8)[0].mean_iter_s(2)
    shifted = [jobs[0], JobSpec(jobs[1].gpus, jobs[1].compute_s, jobs[1].nbytes, offset_s=alone - 0.3e-3)]
    for t in simulate_jobs(NET, shifted, 8):
        assert t.mean_iter_s(2) == pytest.approx(alone, rel=1e-6)


def test_bad_jobs_are_one_line():
    with pytest.raises(EstimatorError, match="two jobs share a GPU"):
        simulate_jobs(NET, [JobSpec((0, 1), 0.0, MB), JobSpec((1, 2), 0.0, MB)], 2)
    with pytest.raises(EstimatorError, match="at least 2 GPUs"):
        simulate_jobs(NET, [JobSpec((0,), 0.0, MB)], 2)
    with pytest.raises(EstimatorError, match="not on the network"):
        simulate_jobs(NET, [JobSpec((0, 9), 0.0, MB)], 2)
    with pytest.raises(EstimatorError, match="unknown scenario 'nope'"):
        pc.scenario("nope")


def test_model_phase_order_in_every_scenario():
    """For the same jobs the model's aligned >= independent >= interleaved, per job."""
    for sc in pc.SCENARIOS:
        by = {ph: pc.model(pc.Scenario(sc.key, sc.name, ph, sc.jobs)) for ph in ("aligned", "independent", "interleaved")}
        for a, i, t in zip(by["aligned"], by["independent"], by["interleaved"], strict=True):
            assert a[1] >= i[1] - 1e-12 >= t[1] - 2e-12
            assert a[0] == i[0] == t[0]  # the same alone time


def test_packet_check_scenario_holds():
    """One scenario end to end: every job's model slowdown within 10 % of the packet level."""
    rows = pc.compare(pc.scenario("independent2"))
    assert len(rows) == 2
    for c in rows:
        assert c.packet_slowdown > 1.05  # they do slow each other
        assert c.holds and abs(c.error) <= pc.TOLERANCE
    bound = pc.Comparison("x", "aligned", 0, 2, 2, 1.0, 1.2, 1.0, 1.1)
    assert not bound.holds and bound.rule == "upper bound"  # a bound below the packet level fails


def test_cassini_rule_can_hold_and_fail():
    from estimator.reports.sections.cluster import gain_rule

    rule = gain_rule(1.6)  # holds on [1.05, 1.76]
    assert rule.judge(1.3).verdict == "holds"
    assert rule.judge(1.0).verdict == "fails" and "below" in rule.judge(1.0).reason  # no real gain
    assert rule.judge(2.0).verdict == "fails" and "above" in rule.judge(2.0).reason  # more than the paper found


def test_cluster_sweep_kind_writes_and_resumes(tmp_path):
    """A one-point `cluster` sweep: rows in cluster_runs / cluster_jobs under the point's hash; run
    again, it is skipped."""
    import duckdb

    from estimator.commands.sweep import run_sweep
    from estimator.sweep import kinds

    store = str(tmp_path / "s.duckdb")
    sweep = {"kind": "cluster", "grid": {"cluster.jobs": [30], "cluster.models": [["mobilenet_v2"]],
                                         "fabric": ["fattree"], "fabric.nodes": [32]}}
    from pathlib import Path

    if not (Path(__file__).resolve().parents[1] / "traces" / "mobilenet_v2.workload.json").exists():
        pytest.skip("traces/mobilenet_v2.workload.json not captured")
    r = run_sweep("t", sweep, [], store, {"address": "local", "in_process_below": 1000})
    assert r["written"] == 1 and r["points"] == 1
    with duckdb.connect(store, read_only=True) as con:
        (key,) = con.execute("SELECT config_hash FROM cluster_runs").fetchone()
        assert con.execute("SELECT count(*) FROM cluster_jobs WHERE config_hash = ?", [key]).fetchone()[0] == 30
    kind = kinds.get("cluster")
    assert kind.heavy and kind.table == "cluster_runs"
    again = run_sweep("t", sweep, [], store, {"address": "local", "in_process_below": 1000})
    assert again["skipped"] == 1 and again["written"] == 0
